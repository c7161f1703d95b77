"""Sensitivity to what a paper leaves unstated: ``railbed reproduce PAPER --sensitivity [--quick]``.

Each claims file lists its ``unstated`` parameters (name, the dotted paths
set to it, the value the scenarios use and why, the range to sweep, the
claims it applies to; :class:`scenarios.claims.Unstated`). For every
(parameter, claim) pair, every value of the range is one run of the claim's
scenario with its overrides (``set``, each sweep point, ``quick`` with
``--quick``) and the parameter's paths set to that value, run on Ray
(:mod:`scenarios.sweep`'s machinery: ``run_point``, resume by
``point.json``). A parameter set on several paths takes one value per path
when a range entry is a list as long as the paths, else the same value on
each.

Output under ``--out`` (default ``reproduction/``): ``sensitivity/<paper>/``
with ``points/`` (a results directory per run), ``sweep.csv``, and per
claim ``<claim id>.png`` (one panel per parameter: the claim's number in
the paper's unit against the parameter, the paper's number as a line and
its band shaded, the scenarios' value marked) with the numbers in
``<claim id>.csv``; ``SENSITIVITY.md`` lists them. Simulated claims on the
fluid backend only (an emulated claim's simulated twin carries its
sensitivity; a full-size claim's runs take minutes each).
"""

from __future__ import annotations

import copy
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from scenarios.claims import DEFAULT_ENGINE, Claim, Unstated, fmt, load_claims

HERE = Path(__file__).resolve().parent


@dataclass
class Case:
    """One run: a claim's point with one value of one parameter."""

    claim: Claim
    param: Unstated
    value: Any
    point: dict[str, Any]
    sweep_point: Any  # scenarios.sweep.Point


def values_per_path(param: Unstated, value: Any) -> list[Any]:
    """The value of each of ``param.set``'s paths for one entry of its range."""
    if len(param.set) > 1 and isinstance(value, list) and len(value) == len(param.set):
        return list(value)
    return [value] * len(param.set)


def normal(value: Any) -> Any:
    """A value as the run reads it: durations and sizes written as text ("2ms", "1MB") parsed,
    lists element by element (so the claims file's value compares with the scenario's)."""
    from railbed.units import parse_duration, parse_size

    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, str):
        for parse in (parse_duration, parse_size):
            try:
                return float(parse(value, "value"))
            except SpecError:
                pass
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def current_value(claim: Claim, param: Unstated) -> Any:
    """What the claim's scenario (first point, its ``set`` applied) uses today for ``param``: the
    scenario's own value, else the job generator's default. A list when the paths differ."""
    import inspect

    from scenarios.sweep import get_dotted, scenario_mapping, set_dotted
    from workloads import GENERATORS

    data, _ = scenario_mapping(str(claim.scenario_of(claim.points()[0])), Path("."))
    for key, v in claim.set.items():
        set_dotted(data, key, copy.deepcopy(v), f"set.{key}")
    out = []
    for path in param.set:
        got = get_dotted(data, path)
        if got is None and path.startswith("cluster."):  # a preset's value: the spec as it loads
            from railbed.spec import ClusterSpec

            got = get_dotted({"cluster": ClusterSpec.from_dict(data["cluster"]).to_dict()}, path)
        if got is None and path.startswith("job.args."):
            gen = GENERATORS.find((data.get("job") or {}).get("generator"))
            p = inspect.signature(gen).parameters.get(path.split(".")[-1]) if gen else None
            got = p.default if p is not None and p.default is not inspect.Parameter.empty else None
        out.append(got)
    out = [normal(v) for v in out]
    return out[0] if len(set(map(repr, out))) == 1 else out


def cases(claims: list[Claim], unstated: list[Unstated], quick: bool, base: Path) -> list[Case]:
    """Every run of the sensitivity sweep of one claims file, validated as scenarios."""
    from scenarios.runner import Scenario
    from scenarios.sweep import Point, point_id, scenario_mapping, set_dotted

    by_id = {c.id: c for c in claims}
    out = []
    for param in unstated:
        for cid in param.claims:
            claim = by_id[cid]
            if claim.mode != "simulate" or claim.engine != DEFAULT_ENGINE:
                continue
            for value in param.range:
                for point in claim.points():
                    data, sbase = scenario_mapping(str(claim.scenario_of(point)), Path("."))
                    for name, overrides in claim.overrides(point, quick):
                        for key, v in overrides.items():
                            set_dotted(data, key, copy.deepcopy(v), f"{name}.{key}")
                    for path, v in zip(param.set, values_per_path(param, value)):
                        set_dotted(data, path, copy.deepcopy(v), f"unstated.{param.name}")
                    label = {"claim": cid, "parameter": param.name, "value": value,
                             **{k: (Path(v).stem if k == "scenario" else v) for k, v in point.items()}}  # fmt: skip
                    try:
                        Scenario.from_dict(data, sbase)
                    except SpecError as exc:
                        raise SpecError(
                            f"unstated {param.name!r} = {value!r} on {cid}: {exc.field}", exc.message
                        ) from None
                    out.append(Case(claim, param, value, point, Point(point_id(label), label, data)))
    return out


def measure(claim: Claim, rows: list[dict]) -> float:
    """The claim's number from a finished point's metric rows (``run``, metric values)."""
    by_run = {r["run"]: r for r in rows}
    name = claim.scheduler or next(iter(by_run))
    if name not in by_run or (claim.relative_to and claim.relative_to not in by_run):
        return math.nan
    value = by_run[name][claim.metric]
    reference = by_run[claim.relative_to][claim.metric] if claim.relative_to else None
    return claim.to_unit(value, reference)


def sensitivity(
    which: str,
    out: Path,
    quick: bool = False,
    echo: Callable[[str], None] = print,
    address: str | None = None,
    cpus: int | None = None,
    claims_dir: Path = HERE,
) -> list[Path]:
    """Sweep the unstated parameters of ``which`` (a paper or ``all``); return the figures."""
    from scenarios.reproduce import PAPERS

    papers = [p for p in (PAPERS if which == "all" else (which,)) if (claims_dir / p / "claims.yaml").exists()]
    figures: list[Path] = []
    lines = ["# Sensitivity to what the papers leave unstated", "",
             f"Made with `railbed reproduce {which} --sensitivity{' --quick' if quick else ''}`.", ""]  # fmt: skip
    for paper in papers:
        _, claims, unstated = load_claims(claims_dir / paper / "claims.yaml")
        if not unstated:
            continue
        got = run_paper(paper, claims, unstated, out / "sensitivity" / paper, quick, echo, address, cpus)
        lines += [f"## {paper}", ""]
        for param in unstated:
            lines.append(f"- **{param.name}** (`{', '.join(param.set)}`): {param.reason} Chosen: "
                         f"{param.value!r}; swept: {', '.join(map(repr, param.range))}.")  # fmt: skip
        lines.append("")
        for png in got:
            figures.append(png)
            lines.append(f"![{png.stem}]({png.relative_to(out)})")
        lines.append("")
    (out / "SENSITIVITY.md").write_text("\n".join(lines).rstrip() + "\n")
    echo(f"sensitivity: {out / 'SENSITIVITY.md'}")
    return figures


def run_paper(paper, claims, unstated, out: Path, quick, echo, address, cpus) -> list[Path]:
    """Run one paper's cases on Ray (resuming finished ones); draw a figure per claim."""
    from scenarios.sweep import Sweep, point_done, run_points, start_ray, write_table

    todo = cases(claims, unstated, quick, out)
    if not todo:
        return []
    metrics = sorted({c.claim.metric for c in todo})
    sweep = Sweep(f"{paper}-sensitivity", {}, HERE, "simulate", {"claim": [], "parameter": [], "value": []},
                  metrics)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    points = {c.sweep_point.id: c.sweep_point for c in todo}
    records = {pid: point_done(out, p) for pid, p in points.items()}
    pending = [p for pid, p in points.items() if records[pid] is None]
    echo(f"{paper}: {len(points)} sensitivity runs ({len(points) - len(pending)} done already)")
    if pending:
        ray = start_ray(address, cpus, echo=echo)
        try:
            run_points(ray, sweep, out, pending, records, echo)
        finally:
            ray.shutdown()
    write_table(sweep, out, [r for r in records.values() if r is not None])
    results: dict[tuple[str, str], list[tuple[Any, float]]] = {}
    for claim in dict.fromkeys(c.claim for c in todo):
        for param in unstated:
            mine = [c for c in todo if c.claim is claim and c.param is param]
            if not mine:
                continue
            series = []
            for value in param.range:
                rows = [records[c.sweep_point.id] for c in mine if c.value == value]
                nums = [measure(claim, r["rows"]) if r and r.get("status") == "ok" else math.nan for r in rows]
                series.append((value, claim.best(nums)))
            results[(claim.id, param.name)] = series
    return [draw(claim, [(p, results[(claim.id, p.name)]) for p in unstated if (claim.id, p.name) in results], out)
            for claim in dict.fromkeys(c.claim for c in todo)]  # fmt: skip


def draw(claim: Claim, panels: list[tuple[Unstated, list[tuple[Any, float]]]], out: Path) -> Path:
    """One figure per claim: a panel per parameter, the claim's number against the parameter's
    values, the paper's number (a line, or two for a range) and its band, the chosen value marked."""
    from railbed.figure import new_figure, save_figure, write_csv

    fig, first = new_figure(max(6.0, 4.2 * len(panels)), 3.8)
    fig.delaxes(first)
    unit = claim.paper.unit
    rows = []
    for k, (param, series) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        xs = list(range(len(series)))
        ys = [v for _, v in series]
        ax.plot(xs, ys, marker="o", color="C0", label="railbed")
        ax.set_xticks(xs, [_short(v) for v, _ in series], fontsize=8)
        chosen = current_value(claim, param)
        for x, (v, _) in zip(xs, series):
            if normal(v) == chosen:
                ax.axvline(x, color="0.5", linestyle=":", label="scenario's value")
        if claim.paper.value is not None:
            lo, hi = claim.paper.span()
            a, b = claim.interval()
            ax.axhspan(a, b, color="C1", alpha=0.15, label="band")
            for line in {lo, hi}:
                ax.axhline(line, color="C1", label="paper" if line == lo else None)
        elif claim.kind == "direction":
            a, b = claim.interval()
            for bound in (a, b):
                if math.isfinite(bound):
                    ax.axhline(bound, color="C1", linestyle="--", label="paper's direction")
        ax.set_xlabel(param.name, fontsize=8)
        ax.set_ylabel(f"{claim.metric} ({unit})", fontsize=8)
        ax.legend(fontsize=7)
        rows += [(param.name, _short(v), y, fmt(unit, y)) for v, y in series]
    fig.suptitle("\n".join(textwrap.wrap(claim.claim, 90)[:2]), fontsize=9)
    write_csv(out / f"{claim.id}.csv", ["parameter", "value", f"claim_{unit}", "shown"], rows)
    return save_figure(fig, out / f"{claim.id}.png")


def _short(value: Any) -> str:
    return "/".join(map(str, value)) if isinstance(value, list) else str(value)
