"""Code asks a backend's :class:`~railbed.backend.Capabilities`, never its name (ARCHITECTURE.md,
"Registries"; issue 43): no module compares a value with a registered backend name or an old
spelling of one (``==``, ``!=``, ``in``, ``not in`` against a string, or a tuple, list or set of
them). Read with ``ast`` over every package, ``bench/`` and ``scripts/`` (not ``tests/``, whose
assertions name the backend they expect). The few comparisons that look alike but are not a
backend's name are declared in :data:`NOT_BACKENDS`, with why."""

from __future__ import annotations

import ast
from pathlib import Path

from railbed.backend import BACKENDS

ROOT = Path(__file__).resolve().parent.parent

NOT_BACKENDS = {  # (file, the string) -> why it is not a backend's name there
    ("scenarios/labels.py", "emulate"): "a claim's mode (scenarios.claims.MODES), printed as the row's label",
    ("scenarios/groups.py", "emulate"): "a claim's mode (scenarios.claims.MODES): how a row runs",
    ("scenarios/reproduce.py", "packet"): "a note's placeholder kind, {packet:<label>.<key>} (scenarios.claims)",
    ("railbed/results.py", "packet"): "result.json's key of the packet backend's counters before counters (read back)",
    ("bench/bench_compact.py", "compact"): "the bench's own engine choice (compact, python), a column it prints",
}


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def name_comparisons(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each comparison in ``path`` against one of ``names``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        for side in (node.left, *node.comparators):
            found += [(node.lineno, s) for s in _strings(side) if s in names]
    return found


def files() -> list[Path]:
    top = [p for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name != "tests"]
    return sorted(f for d in [*top, ROOT / "bench", ROOT / "scripts"] for f in d.rglob("*.py"))


def test_no_module_compares_a_backends_name():
    names = set(BACKENDS.spellings())
    found = []
    for path in files():
        rel = path.relative_to(ROOT).as_posix()
        if rel == "railbed/backend.py":  # the registry itself
            continue
        found += [f"{rel}:{line}: {s!r}" for line, s in name_comparisons(path, names) if (rel, s) not in NOT_BACKENDS]
    assert not found, "compared with a backend's name (ask its capabilities):\n" + "\n".join(found)


def test_the_check_sees_a_comparison(tmp_path):
    """The checker on a module written for the test: each form it must see, and what it must not."""
    module = tmp_path / "m.py"
    module.write_text(
        'if be.name == "packet": pass\n'
        'ok = "fluid-rules" != name\n'
        'many = engine in ("compact", "x")\n'
        'label = {"emulate": "emulated"}["emulate"]\n'  # a lookup, not a comparison
        'also = name not in ["numba"]\n'
    )
    got = name_comparisons(module, set(BACKENDS.spellings()))
    assert got == [(1, "packet"), (2, "fluid-rules"), (3, "compact"), (5, "numba")]


def test_every_declared_exception_is_still_there():
    """A declared comparison that went away is removed from :data:`NOT_BACKENDS` (it cannot hide a new one)."""
    names = set(BACKENDS.spellings())
    for rel, s in NOT_BACKENDS:
        assert (rel, s) in {(rel, n) for _, n in name_comparisons(ROOT / rel, names)}, (rel, s)
