"""REPRODUCTION.md's generated block: its sections, what each was made from, and the summary on top.

Each section (one per paper and flags, :mod:`scenarios.reproduce`) starts with
its marker and an inputs line, ``<!-- reproduce:inputs <digest> made at
<commit> -->``: the digest of what its runs depend on (:func:`inputs_digest`).
A section whose inputs changed since is *stale*: ``railbed reproduce --check
FILE`` lists such sections, and every ``--write`` prints "Stale since
<commit>" under the heading of each one it keeps without regenerating (issue
41). The summary (between ``reproduce:summary`` markers near the top) counts
the verdicts of every section per paper; ``--write`` rewrites it.

What a section depends on (issue 41: "the scenario files and claims, and the
code of the packages the runs import"), its digest's files:

* data: every file of the paper's directory but its ``.py`` ones, each scenario
  file its claims name and the clusters those name;
* code: the ``.py`` files its runs can execute, found without running them
  (``--check`` reads source only): the import closure
  (:meth:`scenarios.codegraph.Graph.closure`: imports inside functions too, the
  packages a dotted module lives in, ``"module:attr"`` strings, registry lookups
  by a literal name) from where ``railbed reproduce`` enters
  (:mod:`scenarios.reproduce`, and what ``cli/main.py`` imports at its top),
  plus any ``module:Class`` a scenario file names; and beside each module its
  folder's data files (hwmodels' presets, the packet backend's C++), and
  ``cli/main.py`` itself. Of the registries whose entries the core names as
  strings: the backends are those the claims file's ``engine`` keys name and
  the default, with ``--emulate`` every one; without it no lookup reaches a
  backend that needs root (:class:`railbed.backend.Capabilities`: its rows are
  skipped). A scenario file with a backend's own key (``timeout``) adds what
  importing every backend runs (:func:`railbed.backend.owners` reads each one's
  keys, the owner parses them): their modules' top-level imports, no function.
  The schedulers (``schedulers.REGISTRY``) and job generators
  (``workloads.GENERATORS``, with their item estimates and array forms): those
  the paper's files name (any YAML scalar or string constant of its ``.py``
  files equal to a registered name), and those the modules reached in the
  same package name in turn. The hardware-model kinds: every entry (too few
  to resolve).

So a change to the emulator's runs leaves a simulated section current, and so
does a change to another paper's scripts (``scenarios/hermod/rows.py``), to
the packet backend for a section whose claims run none, or to a scheduler its
paper does not name, or to a generator it does not use
(``tests/test_digest_covers_imports.py`` runs small sections and checks that
every module they import is counted). This module and
:mod:`scenarios.codegraph` are left out: they compute the digest and place
sections, and write no row (the regeneration test of the ``--quick`` sections
checks what they write); counting them would make a change of the rule itself
mark every section stale.

Two styles of inputs line: ``v2_`` and 12 hex digits is this rule's; 12 hex
digits alone is the rule before (every ``.py`` file of railbed, simulator,
schedulers, workloads, hwmodels and scenarios/*.py, plus emulator with
``--emulate``), judged by that rule as before. A section keeps its old line
until regenerated, or until ``railbed reproduce --refresh-inputs FILE``
(:func:`refresh_inputs`) proves it: the old digest recomputed on the tree of
the commit the line names must equal it (so that tree is what the section was
made from) and the new line gets that tree's digest, never today's, so a
section whose code changed since stays stale. A refresh that rewrote a digest
from today's tree would call current what was never run.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import subprocess
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

import yaml

from railbed.backend import BACKENDS
from railbed.errors import SpecError
from scenarios.claims import DEFAULT_ENGINE, EXPLAINED, QUICK_VERDICT, REDUCED_VERDICT, TUNED_MARK
from scenarios.codegraph import TARGET, Graph, packages, parse, strings_of
from scenarios.codegraph import modules as modules_of

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- reproduce:summary:begin -->", "<!-- reproduce:summary:end -->"
SECTION = re.compile(r"^<!-- reproduce:section (\w+)((?: --[\w-]+)*) -->$", re.M)
INPUTS = re.compile(r"^<!-- reproduce:inputs (\w+) made at (\S+) -->\n", re.M)
STALE = re.compile(r"^\*\*Stale since [^\n]*\n\n", re.M)
WALL = re.compile(r"^Wall time of the command: [^\n]*\n\n", re.M)
PACKAGES = ("railbed", "simulator", "schedulers", "workloads", "hwmodels")  # an old-style digest's
V2 = "v2_"  # a digest's prefix: of the code its runs can execute (none: of all code, the rule before)
# the registries (codegraph.REGISTRIES) narrowed to the names a section's files use: schedulers, and the
# generators with their item estimates and array forms (registered under the generator's name)
NAMED = ("schedulers.REGISTRY", "workloads.GENERATORS", "workloads.SIZE_HINTS", "workloads.ARRAY_FORMS",
         "workloads.DESCRIPTIONS")  # fmt: skip
ENTRY = "scenarios.reproduce"  # where ``railbed reproduce`` enters (cli.main calls it)
MACHINERY = ("scenarios.block", "scenarios.codegraph")  # this digest's own code: writes no row (docstring)
COMMAND = Path("cli/main.py")  # the command: its file and top-level imports count, not its functions
DATA = (".yaml", ".yml", ".json", ".csv", ".txt", ".toml", ".cpp", ".cc", ".h", ".hpp")  # read by code
# the verdict column's words -> the summary's columns
COLUMNS = ("claims", "hold", "do not hold", "explained", "input check", "quick: no verdict", "skipped", "not built",
           "not reproduced", "measured")  # fmt: skip
REDUCED_COLUMN = REDUCED_VERDICT  # appended to COLUMNS only when a section has such a row (scenarios.sizeprobe)


def _data(paper: str, claims_dir: Path) -> set[Path]:
    """The section's files other than code: every file of the paper's directory but its ``.py`` ones,
    each scenario file its claims name and the clusters those name."""
    here = claims_dir / paper
    files = {p for p in here.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    claims = here / "claims.yaml"
    if claims.exists():
        for path in re.findall(r"scenario:\s*([\w./-]+\.yaml)", claims.read_text()):
            files.add((here / path).resolve())
    for path in list(files):
        if path.suffix == ".yaml" and path.exists():
            for cluster in re.findall(r"^cluster:\s*([\w./-]+\.yaml)", path.read_text(), re.M):
                files.add((path.parent / cluster).resolve())
    return {p for p in files if p.exists() and p.suffix != ".py"}


def _all_code(paper: str, flags: str, claims_dir: Path, root: Path) -> list[Path]:
    """The files of an old-style digest (no :data:`V2`): every file of the paper's directory and
    every ``.py`` file of the packages a simulated run imports (plus emulator's with --emulate)."""
    files = _data(paper, claims_dir) | {p for p in (claims_dir / paper).rglob("*.py") if "__pycache__" not in p.parts}
    packages = (*PACKAGES, "emulator") if "--emulate" in flags.split() else PACKAGES
    for package in packages:
        files |= set((root / package).rglob("*.py"))
    files |= set((root / "scenarios").glob("*.py"))
    return sorted(p for p in files if p.exists())


_GRAPHS: dict[tuple[Path, str], Graph] = {}


def _graph(root: Path) -> Graph:
    """The tree's import graph, read again only when a ``.py`` file of it changed."""
    h = hashlib.sha256()
    for path in sorted(p for pkg in packages(root) for p in (root / pkg).rglob("*.py")):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    key = (root, h.hexdigest())
    if key not in _GRAPHS:
        _GRAPHS.clear()
        _GRAPHS[key] = Graph.read(root)
    return _GRAPHS[key]


def _needs_root() -> set[str]:
    """The modules of the backends that need root (:class:`railbed.backend.Capabilities`): the
    emulated and crosscheck rows, which run only with --emulate."""
    return {
        BACKENDS.target(name).partition(":")[0]
        for name in BACKENDS.names()
        if isinstance(BACKENDS.target(name), str) and BACKENDS.get(name).capabilities.needs_root
    }  # fmt: skip


def code_modules(paper: str, flags: str, claims_dir: Path, root: Path = ROOT) -> set[str]:
    """The modules a (paper, flags) section's runs can execute (see the module's docstring)."""
    graph = _graph(root)
    emulate = "--emulate" in flags.split()
    chosen: dict[str, set[str] | None] = {
        "railbed.backend.BACKENDS": None if emulate else _engines(claims_dir / paper / "claims.yaml")
    }
    start = {ENTRY, *_command_imports(root, graph)}
    for path in _data(paper, claims_dir):  # a scheduler (or any plug-in) named as module:Class
        if path.suffix == ".yaml":
            start |= {m[1] for m in TARGET.finditer(path.read_text()) if m[1] in graph.imports}
    avoid = frozenset() if emulate else _needs_root()
    loaded = set()  # a scenario key of a backend's: loading the scenario imports every backend for its keys
    if not emulate and _backend_keys(paper, claims_dir):
        loaded = graph.imported_with(t.partition(":")[0] for t in map(BACKENDS.target, BACKENDS.names()))
    strings = _paper_strings(paper, claims_dir)
    known = {reg: graph.spellings(reg) for reg in NAMED}
    named = {reg: strings & known[reg] for reg in NAMED}
    while True:  # the plug-ins the paper's files name, and those a plug-in reached names in turn
        chosen.update({reg: set(names) for reg, names in named.items()})
        mods = graph.closure(sorted(start), chosen, avoid)
        grown = False
        for reg in NAMED:
            package = reg.split(".")[0]
            inner = [m for m in mods if m.startswith(package + ".")]  # not the table's own module
            more = set().union(*(graph.strings[m] for m in inner)) & known[reg] - named[reg]
            named[reg] |= more
            grown = grown or bool(more)
        if not grown:
            return mods | loaded


def _backend_keys(paper: str, claims_dir: Path) -> set[str]:
    """The keys of the paper's scenario files that no core reader knows (:data:`scenarios.runner.KEYS`):
    a backend's settings. Loading such a file asks every backend for its keys
    (:func:`railbed.backend.owners`, which imports each) and has the owner parse them
    (:func:`scenarios.runner.backend_settings`), on any backend the run is on."""
    from scenarios.runner import KEYS

    out: set[str] = set()
    for path in _data(paper, claims_dir):
        if path.suffix == ".yaml" and path.name != "claims.yaml":
            try:
                data = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                out.add(f"{path.name}: unreadable")  # counted as having one: the safe side
                continue
            if isinstance(data, dict) and ("job" in data or "jobs" in data):
                out |= {str(k) for k in data} - KEYS
    return out


def _paper_strings(paper: str, claims_dir: Path) -> set[str]:
    """Every string in the paper's files: the YAML files' scalars (keys and values, at any depth) and
    the string constants of its ``.py`` files; a scheduler is named by one of them (or by a module)."""
    out: set[str] = set()
    for path in _data(paper, claims_dir) | set((claims_dir / paper).rglob("*.py")):
        if path.suffix == ".py":
            out |= strings_of(parse(path))
        elif path.suffix in (".yaml", ".yml"):
            try:
                out |= _scalars(yaml.safe_load(path.read_text()))
            except yaml.YAMLError:
                out |= set(re.findall(r"[\w./:-]+", path.read_text()))  # unreadable: every word, to be safe
    return out


def _scalars(node) -> set[str]:
    if isinstance(node, dict):
        return set().union(*(_scalars(k) | _scalars(v) for k, v in node.items()))
    if isinstance(node, list):
        return set().union(*(_scalars(v) for v in node))
    return {node} if isinstance(node, str) else set()


def _engines(claims: Path) -> set[str] | None:
    """The backends a claims file's simulated rows name (``engine``), and the default; None (every
    backend) for a file that does not read as claims."""
    try:
        rows = (yaml.safe_load(claims.read_text()) or {}).get("claims") if claims.exists() else []
    except (yaml.YAMLError, AttributeError):
        return None
    if not isinstance(rows, list):
        return None
    return {DEFAULT_ENGINE, *(str(r["engine"]) for r in rows if isinstance(r, dict) and "engine" in r)}


def _command_imports(root: Path, graph: Graph) -> set[str]:
    """What the command's module imports at its top (its functions serve other commands too)."""
    if not (root / COMMAND).exists():  # a tree from before cli/ (refresh_inputs)
        return set()
    tree = parse(root / COMMAND)
    found = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return {m for m in found if m in graph.imports}


def _code_files(modules: set[str], root: Path, claims_dir: Path) -> set[Path]:
    """The modules' files, the data files beside them (a folder's non-``.py`` files, and those of
    its sub-folders that hold no module: hwmodels' presets, the packet backend's C++; not the
    papers' folders, each its own section's data), and the command's own (``cli``: it reads the
    flags and calls :mod:`scenarios.reproduce`)."""
    where = {n: path for n, path in modules_of(root, packages(root)).items() if n in modules and n not in MACHINERY}
    files = set(where.values()) | {root / COMMAND, root / COMMAND.parent / "__init__.py"}
    for folder in {p.parent for p in where.values()}:
        for path in folder.rglob("*"):
            inside = path.relative_to(folder).parts[:-1]
            loose = all(not (folder.joinpath(*inside[: i + 1]) / "__init__.py").exists() for i in range(len(inside)))
            if path.is_file() and path.suffix in DATA and loose and not path.is_relative_to(claims_dir):
                files.add(path)
    return {p for p in files if p.exists()}


def _files(paper: str, flags: str, claims_dir: Path, root: Path = ROOT) -> list[Path]:
    """The files of a section's digest: its data and the code its runs can execute."""
    code = _code_files(code_modules(paper, flags, claims_dir, root), root, claims_dir.resolve())
    return sorted(_data(paper, claims_dir) | code)


def _digest(files: list[Path], root: Path) -> str:
    h = hashlib.sha256()
    for path in files:
        try:
            name = str(path.relative_to(root))
        except ValueError:
            name = str(path)
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def inputs_digest(paper: str, flags: str, claims_dir: Path, root: Path = ROOT, old_style: bool = False) -> str:
    """The digest of the files a section's runs depend on, by path and content: ``v2_`` and 12 hex
    digits (the code its runs can execute); ``old_style``: 12 hex digits (all code, the rule before)."""
    if old_style:
        return _digest(_all_code(paper, flags, claims_dir, root), root)
    return V2 + _digest(_files(paper, flags, claims_dir, root), root)


def head_commit() -> str:
    """The repository's commit (short), ``unknown`` outside git."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def wall_line(seconds: float | None, tally: dict | None = None) -> str:
    """The section's wall time (varies between runs of the same code: left out of comparisons) and,
    from ``tally`` (:func:`scenarios.reproduce.reproduce_paper`'s), how many of its run groups it
    read from earlier runs (``--resume``) and the commits they were made at: such a section's wall
    time is not what its runs cost."""
    took = "not measured" if seconds is None else f"{seconds:.0f} s ({seconds / 60:.1f} min)"
    read = (tally or {}).get("read") or []
    if not read:
        return f"Wall time of the command: {took}, at commit {head_commit()}."
    at = ", ".join(f"{n} at {c}" for c, n in sorted(Counter(read).items()))
    return (f"Wall time of the command: {took}, at commit {head_commit()}; {len(read)} of its {tally['groups']} "
            f"run groups read from earlier runs of the same inputs (`--resume`; made {at}).")  # fmt: skip


def inputs_line(paper: str, flags: str, claims_dir: Path) -> str:
    return f"<!-- reproduce:inputs {inputs_digest(paper, flags, claims_dir)} made at {head_commit()} -->"


def block_sections(text: str) -> dict[tuple[str, str], str]:
    """(paper, flags) -> its section, from a REPRODUCTION.md block."""
    out = {}
    marks = list(SECTION.finditer(text))
    for m, nxt in zip(marks, marks[1:] + [None]):
        out[(m.group(1), m.group(2))] = text[m.start() : nxt.start() if nxt else len(text)].rstrip() + "\n"
    return out


def without_inputs(section: str) -> str:
    """A section without its inputs line, wall time and stale mark (what two runs of the same code share)."""
    return WALL.sub("", STALE.sub("", INPUTS.sub("", section)))


def stale(sections: dict[tuple[str, str], str], claims_dir: Path, root: Path = ROOT) -> dict[tuple[str, str], str]:
    """(paper, flags) -> the commit it was made at, for each section whose inputs changed since
    (``unknown`` for a section without an inputs line)."""
    out = {}
    for (paper, flags), text in sections.items():
        m = INPUTS.search(text)
        if m is None:
            out[(paper, flags)] = "unknown"
        elif m.group(1) != inputs_digest(paper, flags, claims_dir, root, old_style=not m.group(1).startswith(V2)):
            out[(paper, flags)] = m.group(2)
    return out


def mark_stale(text: str, paper: str, flags: str, since: str | None) -> str:
    """The section with its "Stale since" line under the heading (or without it when ``since`` is None)."""
    text = STALE.sub("", text)
    if since is None:
        return text
    what = ("it was made before sections recorded their inputs" if since == "unknown"
            else "what its runs depend on changed after it was made")  # fmt: skip
    again = f"`railbed reproduce {paper}{flags} --write REPRODUCTION.md`"
    line = f"**Stale since {since}**: {what}; regenerate with {again}.\n\n"
    head, sep, rest = text.partition("\n### ")
    if not sep:
        return text
    heading, nl, body = rest.partition("\n\n")
    return head + sep + heading + nl + line + body


def check(path: Path, claims_dir: Path, echo=print, root: Path = ROOT) -> int:
    """``railbed reproduce --check FILE``: list the stale sections of FILE's block; 1 if any, else 0."""
    text = path.read_text()
    if BEGIN not in text:
        raise SpecError("check", f"{path} has no {BEGIN} ... {END} block")
    found = stale(block_sections(text.split(BEGIN, 1)[1].split(END, 1)[0]), claims_dir, root)
    for (paper, flags), since in found.items():
        echo(f"stale since {since}: railbed reproduce {paper}{flags} --write {path.name}")
    echo(f"{len(found)} stale section(s)" if found else "every section is current")
    return 1 if found else 0


def _tree_at(commit: str, dest: Path, root: Path) -> Path | None:
    """The repository's tracked files at ``commit``, unpacked into ``dest`` (None: no such commit)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit], capture_output=True,
                             timeout=120, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def refresh_inputs(path: Path, claims_dir: Path, echo=print, root: Path = ROOT) -> int:
    """``railbed reproduce --refresh-inputs FILE``: each old-style inputs line rewritten to the
    rule of today, where that is proven: its digest is recomputed by the old rule on the tree of
    the commit it names (``git archive``); when equal, the section was made from that tree, and its
    new digest is that tree's (never today's: a section whose code changed since stays stale).
    Others keep their line. Then every section's "Stale since" mark is set again; 0, or 1 if
    some section is still stale."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SpecError("refresh-inputs", f"{path} has no {BEGIN} ... {END} block")
    try:
        rel = claims_dir.resolve().relative_to(root)
    except ValueError:
        raise SpecError("refresh-inputs", f"{claims_dir} is outside the repository {root}") from None
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    sections = block_sections(body)
    with tempfile.TemporaryDirectory(prefix="railbed-inputs-") as tmp:
        trees: dict[str, Path | None] = {}
        for (paper, flags), section in sections.items():
            m = INPUTS.search(section)
            if m is None or m.group(1).startswith(V2):
                continue
            commit = m.group(2)
            if commit not in trees:
                trees[commit] = _tree_at(commit, Path(tmp) / commit, root)
            tree = trees[commit]
            if tree is None or inputs_digest(paper, flags, tree / rel, tree, old_style=True) != m.group(1):
                echo(f"kept: {paper}{flags}: its digest is not the old rule's at {commit}")
                continue
            line = f"<!-- reproduce:inputs {inputs_digest(paper, flags, tree / rel, tree)} made at {commit} -->\n"
            sections[(paper, flags)] = section.replace(m.group(0), line)
            echo(f"refreshed: {paper}{flags} (made at {commit})")
    old_ones = stale(sections, claims_dir, root)
    for (paper, flags), section in sections.items():
        sections[(paper, flags)] = mark_stale(section, paper, flags, old_ones.get((paper, flags)))
    path.write_text(head + BEGIN + "\n\n" + "\n".join(sections.values()) + END + tail)
    echo(f"{len(old_ones)} stale section(s)" if old_ones else "every section is current")
    return 1 if old_ones else 0


# ----------------------------------------------------------------- summary
def _verdicts(section: str) -> list[tuple[str, str]]:
    """(claim, verdict) of each row of a section's claims table (the mechanisms' table has none)."""
    lines = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| ---")]
    if not lines or not lines[0].startswith("| claim | ran | paper | railbed | verdict"):
        return []
    rows = []
    for line in lines[1:]:
        cells = re.split(r"(?<!\\) \| ", line[2:-2])
        rows.append((cells[0], cells[4]))
    return rows


def _claim_rows(section: str) -> list[tuple[tuple[str, int], str]]:
    """((claim text, its occurrence), verdict) per claim row of a section. Every section has one row
    per claim of its claims file, in the file's order, and several claims share a text (Hermod's
    Fig. 5.11 rows at 16 and 32 GPUs): the n-th row of a text is the n-th claim of that text.
    Rows at a tuned parameter's value before are not claims of their own."""
    seen: Counter = Counter()
    rows = []
    for claim, verdict in _verdicts(section):
        if TUNED_MARK not in claim:
            rows.append(((claim, seen[claim]), verdict))
            seen[claim] += 1
    return rows


def _rank(verdict: str) -> int:
    return 2 if verdict == "skipped" else 1 if verdict in (QUICK_VERDICT, REDUCED_VERDICT) else 0


def _column(verdict: str) -> str:
    if verdict.startswith("holds"):
        return "hold"
    if verdict.startswith(EXPLAINED):
        return "explained"
    if verdict.startswith("does not hold") or verdict == "no value":
        return "do not hold"
    return {"not built yet": "not built", "not reproduced here": "not reproduced"}.get(verdict, verdict)


def summary(sections: dict[tuple[str, str], str], papers: tuple[str, ...]) -> list[str]:
    """Per paper, its claims and how many hold, do not hold, ... : each claim counted once, by its
    row in the section made at the largest size (no --quick) that judged it, else its quick row."""
    rows = []
    for paper in papers:
        mine = sorted((k for k in sections if k[0] == paper), key=lambda k: ("--quick" in k[1], k[1]))
        if not mine or paper == "mechanisms":
            continue
        best: dict[tuple[str, int], str] = {}
        for key in mine:  # sections at the paper's size first
            for claim, verdict in _claim_rows(sections[key]):
                if claim not in best or _rank(verdict) < _rank(best[claim]):
                    best[claim] = verdict
        names = ", ".join(f"`{k[1].strip() or 'without --quick'}`" for k in mine)
        rows.append((paper, names, Counter(_column(v) for v in best.values()), len(best)))
    columns = COLUMNS + (REDUCED_COLUMN,) * any(counts[REDUCED_COLUMN] for *_, counts, _n in rows)
    lines = ["| paper | sections | " + " | ".join(columns) + " |", "|" + " --- |" * (len(columns) + 2)]
    for paper, names, counts, n in rows:
        cells = [str(n)] + [str(counts.get(c, 0)) for c in columns[1:]]
        lines.append(f"| {paper} | {names} | " + " | ".join(cells) + " |")
    return lines


def write_summary(text: str, papers: tuple[str, ...], claims_dir: Path) -> str:
    """``text`` with its summary block rewritten (left as it is when it has no summary markers)."""
    if SUMMARY_BEGIN not in text or SUMMARY_END not in text:
        return text
    sections = block_sections(text.split(BEGIN, 1)[1].split(END, 1)[0]) if BEGIN in text else {}
    lines = [
        "Generated from the sections below (each claim counted once: by its row in a section made at the",
        "paper's size when one judged it, else by its `--quick` row, a smoke test that gives no verdict):",
        "",
        *summary(sections, papers),
        "",
        "Whether a section is current (its inputs unchanged since it was made): `railbed reproduce --check "
        "REPRODUCTION.md`; a stale section says so under its heading.",
    ]
    head, rest = text.split(SUMMARY_BEGIN, 1)
    _old, tail = rest.split(SUMMARY_END, 1)
    return head + SUMMARY_BEGIN + "\n\n" + "\n".join(lines) + "\n\n" + SUMMARY_END + tail
