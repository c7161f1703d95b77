"""Concurrent transfers inside a server: routes, max-min fair sharing, completion times.

DGCL (seed 002) section 3 and 5.1: concurrent transfers share links and a
multi-hop path is limited by its slowest hop. This is a fluid model: at any
moment every unfinished transfer gets its max-min fair rate over the
directed links of its route (progressive filling: the simulator's solver,
:mod:`railbed.maxmin`, with one class and no caps); when one finishes,
rates are recomputed (transfers ending within a factor ``1 + EPS`` of the
earliest end end together, as in the simulator's network). A transfer
split over several NVSwitch planes is several sub-flows and completes when its last sub-flow does. Each transfer's
completion time adds the latency of its (slowest) route. A graph with path
rates (``path_speeds``, :meth:`IntraHostGraph.path_cap`) gives every capped
transfer a private link of that rate (each plane its share): one pair's
measured rate, while the links it crosses are shared at their capacities.

Public: :func:`transfer_times` (graph + transfers), :func:`fluid_finish_times`
(arrays). The numba kernel ``_fluid_kernel`` has a slow reference,
:func:`fluid_finish_times_reference`, and tests that they agree.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hwmodels.graph import IntraHostGraph
from railbed.maxmin import EPS, maxmin_kernel, maxmin_reference, pack_paths


@njit(cache=True)
def _fluid_kernel(cap, flow_links, nhops, bits):  # pragma: no cover - numba
    """Finish times of flows over ``flow_links[f, :nhops[f]]``: max-min rates
    (:func:`railbed.maxmin.maxmin_kernel`, one class, no caps) recomputed whenever a flow
    finishes; flows finishing within a factor ``1 + EPS`` of the earliest end together."""
    nflows = bits.shape[0]
    remaining = bits.copy()
    finish = np.zeros(nflows)
    act = np.empty(nflows, dtype=np.int64)
    n = 0
    for f in range(nflows):
        if remaining[f] > 0 and nhops[f] > 0:  # no bytes, or no link to cross (src == dst): done at once
            act[n] = f
            n += 1
    prio = np.zeros(nflows, dtype=np.int64)
    nocap = np.full(nflows, np.inf)
    rates = np.zeros(nflows)
    left = np.zeros(cap.shape[0])
    count = np.zeros(cap.shape[0], dtype=np.int64)
    state = np.zeros(nflows, dtype=np.int8)
    now = 0.0
    while n > 0:
        maxmin_kernel(cap, flow_links, nhops, prio, nocap, act, n, rates, left, count, state)
        t_min = np.inf
        for i in range(n):
            f = act[i]
            t = now + remaining[f] / rates[f]
            if t < t_min:
                t_min = t
        limit = t_min * (1.0 + EPS)
        keep = 0
        for i in range(n):
            f = act[i]
            if now + remaining[f] / rates[f] <= limit:
                remaining[f] = 0.0
                finish[f] = t_min
            else:
                remaining[f] -= rates[f] * (t_min - now)
                act[keep] = f
                keep += 1
        n = keep
        now = t_min
    return finish


def fluid_finish_times(capacity: np.ndarray, paths: list[list[int]], bits: np.ndarray) -> np.ndarray:
    """Finish time (s) of flows of ``bits`` over ``paths`` (directed link ids) on links of ``capacity`` bit/s."""
    flow_links, nhops = pack_paths(paths)
    return _fluid_kernel(np.asarray(capacity, dtype=np.float64), flow_links, nhops, np.asarray(bits, dtype=np.float64))


def fluid_finish_times_reference(capacity, paths, bits) -> np.ndarray:
    """Slow and plain: the same fluid model with dicts and :func:`railbed.maxmin.maxmin_reference`."""
    remaining = {f: float(b) for f, b in enumerate(bits) if b > 0 and paths[f]}
    finish = [0.0] * len(paths)
    now = 0.0
    while remaining:
        flows = list(remaining)
        rates = maxmin_reference(capacity, [paths[f] for f in flows], [0] * len(flows), [math.inf] * len(flows))
        rate = dict(zip(flows, rates))
        end = {f: now + remaining[f] / rate[f] for f in flows}
        t_min = min(end.values())
        for f in flows:
            if end[f] <= t_min * (1 + EPS):
                del remaining[f]
                finish[f] = t_min
            else:
                remaining[f] -= rate[f] * (t_min - now)
        now = t_min
    return np.array(finish)


def transfer_times(
    graph: IntraHostGraph,
    transfers: list[tuple[str, str, float]],
    kernel=fluid_finish_times,
    with_latency: bool = True,
) -> np.ndarray:
    """Completion time (s) of each concurrent transfer (src node, dst node, bytes) in ``graph``;
    ``with_latency=False`` gives the fluid part only (as DGCL's cost model counts)."""
    paths, bits, owner, latency = [], [], [], np.zeros(len(transfers))
    capacity = list(graph.capacity)
    for t, (src, dst, nbytes) in enumerate(transfers):
        if nbytes < 0:
            raise ValueError(f"transfer {t}: negative size {nbytes}")
        cap = graph.path_cap(src, dst)
        for path, frac in graph.routes(src, dst):
            if np.isfinite(cap) and path:
                capacity.append(cap * frac)  # the pair's own rate, a link no other transfer crosses
                path = [*path, len(capacity) - 1]
            paths.append(path)
            bits.append(8.0 * nbytes * frac)
            owner.append(t)
            if nbytes > 0 and with_latency:
                hops = [d for d in path if d < len(graph.latency)]
                latency[t] = max(latency[t], float(graph.latency[hops].sum()) if hops else 0.0)
    if not paths:
        return np.zeros(0)
    finish = kernel(np.array(capacity), paths, np.array(bits))
    out = np.zeros(len(transfers))
    for sub, t in enumerate(owner):
        out[t] = max(out[t], finish[sub])
    return out + latency
