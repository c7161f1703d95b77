"""The project's import graph, read from its source (``ast``, never imported): imports, those inside
functions too, and the dependencies no import statement shows (``"module:attr"`` strings, registry
lookups by a literal name). ``tests/test_layering.py`` judges the graph against the layers;
:func:`closure` gives the modules a run entering some modules can execute (:mod:`scenarios.block`:
what a REPRODUCTION.md section depends on).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (a name imported from a module counts as that module)
    names: tuple[str, ...]  # names taken from ``target`` (``from target import ...``; attribute uses)
    line: int
    how: str = "imports"  # or "names" (a "module:attr" string), "looks up 'NAME' ->" (a registry lookup)


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


def on_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements a module runs when it is imported: those outside function bodies."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def strings_of(tree: ast.AST) -> frozenset[str]:
    """The string constants of a module's tree (docstrings included)."""
    return frozenset(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _top_imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    out = set()
    is_pkg = path.name == "__init__.py"
    for node in on_import(parse(path)):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
        else:
            base = _absolute(node, name, is_pkg)
            bases = [f"{base}.{a.name}" for a in node.names] + [base] if base else []
        out |= {m for m in (_module_of(t, mods) for t in bases) if m}
    return out


def _module_of(target: str, mods) -> str:
    """The module of the tree a dotted name lives in (``a.b.name`` -> ``a.b``), or ``""``."""
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target


def _absolute(node: ast.ImportFrom, module: str, is_pkg: bool) -> str | None:
    if not node.level:
        return node.module
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_pkg else 0)
    if keep <= 0:
        return None
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


# ------------------------------------------------------- registries and lookups through them
# the registries that may name plug-ins above their own layer: "module.VARIABLE" -> what they hold
# (tests/test_layering.py: the layering rule; closure: resolved per run, not followed whole)
REGISTRIES = {
    "railbed.backend.BACKENDS": "run backends (simulator/, emulator/): the backend seam",
    "railbed.hosts.KINDS": "hardware-model kinds (hwmodels/): a cluster file's server-group keys",
    "schedulers.REGISTRY": "schedulers by name (a scenario's schedulers, --scheduler)",
    "workloads.GENERATORS": "job generators by name (a scenario's job.generator)",
    "workloads.SIZE_HINTS": "the generators' item estimates, by generator",
    "workloads.ARRAY_FORMS": "the generators' array forms, by generator",
    "workloads.DESCRIPTIONS": "what a generator's job runs (a row's label), by generator",
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
    return [imp for imp in lookups if imp.how == "names" and (imp.module, f"{imp.target}:{imp.names[0]}") in entries]


# ------------------------------------------------------- what a run entering some modules can execute
NOT_CODE = ("tests", "bench", "scripts", "examples")  # top-level folders with __init__.py that no run imports


def packages(root: Path) -> tuple[str, ...]:
    """The repository's packages: its top-level folders with an ``__init__.py`` (tests and tools aside)."""
    return tuple(sorted(p.parent.name for p in root.glob("*/__init__.py") if p.parent.name not in NOT_CODE))


@dataclass(frozen=True)
class Graph:
    """A tree's dependencies, read once: ``imports[m]`` the modules ``m`` imports or names as
    ``"module:attr"`` (other than a registry's entries); ``lookups[m]`` those it looks up by a
    literal name in a registry of :data:`REGISTRIES`; ``entries[m]`` (registry, spelling, module)
    of each entry of such a registry defined in ``m``."""

    imports: dict[str, set[str]]
    lookups: dict[str, set[str]]
    entries: dict[str, list[tuple[str, str, str]]]
    strings: dict[str, frozenset[str]]  # the string constants of each module (names it may look up)
    top: dict[str, set[str]]  # the modules each module imports when it is imported (not in its functions)

    @classmethod
    def read(cls, root: Path, pkgs=None) -> Graph:
        pkgs = packages(root) if pkgs is None else pkgs
        mods = modules(root, pkgs)
        regs = registries(root, pkgs)
        found = read_lookups(root, pkgs)
        skip = set(registered(found, regs))
        imports: dict[str, set[str]] = {name: set() for name in mods}
        lookups: dict[str, set[str]] = {name: set() for name in mods}
        for imp in read_imports(root, pkgs) + [imp for imp in found if imp not in skip]:
            target = _module_of(imp.target, mods)  # ``from m import name`` read as a dotted target
            if target:
                (lookups if imp.how.startswith("looks up") else imports)[imp.module].add(target)
        entries: dict[str, list[tuple[str, str, str]]] = {}
        for reg, table in regs.items():
            if reg in REGISTRIES:
                for spelling, target in table.items():
                    entries.setdefault(reg.rpartition(".")[0], []).append((reg, spelling, target.partition(":")[0]))
        strings = {name: strings_of(parse(path)) for name, path in mods.items()}
        top = {name: _top_imports(name, path, mods) for name, path in mods.items()}
        return cls(imports, lookups, entries, strings, top)

    def imported_with(self, start) -> set[str]:
        """The modules importing ``start`` runs (their top-level imports, transitively, and the
        packages around each), none of their functions."""
        return _walk(start, self.top, lambda name: self.top[name])

    def spellings(self, registry: str) -> set[str]:
        """Every name an entry of ``registry`` (of :data:`REGISTRIES`) is registered as."""
        return {spelling for table in self.entries.values() for reg, spelling, _ in table if reg == registry}

    def closure(self, start, chosen: dict[str, set[str] | None], avoid=frozenset()) -> set[str]:
        """The modules a run entering ``start`` can execute: what they import, inside functions too,
        and around, the packages each dotted module lives in (Python runs ``a/__init__.py`` before
        ``a.b``); the ``"module:attr"`` strings they hold; their lookups by a literal name, unless of
        a module of ``avoid``; and of a registry of :data:`REGISTRIES` whose module is reached, the
        entries ``chosen[registry]`` spells (every entry when it holds None or nothing for it), unless
        of ``avoid``. A start that is no module of the tree: a ``KeyError`` naming it."""
        missing = [m for m in start if m not in self.imports]
        if missing:
            raise KeyError(f"no module {missing[0]}")

        def step(name: str) -> list[str]:
            entries = [
                target for reg, spelling, target in self.entries.get(name, ())
                if (chosen.get(reg) is None or spelling in chosen[reg]) and target not in avoid
            ]  # fmt: skip
            return [*self.imports[name], *(m for m in self.lookups[name] if m not in avoid), *entries]

        return _walk(start, self.imports, step)


def _walk(start, known, step) -> set[str]:
    """The modules of ``known`` reached from ``start`` by ``step`` (a module -> the modules it
    reaches), with the packages around each dotted module (Python runs ``a/__init__.py`` first)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen or name not in known:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += step(name)
    return seen
