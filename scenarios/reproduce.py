"""One reproduction report: ``railbed reproduce [PAPER|all] [--quick] [--emulate] [--full-size]
[--write REPRODUCTION.md] [--sensitivity]``.

Each paper keeps its claims in ``scenarios/<paper>/claims.yaml`` (read by
:mod:`scenarios.claims`)::

    title: 'Hermod (seed 004, chapter 5)'
    unstated:                              # what the paper leaves unstated (swept by --sensitivity)
      - name: compute efficiency
        set: job.args.efficiency           # dotted path(s) into the scenario, set to each value
        value: 0.5                         # the value the scenarios use
        reason: ...                        # why, from what the paper gives (never from the outcome)
        range: [0.3, 0.5, 0.7]             # what --sensitivity sweeps
        claims: [gpt3-100g]                # the claims (ids) it applies to
    claims:
      - id: gpt3-100g                      # names figures and note references (default c<index>)
        claim: GPT-3 13B at 100 Gbit/s, Hermod's speedup over Megatron   # the paper's claim, not the run
        paper: {value: 1.38, unit: speedup, source: Fig. 5.9}  # the paper's number (or [low, high]),
                                           # unit: x (scheduler's metric over relative_to's) | speedup
                                           # (relative_to's over the scheduler's: times) | % (a change
                                           # against relative_to, or a fraction metric) | s | ms | us | count;
                                           # text: words after the number; no number: paper: "its words"
        kind: value                        # value (default with a number) | up_to (the best point of
                                           # sweep) | mean (their mean) | direction (no number: bound) |
                                           # measured (no number, no bound)
        band: {relative: 0.2}              # around the number: absolute (10 for % points, the default
                                           # for %) | relative (0.2, the default otherwise) | factor
        bound: {max: 1.0}                  # kind direction only, in the paper's unit
        scenario: testbed-gpt3-sim.yaml    # relative to the claims file
        backend: simulate                  # simulate (default) | emulate | crosscheck
        engine: fluid-rules                # simulated rows: the simulator backend, fluid (default) |
                                           # fluid-rules (compact: rules only, jobs over MAX_ITEMS built as
                                           # arrays) | packet (ns-3: TCP, queues, drops); old names numba |
                                           # compact read
        full_size: true                    # runs only with --full-size (1000s of GPUs: minutes and GBs
                                           # per run; the job always built as arrays)
        scheduler: hermod                  # the run the metric reads
        relative_to: megatron              # the run it is compared with
        metric: iteration_mean             # railbed.metrics.METRICS, a crosscheck metric, or a curve
                                           # metric (CURVE_METRICS: knee, p50_at_knee) of a load sweep,
                                           # whose scheduler and relative_to name sweeps (leo, acc-only)
        set: {job.args.iterations: 5}      # dotted overrides for every run of this row
        sweep: {job.args.dp: [1, 2, 4]}    # the paper's sweep (up_to, mean): one run per combination;
                                           # axis scenario: a list of files
        quick: {job.args.microbatches: 2}  # dotted overrides for --quick (small and fast), applied last
        size_probe: {set: job.args.scale, values: [0.002, 0.004]}  # the override setting the size and
                                           # smaller sizes that run here (scenarios.sizeprobe)
        experiment: 32-GPU testbed, Table 5.5   # rows reading one run must name the same experiment
        note: 'railbed {value} against ...'     # {...}: numbers from the runs (NOTE_FIELDS)
      - claim: DrTM-KV's ...
        paper: {value: 1.5, unit: x, source: Fig. 6.10a}
        not_reproduced: an outside system  # listed, not measured
      - claim: ByteGNN's ...
        paper: {value: 3.5, unit: x, source: ...}
        not_built: no ByteGNN here yet     # a seed system railbed has not built: "not built yet"

A row holds only inside the band around the paper's number and, for a
comparison of two runs, with at least half the paper's effect on its side
(:meth:`Claim.effect_edge`); a band wider than the default needs
``band_reason: '<why, cited>'``, printed in the row. "Up to X" is judged on the
best point of the sweep the paper ran (``up_to``), "X on average" on the
mean; a claim whose paper gives no number may have a ``bound`` and says
``direction only``. ``input_check: '<why>'`` marks a row whose number follows
from its inputs (a surrogate's, a calibration's): it prints ``input check``,
never ``holds``; ``stand_in: '<what>'`` names, in the claim column, the model
of another system (or the variant) a row runs in its place. A ``--quick``
section is a smoke test: its rows print ``quick: no verdict``. Rows reading
the same run name the same ``experiment`` (``load_claims`` refuses otherwise).

A claims file lists under ``tuned:`` every parameter whose value was chosen
or changed after a run's result was known::

    tuned:
      - name: expert grid (Mixtral testbed files)
        value: strided                     # the value the scenarios run
        before: megatron                   # the value before
        set: {job.args.expert_grid: megatron}   # overrides giving the value before (or
                                           # scheduler_args: {match: gpu}: the row's scheduler's options)
        commit: 272d615                    # the commit that changed it
        why: ...                           # why, and what the run before showed
        claims: [mixtral-both-sim]         # rows shown again at the value before, beside the chosen one

Every row's "ran" column is generated from the run's scenario and job
(:mod:`scenarios.labels`: model, layers, GPUs, iterations, backend, quick);
"room" is the baseline run's ``analysis`` (``max_speedup``, the largest
``overlap`` shares; ``n/a`` without it); fidelity is the emulator's report
(``n/a`` when a run has none, "simulated" for the simulator). Notes take
their numbers from the runs through ``{...}`` fields, never typed.

Runs are grouped by (scenario, backend, engine, overrides), so one run serves
every row (of one experiment) that reads it. Simulated rows run by default;
emulated and crosscheck rows need ``--emulate`` (root; one testbed per
machine) and ``full_size: true`` rows ``--full-size``; otherwise they are listed
as skipped. ``--resume`` reuses a group's finished results directory when its
``scenario.yaml`` is the one the row would run and its ``inputs.txt`` holds the
digest of what a group of its mode runs, as it is now (:func:`group_inputs`: a simulated
group's is the section's without ``--emulate``, so a section with ``--emulate`` reads the
simulated groups of the one without), so a section resumed across sessions never mixes
two versions of the code; the section's header counts the groups read so. Runs are
normal results directories under ``--out`` (default ``reproduction/``).

``--write REPRODUCTION.md`` replaces, in that file's block between
``<!-- reproduce:begin -->`` and ``<!-- reproduce:end -->``, the sections of
the papers just run with these flags (tables and notes, nothing that changes
between two runs of the same code): one section per (paper, flags).
``tests/test_reproduction_md.py`` regenerates the ``--quick`` sections and
fails when the committed ones differ.

``--sensitivity`` (:mod:`scenarios.sensitivity`) sweeps each ``unstated``
parameter on Ray and draws, per claim, its number against the parameter
with the paper's number and band. ``railbed reproduce mechanisms`` runs the
mechanism jobs with known answers (:mod:`scenarios.mechanisms`).

Adding a paper's rows: create ``scenarios/<paper>/claims.yaml`` and add the
paper to :data:`PAPERS`. A new kind of number is one entry in
:data:`railbed.metrics.METRICS` or :data:`CROSSCHECK`.
"""

from __future__ import annotations

import copy
import math
import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railbed.backend import backend as get_backend
from railbed.errors import SpecError
from railbed.metrics import CURVE_METRICS, curve_metric, metric
from railbed.results import RunResult, fmt_time, percentile
from scenarios.block import (
    BEGIN,
    END,
    SUMMARY_BEGIN,
    block_sections,
    inputs_digest,
    inputs_line,
    mark_stale,
    stale,
    wall_line,
    write_summary,
)
from scenarios.claims import (
    CROSSCHECK_METRICS,
    DEFAULT_ENGINE,
    NOTE_FIELD,
    Claim,
    explain,
    fmt,
    load_claims,
    paper_cell,
    verdict,
)
from scenarios.groups import Groups, Planned, prerun
from scenarios.sizeprobe import sized

PAPERS = (
    "platform", "mechanisms", "dgtp", "hermod", "leo", "dgcl", "distdgl", "bytegnn", "sancus", "adagl", "dgs", "g3",
    "cassini", "crux", "unbuilt",
)  # fmt: skip
HERE = Path(__file__).resolve().parent
__all__ = ["BEGIN", "END", "SUMMARY_BEGIN", "block_sections"]  # REPRODUCTION.md's block (scenarios.block)
# the rest stay in each run's figures/
REPORT_FIGURES = ("timeline-", "fct-cdf", "iterations", "crosscheck-fct", "latency-load", "throughput-load")
HEAD = ("claim", "ran", "paper", "railbed", "verdict", "room (baseline)", "fidelity", "command")

CROSSCHECK: dict[str, Callable[[Any], float]] = {
    "makespan_rel": lambda c: c.makespan_rel,
    "fct_rel_median": lambda c: percentile([abs(f.rel) for f in c.flows], 50),
    "fct_rel_worst": lambda c: max((abs(f.rel) for f in c.flows), default=math.nan),
    "order_violations": lambda c: float(len(c.order_violations)),
}
assert set(CROSSCHECK) == set(CROSSCHECK_METRICS)


def flags(quick: bool, emulate: bool, full_size: bool) -> str:
    """The report's flags, in one order (a section of REPRODUCTION.md is keyed by them)."""
    return "".join(f for f, on in ((" --quick", quick), (" --emulate", emulate), (" --full-size", full_size)) if on)


# -------------------------------------------------------------------- runs
@dataclass
class PointRun:
    """One run behind a row (one point of its sweep)."""

    point: dict[str, Any]
    value: float
    run_dir: Path
    label: str  # what ran (scenarios.labels)
    runs: dict[str, RunResult]
    source: dict[str, Any]  # the scenario mapping that ran


@dataclass
class Row:
    claim: Claim
    value: float | None = None
    verdict: str = ""
    fidelity: str = ""
    ran: str = "-"
    room: str = "-"
    command: str = ""  # reruns this row's scenario (the report)
    paper_command: str = ""  # reruns the paper's rows (REPRODUCTION.md's block)
    points: list[PointRun] = field(default_factory=list)
    best: PointRun | None = None
    fields: dict[str, str] = field(default_factory=dict)  # its note's fields read from its runs (_let_go)

    @property
    def run_dir(self) -> Path | None:
        return self.best.run_dir if self.best else None


def _planned(claim: Claim, point: dict[str, Any], quick: bool) -> Planned:
    """The claim's scenario with its set, sweep point and quick overrides, cluster inline, not yet
    built (:class:`scenarios.groups.Planned`: its jobs are built only where its group runs)."""
    data, base = _mapping(claim, point, quick, None)
    return Planned(data, base, claim.arrays)


def _mapping(claim: Claim, point: dict[str, Any], quick: bool, extra: dict[str, Any] | None):
    """(the mapping, its base directory) of :func:`_planned`'s scenario, with ``extra`` overrides."""
    from scenarios.sweep import scenario_mapping, set_dotted

    data, base = scenario_mapping(str(claim.scenario_of(point)), Path("."))
    for name, overrides in [*claim.overrides(point, quick), ("extra", extra or {})]:
        for key, value in overrides.items():
            if key != "scheduler_args":
                set_dotted(data, key, copy.deepcopy(value), f"{name}.{key}")
    if claim.set.get("scheduler_args"):  # a tuned scheduler option's value before (claims.Tuned), after quick's
        _scheduler_args(data, claim, claim.set["scheduler_args"])
    return data, base


def _scheduler_args(data: dict[str, Any], claim: Claim, args: dict[str, Any]) -> None:
    """Keep only the row's two runs, the scheduler's with ``args`` added to its options."""
    keep = []
    for entry in data.get("schedulers") or []:
        spec = {"name": entry} if isinstance(entry, str) else dict(entry)
        label = spec.get("label", spec["name"])
        if label == claim.scheduler:
            spec = {**spec, "args": {**(spec.get("args") or {}), **args}, "label": label}
        if label in (claim.scheduler, claim.relative_to):
            keep.append(spec)
    if not any(s.get("label") == claim.scheduler for s in keep):
        raise SpecError("tuned.scheduler_args", f"{claim.scheduler!r} is not a run of {claim.scenario}")
    data["schedulers"] = keep


def measure(claim: Claim, got: dict[str, Any]) -> float:
    """The claim's number, in the paper's unit, from one run group."""
    runs = {r.scheduler: r for r in got["runs"]}
    name = claim.scheduler or next(iter(runs))
    if claim.metric in CURVE_METRICS:
        try:
            return claim.to_unit(*curve_metric(claim.metric, got["runs"], name, claim.relative_to))
        except KeyError as e:  # the field whose sweep is missing (the scheduler's first)
            field = "scheduler" if f"no runs {name}@" in e.args[0] else "relative_to"
            raise SpecError(field, e.args[0]) from None
    for who, label in (("scheduler", name), ("relative_to", claim.relative_to)):
        if label is not None and label not in runs:
            raise SpecError(who, f"{label!r} is not a run of this scenario (runs: {', '.join(runs)})")
    if claim.mode == "crosscheck":
        check = next(c for c in got["checks"] if c.scheduler == name)
        return claim.to_unit(CROSSCHECK[claim.metric](check))
    value = metric(runs[name], claim.metric)
    reference = metric(runs[claim.relative_to], claim.metric) if claim.relative_to else None
    return claim.to_unit(value, reference)


def fidelity(runs: list[RunResult]) -> str:
    """The emulator's verdict on the runs a row read: ok, BROKEN (why), ``n/a`` without a report.
    Runs of an exact backend (a model: :class:`railbed.backend.Capabilities`) have no wall clock to
    check: ``simulated``, with what their packets met where they carried packets."""
    inexact = [r for r in runs if not get_backend(r.backend, "backend").capabilities.exact]
    if not inexact:
        counted = [r.own for r in runs if get_backend(r.backend, "backend").capabilities.packets]  # its own
        if not counted or len(counted) < len(runs):
            return "simulated"
        drops = sum(c["drops"] for c in counted)
        timeouts = sum(c["tcp"]["timeouts"] for c in counted)
        return f"simulated (packets: {drops:,} drops, {timeouts:,} timeouts)"
    problems, missing = [], False
    for r in inexact:
        report = r.fidelity_report
        if "ok" not in report:
            missing = True
        elif not report["ok"]:
            problems += [f"{r.scheduler}: {p}" for p in report.get("problems", [])] or [f"{r.scheduler}"]
    if problems:
        return "BROKEN: " + "; ".join(problems)
    return "n/a" if missing else "ok"


def _lowest_load(runs: dict[str, RunResult], label: str) -> RunResult | None:
    """The run ``<label>@<load>`` of the lowest load among ``runs`` (None without one)."""
    sweep = [(float(n.rpartition("@")[2]), n) for n in runs if n.rpartition("@")[0] == label]
    return runs[min(sweep)[1]] if sweep else None


# a request stream's capacity check (schedulers.leo.CapacityCheck.note), in a run's notes
CAPACITY_NOTE = re.compile(r"capacity \((?P<head>[^)]*)\).*a split can add at most (?P<room>[-+][\d.]+) %")


def room(run: RunResult | None) -> str:
    """The baseline run's analysis: the most any scheduler could gain (without a network; and, where
    the busiest port binds tighter, keeping placement, routes and bytes) and where coflow types meet;
    for a request stream, its capacity check (what a split of its paths can add at most)."""
    capacity = next((m for n in getattr(run, "notes", None) or [] if (m := CAPACITY_NOTE.search(str(n)))), None)
    if capacity:
        return f"a split can add {capacity['room']} % over the best single path ({capacity['head']})"
    analysis = getattr(run, "analysis", None) if run is not None else None
    if not isinstance(analysis, dict) or not analysis:
        return "n/a"
    parts = []
    speedup = analysis.get("max_speedup")
    if isinstance(speedup, (int, float)) and math.isfinite(speedup):
        parts.append(f"max speedup {speedup:.3g}x")
    bound, port = analysis.get("room"), analysis.get("busiest_port") or {}
    if isinstance(bound, (int, float)) and math.isfinite(bound) and (not parts or bound < 0.99 * speedup):
        busy = f" (busiest port {100 * port['share']:.0f} %)" if isinstance(port.get("share"), (int, float)) else ""
        parts.append(f"room {bound:.3g}x{busy}")
    overlap = analysis.get("overlap")
    if isinstance(overlap, dict):
        pairs = _overlap_pairs(overlap)
        shares = sorted(((v, k) for k, v in pairs.items() if isinstance(v, (int, float)) and v > 0), reverse=True)
        if shares:
            parts.append("overlap " + ", ".join(f"{k} {100 * v:.0f} %" for v, k in shares[:2]))
    return "; ".join(parts) or "n/a"


def room_bound(run: RunResult | None) -> float | None:
    """The most any scheduler could speed ``run`` up (its analysis's ``room``, else ``max_speedup``;
    :mod:`railbed.analysis`), None without one."""
    analysis = getattr(run, "analysis", None) if run is not None else None
    if not isinstance(analysis, dict):
        return None
    for key in ("room", "max_speedup"):
        value = analysis.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            return float(value)
    return None


def _overlap_pairs(overlap: dict) -> dict[str, float]:
    """``"a/b"`` -> share, from :func:`railbed.analysis.overlap`'s symmetric ``share[a][b]`` (each
    pair once, in its ``types`` order); a mapping already by pair is read as it is."""
    share = overlap.get("share")
    if not isinstance(share, dict):
        return overlap.get("pairs", overlap)
    types = list(overlap.get("types") or share)
    return {f"{a}/{b}": share.get(a, {}).get(b) for i, a in enumerate(types) for b in types[i:]}


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
    plots: bool = True,
    jobs: int = 1,
    tally: dict[str, Any] | None = None,
) -> tuple[str, list[Row]]:
    """Run one paper's claims; return (title, rows). No claims file: ("not built yet", []).
    ``jobs`` > 1: the simulated run groups first, that many at once (:func:`scenarios.groups.prerun`).
    ``tally``, if given, gets the section's run groups (``groups``) and, per group read from an
    earlier run with ``resume``, the commit it was made at (``read``)."""
    path = claims_dir / paper / "claims.yaml"
    if not path.exists():
        return "not built yet", []
    title, claims, _ = load_claims(path)
    echo(f"{paper}: {len(claims)} claims")
    probes: dict[str, list] = {}  # size probes (scenarios.sizeprobe) by run
    rows = []
    groups = Groups(echo, resume, plots, group_inputs(paper, quick, emulate, full_size, claims_dir))
    if jobs > 1:
        prerun(_simulated_groups(claims, quick, full_size, out / paper), jobs, groups)
    for claim in claims:
        row = Row(claim)
        rows.append(row)
        if not claim.measured:
            row.verdict, row.fidelity = verdict(claim, None), claim.not_reproduced or claim.not_built or ""
            row.paper_command = row.command = "-"
            continue
        big = claim.full_size
        row.paper_command = "sudo " * (claim.mode != "simulate") + "railbed reproduce " + paper + flags(
            quick, claim.mode != "simulate", big)  # fmt: skip
        if claim.mode != "simulate" and not emulate:
            row.verdict, row.fidelity, row.command = "skipped", "needs --emulate (root)", row.paper_command
            continue
        if big and not full_size:
            row.verdict, row.fidelity, row.command = "skipped", "needs --full-size (minutes, GBs)", row.paper_command
            continue
        ran, reduced = sized(claim, quick, _mapping, probes, echo)  # at a size that fits here
        for point in ran.points():
            row.points.append(_run_point(ran, point, quick, out / paper, groups))
        _judge(row, quick, reduced)
        _let_go(row)
    if tally is not None:
        tally.update(groups=len(groups.made), read=list(groups.read))
    return title, rows


def group_inputs(paper: str, quick: bool, emulate: bool, full_size: bool, claims_dir: Path) -> dict[str, str]:
    """The digest each mode's run groups are made from: a simulated group's is the section's without
    ``--emulate`` (the code a simulated run can execute), so a section with ``--emulate`` and one
    without share their simulated groups under ``--resume``; an emulated or crosscheck group's is the
    section's."""
    simulated = inputs_digest(paper, flags(quick, False, full_size), claims_dir)
    emulated = inputs_digest(paper, flags(quick, True, full_size), claims_dir) if emulate else simulated
    return {"simulate": simulated, "emulate": emulated, "crosscheck": emulated}


def _simulated_groups(claims: list[Claim], quick: bool, full_size: bool, out: Path) -> list[tuple]:
    """(key, claim, :class:`Planned`, directory) of each simulated run group the section's rows will
    read, once each, in the rows' order; not a claim whose size a probe decides (it runs in the rows'
    turn). No job is built here: each is built in the worker that runs its group."""
    plan: dict[str, tuple] = {}
    for claim in claims:
        if not claim.measured or claim.mode != "simulate" or (claim.full_size and not full_size):
            continue
        if claim.size_probe is not None and not quick:
            continue
        for point in claim.points():
            key = claim.run_key(point, quick)
            if key not in plan:
                plan[key] = (key, claim, _planned(claim, point, quick), out / key)
    return list(plan.values())


def _run_point(claim: Claim, point: dict[str, Any], quick: bool, out: Path, groups: Groups) -> PointRun:
    """One point of ``claim``'s sweep, its group run once (its jobs built only if it runs here, or
    where its label reads the job: :func:`scenarios.labels.needs_job`)."""
    from scenarios.labels import needs_job, run_label

    key = claim.run_key(point, quick)
    planned = _planned(claim, point, quick)
    got = groups.get(key, claim, planned, out / key)
    runs = {r.scheduler: r for r in got["runs"]}
    scale = next(iter(runs.values())).scale if claim.mode != "simulate" else None
    job = planned.scenario.job if needs_job(planned.mapping) else None
    label = run_label(planned.mapping, job, claim.mode, claim.engine, scale, quick)
    return PointRun(point, measure(claim, got), out / key, label, runs, planned.mapping)


def _judge(row: Row, quick: bool = False, reduced: tuple[str, str] | None = None) -> None:
    """The row from its runs; ``reduced``: (ran, words) of a row run below the claims' size (sizeprobe)."""
    claim = row.claim
    row.value = claim.best([p.value for p in row.points])
    # the first point as good as the best within the engines' agreement (1e-9): a tie is not
    # decided by the last bits of the arithmetic (the fluid and compact engines differ there)
    row.best = next((p for p in row.points if math.isclose(p.value, row.value, rel_tol=1e-9)), row.points[0])
    if claim.kind != "mean":
        row.value = row.best.value
    row.verdict = verdict(claim, row.value, quick, reduced=reduced is not None)
    read = [row.best.runs[n] for n in (claim.scheduler, claim.relative_to) if n in row.best.runs]
    row.fidelity = fidelity(read or list(row.best.runs.values())) + (f"; {reduced[1]}" if reduced else "")
    baseline = row.best.runs.get(claim.relative_to or claim.scheduler or "")
    if claim.metric in CURVE_METRICS:  # a load sweep: the reference's run at its lowest load
        baseline = _lowest_load(row.best.runs, claim.relative_to or claim.scheduler)
    row.room = room(baseline)
    rooms = [room_bound(p.runs.get(claim.relative_to or "")) for p in row.points]  # every point's: a bound on all
    row.verdict = explain(claim, row.verdict, max(rooms) if rooms and None not in rooms else None)
    names = ", ".join(_point_name(p.point) for p in row.points)
    many = {
        "up_to": f"; best of {len(row.points)} points ({names})",
        "mean": f"; mean of {len(row.points)} points ({names})",
    }
    many = many.get(claim.kind, "") if len(row.points) > 1 else ""
    row.ran = row.best.label + many + (f"; {reduced[0]}" if reduced else "")
    cmd = {"simulate": "railbed simulate", "emulate": "sudo railbed run", "crosscheck": "sudo railbed crosscheck"}
    engine = f" --backend {claim.engine}" if claim.engine != DEFAULT_ENGINE else ""
    row.command = f"{cmd[claim.mode]} {shlex.quote(str(row.run_dir / 'scenario.yaml'))}{engine}"


def _let_go(row: Row) -> None:
    """Keep what the row's note reads from its runs (``Row.fields``), then let the runs go: a
    section holds its rows until it is written, and runs at the papers' sizes are gigabytes."""
    for m in NOTE_FIELD.finditer(row.claim.note or ""):
        name = m.group(1)
        if name == "value" or name.startswith("arg:") or (name.endswith(".value") and ":" not in name):
            continue  # read from the rows and the scenario when the note is rendered
        try:
            row.fields[name] = _field(name, row, {})
        except (KeyError, TypeError, ValueError, AttributeError):
            row.fields[name] = "n/a"
    for p in row.points:
        p.runs = {}


# ------------------------------------------------------------------- notes
def render_note(row: Row, rows: dict[str, Row]) -> str:
    """The row's note with its ``{...}`` fields read from the runs (``n/a`` where a run is missing)."""

    def field_value(m: re.Match) -> str:
        name = m.group(1)
        if name in row.fields:
            return row.fields[name]
        try:
            return _field(name, row, rows)
        except (KeyError, TypeError, ValueError, AttributeError):
            return "n/a"

    return NOTE_FIELD.sub(field_value, row.claim.note or "")


def _field(name: str, row: Row, rows: dict[str, Row]) -> str:
    if name == "value":
        return fmt(row.claim.paper.unit, row.value)
    if name.endswith(".value") and ":" not in name:
        other = rows[name[: -len(".value")]]
        return fmt(other.claim.paper.unit, other.value)
    kind, _, rest = name.partition(":")
    if kind == "arg":
        from scenarios.sweep import get_dotted

        value = get_dotted(row.best.source, rest)
        if value is None:
            value = _generator_default(row.best.source, rest)
        return "n/a" if value is None else str(value)
    if kind == "wall":
        return f"{row.best.runs[rest].wall_seconds / 60:.0f} minutes"
    label, _, key = rest.rpartition(".")
    run = row.best.runs[label]
    if kind == "run":
        number = metric(run, key)
        return fmt_time(number) if key in ("makespan", "iteration_mean", "iteration_max") or key.startswith(
            ("fct_", "cct_", "request_p")) else f"{number:.4g}"  # fmt: skip
    if kind == "packet":  # the packet backend's counters: drops, marks, tcp.retransmissions, tcp.timeouts
        own = run.own
        number = {**own, **own["tcp"]}[key]
    else:
        number = (run.fidelity_report if kind == "fidelity" else getattr(run, "analysis", None) or {})[key]
    return f"{number:,}" if isinstance(number, int) else f"{number:.3g}"


def _generator_default(source: dict, path: str):
    """A ``job.args.<name>`` the scenario leaves out: the job generator's default, else None."""
    import inspect

    from workloads import GENERATORS

    job = (source or {}).get("job") or {}
    gen = GENERATORS.find(job.get("generator")) if isinstance(job, dict) else None
    if gen is None or not path.startswith("job.args.") or path.count(".") != 2:
        return None
    param = inspect.signature(gen).parameters.get(path.rsplit(".", 1)[1])
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def notes(rows: list[Row]) -> list[str]:
    """The claims' notes (numbers from the runs) and each swept row's points, under the table."""
    by_id = {r.claim.id: r for r in rows}
    out = []
    for r in rows:
        text = render_note(r, by_id) if r.claim.note else ""
        if r.verdict == "skipped" and "n/a" in text:  # numbers from runs that were not made
            text = f"not run here ({r.fidelity}): this row's note reads its numbers from the runs."
        if len(r.points) > 1:
            text += (" " if text else "") + "Points: " + "; ".join(
                f"{_point_name(p.point)}: {fmt(r.claim.paper.unit, p.value)}" for p in r.points) + "."  # fmt: skip
        if text:
            out.append(f"- *{r.claim.label}*: {text}")
    return ["Notes:", "", *out, ""] if out else []


def _point_name(point: dict[str, Any]) -> str:
    return ", ".join(Path(v).stem if k == "scenario" else f"{k.split('.')[-1]} {v}" for k, v in point.items())


# ------------------------------------------------------------------ render
def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows: list[Row], rel_to: Path | None = None) -> str:
    """The rows as a Markdown table; with ``rel_to`` (the report's directory) commands name the
    run's scenario relative to it, without it (REPRODUCTION.md's block) the ``railbed reproduce`` command."""
    lines = ["| " + " | ".join(HEAD) + " |", "|" + " --- |" * len(HEAD)]
    for r in rows:
        cmd = r.paper_command if rel_to is None else r.command
        if rel_to is not None and r.run_dir is not None:
            cmd = cmd.replace(str(r.run_dir), os.path.relpath(r.run_dir, rel_to))
        cells = (r.claim.label, r.ran, paper_cell(r.claim), fmt(r.claim.paper.unit, r.value), r.verdict, r.room,
                 r.fidelity, f"`{cmd}`")  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _figures(rows: list[Row], out: Path) -> list[str]:
    lines = []
    dirs = dict.fromkeys(p.run_dir for r in rows for p in r.points)
    for run_dir in dirs:
        figs = [p for p in sorted((run_dir / "figures").glob("*.png")) if p.stem.startswith(REPORT_FIGURES)]
        if figs:
            lines.append(f"Figures of `{os.path.relpath(run_dir, out)}`:\n")
            lines += [f"![{p.stem}]({os.path.relpath(p, out)})" for p in figs]
            lines.append("")
    return lines


def provenance_line(paper: str, how: str) -> str:
    """Every flag the section's rows were made with, and what the ones left out skip."""
    left = [f"without {f} ({why})" for f, why in (("--emulate", "emulated rows skipped"),
            ("--full-size", "full-size rows skipped")) if f not in how.split()]  # fmt: skip
    return f"Made with `railbed reproduce {paper}{how}`" + (f"; {', '.join(left)}" if left else "") + "."


def section(paper: str, title: str, rows: list[Row], how: str, rel_to: Path | None = None) -> list[str]:
    """A paper's section: heading, provenance, table (or "not built yet"), notes."""
    lines = [f"### {paper}: {title}", "", provenance_line(paper, how), ""]
    if paper == "mechanisms":
        from scenarios.mechanisms import mechanism_table

        return lines + mechanism_table(rows) + [""]
    if not rows:
        return lines + [f"Not built yet: no `scenarios/{paper}/claims.yaml`.", ""]
    return lines + [table(rows, rel_to), ""] + notes(rows)


def render(sections: list[tuple[str, str, list]], out: Path, how: str, seconds: float) -> str:
    lines = [
        "# railbed reproduction report",
        "",
        f"Generated by `railbed reproduce{how}` in {seconds:.0f} s "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); `provenance.json` in each run's directory. "
        + (
            "Quick mode: small versions of the scenarios; the numbers are not the papers' settings. "
            if " --quick" in how
            else ""
        )  # fmt: skip
        + "Verdict: whether railbed's number is inside the band around the paper's with at least half its "
        "effect (`quick: no verdict` in quick mode); room: the baseline run's "
        "analysis (the largest speedup any network scheduler could give, coflow overlap); fidelity: the "
        "emulator's own report.",
        "",
    ]
    for paper, title, rows in sections:
        lines += section(paper, title, rows, how, out)
        if paper != "mechanisms":
            lines += _figures(rows, out)
    return "\n".join(lines).rstrip() + "\n"


def write_block(path: Path, sections: list[tuple[str, str, list]], how: str, claims_dir: Path = HERE,
                papers: tuple[str, ...] = PAPERS, seconds: dict[str, float] | None = None,
                tallies: dict[str, dict[str, Any]] | None = None) -> None:  # fmt: skip
    """Replace, in ``path``'s block between the reproduce markers, the sections of the papers just
    run with these flags (tables and notes, no figures, each with its inputs line); other sections
    stay as they were, marked "Stale since" when their inputs changed; the summary is rewritten."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SpecError("write", f"{path} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = block_sections(old)
    for paper, title, rows in sections:
        mark = f"<!-- reproduce:section {paper}{how} -->"
        lines = section(paper, title, rows, how)
        wall = wall_line((seconds or {}).get(paper), (tallies or {}).get(paper))  # after the provenance line
        body = [mark, inputs_line(paper, how, claims_dir), "", *lines[:4], wall, "", *lines[4:]]
        kept[(paper, how)] = "\n".join(body).rstrip() + "\n"
    old_ones = stale(kept, claims_dir)
    for key in kept:
        kept[key] = mark_stale(kept[key], key[0], key[1], old_ones.get(key))
    order = sorted(kept, key=lambda k: (papers.index(k[0]) if k[0] in papers else len(papers), k[1]))
    new = head + BEGIN + "\n\n" + "\n".join(kept[k] for k in order) + END + tail
    path.write_text(write_summary(new, papers, claims_dir))


def reproduce(
    which: str,
    out: Path,
    quick: bool = False,
    emulate: bool = False,
    echo: Callable[[str], None] = print,
    write: Path | None = None,
    claims_dir: Path = HERE,
    resume: bool = False,
    full_size: bool = False,
    papers: tuple[str, ...] = PAPERS,
    plots: bool = True,
    jobs: int = 1,
) -> Path:
    """Run the claims of ``which`` (a paper or ``all``) and write ``out/REPRODUCTION.md``
    (and, with ``write``, that file's block)."""
    from railbed import provenance

    if which != "all" and which not in papers:
        raise SpecError("paper", f"unknown paper {which!r} (known: {', '.join(papers)}, all)")
    chosen = papers if which == "all" else (which,)
    how = flags(quick, emulate, full_size)
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    sections, seconds, tallies = [], {}, {}
    for paper in chosen:
        t1 = time.perf_counter()
        if paper == "mechanisms":
            from scenarios.mechanisms import mechanism_rows

            sections.append((paper, "scheduler mechanisms with known answers", mechanism_rows(emulate, echo)))
        else:
            tallies[paper] = {}
            title, rows = reproduce_paper(paper, out, quick, emulate, echo, claims_dir, resume, full_size, plots, jobs,
                                          tallies[paper])  # fmt: skip
            sections.append((paper, title, rows))
        seconds[paper] = time.perf_counter() - t1
    report = out / "REPRODUCTION.md"
    report.write_text(render(sections, out, how, time.perf_counter() - t0))
    provenance.write(out, extra_seeds=None)
    if write is not None:
        write_block(write, sections, how, claims_dir, papers, seconds, tallies)
    echo(f"report: {report}")
    return report
