"""Numbers derived from a :class:`~railbed.results.RunResult`, by name.

One place for what "FCT p99" or "coflow completion time" means, read by
the figures (``railbed/plots.py``), the sweep table (``scenarios/sweep.py``)
and the reproduction report (``scenarios/reproduce.py``):

* **flow completion time** (FCT): ``end - start`` of a flow (start: its
  sender was told to go), as :meth:`RunResult.flow_completion_times`;
  ``fct_p50``/``fct_p99`` count only the flows between servers (they cross
  the network; a flow inside one server takes 0 s without a host model, and
  counting those made a DP x PP job's median 0 s), ``fct_local_p50``/``_p99``
  those inside one server, ``fct_all_p99`` every flow;
* **coflow completion time** (CCT): from the first ``ready`` of a coflow's
  flows (the coflow arrived) to the last ``end`` (flows carry their coflow
  in ``attrs["coflow"]``), as :func:`railbed.results.coflow_completion_times` (beside
  :func:`railbed.results.collective_bandwidths`: a run's summary shows both);
* **percentiles**: nearest rank on the sorted values (``p50`` of 1, 2, 3, 4
  is 3: :func:`railbed.results.percentile`, used everywhere).

:data:`METRICS` maps a metric's name to a function of a result; all are in
model seconds except ``fidelity_ok`` (1 or 0), ``flows`` (a count), ``bytes`` and
``remote_bytes`` (bytes of the job's flows, all or between servers), ``algbw`` and ``busbw``
(bytes per model second, nccl-tests' definitions: :func:`collective_bandwidths`), ``gpu_busy_share`` (a
fraction; runs of several jobs, like ``jct_mean`` and ``jct_p99``, NaN otherwise), ``alpha_beta_error``,
``edge_cut`` and ``imbalance`` (fractions; the last two a GNN epoch's partition, from its job's
tags), ``nodes_per_second`` and ``request_throughput`` (per model second) and
``wall_seconds`` (real).
``request_p50``/``request_p99`` are the latencies of LEO's requests
(arrival to the last message's end, :func:`request_latencies`) in steady
state: requests arriving in the first :data:`WARMUP` of the arrival window
are left out. An offered-load sweep's knee (:func:`knee`) is the thesis's
sustainable throughput.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from railbed.results import RunResult, coflow_completion_times, collective_bandwidths, percentile


def flow_completion_times(result: RunResult) -> dict[str, float]:
    return result.flow_completion_times()


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


def compute_max(result: RunResult) -> float:
    """The largest per-server sum of the durations of finished tasks that trained nodes (their
    ``tags["trained"]``): the training time of the slowest server (NaN without such tasks)."""
    per: dict[int, float] = {}
    for r in result.items.values():
        trained = (r.attrs.get("tags") or {}).get("trained")
        if r.kind == "task" and r.end is not None and r.start is not None and trained:
            per[r.server] = per.get(r.server, 0.0) + (r.end - r.start)
    return max(per.values()) if per else math.nan


def epoch_tag(key: str) -> Callable[[RunResult], float]:
    """A number of the job's ``tags["epoch"]`` (``workloads.gnn_epoch``: the partition's ``edge_cut``,
    its ``imbalance`` against the capacities; NaN where the job has none)."""

    def read(result: RunResult) -> float:
        for r in result.items.values():
            epoch = (r.attrs.get("tags") or {}).get("epoch")
            if isinstance(epoch, dict) and key in epoch:
                return float(epoch[key])
        return math.nan

    return read


def job_completion_times(result: RunResult) -> list[float]:
    """Per-job completion times of a run of several jobs (``result.jobs["per_job"][name]["jct"]``,
    arrival to the job's last end, :mod:`railbed.jobmetrics`); empty for a run of one job."""
    per = (result.jobs or {}).get("per_job") or {}
    return [float(j["jct"]) for j in per.values() if j.get("jct") is not None]


def gpu_busy_share(result: RunResult) -> float:
    """The cluster's GPU busy share of a run of several jobs (``result.jobs["cluster"]``, the GPUs'
    busy time over GPUs x makespan); NaN for a run of one job."""
    value = ((result.jobs or {}).get("cluster") or {}).get("gpu_busy_share")
    return math.nan if value is None else float(value)


def nodes_per_second(result: RunResult) -> float:
    """Training throughput: the nodes the run's finished items trained (their ``tags["trained"]``: a
    mini-batch's seeds, a full-graph bin's nodes in the output layer) per model second of makespan."""
    trained = sum(
        r.attrs.get("tags", {}).get("trained", 0) for r in result.items.values() if r.end is not None
    )  # fmt: skip
    return trained / result.makespan if result.makespan > 0 else math.nan


def flow_bytes(result: RunResult, remote_only: bool = False) -> float:
    """Bytes of the job's flows (not sub-flows); ``remote_only``: those whose source and destination
    are on different servers."""
    return float(
        sum(r.size or 0 for r in result.items.values()
            if r.kind == "flow" and r.parent is None
            and (not remote_only or (r.server is not None and r.server != r.dst_server)))
    )  # fmt: skip


def remote_bytes(result: RunResult) -> float:
    """Bytes of the job's flows (not sub-flows) whose source and destination are on different servers."""
    return flow_bytes(result, remote_only=True)


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


def _first_collective(key: str) -> Callable[[RunResult], float]:
    def read(result: RunResult) -> float:
        rows = collective_bandwidths(result)
        return rows[0][key] if rows else math.nan

    return read


def iteration_times(result: RunResult) -> dict[int, float]:
    return dict(result.iterations) if result.iterations else {0: result.makespan}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


METRICS: dict[str, Callable[[RunResult], float]] = {
    "makespan": lambda r: r.makespan,
    "iteration_mean": lambda r: _mean(iteration_times(r).values()),
    "iteration_max": lambda r: max(iteration_times(r).values()),
    "fct_p50": lambda r: percentile(r.flow_completion_times("network").values(), 50),
    "fct_p99": lambda r: percentile(r.flow_completion_times("network").values(), 99),
    "fct_local_p50": lambda r: percentile(r.flow_completion_times("local").values(), 50),
    "fct_local_p99": lambda r: percentile(r.flow_completion_times("local").values(), 99),
    "fct_all_p99": lambda r: percentile(r.flow_completion_times().values(), 99),
    "cct_p50": lambda r: percentile(coflow_completion_times(r).values(), 50),
    "cct_p99": lambda r: percentile(coflow_completion_times(r).values(), 99),
    "cct_mean": lambda r: _mean(coflow_completion_times(r).values()),
    "cct_sum": lambda r: sum(coflow_completion_times(r).values()),
    "flows": lambda r: float(len(r.flow_completion_times())),
    "receiver_comm_max": lambda r: max(receiver_comm(r).values(), default=0.0),
    "bytes": flow_bytes,
    "algbw": _first_collective("algbw"),  # the (first) collective's, bytes/s (collective_bandwidths)
    "busbw": _first_collective("busbw"),
    "remote_bytes": remote_bytes,
    "alpha_beta_error": alpha_beta_error,
    "nodes_per_second": nodes_per_second,
    "compute_max": compute_max,
    "edge_cut": epoch_tag("edge_cut"),
    "imbalance": epoch_tag("imbalance"),
    "request_p50": lambda r: percentile(steady_latencies(r), 50),
    "request_p99": lambda r: percentile(steady_latencies(r), 99),
    "request_throughput": request_throughput,
    "fidelity_ok": lambda r: 1.0 if r.fidelity_report.get("ok", True) else 0.0,
    "wall_seconds": lambda r: r.wall_seconds,
    "jct_mean": lambda r: _mean(job_completion_times(r)),
    "jct_p99": lambda r: percentile(job_completion_times(r), 99),
    "gpu_busy_share": gpu_busy_share,
}

DEFAULT_METRICS = ["makespan", "iteration_mean", "fct_p50", "fct_p99", "cct_p99"]


def metric(result: RunResult, name: str) -> float:
    return float(METRICS[name](result))
