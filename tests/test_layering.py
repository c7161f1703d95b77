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
from pathlib import Path

import pytest

from scenarios.codegraph import REGISTRIES, Import, modules, read_imports, read_lookups, registered, registries

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


def package(module: str) -> str:
    return module.split(".")[0]


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


# the graph is read by scenarios/codegraph.py (REGISTRIES: the registries that may name a higher layer)
# lookups by a literal name that cross the layers on purpose: (module, name) -> why
DECLARED_LOOKUPS = {
    ("emulator.runtime", "fluid"): "the fidelity report's reference: the fluid model's makespan of the same "
    "job and scheduler, run before the agents start (it also compiles the numba kernels the hooks call)",
    ("schedulers.dgtp", "fluid"): "DGTP's ETP costs a placement by a simulated run under OES (paper eq. 22); "
    "the default when the caller passes no backend",
    ("schedulers.multijob_profile", "fluid"): "CASSINI's and Crux's profile of a job run alone, measured "
    "before the shared run: the schedulers' input, not a result",
}


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
