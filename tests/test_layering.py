"""Import layering: every module's imports (``ast``, those inside functions too) against the layers.

Rules (ARCHITECTURE.md, "Layers"):

* **upward**: a package imports its own modules and those of LOWER layers only (not a sibling's
  of its own layer: the simulator never imports the emulator); nothing imports the entry point
  ``railbed.cli``, which may import anything;
* **private**: no module imports another module's private names (``from m import _x``, or
  ``m._x`` on a module it imported);
* **cycles**: no two packages import each other, directly or around a loop;
* **registries**: the core names its plug-ins (backends, hardware-model kinds) as
  ``"module:attr"`` strings it resolves only when one is used; each names an existing module
  above the core that defines ``attr``.

``test_the_checker_catches_*`` run the same checks on small trees written for the test, so a
rule that stopped seeing its violation would fail here, not pass silently.
"""

from __future__ import annotations

import ast
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
)
ENTRY = "railbed.cli"  # the command: imports any layer, imported by none


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (a name imported from a module counts as that module)
    names: tuple[str, ...]  # names taken from ``target`` (``from target import ...``; attribute uses)
    line: int


def package(module: str) -> str:
    """A module's package (the entry point counts as a package of its own: it stands above all)."""
    return module if module == ENTRY else module.split(".")[0]


def modules(root: Path, packages) -> dict[str, Path]:
    """Dotted name -> file of every module of ``packages`` under ``root``."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def read_imports(root: Path, packages) -> list[Import]:
    """Every import between the modules of ``packages`` (top level and inside functions)."""
    mods = modules(root, packages)
    found: list[Import] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
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
    """Imports of a package of the same or a higher layer, and any import of the entry point."""
    bad = []
    for imp in imports:
        src, dst = package(imp.module), package(imp.target)
        if dst == ENTRY:
            if src != ENTRY:
                bad.append(f"{imp.module}:{imp.line} imports the entry point {imp.target}")
        elif src != ENTRY and src != dst and layer_of(dst) >= layer_of(src):
            bad.append(f"{imp.module}:{imp.line} imports {imp.target} (layer {layer_of(dst)} >= {layer_of(src)})")
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


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected sets of more than one package (Tarjan over the package graph)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        src, dst = package(imp.module), package(imp.target)
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


PACKAGES = tuple(p for layer in LAYERS for p in layer)


@pytest.fixture(scope="module")
def project_imports() -> list[Import]:
    return read_imports(ROOT, PACKAGES)


def test_every_package_is_in_a_layer():
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "scripts", "examples"}
    assert on_disk <= set(PACKAGES), f"packages without a layer: {sorted(on_disk - set(PACKAGES))}"


def test_no_upward_import(project_imports):
    assert upward(project_imports) == []


def test_no_private_name_crosses_modules(project_imports):
    assert private(project_imports) == []


def test_no_package_cycle(project_imports):
    assert cycles(project_imports) == []


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
def _tree(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return read_imports(tmp_path, PACKAGES)


def test_the_checker_catches_an_upward_import_inside_a_function(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "railbed/results.py": "def f():\n    from simulator.run import simulate\n    return simulate\n",
            "simulator/run.py": "from railbed.results import f\n\ndef simulate():\n    pass\n",
            "railbed/cli.py": "import scenarios.runner\n",  # the entry point may
        },
    )
    assert upward(imports) == ["railbed.results:2 imports simulator.run (layer 4 >= 0)"]
    assert cycles(imports) == [["railbed", "simulator"]]


def test_the_checker_catches_a_sibling_and_an_import_of_the_entry_point(tmp_path):
    imports = _tree(
        tmp_path,
        {
            "simulator/a.py": "import emulator.testbed\n",
            "scenarios/b.py": "from railbed import cli\n",
            "railbed/cli.py": "import scenarios.b\n",
        },
    )
    assert upward(imports) == [
        "simulator.a:1 imports emulator.testbed (layer 4 >= 4)",
        "scenarios.b:1 imports the entry point railbed.cli",
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
