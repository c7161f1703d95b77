"""One reproduction report: ``railbed reproduce [platform|dgtp|hermod|leo|dgcl|all] [--quick] [--emulate]``.

Each paper keeps its claims in ``scenarios/<paper>/claims.yaml``::

    title: railbed itself (the platform)
    claims:
      - claim: the emulator and the simulator agree on crosscheck-small's makespan (FIFO)
        paper: "within 10 %"                 # the paper's number, as the paper states it
        scenario: ../../examples/scenarios/crosscheck-small.yaml   # relative to the claims file
        backend: crosscheck                  # simulate (default) | emulate | crosscheck
        engine: fluid-rules                  # simulated rows: the simulator backend, fluid (default) |
                                             # fluid-rules (jobs as arrays: the papers' sizes, rows run only
                                             # with --full-size); old names numba | compact still read
        scheduler: fifo                      # which run of the scenario the metric reads
        metric: makespan_rel                 # see METRIC_HELP
        relative_to: null                    # a scheduler: report metric / metric(relative_to) - 1
        bound: {min: -0.10, max: 0.10}       # the claim holds when the measurement is inside
        unit: percent                        # percent | time | number | ratio (with relative_to:
                                             # metric / metric(relative_to), shown as 4.45x)
        set: {schedulers: [fifo]}            # dotted overrides for every run of this row (say why in note)
        quick: {job.args.microbatches: 1}    # dotted overrides for --quick (small and fast), after set
      - claim: 1.5x over DrTM-KV
        paper: "~1.5x"
        not_reproduced: DrTM-KV is an outside system; its pattern is not built here

Rows are grouped by (scenario, backend, engine, set and quick overrides), so one run
serves every row that reads it. Simulated rows run by default; emulated
and crosscheck rows need ``--emulate`` (root; one testbed per machine) and
are listed as skipped otherwise, and so are rows on a backend that builds jobs
as arrays (``fluid-rules``) without ``--full-size`` (the papers' sizes:
minutes and GBs each). ``--resume`` reuses a group's finished results
directory when its ``scenario.yaml`` is the one the row would run (so a long
``--emulate`` report can be stopped and taken up again; each run's
``provenance.json`` names the commit it was made with). Each run is a normal
results directory (figures included) under ``--out`` (default
``reproduction/``), and ``REPRODUCTION.md`` there has, per paper, a table: claim, paper, railbed,
verdict (holds / does not hold / measured), fidelity (the emulator's
report, or "simulated"), and the command that reruns the row; then the
runs' figures. A paper without a claims file gets "not built yet".

``--readme README.md`` writes the same tables between the README's
``<!-- reproduce:begin -->`` and ``<!-- reproduce:end -->`` markers, so the
README's tables are generated, never typed.

Adding a paper's rows: create ``scenarios/<paper>/claims.yaml`` (and its
scenarios); nothing in this module changes. A new kind of number is one
entry in :data:`railbed.metrics.METRICS` or in :data:`CROSSCHECK_METRICS`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from railbed import backend as backends
from railbed.errors import SpecError
from railbed.metrics import METRICS, metric
from railbed.results import RunResult, fmt_time, percentile

PAPERS = ("platform", "dgtp", "hermod", "leo", "dgcl")
HERE = Path(__file__).resolve().parent
BACKENDS = ("simulate", "emulate", "crosscheck")
CLAIM_KEYS = {
    "claim", "paper", "scenario", "backend", "scheduler", "metric", "relative_to", "bound", "unit", "set", "quick",
    "note", "not_reproduced", "engine",
}  # fmt: skip
UNITS = ("percent", "time", "number", "ratio")
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
# the rest stay in each run's figures/
REPORT_FIGURES = ("timeline-", "fct-cdf", "iterations", "crosscheck-fct", "latency-load", "throughput-load")


CROSSCHECK_METRICS: dict[str, Callable[[Any], float]] = {
    "makespan_rel": lambda c: c.makespan_rel,
    "fct_rel_median": lambda c: percentile([abs(f.rel) for f in c.flows], 50),
    "fct_rel_worst": lambda c: max((abs(f.rel) for f in c.flows), default=math.nan),
    "order_violations": lambda c: float(len(c.order_violations)),
}
METRIC_HELP = f"run metrics: {', '.join(METRICS)}; crosscheck metrics: {', '.join(CROSSCHECK_METRICS)}"


@dataclass
class Claim:
    claim: str
    paper: str
    scenario: Path
    metric: str
    backend: str = "simulate"
    scheduler: str | None = None
    relative_to: str | None = None
    bound: dict[str, float] = field(default_factory=dict)
    unit: str = "number"
    quick: dict[str, Any] = field(default_factory=dict)
    set: dict[str, Any] = field(default_factory=dict)  # overrides for every run of the row
    note: str | None = None
    not_reproduced: str | None = None  # why railbed does not measure this row (an outside system's baseline)
    engine: str = "fluid"  # the simulator backend of a simulated row (railbed.backend.BACKENDS)

    @property
    def full_size(self) -> bool:
        """A row at the paper's size: its backend builds jobs as arrays (minutes and GBs per run)."""
        return self.not_reproduced is None and backends.backend(self.engine).capabilities.array_jobs

    def run_key(self, quick: bool) -> str:
        overrides = json.dumps([self.set, self.quick if quick else {}], sort_keys=True, default=str)
        engine = "" if self.engine == "fluid" else f"|{self.engine}"  # fluid rows keep their old keys
        digest = hashlib.sha1(f"{self.scenario}|{self.backend}{engine}|{overrides}".encode()).hexdigest()[:6]
        return f"{self.scenario.stem}-{self.backend}{'-quick' if quick else ''}-{digest}"


@dataclass
class Row:
    claim: Claim
    value: float | None = None
    verdict: str = ""
    fidelity: str = ""
    command: str = ""  # reruns this row's scenario
    paper_command: str = ""  # reruns the paper's rows (what the README shows)
    run_dir: Path | None = None


def load_claims(path: Path) -> tuple[str, list[Claim]]:
    """(title, claims) of a claims file; errors name ``claims[i].field``."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise SpecError(str(path), "not valid YAML") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise SpecError("claims", f"{path}: expected a mapping with a list 'claims'")
    return str(data.get("title", path.parent.name)), [
        _claim(c, path.parent, f"claims[{i}]") for i, c in enumerate(data["claims"])
    ]


def _claim(raw: Any, base: Path, where: str) -> Claim:
    if not isinstance(raw, dict):
        raise SpecError(where, "expected a mapping")
    unknown = set(raw) - CLAIM_KEYS
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", f"unknown key (known: {', '.join(sorted(CLAIM_KEYS))})")
    if raw.get("not_reproduced") is not None:  # a row railbed lists but does not measure
        for key in ("claim", "paper"):
            if key not in raw:
                raise SpecError(f"{where}.{key}", "missing")
        why = raw["not_reproduced"]
        if not isinstance(why, str) or not why:
            raise SpecError(f"{where}.not_reproduced", "expected the reason, as text")
        return Claim(str(raw["claim"]), str(raw["paper"]), base, "", not_reproduced=why, note=raw.get("note"))
    for key in ("claim", "paper", "scenario", "metric"):
        if key not in raw:
            raise SpecError(f"{where}.{key}", "missing")
    backend = str(raw.get("backend", "simulate"))
    if backend not in BACKENDS:
        raise SpecError(f"{where}.backend", f"must be one of {', '.join(BACKENDS)}")
    known = CROSSCHECK_METRICS if backend == "crosscheck" else METRICS
    if raw["metric"] not in known:
        raise SpecError(f"{where}.metric", f"unknown metric {raw['metric']!r} for {backend} ({METRIC_HELP})")
    bound = raw.get("bound") or {}
    if not isinstance(bound, dict) or set(bound) - {"min", "max"}:
        raise SpecError(f"{where}.bound", "expected {min: X, max: Y} (either may be left out)")
    unit = str(raw.get("unit", "number"))
    if unit not in UNITS:
        raise SpecError(f"{where}.unit", f"must be one of {', '.join(UNITS)}")
    if unit == "ratio" and not raw.get("relative_to"):
        raise SpecError(f"{where}.relative_to", "unit ratio is a metric over another scheduler's: name it")
    engine = backends.BACKENDS.canonical(raw.get("engine", "fluid"), f"{where}.engine")
    if engine != "fluid" and (backend != "simulate" or backends.backend(engine).capabilities.needs_root):
        raise SpecError(f"{where}.engine", f"names a simulator backend ({engine} is not one), on a simulated row")
    scenario = (base / str(raw["scenario"])).resolve()
    if not scenario.exists():
        raise SpecError(f"{where}.scenario", f"no such file {scenario}")
    return Claim(
        claim=str(raw["claim"]),
        paper=str(raw["paper"]),
        scenario=scenario,
        metric=str(raw["metric"]),
        backend=backend,
        scheduler=raw.get("scheduler"),
        relative_to=raw.get("relative_to"),
        bound={k: float(v) for k, v in bound.items()},
        unit=unit,
        quick=_overrides(raw.get("quick"), f"{where}.quick"),
        set=_overrides(raw.get("set"), f"{where}.set"),
        note=str(raw["note"]) if raw.get("note") is not None else None,
        engine=engine,
    )


def _overrides(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise SpecError(where, "expected a mapping of dotted key (job.args.iterations) to value")
    return dict(raw)


# -------------------------------------------------------------------- runs
def _scenario(claim: Claim, quick: bool):
    """The claim's scenario with its ``set`` and --quick overrides, cluster inline (a self-contained scenario.yaml)."""
    from scenarios.runner import Scenario
    from scenarios.sweep import scenario_mapping, set_dotted

    data, base = scenario_mapping(str(claim.scenario), Path("."))
    for name, overrides in (("set", claim.set), ("quick", claim.quick if quick else {})):
        for key, value in overrides.items():
            set_dotted(data, key, copy.deepcopy(value), f"{name}.{key}")
    return Scenario.from_dict(data, base, arrays="always" if claim.full_size else False)


def run_group(
    claim: Claim, quick: bool, out: Path, echo: Callable[[str], None], resume: bool = False
) -> dict[str, Any]:
    """Run the scenario behind ``claim`` once; return what its rows read (results, crosschecks).
    With ``resume``, an earlier finished run of the same scenario in ``out`` is read instead."""
    from scenarios.runner import crosscheck_scenario, run_scenario, simulate_scenario

    sc = _scenario(claim, quick)
    got = _finished(sc, claim.backend, out) if resume else None
    if got is not None:
        echo(f"  {claim.backend} {claim.scenario.name}: finished earlier in {out} (--resume)")
        return got
    quiet = lambda _msg: None  # noqa: E731 - the scenario's own progress is in its directory
    echo(f"  {claim.backend} {claim.scenario.name}{' (quick)' if quick else ''} -> {out}")
    if claim.backend == "simulate":
        # full-size rows are the big jobs (1024+ GPUs): no figures, which would read every item
        return {"runs": simulate_scenario(sc, out, echo=quiet, backend=claim.engine, plots=not claim.full_size)}
    if claim.backend == "emulate":
        return {"runs": run_scenario(sc, out, echo=quiet)}
    checks = crosscheck_scenario(sc, out, echo=quiet)
    runs = [RunResult.load(out / s.run_label / "result.json") for s in sc.schedulers]
    return {"runs": runs, "checks": checks}


def _finished(sc, backend: str, out: Path) -> dict[str, Any] | None:
    """What :func:`run_group` returns, read from ``out`` if a run of exactly ``sc`` finished there."""
    from scenarios.runner import PARTIAL

    saved = out / "scenario.yaml"
    if (out / PARTIAL).exists() or not saved.exists():
        return None
    if yaml.safe_load(saved.read_text()) != yaml.safe_load(yaml.safe_dump(sc.source or {}, sort_keys=False)):
        return None
    labels = [spec.run_label for spec, _job in sc.points(sc.schedulers)]
    names = ("result.json", "simulated.json") if backend == "crosscheck" else ("result.json",)
    paths = [[out / label / name for name in names] for label in labels]
    if not all(p.exists() for group in paths for p in group):
        return None
    runs = [RunResult.load(group[0]) for group in paths]
    if backend != "crosscheck":
        return {"runs": runs}
    from simulator.crosscheck import compare

    return {"runs": runs, "checks": [compare(r, RunResult.load(g[1])) for r, g in zip(runs, paths)]}


def measure(claim: Claim, got: dict[str, Any]) -> tuple[float, str]:
    """(the claim's number, fidelity verdict of the run it was read from)."""
    runs = {r.scheduler: r for r in got["runs"]}
    name = claim.scheduler or next(iter(runs))
    if name not in runs:
        raise SpecError("scheduler", f"{name!r} is not a scheduler of {claim.scenario.name}")
    run = runs[name]
    if claim.backend == "crosscheck":
        check = next(c for c in got["checks"] if c.scheduler == name)
        value = CROSSCHECK_METRICS[claim.metric](check)
    else:
        value = metric(run, claim.metric)
        if claim.relative_to:
            value = value / metric(runs[claim.relative_to], claim.metric) - (claim.unit != "ratio")
    if run.backend == "simulator":
        fidelity = "simulated"
    else:
        fidelity = "ok" if run.fidelity.get("ok", True) else "BROKEN: " + "; ".join(run.fidelity.get("problems", []))
    return value, fidelity


def verdict(claim: Claim, value: float) -> str:
    if not claim.bound:
        return "measured"
    if math.isnan(value):
        return "no value"
    lo, hi = claim.bound.get("min", -math.inf), claim.bound.get("max", math.inf)
    return "holds" if lo <= value <= hi else "does not hold"


def fmt_value(claim: Claim, value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if claim.unit == "ratio":
        return f"{value:.3g}x"
    if claim.unit == "percent" or claim.relative_to:
        return f"{100 * value:+.1f} %"
    if claim.unit == "time":
        return fmt_time(value)
    return f"{value:.4g}"


# ------------------------------------------------------------------ report
def reproduce_paper(
    paper: str,
    out: Path,
    quick: bool,
    emulate: bool,
    echo: Callable[[str], None],
    claims_dir: Path = HERE,
    resume: bool = False,
    full_size: bool = False,
) -> tuple[str, list[Row]]:
    """Run one paper's claims; return (title, rows). No claims file: ("not built yet", [])."""
    path = claims_dir / paper / "claims.yaml"
    if not path.exists():
        return "not built yet", []
    title, claims = load_claims(path)
    echo(f"{paper}: {len(claims)} claims")
    groups: dict[str, dict[str, Any]] = {}
    rows = []
    for claim in claims:
        big = claim.full_size
        flags = (" --quick" if quick else "") + (" --emulate" if claim.backend != "simulate" else "")
        flags += " --full-size" if big else ""
        row = Row(
            claim, paper_command=f"{'sudo ' if claim.backend != 'simulate' else ''}railbed reproduce {paper}{flags}"
        )
        rows.append(row)
        if claim.not_reproduced:
            row.verdict, row.fidelity = "not reproduced here", claim.not_reproduced
            row.paper_command = row.command = "-"
            continue
        if claim.backend != "simulate" and not emulate:
            row.verdict, row.fidelity, row.command = "skipped", "needs --emulate (root)", row.paper_command
            continue
        if big and not full_size:
            row.verdict, row.fidelity, row.command = "skipped", "needs --full-size (minutes, GBs)", row.paper_command
            continue
        key = claim.run_key(quick)
        row.run_dir = out / paper / key
        if key not in groups:
            groups[key] = run_group(claim, quick, row.run_dir, echo, resume)
        row.value, row.fidelity = measure(claim, groups[key])
        row.verdict = verdict(claim, row.value)
        cmd = {"simulate": "railbed simulate", "emulate": "sudo railbed run", "crosscheck": "sudo railbed crosscheck"}
        engine = f" --backend {claim.engine}" if claim.engine != "fluid" else ""
        row.command = f"{cmd[claim.backend]} {shlex.quote(str(row.run_dir / 'scenario.yaml'))}{engine}"
    return title, rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows: list[Row], rel_to: Path | None = None) -> str:
    """The rows as a Markdown table; with ``rel_to`` (the report's directory) commands name the
    run's scenario relative to it, without it (the README) the ``railbed reproduce`` command."""
    head = "| claim | paper | railbed | verdict | fidelity | command |\n| --- | --- | --- | --- | --- | --- |"
    lines = [head]
    for r in rows:
        cmd = r.paper_command if rel_to is None else r.command
        if rel_to is not None and r.run_dir is not None:
            cmd = cmd.replace(str(r.run_dir), os.path.relpath(r.run_dir, rel_to))
        cells = (r.claim.claim, r.claim.paper, fmt_value(r.claim, r.value), r.verdict, r.fidelity, f"`{cmd}`")
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _figures(rows: list[Row], out: Path) -> list[str]:
    lines = []
    for run_dir in dict.fromkeys(r.run_dir for r in rows if r.run_dir is not None):
        figs = [p for p in sorted((run_dir / "figures").glob("*.png")) if p.stem.startswith(REPORT_FIGURES)]
        if figs:
            lines.append(f"Figures of `{os.path.relpath(run_dir, out)}`:\n")
            lines += [f"![{p.stem}]({os.path.relpath(p, out)})" for p in figs]
            lines.append("")
    return lines


def render(sections: list[tuple[str, str, list[Row]]], out: Path, quick: bool, emulate: bool, seconds: float) -> str:
    lines = [
        "# railbed reproduction report",
        "",
        f"Generated by `railbed reproduce{' --quick' if quick else ''}{' --emulate' if emulate else ''}` "
        f"in {seconds:.0f} s ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); how it was made: "
        "`provenance.json` in each run's directory. "
        + ("Quick mode: small versions of the scenarios; the numbers are not the papers' settings. " if quick else "")
        + "Verdict: whether railbed's number is inside the claim's bound; fidelity: the emulator's own report.",
        "",
    ]
    for paper, title, rows in sections:
        lines += [f"## {paper}: {title}", ""]
        if not rows:
            lines += [f"Not built yet: no `scenarios/{paper}/claims.yaml`.", ""]
            continue
        lines += [table(rows, out), ""]
        lines += notes(rows)
        lines += _figures(rows, out)
    return "\n".join(lines).rstrip() + "\n"


def notes(rows: list[Row]) -> list[str]:
    """The claims' notes (why railbed and the paper differ, as far as we can tell), under the table."""
    out = [f"- *{r.claim.claim}*: {r.claim.note}" for r in rows if r.claim.note]
    return ["Notes:", "", *out, ""] if out else []


def update_readme(readme: Path, sections: list[tuple[str, str, list[Row]]], quick: bool) -> None:
    """Replace, in the README's block between the reproduce markers, the sections of the papers
    just run (tables and notes, no figures); other papers' sections stay as they were."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SpecError("readme", f"{readme} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = _readme_sections(old)
    for paper, title, rows in sections:
        body = [
            f"**{paper}: {title}**",
            "",
            f"<!-- generated by railbed reproduce {paper}{' --quick' if quick else ''}; do not edit -->",
            "",
        ]
        body += [table(rows) if rows else f"Not built yet: no `scenarios/{paper}/claims.yaml`.", ""]
        kept[paper] = "\n".join(body + notes(rows))
    blocks = [kept[p] for p in PAPERS if p in kept]
    readme.write_text(head + BEGIN + "\n\n" + "\n".join(blocks) + END + tail)


def _readme_sections(block: str) -> dict[str, str]:
    """paper -> its section (from its ``**paper: title**`` line to the next) in the README block."""
    out = {}
    for part in re.split(r"^(?=\*\*\w+: )", block, flags=re.M):
        m = re.match(r"\*\*(\w+): ", part)
        if m and m.group(1) in PAPERS:
            out[m.group(1)] = part.rstrip() + "\n"
    return out


def reproduce(
    which: str,
    out: Path,
    quick: bool = False,
    emulate: bool = False,
    echo: Callable[[str], None] = print,
    readme: Path | None = None,
    claims_dir: Path = HERE,
    resume: bool = False,
    full_size: bool = False,
) -> Path:
    """Run the claims of ``which`` (a paper or ``all``) and write ``out/REPRODUCTION.md``."""
    from railbed import provenance

    papers = PAPERS if which == "all" else (which,)
    if which != "all" and which not in PAPERS:
        raise SpecError("paper", f"unknown paper {which!r} (known: {', '.join(PAPERS)}, all)")
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for paper in papers:
        title, rows = reproduce_paper(paper, out, quick, emulate, echo, claims_dir, resume, full_size)
        sections.append((paper, title, rows))
    report = out / "REPRODUCTION.md"
    report.write_text(render(sections, out, quick, emulate, time.perf_counter() - t0))
    provenance.write(out)
    if readme is not None:
        update_readme(readme, sections, quick)
    echo(f"report: {report}")
    return report
