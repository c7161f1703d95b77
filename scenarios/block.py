"""REPRODUCTION.md's generated block: its sections, what each was made from, and the summary on top.

Each section (one per paper and flags, :mod:`scenarios.reproduce`) starts with
its marker and an inputs line, ``<!-- reproduce:inputs <digest> made at
<commit> -->``: the digest of what its runs depend on (:func:`inputs_digest`).
A section whose inputs changed since is *stale*: ``railbed reproduce --check
FILE`` lists such sections, and every ``--write`` prints "Stale since
<commit>" under the heading of each one it keeps without regenerating (issue
41). The summary (between ``reproduce:summary`` markers near the top) counts
the verdicts of every section per paper; ``--write`` rewrites it.

What a run depends on (issue 41 asks for "the code of the packages the runs
import"): the claims file, every file under the paper's directory and each
scenario file its claims name, the clusters those name, and the ``.py`` files
of the packages a simulated run imports (railbed, simulator, schedulers,
workloads, hwmodels and scenarios' own modules), plus emulator's for a section
made with ``--emulate``. The simplest honest choice: a change anywhere in that
code makes every section stale until regenerated, whether or not it moves a
number (finer tracking would need the import graph of each run).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections import Counter
from pathlib import Path

from railbed.errors import SpecError
from scenarios.claims import QUICK_VERDICT, TUNED_MARK

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- reproduce:summary:begin -->", "<!-- reproduce:summary:end -->"
SECTION = re.compile(r"^<!-- reproduce:section (\w+)((?: --[\w-]+)*) -->$", re.M)
INPUTS = re.compile(r"^<!-- reproduce:inputs (\w+) made at (\S+) -->\n", re.M)
STALE = re.compile(r"^\*\*Stale since [^\n]*\n\n", re.M)
WALL = re.compile(r"^Wall time of the command: [^\n]*\n\n", re.M)
PACKAGES = ("railbed", "simulator", "schedulers", "workloads", "hwmodels")
# the verdict column's words -> the summary's columns
COLUMNS = ("claims", "hold", "do not hold", "input check", "quick: no verdict", "skipped", "not built",
           "not reproduced", "measured")  # fmt: skip


def _files(paper: str, flags: str, claims_dir: Path) -> list[Path]:
    """The files a (paper, flags) section's runs depend on (see the module's docstring)."""
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
    packages = (*PACKAGES, "emulator") if "--emulate" in flags.split() else PACKAGES
    for package in packages:
        files |= set((ROOT / package).rglob("*.py"))
    files |= set((ROOT / "scenarios").glob("*.py"))
    return sorted(p for p in files if p.exists())


def inputs_digest(paper: str, flags: str, claims_dir: Path) -> str:
    """The digest (12 hex digits) of the files a section's runs depend on, by path and content."""
    h = hashlib.sha256()
    for path in _files(paper, flags, claims_dir):
        try:
            name = str(path.relative_to(ROOT))
        except ValueError:
            name = str(path)
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def head_commit() -> str:
    """The repository's commit (short), ``unknown`` outside git."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def wall_line(seconds: float | None) -> str:
    """The section's wall time (varies between runs of the same code: left out of comparisons)."""
    took = "not measured" if seconds is None else f"{seconds:.0f} s ({seconds / 60:.1f} min)"
    return f"Wall time of the command: {took}, at commit {head_commit()}."


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


def stale(sections: dict[tuple[str, str], str], claims_dir: Path) -> dict[tuple[str, str], str]:
    """(paper, flags) -> the commit it was made at, for each section whose inputs changed since
    (``unknown`` for a section without an inputs line)."""
    out = {}
    for (paper, flags), text in sections.items():
        m = INPUTS.search(text)
        if m is None:
            out[(paper, flags)] = "unknown"
        elif m.group(1) != inputs_digest(paper, flags, claims_dir):
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


def check(path: Path, claims_dir: Path, echo=print) -> int:
    """``railbed reproduce --check FILE``: list the stale sections of FILE's block; 1 if any, else 0."""
    text = path.read_text()
    if BEGIN not in text:
        raise SpecError("check", f"{path} has no {BEGIN} ... {END} block")
    found = stale(block_sections(text.split(BEGIN, 1)[1].split(END, 1)[0]), claims_dir)
    for (paper, flags), since in found.items():
        echo(f"stale since {since}: railbed reproduce {paper}{flags} --write {path.name}")
    echo(f"{len(found)} stale section(s)" if found else "every section is current")
    return 1 if found else 0


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
    return 2 if verdict == "skipped" else 1 if verdict == QUICK_VERDICT else 0


def _column(verdict: str) -> str:
    if verdict.startswith("holds"):
        return "hold"
    if verdict.startswith("does not hold") or verdict == "no value":
        return "do not hold"
    return {"not built yet": "not built", "not reproduced here": "not reproduced"}.get(verdict, verdict)


def summary(sections: dict[tuple[str, str], str], papers: tuple[str, ...]) -> list[str]:
    """Per paper, its claims and how many hold, do not hold, ... : each claim counted once, by its
    row in the section made at the largest size (no --quick) that judged it, else its quick row."""
    lines = ["| paper | sections | " + " | ".join(COLUMNS) + " |", "|" + " --- |" * (len(COLUMNS) + 2)]
    for paper in papers:
        mine = sorted((k for k in sections if k[0] == paper), key=lambda k: ("--quick" in k[1], k[1]))
        if not mine or paper == "mechanisms":
            continue
        best: dict[tuple[str, int], str] = {}
        for key in mine:  # sections at the paper's size first
            for claim, verdict in _claim_rows(sections[key]):
                if claim not in best or _rank(verdict) < _rank(best[claim]):
                    best[claim] = verdict
        counts = Counter(_column(v) for v in best.values())
        names = ", ".join(f"`{k[1].strip() or 'without --quick'}`" for k in mine)
        cells = [str(len(best))] + [str(counts.get(c, 0)) for c in COLUMNS[1:]]
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
