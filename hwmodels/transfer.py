"""Concurrent transfers inside a server: routes, max-min fair sharing, completion times.

DGCL (seed 002) section 3 and 5.1: concurrent transfers share links and a
multi-hop path is limited by its slowest hop. This is a fluid model: at any
moment every unfinished transfer gets its max-min fair rate over the
directed links of its route (progressive filling); when one finishes, rates
are recomputed. A transfer split over several NVSwitch planes is several
sub-flows and completes when its last sub-flow does. Each transfer's
completion time adds the latency of its (slowest) route. A graph with path
rates (``path_speeds``, :meth:`IntraHostGraph.path_cap`) gives every capped
transfer a private link of that rate (each plane its share): one pair's
measured rate, while the links it crosses are shared at their capacities.

Public: :func:`transfer_times` (graph + transfers), :func:`fluid_finish_times`
(arrays). The numba kernel ``_fluid_kernel`` has a slow reference,
:func:`fluid_finish_times_reference`, and tests that they agree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hwmodels.graph import IntraHostGraph

EPS = 1e-12


@njit(cache=True)
def _maxmin_rates(cap, indptr, links, active):  # pragma: no cover - numba
    nflows = active.shape[0]
    rates = np.zeros(nflows)
    left = cap.copy()
    frozen = ~active
    count = np.zeros(cap.shape[0], dtype=np.int64)
    for f in range(nflows):
        if not frozen[f]:
            if indptr[f + 1] == indptr[f]:
                rates[f] = np.inf
                frozen[f] = True
                continue
            for k in range(indptr[f], indptr[f + 1]):
                count[links[k]] += 1
    while True:
        share = np.inf
        for lk in range(cap.shape[0]):
            if count[lk] > 0:
                s = left[lk] / count[lk]
                if s < share:
                    share = s
        if share == np.inf:
            break
        for f in range(nflows):
            if not frozen[f]:
                rates[f] += share
                for k in range(indptr[f], indptr[f + 1]):
                    left[links[k]] -= share
        for f in range(nflows):
            if frozen[f]:
                continue
            saturated = False
            for k in range(indptr[f], indptr[f + 1]):
                if left[links[k]] <= EPS * cap[links[k]]:
                    saturated = True
                    break
            if saturated:
                frozen[f] = True
                for k in range(indptr[f], indptr[f + 1]):
                    count[links[k]] -= 1
    return rates


@njit(cache=True)
def _fluid_kernel(cap, indptr, links, bits):  # pragma: no cover - numba
    nflows = bits.shape[0]
    remaining = bits.copy()
    finish = np.zeros(nflows)
    active = remaining > 0
    for f in range(nflows):
        if indptr[f + 1] == indptr[f]:
            active[f] = False  # no link to cross (src == dst): done at once
    now = 0.0
    while active.any():
        rates = _maxmin_rates(cap, indptr, links, active)
        dt = np.inf
        for f in range(nflows):
            if active[f]:
                t = remaining[f] / rates[f]
                if t < dt:
                    dt = t
        now += dt
        for f in range(nflows):
            if active[f]:
                remaining[f] -= rates[f] * dt
                if remaining[f] <= EPS * bits[f]:
                    remaining[f] = 0.0
                    active[f] = False
                    finish[f] = now
    return finish


def fluid_finish_times(capacity: np.ndarray, paths: list[list[int]], bits: np.ndarray) -> np.ndarray:
    """Finish time (s) of flows of ``bits`` over ``paths`` (directed link ids) on links of ``capacity`` bit/s."""
    indptr = np.zeros(len(paths) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in paths])
    links = np.array([lk for p in paths for lk in p], dtype=np.int64)
    return _fluid_kernel(np.asarray(capacity, dtype=np.float64), indptr, links, np.asarray(bits, dtype=np.float64))


def fluid_finish_times_reference(capacity, paths, bits) -> np.ndarray:
    """Slow and plain: the same fluid max-min model with dicts and sets."""
    remaining = {f: float(b) for f, b in enumerate(bits) if b > 0 and paths[f]}
    finish = [0.0] * len(paths)
    now = 0.0
    while remaining:
        # progressive filling: raise every unfrozen flow's rate until a link fills
        rate = dict.fromkeys(remaining, 0.0)
        unfrozen = set(remaining)
        left = {lk: float(capacity[lk]) for f in unfrozen for lk in paths[f]}
        while unfrozen:
            users = {lk: sum(1 for f in unfrozen if lk in paths[f]) for lk in left}
            share = min(left[lk] / n for lk, n in users.items() if n > 0)
            for f in unfrozen:
                rate[f] += share
                for lk in paths[f]:
                    left[lk] -= share
            full = {lk for lk in left if left[lk] <= EPS * capacity[lk]}
            unfrozen = {f for f in unfrozen if not full & set(paths[f])}
        dt = min(remaining[f] / rate[f] for f in remaining)
        now += dt
        for f in list(remaining):
            remaining[f] -= rate[f] * dt
            if remaining[f] <= EPS * bits[f]:
                del remaining[f]
                finish[f] = now
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
