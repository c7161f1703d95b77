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
(arrival to the last message's end, :func:`request_latencies`).
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


def receiver_comm(result: RunResult) -> dict[int, float]:
    """Destination server -> the summed completion times of the coflows whose flows all go to it
    (a server's own fetches: AdaGL's ``T_i`` of eq. 5, Table I's "communication time"); coflows
    with several destinations (collectives) are left out."""
    out: dict[int, float] = {}
    for s, t, _flows, _bytes in _receiver_coflows(result):
        out[s] = out.get(s, 0.0) + t
    return out


def _receiver_coflows(result: RunResult) -> list[tuple[int, float, int, int]]:
    """(destination server, completion time, flows, bytes) of every finished coflow whose flows
    all go to one server (see :func:`receiver_comm`)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    dest: dict[str, set] = {}
    flows: dict[str, int] = {}
    size: dict[str, int] = {}
    for r in result.items.values():
        coflow = r.attrs.get("coflow")
        if r.kind != "flow" or coflow is None or r.parent is not None or r.end is None:
            continue
        arrived = r.ready if r.ready is not None else r.start
        if arrived is None:
            continue
        c = str(coflow)
        first[c] = min(first.get(c, math.inf), arrived)
        last[c] = max(last.get(c, -math.inf), r.end)
        dest.setdefault(c, set()).add(r.dst_server)
        flows[c] = flows.get(c, 0) + 1
        size[c] = size.get(c, 0) + (r.size or 0)
    return [
        (next(iter(dest[c])), last[c] - first[c], flows[c], size[c])
        for c in first
        if len(dest[c]) == 1 and None not in dest[c]
    ]


def alpha_beta_error(result: RunResult) -> float:
    """How well the alpha-beta model of AdaGL's eq. (5), ``t = alpha r + beta n``, predicts each
    server's summed fetch time: per server, alpha and beta are fitted (least squares) on the other
    servers' coflows into one server (``r`` its flows, ``n`` its bytes, ``t`` its completion time),
    and the server's total is predicted; the mean absolute relative error over servers (NaN with
    fewer than two servers)."""
    rows = _receiver_coflows(result)
    servers = sorted({s for s, *_ in rows})
    if len(servers) < 2:
        return math.nan
    errors = []
    for s in servers:
        train = [(f, b, t) for d, t, f, b in rows if d != s]
        test = [(f, b, t) for d, t, f, b in rows if d == s]
        a = [[f, b] for f, b, _ in train]
        y = [t for *_, t in train]
        (alpha, beta) = _lstsq2(a, y)
        measured = sum(t for *_, t in test)
        predicted = sum(alpha * f + beta * b for f, b, _ in test)
        if measured > 0:
            errors.append(abs(predicted - measured) / measured)
    return sum(errors) / len(errors) if errors else math.nan


def _lstsq2(a: list[list[float]], y: list[float]) -> tuple[float, float]:
    """Least squares of ``y ~ a @ (x0, x1)`` (normal equations; 0 where singular)."""
    s00 = sum(r[0] * r[0] for r in a)
    s01 = sum(r[0] * r[1] for r in a)
    s11 = sum(r[1] * r[1] for r in a)
    t0 = sum(r[0] * v for r, v in zip(a, y))
    t1 = sum(r[1] * v for r, v in zip(a, y))
    det = s00 * s11 - s01 * s01
    if abs(det) <= 1e-12 * max(1.0, s00 * s11):
        return (0.0, t1 / s11 if s11 else 0.0)
    return ((t0 * s11 - t1 * s01) / det, (s00 * t1 - s01 * t0) / det)


def nodes_per_second(result: RunResult) -> float:
    """Training throughput: the nodes the run's finished items trained (their ``tags["trained"]``: a
    mini-batch's seeds, a full-graph bin's nodes in the output layer) per model second of makespan."""
    trained = sum(
        r.attrs.get("tags", {}).get("trained", 0) for r in result.items.values() if r.end is not None
    )  # fmt: skip
    return trained / result.makespan if result.makespan > 0 else math.nan


def remote_bytes(result: RunResult) -> float:
    """Bytes of the job's flows (not sub-flows) whose source and destination are on different servers."""
    return float(
        sum(r.size or 0 for r in result.items.values()
            if r.kind == "flow" and r.parent is None and r.server is not None and r.server != r.dst_server)
    )  # fmt: skip


def request_latencies(result: RunResult) -> list[float]:
    """LEO's requests (``workloads.requests``): per request the end of its last message minus
    its arrival (the end of its ``a<i>`` task), in request order."""
    out = []
    for r in result.items.values():
        tags = r.attrs.get("tags") or {}
        if r.kind == "flow" and tags.get("last") and r.end is not None:
            arrival = result.items.get(f"a{tags['request']}")
            if arrival is not None and arrival.end is not None:
                out.append(r.end - arrival.end)
    return out


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
    """Runs labelled ``<scheduler>@<load>`` -> per scheduler, by load: latency p50/p99 (s), throughput."""
    curve: dict[str, list[dict[str, float]]] = {}
    for r in results:
        name, _, load = r.scheduler.rpartition("@")
        if not name:
            continue
        lat = request_latencies(r)
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
    return curve


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
    "receiver_comm_max": lambda r: max(receiver_comm(r).values(), default=0.0),
    "remote_bytes": remote_bytes,
    "alpha_beta_error": alpha_beta_error,
    "nodes_per_second": nodes_per_second,
    "request_p50": lambda r: percentile(request_latencies(r), 50),
    "request_p99": lambda r: percentile(request_latencies(r), 99),
    "request_throughput": request_throughput,
    "fidelity_ok": lambda r: 1.0 if r.fidelity.get("ok", True) else 0.0,
    "wall_seconds": lambda r: r.wall_seconds,
}

DEFAULT_METRICS = ["makespan", "iteration_mean", "fct_p50", "fct_p99", "cct_p99"]


def metric(result: RunResult, name: str) -> float:
    return float(METRICS[name](result))
