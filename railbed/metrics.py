"""Numbers derived from a :class:`~railbed.results.RunResult`, by name.

One place for what "FCT p99" or "coflow completion time" means, read by
the figures (``railbed/plots.py``), the sweep table (``scenarios/sweep.py``)
and the reproduction report (``scenarios/reproduce.py``):

* **flow completion time** (FCT): ``end - start`` of a flow (start: its
  sender was told to go), as :meth:`RunResult.flow_completion_times`;
* **coflow completion time** (CCT): from the first ``ready`` of a coflow's
  flows (the coflow arrived) to the last ``end`` (flows carry their coflow
  in ``attrs["coflow"]``);
* **percentiles**: nearest rank on the sorted values (``p50`` of 1, 2, 3, 4
  is 3: :func:`railbed.results.percentile`, used everywhere).

:data:`METRICS` maps a metric's name to a function of a result; all are in
model seconds except ``fidelity_ok`` (1 or 0), ``flows`` (a count),
``request_throughput`` (requests per model second) and ``wall_seconds`` (real).
``request_p50``/``request_p99`` are the latencies of LEO's requests
(arrival to the last message's end, :func:`request_latencies`) in steady
state: requests arriving in the first :data:`WARMUP` of the arrival window
are left out. An offered-load sweep's knee (:func:`knee`) is the thesis's
sustainable throughput.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from railbed.results import RunResult, percentile


def flow_completion_times(result: RunResult) -> dict[str, float]:
    return result.flow_completion_times()


def coflow_completion_times(result: RunResult) -> dict[str, float]:
    """Coflow id -> last end minus first ready of its flows (coflows with an unfinished flow are left out)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    unfinished = set()
    for r in result.items.values():
        coflow = r.attrs.get("coflow")
        if r.kind != "flow" or coflow is None:
            continue
        coflow = str(coflow)
        arrived = r.ready if r.ready is not None else r.start
        if r.end is None or arrived is None:
            unfinished.add(coflow)
            continue
        first[coflow] = min(first.get(coflow, math.inf), arrived)
        last[coflow] = max(last.get(coflow, -math.inf), r.end)
    return {c: last[c] - first[c] for c in first if c not in unfinished}


# Steady state: the first 20 % of a run's arrival window is warm-up (at 1.2 ms of KVS arrivals,
# 240 us: about 7 times an unloaded request's latency, and hundreds of completions for LEO's k_hat
# and the greedy baselines' last-JCT tables, which start from their offline values).
WARMUP = 0.2
# The knee (§6.4.2 reads Fig. 6.10's: the median "starts to increase its median latency when
# system workload is above 5Mrps"): the highest load whose median stays within KNEE_MULTIPLE of
# the median at the sweep's lowest load. Overload shows as a queue growing all run long (10 %
# over capacity: about 2.8x the unloaded median after 1.2 ms of KVS arrivals), so any multiple
# from 1.2 to 2 puts the knee within a few percent of the capacity; 1.5 sits between the noise
# of a median and that growth. Reports give the knee at 1.2 and 2 as well.
KNEE_MULTIPLE = 1.5


def request_latencies(result: RunResult, warmup: float = 0.0) -> list[float]:
    """LEO's requests (``workloads.requests``): per request the end of its last message minus
    its arrival (the end of its ``a<i>`` task), in request order; with ``warmup`` (a fraction),
    only the requests arriving after that fraction of the arrival window."""
    pairs = []
    for r in result.items.values():
        tags = r.attrs.get("tags") or {}
        if r.kind == "flow" and tags.get("last") and r.end is not None:
            arrival = result.items.get(f"a{tags['request']}")
            if arrival is not None and arrival.end is not None:
                pairs.append((arrival.end, r.end - arrival.end))
    if warmup > 0 and pairs:
        start = warmup * max(a for a, _ in pairs)
        pairs = [p for p in pairs if p[0] >= start]
    return [lat for _, lat in pairs]


def steady_latencies(result: RunResult) -> list[float]:
    """:func:`request_latencies` after the :data:`WARMUP`."""
    return request_latencies(result, WARMUP)


def knee(points, multiple: float = KNEE_MULTIPLE) -> float:
    """The sustainable throughput of an offered-load sweep, ``points`` = (load, median latency):
    the highest load L such that every load up to L keeps its median within ``multiple`` times
    the median at the lowest load (which must be below every path's knee: the sweep's job).
    ``nan`` for no points."""
    pts = sorted((float(x), float(m)) for x, m in points)
    if not pts:
        return math.nan
    limit, best = multiple * pts[0][1], pts[0][0]
    for load, median in pts:
        if not median <= limit:  # nan counts as over
            break
        best = load
    return best


def request_throughput(result: RunResult) -> float:
    """Requests completed per second (model) in the steady part of the run: the middle 80 % of
    completions over the time they took (``0.8 n / (t[0.9 n] - t[0.1 n])`` on the sorted
    completion times). Below capacity this is the offered load; above it, the sustainable
    throughput (§6.4's metric), without the start-up and drain of a finite open-loop run."""
    ends = sorted(
        r.end
        for r in result.items.values()
        if r.kind == "flow" and r.end is not None and (r.attrs.get("tags") or {}).get("last")
    )
    lo, hi = int(0.1 * len(ends)), int(0.9 * len(ends))
    if hi - lo < 2 or ends[hi - 1] <= ends[lo]:
        return math.nan
    return (hi - 1 - lo) / (ends[hi - 1] - ends[lo])


def load_curve(results) -> dict[str, list[dict[str, float]]]:
    """Runs labelled ``<scheduler>@<load>`` -> per scheduler, by load: steady-state latency p50/p99
    (s), throughput, and ``knee`` (1.0 on the point :func:`knee` picks, else 0.0)."""
    curve: dict[str, list[dict[str, float]]] = {}
    for r in results:
        name, _, load = r.scheduler.rpartition("@")
        if not name:
            continue
        lat = steady_latencies(r)
        curve.setdefault(name, []).append(
            {
                "load": float(load),
                "p50": percentile(lat, 50),
                "p99": percentile(lat, 99),
                "throughput": request_throughput(r),
                "requests": float(len(lat)),
            }
        )
    for points in curve.values():
        points.sort(key=lambda p: p["load"])
        at = knee([(p["load"], p["p50"]) for p in points])
        for p in points:
            p["knee"] = float(p["load"] == at)
    return curve


def _p50_at_knee(mine: list[dict], ref: list[dict] | None) -> tuple[float, float | None]:
    """Medians at the reference's knee (the scheduler's own without one): (mine, the reference's)."""
    at = knee([(p["load"], p["p50"]) for p in (ref or mine)])
    pick = lambda pts: next((p["p50"] for p in pts if p["load"] == at), math.nan)  # noqa: E731
    return pick(mine), (pick(ref) if ref is not None else None)


def _knee_of(mine: list[dict], ref: list[dict] | None) -> tuple[float, float | None]:
    k = lambda pts: knee([(p["load"], p["p50"]) for p in pts])  # noqa: E731
    return k(mine), (k(ref) if ref is not None else None)


# Numbers of an offered-load sweep (runs ``<label>@<load>``), by name: (the scheduler's value, the
# reference's, or None without one). ``knee``: the sustainable throughput (requests/s);
# ``p50_at_knee``: steady-state median latency at the reference's knee (s).
CURVE_METRICS: dict[str, Callable[[list[dict], list[dict] | None], tuple[float, float | None]]] = {
    "knee": _knee_of,
    "p50_at_knee": _p50_at_knee,
}


def curve_metric(name: str, results, scheduler: str, relative_to: str | None = None) -> tuple[float, float | None]:
    """:data:`CURVE_METRICS` ``name`` of ``scheduler``'s sweep among ``results`` (against ``relative_to``'s)."""
    curve = load_curve(results)
    for label in (scheduler, relative_to):
        if label is not None and label not in curve:
            raise KeyError(f"no runs {label}@<load> (sweeps: {', '.join(curve) or 'none'})")
    return CURVE_METRICS[name](curve[scheduler], curve[relative_to] if relative_to else None)


def iteration_times(result: RunResult) -> dict[int, float]:
    return dict(result.iterations) if result.iterations else {0: result.makespan}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


METRICS: dict[str, Callable[[RunResult], float]] = {
    "makespan": lambda r: r.makespan,
    "iteration_mean": lambda r: _mean(iteration_times(r).values()),
    "iteration_max": lambda r: max(iteration_times(r).values()),
    "fct_p50": lambda r: percentile(r.flow_completion_times().values(), 50),
    "fct_p99": lambda r: percentile(r.flow_completion_times().values(), 99),
    "cct_p50": lambda r: percentile(coflow_completion_times(r).values(), 50),
    "cct_p99": lambda r: percentile(coflow_completion_times(r).values(), 99),
    "cct_mean": lambda r: _mean(coflow_completion_times(r).values()),
    "cct_sum": lambda r: sum(coflow_completion_times(r).values()),
    "flows": lambda r: float(len(r.flow_completion_times())),
    "request_p50": lambda r: percentile(steady_latencies(r), 50),
    "request_p99": lambda r: percentile(steady_latencies(r), 99),
    "request_throughput": request_throughput,
    "fidelity_ok": lambda r: 1.0 if r.fidelity.get("ok", True) else 0.0,
    "wall_seconds": lambda r: r.wall_seconds,
}

DEFAULT_METRICS = ["makespan", "iteration_mean", "fct_p50", "fct_p99", "cct_p99"]


def metric(result: RunResult, name: str) -> float:
    return float(METRICS[name](result))
