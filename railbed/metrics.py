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
model seconds except ``fidelity_ok`` (1 or 0), ``flows`` (a count) and
``wall_seconds`` (real).
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
    "fidelity_ok": lambda r: 1.0 if r.fidelity.get("ok", True) else 0.0,
    "wall_seconds": lambda r: r.wall_seconds,
}

DEFAULT_METRICS = ["makespan", "iteration_mean", "fct_p50", "fct_p99", "cct_p99"]


def metric(result: RunResult, name: str) -> float:
    return float(METRICS[name](result))
