"""Import layering: every module's imports (``ast``, those inside functions too) against the layers.

Rules (ARCHITECTURE.md, "Layers"):

* **upward**: a package imports its own modules and those of LOWER layers only (not a sibling's
  of its own layer: the simulator never imports the emulator); the command (``cli``, the top
  layer) may import anything and nothing imports it;
* **private**: no module imports another module's private names (``from m import _x``, or
  ``m._x`` on a module it imported);
* **cycles**: no two packages import each other, directly or around a loop;
* **registries**: the core names its plug-ins (backends, hardware-model kinds) as
  ``"module:attr"`` strings it resolves only when one is used; each names an existing module
  above the core that defines ``attr``. Only the registries of :data:`REGISTRIES` may name a
  higher layer so.
* **lookups are dependencies**: a registry lookup by a literal name (``backend("fluid")``,
  ``get_backend("fluid")``, ``KINDS.get("datapath")``) depends on the module the name is
  registered to, and any other ``"module:attr"`` string on that module: both are checked by the
  rules above like imports. The few that cross the layers on purpose are declared, with why, in
  :data:`DECLARED_LOOKUPS`.

``test_the_checker_catches_*`` run the same checks on small trees written for the test, so a
rule that stopped seeing its violation would fail here, not pass silently.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS = (  # lowest first
    ("railbed",),  # the core: data model, run semantics (Dispatcher), the seams (backend, hosts)
    ("hwmodels", "tc_policies"),  # hardware-model kinds; tc configurations as data
    ("workloads",),  # job generators
    ("schedulers",),  # policies behind the scheduler hooks
    ("simulator", "emulator"),  # backends
    ("scenarios",),  # scenario files, runs, sweeps, the report
    ("cli",),  # the command: imports any layer, imported by none
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (a name imported from a module counts as that module)
    names: tuple[str, ...]  # names taken from ``target`` (``from target import ...``; attribute uses)
    line: int
    how: str = "imports"  # or "names" (a "module:attr" string), "looks up 'NAME' ->" (a registry lookup)


def package(module: str) -> str:
    return module.split(".")[0]


def modules(root: Path, packages) -> dict[str, Path]:
    """Dotted name -> file of every module of ``packages`` under ``root``."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def parse(path: Path) -> ast.Module:
    """A module's tree, parsed once per text (the checks read each module several times)."""
    return _parse(path.read_text(), str(path))


def read_imports(root: Path, packages) -> list[Import]:
    """Every import between the modules of ``packages`` (top level and inside functions)."""
    mods = modules(root, packages)
    found: list[Import] = []
    for name, path in mods.items():
        tree = parse(path)
        is_pkg = path.name == "__init__.py"
        aliases: dict[str, str] = {}  # local name -> project module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in packages:
                        found.append(Import(name, a.name, (), node.lineno))
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_pkg)
                if base is None or base.split(".")[0] not in packages:
                    continue
                plain = []
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    if sub in mods:  # ``from package import module``
                        found.append(Import(name, sub, (), node.lineno))
                        aliases[a.asname or a.name] = sub
                    else:
                        plain.append(a.name)
                if plain or not node.names:
                    found.append(Import(name, base, tuple(plain), node.lineno))
        for node in ast.walk(tree):  # ``module._name`` on a module imported above
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                found.append(Import(name, aliases[node.value.id], (node.attr,), node.lineno))
    return found


def _absolute(node: ast.ImportFrom, module: str, is_pkg: bool) -> str | None:
    if not node.level:
        return node.module
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_pkg else 0)
    if keep <= 0:
        return None
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def layer_of(pkg: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if pkg in names)


def upward(imports: list[Import]) -> list[str]:
    """Imports of a package of the same or a higher layer."""
    bad = []
    for imp in imports:
        src, dst = package(imp.module), package(imp.target)
        if src != dst and layer_of(dst) >= layer_of(src):
            bad.append(f"{imp.module}:{imp.line} {imp.how} {imp.target} (layer {layer_of(dst)} >= {layer_of(src)})")
    return bad


def private(imports: list[Import]) -> list[str]:
    """Private names (one leading underscore) taken from another module."""
    return [
        f"{imp.module}:{imp.line} takes {imp.target}.{n}"
        for imp in imports
        if imp.target != imp.module
        for n in imp.names
        if n.startswith("_") and not n.startswith("__")
    ]


def module(name: str) -> str:
    return name


def cycles(imports: list[Import], key=package) -> list[list[str]]:
    """Strongly connected sets of more than one package (Tarjan over the package graph), or of
    more than one module with ``key=module``."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        src, dst = key(imp.module), key(imp.target)
        graph.setdefault(src, set())
        graph.setdefault(dst, set())
        if src != dst:
            graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# ------------------------------------------------------- registries and lookups through them
# the registries that may name plug-ins above their own layer: "module.VARIABLE" -> what they hold
REGISTRIES = {
    "railbed.backend.BACKENDS": "run backends (simulator/, emulator/): the backend seam",
    "railbed.hosts.KINDS": "hardware-model kinds (hwmodels/): a cluster file's server-group keys",
}
# lookups by a literal name that cross the layers on purpose: (module, name) -> why
DECLARED_LOOKUPS = {
    ("emulator.runtime", "fluid"): "the fidelity report's reference: the fluid model's makespan of the same "
    "job and scheduler, run before the agents start (it also compiles the numba kernels the hooks call)",
    ("schedulers.dgtp", "fluid"): "DGTP's ETP costs a placement by a simulated run under OES (paper eq. 22); "
    "the default when the caller passes no backend",
    ("schedulers.multijob_profile", "fluid"): "CASSINI's and Crux's profile of a job run alone, measured "
    "before the shared run: the schedulers' input, not a result",
}
TARGET = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*):([A-Za-z_]\w*)")  # a "module:attr" string


def registries(root: Path, packages) -> dict[str, dict[str, str]]:
    """``"module.VARIABLE" -> {spelling: "module:attr"}`` of every ``VARIABLE = Registry(what,
    {name: "module:attr", ...}, aliases={old: name})`` at the top of a module (read, not imported)."""
    out = {}
    for name, path in modules(root, packages).items():
        for node in parse(path).body:
            if not (isinstance(node, ast.Assign) and _is_registry_call(node.value)):
                continue
            targets = _str_dict(node.value.args[1])
            aliases = next((_str_dict(k.value) for k in node.value.keywords if k.arg == "aliases"), {})
            for var in node.targets:
                if isinstance(var, ast.Name):
                    out[f"{name}.{var.id}"] = targets | {old: targets[new] for old, new in aliases.items()}
    return out


def _is_registry_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Registry"


def _str_dict(node: ast.AST) -> dict[str, str]:
    if not isinstance(node, ast.Dict):
        return {}
    return {
        k.value: v.value
        for k, v in zip(node.keys, node.values)
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)
    }


def lookup_functions(root: Path, packages, regs: dict[str, dict]) -> dict[str, str]:
    """``"module.function" -> "module.VARIABLE"``: the top-level functions that return
    ``VARIABLE.get(name, ...)`` of a registry of their module (``railbed.backend.backend``), and
    each registry's own ``get``."""
    out = {f"{reg}.get": reg for reg in regs}
    mods = modules(root, packages)
    for name in {reg.rpartition(".")[0] for reg in regs}:
        for node in parse(mods[name]).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
                    func = ret.value.func
                    if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name):
                        reg = f"{name}.{func.value.id}"
                        if reg in regs:
                            out[f"{name}.{node.name}"] = reg
    return out


def read_lookups(root: Path, packages) -> list[Import]:
    """The dependencies no import statement shows: each ``"module:attr"`` string naming a module
    of ``packages`` (``how="names"``), and each call of a registry lookup with a literal name,
    on the module the name is registered to (``how="looks up 'NAME' ->"``)."""
    mods = modules(root, packages)
    regs = registries(root, packages)
    finders = lookup_functions(root, packages, regs)
    found: list[Import] = []
    for name, path in mods.items():
        tree = parse(path)
        nodes = list(ast.walk(tree))
        bound = _bindings(tree, nodes, name, path.name == "__init__.py")
        for node in nodes:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = TARGET.fullmatch(node.value)
                if m and m[1] in mods:
                    found.append(Import(name, m[1], (m[2],), node.lineno, "names"))
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                reg = finders.get(_dotted(node.func, bound))
                target = regs.get(reg, {}).get(node.args[0].value) if reg else None
                if isinstance(target, str) and TARGET.fullmatch(target):
                    module, _, attr = target.partition(":")
                    found.append(Import(name, module, (attr,), node.lineno, f"looks up {node.args[0].value!r} ->"))
    return found


def _bindings(tree: ast.Module, nodes: list[ast.AST], module: str, is_pkg: bool) -> dict[str, str]:
    """Local name -> the dotted name it stands for: imported names and modules, the module's own
    top-level definitions."""
    out = {n.name: f"{module}.{n.name}" for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    out |= {
        t.id: f"{module}.{t.id}" for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_pkg)
            for a in node.names if base else ():
                out[a.asname or a.name] = f"{base}.{a.name}"
    return out


def _dotted(node: ast.AST, bound: dict[str, str]) -> str | None:
    """What a call's function stands for, dotted (``backends.backend`` -> ``railbed.backend.backend``)."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def registered(lookups: list[Import], regs: dict[str, dict[str, str]]) -> list[Import]:
    """The ``"module:attr"`` strings that are entries of a declared registry (:data:`REGISTRIES`)."""
    entries = {(reg.rpartition(".")[0], t) for reg, table in regs.items() if reg in REGISTRIES for t in table.values()}
    return [
        imp for imp in lookups if imp.how == "names" and (imp.module, f"{imp.target}:{imp.names[0]}") in entries
    ]


def declared(imp: Import) -> bool:
    return imp.how.startswith("looks up") and (imp.module, imp.how.split("'")[1]) in DECLARED_LOOKUPS


def dependencies(root: Path, packages) -> list[Import]:
    """Imports and lookups, without the declared registries' own entries and the declared lookups."""
    lookups = read_lookups(root, packages)
    skip = set(registered(lookups, registries(root, packages)))
    return read_imports(root, packages) + [imp for imp in lookups if imp not in skip and not declared(imp)]


PACKAGES = tuple(p for layer in LAYERS for p in layer)


@pytest.fixture(scope="module")
def project_imports() -> list[Import]:
    """Every dependency of the project's modules: imports, and lookups through the registries."""
    return dependencies(ROOT, PACKAGES)


def test_every_package_is_in_a_layer():
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "scripts", "examples"}
    assert on_disk <= set(PACKAGES), f"packages without a layer: {sorted(on_disk - set(PACKAGES))}"


def test_no_upward_import(project_imports):
    assert upward(project_imports) == []


def test_no_private_name_crosses_modules(project_imports):
    assert private(project_imports) == []


def test_no_package_cycle(project_imports):
    assert cycles(project_imports) == []


def test_no_module_cycle(project_imports):
    """Not inside a package either: an import inside a function does not hide a loop."""
    assert cycles(project_imports, module) == []


def test_every_registry_is_declared():
    assert set(registries(ROOT, PACKAGES)) == set(REGISTRIES)


def test_declared_lookups_are_made_and_cross_the_layers():
    """Each declared lookup is still in its module and would fail the layering without its
    declaration (else the declaration is a stale excuse)."""
    found = {(imp.module, imp.how.split("'")[1]): imp for imp in read_lookups(ROOT, PACKAGES) if declared(imp)}
    assert set(found) == set(DECLARED_LOOKUPS)
    assert all(upward([imp]) for imp in found.values())


def test_registered_plug_ins_name_modules_above_the_core_that_define_them():
    """The core's registries (railbed.backend.BACKENDS, railbed.hosts.KINDS) name their targets as
    strings, read here without importing them: each an existing module above the core."""
    from railbed.backend import BACKENDS
    from railbed.hosts import KINDS

    mods = modules(ROOT, PACKAGES)
    for registry in (BACKENDS, KINDS):
        for name in registry.names():
            module, _, attr = registry.target(name).partition(":")
            assert module in mods and layer_of(package(module)) > 0, f"{name}: {module}"
            tree = ast.parse(mods[module].read_text())
            defined = {
                t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            }
            defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            assert attr in defined, f"{name}: {module} defines no {attr}"


# ------------------------------------------------------------- the checker itself
def _tree(tmp_path: Path, files: dict[str, str], read=read_imports) -> list[Import]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return read(tmp_path, PACKAGES)


def test_the_checker_catches_an_upward_import_inside_a_function(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "railbed/results.py": "def f():\n    from simulator.run import simulate\n    return simulate\n",
            "simulator/run.py": "from railbed.results import f\n\ndef simulate():\n    pass\n",
            "cli/main.py": "import scenarios.runner\n",  # the command may
        },
    )
    assert upward(imports) == ["railbed.results:2 imports simulator.run (layer 4 >= 0)"]
    assert cycles(imports) == [["railbed", "simulator"]]
    assert cycles(imports, module) == [["railbed.results", "simulator.run"]]


def test_the_checker_catches_a_module_cycle_inside_a_package(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "railbed/results.py": "def summary():\n    from railbed.analysis import lines\n",
            "railbed/analysis.py": "from railbed.dispatch import Dispatcher\n\n\ndef lines():\n    pass\n",
            "railbed/dispatch.py": "from railbed import results\n\nDispatcher = None\n",
        },
    )
    assert cycles(imports) == []
    assert cycles(imports, module) == [["railbed.analysis", "railbed.dispatch", "railbed.results"]]


def test_the_checker_catches_a_sibling_and_an_import_of_the_command(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "simulator/a.py": "import emulator.testbed\n",
            "scenarios/b.py": "from cli import main\n",
            "cli/main.py": "import scenarios.b\n",
        },
    )
    assert upward(imports) == [
        "simulator.a:1 imports emulator.testbed (layer 4 >= 4)",
        "scenarios.b:1 imports cli.main (layer 6 >= 5)",
    ]


def test_the_checker_catches_private_names_taken_both_ways(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "simulator/a.py": "from simulator.b import _kernel, public\n",
            "simulator/c.py": "from simulator import b\nimport simulator.b as bb\nb._kernel\nbb._x\nb.__name__\n",
            "simulator/b.py": "def _kernel():\n    pass\n\ndef public():\n    _kernel()\n",
        },
    )
    assert private(imports) == [
        "simulator.a:1 takes simulator.b._kernel",
        "simulator.c:3 takes simulator.b._kernel",
        "simulator.c:4 takes simulator.b._x",
    ]


REGISTRY_FILES = {  # a core registry with a lookup function, and what it names
    "railbed/backend.py": 'from railbed.plugins import Registry\n\n'
    'BACKENDS = Registry("backend", {"fluid": "simulator.backend:FLUID"}, aliases={"numba": "fluid"})\n\n\n'
    "def backend(name, field='backend'):\n    return BACKENDS.get(name, field)\n",
    "railbed/plugins.py": "class Registry:\n    pass\n",
    "simulator/backend.py": "FLUID = None\n",
}


def test_the_checker_catches_lookups_by_name_across_the_layers(tmp_path):
    deps = _tree(tmp_path, REGISTRY_FILES | {
        "schedulers/x.py": "from railbed.backend import backend as get_backend\n\n\n"
        "def f():\n    return get_backend('fluid')\n",
        "schedulers/y.py": "from railbed import backend as backends\n\nbackends.backend('numba')\n"
        "backends.BACKENDS.get('fluid')\nbackends.backend('nothing-registered')\n",
        "emulator/z.py": "def g():\n    from railbed.backend import BACKENDS\n\n    return BACKENDS.get('fluid')\n",
        "scenarios/w.py": "from railbed.backend import backend\n\nbackend('fluid')\n",  # from above: fine
    }, dependencies)  # fmt: skip
    assert sorted(upward(deps)) == [
        "emulator.z:4 looks up 'fluid' -> simulator.backend (layer 4 >= 4)",
        "schedulers.x:5 looks up 'fluid' -> simulator.backend (layer 4 >= 3)",
        "schedulers.y:3 looks up 'numba' -> simulator.backend (layer 4 >= 3)",
        "schedulers.y:4 looks up 'fluid' -> simulator.backend (layer 4 >= 3)",
    ]
    simulator_needs = {"simulator/backend.py": "from schedulers.y import f\n\nFLUID = None\n"}
    assert cycles(_tree(tmp_path, simulator_needs, dependencies)) == [["schedulers", "simulator"]]


def test_the_checker_catches_module_attr_strings_outside_the_declared_registries(tmp_path):
    deps = _tree(tmp_path, REGISTRY_FILES | {
        "simulator/a.py": "FACTORY = 'emulator.testbed:Testbed'\n",
        "railbed/other.py": "from railbed.plugins import Registry\n\n"
        "R = Registry('x', {'a': 'simulator.backend:FLUID'})\n",
        "emulator/testbed.py": "Testbed = None\n",
    }, dependencies)  # fmt: skip
    assert sorted(upward(deps)) == [
        "railbed.other:3 names simulator.backend (layer 4 >= 0)",  # railbed.backend's own entry is declared
        "simulator.a:1 names emulator.testbed (layer 4 >= 4)",
    ]
    assert set(registries(tmp_path, PACKAGES)) == {"railbed.backend.BACKENDS", "railbed.other.R"}
