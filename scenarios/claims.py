"""A paper's claims file, read and judged (the format is in :mod:`scenarios.reproduce`'s docstring).

Pure: loading (errors name ``claims[i].field`` or ``unstated[i].field``),
the paper's number and its band, a measurement in the paper's unit and the
verdict. Running the scenarios behind the claims is :mod:`scenarios.reproduce`'s.

The rules (issues 22 and 41): a claim with a number holds only inside a band
around it (default: 10 points of a percentage, 20 % of anything else; a wider
band needs its ``band_reason``, printed in the row) *and*, for a comparison of
two runs, only when its effect is at least half the paper's on the paper's
side ((r - 1) >= (R - 1) / 2 for ratios, half the points of a change; for a
range, half of its smaller effect). "Up to X" is judged on the best point of
the sweep the paper ran, "X on average" on the mean; a claim whose paper
gives no number may carry a direction (``bound``) and then says ``direction
only``; a row whose number follows from its inputs (``input_check``) says
``input check``, never ``holds``; rows reading one run name the same
``experiment``. Parameters chosen after a result was seen are listed under
``tuned`` (:class:`Tuned`); their rows also run at the value before.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from railbed import backend as backends
from railbed.errors import SpecError
from railbed.metrics import CURVE_METRICS, METRICS
from railbed.results import fmt_time
from scenarios.sizeprobe import SizeProbe, parse_probe

MODES = ("simulate", "emulate", "crosscheck")  # how a row runs (its ``backend`` key): Claim.mode
DEFAULT_ENGINE = "fluid"  # the backend a simulated row runs unless it names one (its ``engine``)
CROSSCHECK_METRICS = ("makespan_rel", "fct_rel_median", "fct_rel_worst", "order_violations")
# the paper's unit -> how a measurement is put in it: a ratio of two runs' metric (x: scheduler over
# relative_to; speedup: relative_to over scheduler, for times), a percentage (a change of one run
# against another, or a fraction metric), a time, a count
RATIO_UNITS = ("x", "speedup")
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}
UNITS = (*RATIO_UNITS, "%", *TIME_UNITS, "count")
TUNED_MARK = "value before tuning:"  # in the claim column of a row at a tuned parameter's value before
KINDS = ("value", "up_to", "mean", "direction", "measured")
BANDS = ("absolute", "relative", "factor")
CLAIM_KEYS = {
    "id", "claim", "paper", "kind", "band", "bound", "scenario", "backend", "engine", "scheduler", "relative_to",
    "metric", "set", "quick", "sweep", "experiment", "note", "not_reproduced", "not_built", "band_reason",
    "input_check", "stand_in", "size_probe", "full_size", "explained",
}  # fmt: skip
PAPER_KEYS = {"value", "unit", "source", "text"}
UNSTATED_KEYS = {"name", "set", "value", "reason", "range", "claims"}


@dataclass(frozen=True)
class Paper:
    """What the paper states: a number (or a range ``(lo, hi)``) in ``unit``, where (``source``),
    and words for claims without a number (``text``)."""

    value: float | tuple[float, float] | None
    unit: str
    source: str = ""
    text: str = ""

    @property
    def neutral(self) -> float:
        """The value of "no effect" in this unit: 1 for ratios, 0 otherwise."""
        return 1.0 if self.unit in RATIO_UNITS else 0.0

    def span(self) -> tuple[float, float]:
        if self.value is None:
            return (math.nan, math.nan)
        return self.value if isinstance(self.value, tuple) else (self.value, self.value)


@dataclass(frozen=True)
class Band:
    """Around the paper's number: ``absolute`` (in its unit; points of a percentage), ``relative``
    (a fraction of it) or ``factor`` (divided and multiplied by)."""

    kind: str
    size: float

    def interval(self, lo: float, hi: float) -> tuple[float, float]:
        if self.kind == "absolute":
            return lo - self.size, hi + self.size
        if self.kind == "relative":
            return lo - self.size * abs(lo), hi + self.size * abs(hi)
        return (lo / self.size, hi * self.size) if lo >= 0 else (lo * self.size, hi / self.size)


def default_band(unit: str) -> Band:
    return Band("absolute", 10.0) if unit == "%" else Band("relative", 0.2)


@dataclass(eq=False)  # rows and runs key by the claim itself
class Claim:
    claim: str
    paper: Paper
    scenario: Path | None = None
    metric: str = ""
    id: str = ""
    kind: str = "value"
    band: Band | None = None
    bound: dict[str, float] = field(default_factory=dict)  # direction only, in the paper's unit
    mode: str = "simulate"  # MODES: the claims file's ``backend`` key
    engine: str = DEFAULT_ENGINE  # the simulator backend of a simulated row (railbed.backend.BACKENDS)
    scheduler: str | None = None
    relative_to: str | None = None
    set: dict[str, Any] = field(default_factory=dict)  # overrides for every run of the row
    quick: dict[str, Any] = field(default_factory=dict)  # overrides for --quick, after set
    sweep: list[dict[str, Any]] = field(default_factory=list)  # the paper's sweep: overrides per point
    experiment: str | None = None  # rows reading one run name the same experiment
    note: str | None = None
    not_reproduced: str | None = None  # an outside system's row: why railbed does not measure it
    not_built: str | None = None  # a seed system railbed has not built yet
    band_reason: str | None = None  # why a band wider than the default (cited), printed in the row
    input_check: str | None = None  # why the number follows from the row's inputs: "input check", never holds
    stand_in: str | None = None  # the baseline or system the row runs in place of the paper's, named in the row
    tuned_from: tuple[str, Any] | None = None  # a row variant at a tuned parameter's value before (Tuned)
    size_probe: SizeProbe | None = None  # the override setting the job's size, smaller values (scenarios.sizeprobe)
    full_size: bool = False  # runs only with --full-size: a job of 1000s of GPUs (minutes and GBs per run)
    explained: str | None = None  # why the row falls short, if it does: the piece and where it is measured
    home: Path | None = None  # the claims file's folder: run keys name scenarios from it (any copy of the tree)

    @property
    def label(self) -> str:
        """The claim column: the paper's claim, the stand-in it runs and the value before, if any."""
        text = self.claim + (f" [stand-in: {self.stand_in}]" if self.stand_in else "")
        if self.tuned_from:
            text += f" [{TUNED_MARK} {self.tuned_from[0]} = {self.tuned_from[1]}]"
        return text

    @property
    def arrays(self) -> bool | str:
        """How its scenario builds the job (``Scenario.from_dict``): a ``full_size`` row's as arrays
        always, an array-building engine's (compact) as arrays over ``workloads.MAX_ITEMS``."""
        return "always" if self.full_size else backends.backend(self.engine).capabilities.array_jobs

    @property
    def measured(self) -> bool:
        return not (self.not_reproduced or self.not_built)

    def points(self) -> list[dict[str, Any]]:
        """Overrides per run of the row: one per sweep point (``scenario`` may change the file)."""
        return self.sweep or [{}]

    def scenario_of(self, point: dict[str, Any]) -> Path:
        return point.get("scenario", self.scenario)

    def overrides(self, point: dict[str, Any], quick: bool) -> list[tuple[str, dict[str, Any]]]:
        """(name, overrides) in the order they apply: set, the sweep point, quick."""
        here = {k: v for k, v in point.items() if k != "scenario"}
        return [("set", self.set), ("sweep", here), ("quick", self.quick if quick else {})]

    def run_key(self, point: dict[str, Any], quick: bool) -> str:
        """The run a point of this row reads: rows with equal keys share it. The scenario is named
        by its path from the claims file's folder, so that a copy of the tree (a frozen worktree)
        gives the same keys and ``--resume`` finds its groups. A row without ``quick`` overrides
        runs the same at both sizes, so its ``--quick`` key is its claims'-size one: the two
        sections read one group (Hermod's emulated rows: 35 minutes of testbed each, once)."""
        scenario = self.scenario_of(point)
        where = os.path.relpath(scenario, self.home) if self.home is not None else str(scenario)
        layers = json.dumps([o for _, o in self.overrides(point, quick)], sort_keys=True, default=str)
        engine = "" if self.engine == DEFAULT_ENGINE else f"|{self.engine}"  # fluid rows keep their old keys
        engine += "|arrays" if self.full_size else ""  # its job built as arrays: not the group of a Job
        digest = hashlib.sha1(f"{where}|{self.mode}{engine}|{layers}".encode()).hexdigest()[:6]
        return f"{scenario.stem}-{self.mode}{'-quick' if quick and self.quick else ''}-{digest}"

    def to_unit(self, value: float, reference: float | None = None) -> float:
        """A metric (and the reference run's, for a comparison) in the paper's unit."""
        unit = self.paper.unit
        if unit == "x":
            return value / reference
        if unit == "speedup":
            return reference / value
        if unit == "%":
            return 100 * (value / reference - 1) if reference is not None else 100 * value
        return value * TIME_UNITS.get(unit, 1.0)

    def interval(self) -> tuple[float, float]:
        """Where the measurement must be for the row to hold (the band around the paper's number,
        or the direction's bound)."""
        if self.kind == "direction":
            return self.bound.get("min", -math.inf), self.bound.get("max", math.inf)
        lo, hi = self.paper.span()
        a, b = (self.band or default_band(self.paper.unit)).interval(lo, hi)
        side, edge = self.side(), self.effect_edge()  # on the paper's side, with at least half its effect
        return (max(a, edge), b) if side > 0 else (a, min(b, edge)) if side < 0 else (a, b)

    def effect_edge(self) -> float:
        """The least effect that holds: half of the paper's (its smaller end for a range) for a
        comparison of two runs ((r - 1) >= (R - 1) / 2; half the points of a change), "no effect"
        (excluded) for a number that is not a comparison (issue 41)."""
        lo, hi = self.paper.span()
        neutral, side = self.paper.neutral, self.side()
        if not self.relative_to or not side:
            return neutral
        return neutral + ((lo if side > 0 else hi) - neutral) / 2

    def side(self) -> int:
        """+1 / -1 when the paper's number (all of its range) is above / below "no effect", else 0."""
        lo, hi = self.paper.span()
        return 1 if lo > self.paper.neutral else -1 if hi < self.paper.neutral else 0

    def best(self, values: list[float]) -> float:
        """The row's number from its points: the mean (``mean``), the largest effect (``up_to``: the
        farthest from "no effect" on the paper's side), or the one point."""
        good = [v for v in values if not math.isnan(v)]
        if not good:
            return math.nan
        if self.kind == "mean":
            return sum(good) / len(good)
        return max(good) if self.paper.span()[1] >= self.paper.neutral else min(good)


QUICK_VERDICT = "quick: no verdict"  # a --quick section is a smoke test (issue 41)
REDUCED_VERDICT = "reduced size: no verdict"  # ran below the claims' size, which cannot run here (sizeprobe)
INPUT_CHECK = "input check"
EXPLAINED = "does not hold (explained:"  # a row short of the paper's effect whose reason is measured
MEASURED_AT = re.compile(r"\b(docs|bench|scenarios)/[\w./-]+")  # where a claim's ``explained`` says it is measured
ROOM_METRICS = ("makespan", "iteration_mean")  # speedups a baseline's room bounds (explain)


def verdict(claim: Claim, value: float | None, quick: bool = False, reduced: bool = False) -> str:
    """The row's verdict; ``quick`` (a smoke test, not the paper's size) and ``reduced`` (run below the
    claims' size, which does not fit here: :mod:`scenarios.sizeprobe`) never judge."""
    if claim.not_built:
        return "not built yet"
    if claim.not_reproduced:
        return "not reproduced here"
    if claim.kind == "measured":
        return "measured"
    if value is None or math.isnan(value):
        return "no value"
    if claim.input_check:
        return INPUT_CHECK
    if quick or reduced:
        return QUICK_VERDICT if quick else REDUCED_VERDICT
    lo, hi = claim.interval()
    open_end = claim.kind != "direction" and claim.effect_edge() == claim.paper.neutral and claim.side()
    inside = lo <= value <= hi and not (open_end and value == claim.paper.neutral)
    held = "holds" if inside else "does not hold"
    return f"{held} (direction only)" if claim.kind == "direction" else held


def explain(claim: Claim, verdict: str, room: float | None = None) -> str:
    """``verdict`` with why the row falls short, when it does and the reason is measured: the setup's
    own room (``room``: the most any scheduler could speed the baseline's run up, its network-free
    bound or busiest port, :mod:`railbed.analysis`) under the least speedup that holds, measured on
    this run; else the claim's ``explained`` (the piece and where it is measured). The room bounds
    the makespan; an iteration mean over whole iterations follows it (:data:`ROOM_METRICS`)."""
    if verdict != "does not hold":
        return verdict
    lo = claim.interval()[0]
    if room is not None and claim.paper.unit == "speedup" and claim.metric in ROOM_METRICS and room < lo:
        return f"{EXPLAINED} the setup's room, {room:.3g}x, is under the {lo:.3g}x that holds)"
    return f"{EXPLAINED} {claim.explained})" if claim.explained else verdict


def fmt(unit: str, value: float | None, paper: bool = False) -> str:
    """A number in a unit as the report prints it (``paper``: as precise as papers state them)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return ("+" if value > 0 else "-") + "inf"
    if unit in RATIO_UNITS:
        return f"{value:.2f}x" if abs(value) < 10 else f"{value:.3g}x"
    if unit == "%":
        return f"{value:+.4g} %" if paper else f"{value:+.1f} %"
    if unit in TIME_UNITS:
        return fmt_time(value / TIME_UNITS[unit])
    return f"{value:.4g}"


def paper_cell(claim: Claim) -> str:
    """The paper's number, the kind of claim, where, and the interval the row must reach."""
    p = claim.paper
    if p.value is None:
        words = " ".join(x for x in (p.text or "-", f"({p.source})" if p.source else "") if x)
        if claim.kind == "direction":
            lo, hi = claim.interval()
            ends = [f"at least {fmt(p.unit, lo)}"] * (lo > -math.inf) + [f"at most {fmt(p.unit, hi)}"] * (hi < math.inf)
            words += "; direction only: " + " and ".join(ends)
        return words
    lo, hi = p.span()
    number = fmt(p.unit, lo, True) if lo == hi else f"{fmt(p.unit, lo, True)} to {fmt(p.unit, hi, True)}"
    words = {"up_to": "up to ", "mean": "", "value": "", "direction": "", "measured": ""}[claim.kind] + number
    if claim.kind == "mean":
        words += " on average"
    if p.text:
        words += f" {p.text}"
    if p.source:
        words += f" ({p.source})"
    if claim.kind in ("value", "up_to", "mean") and claim.measured:
        a, b = claim.interval()
        neutral = claim.paper.neutral  # an end clipped at "no effect" is open: no effect does not hold
        left = "(" if claim.side() > 0 and a == neutral else "["
        right = ")" if claim.side() < 0 and b == neutral else "]"
        words += f"; holds in {left}{fmt(p.unit, a)}, {fmt(p.unit, b)}{right}"
        if claim.band_reason:
            words += f" (band {_band_words(claim.band)}: {claim.band_reason})"
    if claim.input_check:
        words += f"; input check: {claim.input_check}"
    return words


def _band_words(band: Band | None) -> str:
    if band is None:
        return "default"
    words = {"absolute": f"+-{band.size:g}", "relative": f"{100 * band.size:g} %", "factor": f"x/{band.size:g}"}
    return words[band.kind]


NOTE_FIELD = re.compile(r"\{([^{}]*)\}")
NOTE_FIELDS = (
    "{value}: this row's number; {<id>.value}: another row's; {run:<label>.<metric>}: a metric of a run "
    "this row read; {fidelity:<label>.<key>}, {analysis:<label>.<key>}: numbers of its reports; "
    "{packet:<label>.<key>}: a packet run's drops, marks, retransmissions or timeouts; "
    "{wall:<label>}: its real time; {arg:<dotted.key>}: the scenario's value"
)
_FIELD_FORMS = re.compile(
    r"value|[a-z0-9-]+\.value|(run|fidelity|analysis|packet):[\w@.+-]+\.\w+|wall:[\w@.+-]+|arg:[\w.]+"
)


def check_note(text: str, where: str) -> None:
    """Every ``{...}`` of a note is a field :func:`render_note` knows."""
    for m in NOTE_FIELD.finditer(text):
        if not _FIELD_FORMS.fullmatch(m.group(1)):
            raise SpecError(where, f"unknown field {{{m.group(1)}}} ({NOTE_FIELDS})")


# ------------------------------------------------------------------ loading
def load_claims(path: Path) -> tuple[str, list[Claim], list[Unstated]]:
    """(title, claims, unstated parameters) of a claims file; errors name the field."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise SpecError(str(path), "not valid YAML") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise SpecError("claims", f"{path}: expected a mapping with a list 'claims'")
    unknown = set(data) - {"title", "claims", "unstated", "anchors", "tuned"}
    if unknown:  # anchors: YAML anchors the claims repeat, read by nothing else
        raise SpecError(sorted(unknown)[0], "unknown key (known: anchors, claims, title, tuned, unstated)")
    claims = [_claim(c, path.parent, f"claims[{i}]", i) for i, c in enumerate(data["claims"])]
    _check_ids(claims)
    unstated = [_unstated(u, claims, f"unstated[{i}]") for i, u in enumerate(data.get("unstated") or [])]
    tuned = data.get("tuned") or []
    if not isinstance(tuned, list):
        raise SpecError("tuned", "expected a list of {name, value, before, commit, why, claims}")
    claims = with_values_before(claims, [_tuned(t, claims, f"tuned[{i}]") for i, t in enumerate(tuned)])
    _check_experiments(claims)
    return str(data.get("title", path.parent.name)), claims, unstated


def load_tuned(path: Path) -> list[Tuned]:
    """The ``tuned`` list of a claims file (parameters chosen after a result was seen)."""
    data = yaml.safe_load(path.read_text())
    claims = [_claim(c, path.parent, f"claims[{i}]", i) for i, c in enumerate(data["claims"])]
    return [_tuned(t, claims, f"tuned[{i}]") for i, t in enumerate(data.get("tuned") or [])]


def _claim(raw: Any, base: Path, where: str, index: int) -> Claim:
    if not isinstance(raw, dict):
        raise SpecError(where, "expected a mapping")
    unknown = set(raw) - CLAIM_KEYS
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", f"unknown key (known: {', '.join(sorted(CLAIM_KEYS))})")
    for key in ("claim", "paper"):
        if key not in raw:
            raise SpecError(f"{where}.{key}", "missing")
    cid = str(raw.get("id", f"c{index}"))
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,59}", cid):
        raise SpecError(f"{where}.id", "lower-case letters, digits and '-' (it names files)")
    unit = "%" if raw.get("relative_to") or raw.get("backend") == "crosscheck" else "count"
    paper = _paper(raw["paper"], f"{where}.paper", unit)
    for key in ("not_reproduced", "not_built"):
        if raw.get(key) is not None:
            if not isinstance(raw[key], str) or not raw[key]:
                raise SpecError(f"{where}.{key}", "expected the reason, as text")
            return Claim(str(raw["claim"]), paper, id=cid, note=_note(raw.get("note"), f"{where}.note"),
                         **{key: raw[key]})  # fmt: skip
    for key in ("scenario", "metric"):
        if key not in raw:
            raise SpecError(f"{where}.{key}", "missing")
    claim = Claim(
        claim=str(raw["claim"]),
        paper=paper,
        scenario=_scenario_path(raw["scenario"], base, f"{where}.scenario"),
        home=base.resolve(),
        metric=str(raw["metric"]),
        id=cid,
        mode=_one_of(raw.get("backend", "simulate"), MODES, f"{where}.backend"),
        engine=backends.BACKENDS.canonical(raw.get("engine", DEFAULT_ENGINE), f"{where}.engine"),
        scheduler=raw.get("scheduler"),
        relative_to=raw.get("relative_to"),
        set=_overrides(raw.get("set"), f"{where}.set"),
        quick=_overrides(raw.get("quick"), f"{where}.quick"),
        sweep=_sweep(raw.get("sweep"), base, f"{where}.sweep"),
        experiment=str(raw["experiment"]) if raw.get("experiment") is not None else None,
        note=_note(raw.get("note"), f"{where}.note"),
        full_size=_flag(raw.get("full_size", False), f"{where}.full_size"),
    )
    _check_metric(claim, where)
    if claim.full_size and not (claim.mode == "simulate" and backends.backend(claim.engine).capabilities.array_jobs):
        raise SpecError(f"{where}.full_size", "a full-size row is simulated on an engine that builds jobs as arrays "
                        "(engine: fluid-rules)")  # fmt: skip
    claim.kind = _kind(raw, claim, where)
    claim.band = _band(raw.get("band"), f"{where}.band") if "band" in raw else None
    for key in ("band_reason", "input_check", "stand_in", "explained"):
        if raw.get(key) is not None:
            if not isinstance(raw[key], str) or len(raw[key]) < 10:
                raise SpecError(f"{where}.{key}", "expected the reason, as text (cite the source)")
            setattr(claim, key, raw[key])
    if claim.explained is not None and not MEASURED_AT.search(claim.explained):
        raise SpecError(f"{where}.explained", "name where the shortfall is measured (a docs/, bench/, scenarios/ file)")
    if claim.band is not None and claim.paper.value is not None and wider(claim) and not claim.band_reason:
        raise SpecError(f"{where}.band_reason", "a band wider than the default (10 points of a %, 20 % of "
                        "anything else) needs its cited reason (band_reason), printed in the row")  # fmt: skip
    if raw.get("size_probe") is not None:
        claim.size_probe = _size_probe(raw["size_probe"], claim, f"{where}.size_probe")
    if raw.get("bound") is not None:
        bound = raw["bound"]
        if not isinstance(bound, dict) or not bound or set(bound) - {"min", "max"}:
            raise SpecError(f"{where}.bound", "expected {min: X, max: Y} (either may be left out)")
        claim.bound = {k: _number(v, f"{where}.bound.{k}") for k, v in bound.items()}
    return claim


def _size_probe(raw: Any, claim: Claim, where: str) -> SizeProbe:
    """A claim's ``size_probe`` (:func:`scenarios.sizeprobe.parse_probe`), on a job it can set."""
    probe = parse_probe(raw, where)
    if any(probe.set in point for point in claim.sweep):
        raise SpecError(f"{where}.set", f"{probe.set} is an axis of the claim's sweep: the probe sets the size")
    if claim.mode != "simulate":  # an emulated job's size is the testbed's, not a build's
        raise SpecError(where, "probes a simulated job (not an emulated one)")
    return probe


def wider(claim: Claim) -> bool:
    """Whether the claim's band reaches beyond the default band of its unit on either side."""
    lo, hi = claim.paper.span()
    a, b = claim.band.interval(lo, hi) if claim.band else (lo, hi)
    da, db = default_band(claim.paper.unit).interval(lo, hi)
    return a < da - 1e-12 or b > db + 1e-12


def _kind(raw: dict, claim: Claim, where: str) -> str:
    """value | up_to | mean need the paper's number; direction needs a bound and no number."""
    has_number = claim.paper.value is not None
    kind = _one_of(raw.get("kind", "value" if has_number else "direction" if raw.get("bound") else "measured"),
                   KINDS, f"{where}.kind")  # fmt: skip
    if kind in ("value", "up_to", "mean") and not has_number:
        raise SpecError(f"{where}.paper.value", f"a {kind} claim needs the paper's number")
    if kind == "direction" and has_number:
        raise SpecError(f"{where}.kind", "direction only is for claims whose paper gives no number: judge the number")
    if kind == "direction" and not raw.get("bound"):
        raise SpecError(f"{where}.bound", "a direction-only claim needs its bound ({max: 1.0} ...)")
    if kind in ("value", "measured") and raw.get("bound"):
        raise SpecError(f"{where}.bound", "a bound is a direction: only for kind direction (use band around a number)")
    if kind == "mean" and len(claim.points()) < 2:
        raise SpecError(f"{where}.sweep", "'on average' needs the points it averages over (sweep)")
    if claim.sweep and kind not in ("up_to", "mean"):
        raise SpecError(f"{where}.sweep", "a sweep's points make one number for up_to (the best) or mean claims")
    return kind


def _paper(raw: Any, where: str, unit: str) -> Paper:
    if isinstance(raw, str):  # words only: a claim without a number (a change in %, else a count)
        return Paper(None, unit, text=raw)
    if not isinstance(raw, dict):
        raise SpecError(where, "expected {value: 1.44, unit: x, source: 'Fig. 5.8'} or the paper's words")
    unknown = set(raw) - PAPER_KEYS
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", f"unknown key (known: {', '.join(sorted(PAPER_KEYS))})")
    value = raw.get("value")
    if isinstance(value, list):
        if len(value) != 2:
            raise SpecError(f"{where}.value", "a range is [low, high]")
        lo, hi = (_number(v, f"{where}.value") for v in value)
        if lo > hi:
            raise SpecError(f"{where}.value", "a range is [low, high]")
        value = (lo, hi)
    elif value is not None:
        value = _number(value, f"{where}.value")
    unit = _one_of(raw.get("unit", unit), UNITS, f"{where}.unit")
    return Paper(value, unit, str(raw.get("source", "")), str(raw.get("text", "")))


def _band(raw: Any, where: str) -> Band:
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in BANDS:
        raise SpecError(where, "expected one of {absolute: 10}, {relative: 0.2}, {factor: 1.4}")
    kind, size = next(iter(raw.items()))
    size = _number(size, f"{where}.{kind}")
    if size < 0 or (kind == "factor" and size < 1):
        raise SpecError(f"{where}.{kind}", "must be >= 0 (a factor >= 1)")
    return Band(kind, size)


def _check_metric(claim: Claim, where: str) -> None:
    crosscheck = claim.mode == "crosscheck"
    known = CROSSCHECK_METRICS if crosscheck else (*METRICS, *CURVE_METRICS)
    if claim.metric not in known:
        raise SpecError(f"{where}.metric", f"unknown metric {claim.metric!r} for {claim.mode} (known: "
                        f"{', '.join(known)})")  # fmt: skip
    simulator = not backends.backend(claim.engine).capabilities.needs_root
    if claim.engine != DEFAULT_ENGINE and (claim.mode != "simulate" or not simulator):
        raise SpecError(f"{where}.engine", f"names a simulator backend ({claim.engine} is not one), on a simulated row")
    unit = claim.paper.unit
    if unit in RATIO_UNITS and not claim.relative_to:
        raise SpecError(f"{where}.relative_to", f"unit {unit} compares two runs: name the other (relative_to)")
    if unit not in RATIO_UNITS + ("%",) and claim.relative_to:
        raise SpecError(f"{where}.paper.unit", "a comparison of two runs is in x, speedup or %")
    if crosscheck and claim.relative_to:
        raise SpecError(f"{where}.relative_to", "a crosscheck metric compares the emulator with the simulator already")
    if claim.metric in CURVE_METRICS:  # read from a load sweep's runs <label>@<load>: name the labels
        for key in ("scheduler", "relative_to"):
            label = getattr(claim, key)
            if (key == "scheduler" and not label) or "@" in str(label or ""):
                raise SpecError(f"{where}.{key}", f"{claim.metric} reads a load sweep: name its label "
                                "(leo), not one run of it (leo@9e+07)")  # fmt: skip


def _scenario_path(raw: Any, base: Path, where: str) -> Path:
    if not isinstance(raw, str) or not raw:
        raise SpecError(where, "expected a path relative to the claims file")
    path = (base / raw).resolve()
    if not path.exists():
        raise SpecError(where, f"no such file {path}")
    return path


def _sweep(raw: Any, base: Path, where: str) -> list[dict[str, Any]]:
    """``sweep: {axis: [values], ...}``: every combination is one run (axis ``scenario``: files)."""
    if raw is None:
        return []
    if not isinstance(raw, dict) or not raw or not all(isinstance(v, list) and v for v in raw.values()):
        raise SpecError(where, "expected a mapping of axis (a dotted key or 'scenario') to a non-empty list")
    points: list[dict[str, Any]] = [{}]
    for axis, values in raw.items():
        if axis == "scenario":
            values = [_scenario_path(v, base, f"{where}.scenario[{i}]") for i, v in enumerate(values)]
        points = [{**p, axis: v} for p in points for v in values]
    return points


def _note(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    check_note(str(raw), where)
    return str(raw)


def _overrides(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise SpecError(where, "expected a mapping of dotted key (job.args.iterations) to value")
    return dict(raw)


def _one_of(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise SpecError(where, f"must be one of {', '.join(choices)}")
    return str(value)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(where, "expected true or false")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SpecError(where, "expected a number")
    return float(value)


def _check_ids(claims: list[Claim]) -> None:
    seen: dict[str, int] = {}
    for i, c in enumerate(claims):
        if c.id in seen:
            raise SpecError(f"claims[{i}].id", f"{c.id!r} is also claims[{seen[c.id]}]'s")
        seen[c.id] = i


def _check_experiments(claims: list[Claim]) -> None:
    """One run, one row: rows reading the same run (full size or quick) must name the same
    ``experiment`` (the paper's figures of one experiment)."""
    for quick in (False, True):
        owner: dict[str, int] = {}
        for i, c in enumerate(claims):
            if not c.measured:
                continue
            for point in c.points():
                key = c.run_key(point, quick)
                j = owner.setdefault(key, i)
                if j != i and (c.experiment is None or c.experiment != claims[j].experiment):
                    raise SpecError(
                        f"claims[{i}].experiment",
                        f"reads the same run as claims[{j}] ({claims[j].id}){' with --quick' if quick else ''}: "
                        "give both the same experiment (the paper's figures of one experiment) or their own runs",
                    )


# --------------------------------------------------------------- unstated
@dataclass
class Unstated:
    """A parameter the paper does not give: the dotted paths set to it, the value chosen and why
    (from what the paper does give), the range ``--sensitivity`` sweeps, the claims it applies to."""

    name: str
    set: list[str]
    value: Any
    reason: str
    range: list[Any]
    claims: list[str]


def _entry(raw: Any, where: str, known: set[str], required: tuple[str, ...]) -> None:
    """An ``unstated`` or ``tuned`` entry is a mapping of known keys with the required ones."""
    if not isinstance(raw, dict):
        raise SpecError(where, "expected a mapping")
    unknown = set(raw) - known
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", f"unknown key (known: {', '.join(sorted(known))})")
    for key in required:
        if key not in raw:
            raise SpecError(f"{where}.{key}", "missing")


def _unstated(raw: Any, claims: list[Claim], where: str) -> Unstated:
    _entry(raw, where, UNSTATED_KEYS, ("name", "set", "value", "reason", "range", "claims"))
    paths = raw["set"] if isinstance(raw["set"], list) else [raw["set"]]
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise SpecError(f"{where}.set", "expected a dotted path (or a list of them) set to each value")
    if not isinstance(raw["range"], list) or len(raw["range"]) < 2:
        raise SpecError(f"{where}.range", "expected the values to sweep (at least 2)")
    if not isinstance(raw["reason"], str) or len(raw["reason"]) < 20:
        raise SpecError(f"{where}.reason", "say why this value, from what the paper gives")
    ids = {c.id: c for c in claims}
    names = raw["claims"]
    if not isinstance(names, list) or not names:
        raise SpecError(f"{where}.claims", "expected the ids of the claims it applies to")
    for i, name in enumerate(names):
        if name not in ids:
            raise SpecError(f"{where}.claims[{i}]", f"no claim with id {name!r}")
        if not ids[name].measured or ids[name].kind == "measured":
            raise SpecError(f"{where}.claims[{i}]", f"{name!r} is not judged: nothing to be sensitive")
    return Unstated(str(raw["name"]), list(paths), raw["value"], raw["reason"], list(raw["range"]), list(names))


# ------------------------------------------------------------------ tuned
TUNED_KEYS = {"name", "set", "scheduler_args", "not_run", "value", "before", "commit", "why", "claims"}


@dataclass
class Tuned:
    """A parameter whose value was chosen or changed after a run's result was known (issue 41): the
    dotted overrides (``set``) or the scheduler's options (``scheduler_args``) that give the value
    before, the commit that changed it and why; each claim in ``claims`` gets a row at the value before."""

    name: str
    value: Any
    before: Any
    commit: str
    why: str
    claims: list[str]
    set: dict[str, Any] = field(default_factory=dict)
    scheduler_args: dict[str, Any] = field(default_factory=dict)
    not_run: str | None = None  # why the value before cannot be set from a claims file (then no rows)


def _tuned(raw: Any, claims: list[Claim], where: str) -> Tuned:
    _entry(raw, where, TUNED_KEYS, ("name", "value", "before", "commit", "why", "claims"))
    if not re.fullmatch(r"[0-9a-f]{7,40}", str(raw["commit"])):
        raise SpecError(f"{where}.commit", "expected the commit that chose the value (hex)")
    if not isinstance(raw["why"], str) or len(raw["why"]) < 20:
        raise SpecError(f"{where}.why", "say why the value was changed, and what the run before showed")
    ways = [k for k in ("set", "scheduler_args", "not_run") if raw.get(k)]
    if len(ways) != 1:
        raise SpecError(f"{where}.set", "give the value before as dotted overrides (set), scheduler_args, or why "
                        "it cannot run (not_run)")  # fmt: skip
    if raw.get("not_run") and raw["claims"]:
        raise SpecError(f"{where}.claims", "a value before that cannot run has no rows ([])")
    ids = {c.id: c for c in claims}
    names = raw["claims"] if isinstance(raw["claims"], list) else None
    if names is None:
        raise SpecError(f"{where}.claims", "expected the ids of the rows to show at the value before ([] for none)")
    for i, name in enumerate(names):
        if name not in ids or not ids[name].measured:
            raise SpecError(f"{where}.claims[{i}]", f"no measured claim with id {name!r}")
    return Tuned(str(raw["name"]), raw["value"], raw["before"], str(raw["commit"]), raw["why"], list(names),
                 _overrides(raw.get("set"), f"{where}.set"), _overrides(raw.get("scheduler_args"),
                 f"{where}.scheduler_args"), raw.get("not_run"))  # fmt: skip


def with_values_before(claims: list[Claim], tuned: list[Tuned]) -> list[Claim]:
    """The claims with, after each one a ``tuned`` entry names, its row at the value before (its
    own runs: the entry's overrides after the claim's ``set``; id ``<id>-before-<n>``)."""
    from dataclasses import replace

    out = []
    for c in claims:
        out.append(c)
        for n, t in enumerate(tuned):
            if c.id in t.claims:
                extra = {**t.set, **({"scheduler_args": t.scheduler_args} if t.scheduler_args else {})}
                out.append(replace(c, id=f"{c.id}-before-{n}", set={**c.set, **extra}, note=None,
                                   tuned_from=(t.name, t.before)))  # fmt: skip
    return out
