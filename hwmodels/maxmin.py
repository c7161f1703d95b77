"""Link rates of concurrent flows: strict priority classes, max-min inside a class, caps.

The rate model of the flow-level simulator (DESIGN.md, "The simulated
backend"):

* **Strict priority between classes** (Hermod, seed 004, section 5.3: coflow
  priorities carried in DSCP and honoured by the switches' strict-priority
  queues). Classes are served from the highest down; a class sees only the
  capacity the classes above it left on each link.
* **Max-min fairness inside a class** by progressive filling (DGCL, seed
  002, section 5.1: concurrent transfers share links max-min and a multi-hop
  path is limited by its slowest hop). Every unfrozen flow of the class rises
  at the same rate; a flow freezes when one of its links is full.
* **Per-flow caps** (a scheduler's rate limit, ``SO_MAX_PACING_RATE`` in the
  emulator): a flow also freezes when it reaches its cap, leaving the rest of
  its links' capacity to the others.

Ties: a flow freezes when its cap or a link's fair share is within a factor
``1 + EPS`` of the current level (``EPS`` = 1e-12, our choice: far below
anything a result reports, far above float rounding).

:func:`maxmin_reference` is the slow, obviously correct version (dicts and
sets); ``maxmin_kernel`` is the numba kernel the simulator runs whenever the set
of flows or a cap changes (public: :func:`simulator.network.advance_kernel`
calls it inside numba).
:func:`maxmin` is its thin public wrapper; the tests make the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit

EPS = 1e-12
CLASSES = 8  # priority classes 0 (lowest) .. 7 (highest), as the tc policies have


def maxmin_reference(
    capacity: Sequence[float], paths: Sequence[Sequence[int]], prio: Sequence[int], cap: Sequence[float]
) -> list[float]:
    """Rates (bit/s) of flows over ``paths`` (link ids) on links of ``capacity`` bit/s.

    ``prio[f]`` is the flow's class (higher first), ``cap[f]`` its rate limit
    (``inf``: none). A flow with no link gets its cap."""
    left = {lk: float(c) for lk, c in enumerate(capacity)}
    rates = [0.0] * len(paths)
    for level in sorted(set(prio), reverse=True):
        unfrozen = {f for f in range(len(paths)) if prio[f] == level}
        while unfrozen:
            users: dict[int, int] = {}
            for f in unfrozen:
                for lk in paths[f]:
                    users[lk] = users.get(lk, 0) + 1
            share = {lk: left[lk] / n for lk, n in users.items()}
            water = min([*share.values(), *(cap[f] for f in unfrozen)])
            done = set()
            for f in unfrozen:
                if cap[f] <= water * (1 + EPS):
                    rates[f] = cap[f]
                    done.add(f)
                elif any(share[lk] <= water * (1 + EPS) for lk in paths[f]):
                    rates[f] = water
                    done.add(f)
            for f in done:
                for lk in paths[f]:
                    left[lk] = max(0.0, left[lk] - rates[f])
            unfrozen -= done
    return rates


@njit(cache=True)
def maxmin_kernel(
    link_cap, flow_links, nhops, prio, cap, act, n, rates, left, count, state
):  # pragma: no cover - numba
    """Rates of the ``n`` active flows ``act[:n]`` into ``rates``.

    ``flow_links[f, :nhops[f]]`` are flow f's links; ``left``/``count`` (per
    link) and ``state`` (per flow) are scratch arrays. Each round finds the
    water level (the smallest fair share of a link still in use, or the
    smallest cap of an unfrozen flow) and freezes the flows of the links at
    that level through per-link flow lists, so a round costs the links in use
    plus the flows it freezes, not every flow."""
    nlinks = link_cap.shape[0]
    used = np.empty(nlinks, dtype=np.int64)
    start = np.empty(nlinks, dtype=np.int64)
    fill = np.empty(nlinks, dtype=np.int64)
    members = np.empty(max(n * flow_links.shape[1], 1), dtype=np.int64)
    newly = np.empty(max(n, 1), dtype=np.int64)
    present = np.zeros(CLASSES, dtype=np.int64)
    for i in range(n):
        f = act[i]
        present[prio[f]] += 1
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            left[lk] = link_cap[lk]
            count[lk] = 0
    for level in range(CLASSES - 1, -1, -1):
        m = present[level]
        if m == 0:
            continue
        # the class's links and per-link flow lists
        nused = 0
        ncapped = 0
        for i in range(n):
            f = act[i]
            if prio[f] != level:
                continue
            state[f] = 0  # 0 unfrozen, 1 freezing in this round, 2 frozen
            if cap[f] < np.inf:
                ncapped += 1
            for h in range(nhops[f]):
                lk = flow_links[f, h]
                if count[lk] == 0:
                    used[nused] = lk
                    nused += 1
                count[lk] += 1
        total = 0
        for k in range(nused):
            lk = used[k]
            start[lk] = total
            fill[lk] = total
            total += count[lk]
        capped = np.empty(ncapped, dtype=np.int64)
        ncapped = 0
        for i in range(n):
            f = act[i]
            if prio[f] != level:
                continue
            if cap[f] < np.inf:
                capped[ncapped] = f
                ncapped += 1
            for h in range(nhops[f]):
                lk = flow_links[f, h]
                members[fill[lk]] = f
                fill[lk] += 1
        capped = capped[np.argsort(cap[capped], kind="mergesort")]
        next_cap = 0
        while m > 0:
            water = np.inf
            for k in range(nused):
                lk = used[k]
                if count[lk] > 0:
                    s = left[lk] / count[lk]
                    if s < water:
                        water = s
            while next_cap < ncapped and state[capped[next_cap]] != 0:
                next_cap += 1
            if next_cap < ncapped and cap[capped[next_cap]] < water:
                water = cap[capped[next_cap]]
            limit = water * (1 + EPS)
            nnew = 0
            k = next_cap
            while k < ncapped and cap[capped[k]] <= limit:
                f = capped[k]
                if state[f] == 0:
                    rates[f] = cap[f]
                    state[f] = 1
                    newly[nnew] = f
                    nnew += 1
                k += 1
            for k in range(nused):
                lk = used[k]
                if count[lk] > 0 and left[lk] / count[lk] <= limit:
                    for j in range(start[lk], fill[lk]):
                        f = members[j]
                        if state[f] == 0:
                            rates[f] = water
                            state[f] = 1
                            newly[nnew] = f
                            nnew += 1
            if nnew == 0:  # only flows without links and without a cap are left
                for i in range(n):
                    f = act[i]
                    if prio[f] == level and state[f] == 0:
                        rates[f] = np.inf
                        state[f] = 2
                break
            for j in range(nnew):
                f = newly[j]
                state[f] = 2
                m -= 1
                for h in range(nhops[f]):
                    lk = flow_links[f, h]
                    left[lk] = max(0.0, left[lk] - rates[f])
                    count[lk] -= 1


def pack_paths(paths: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(flow_links padded with -1, nhops) arrays of ``paths``."""
    width = max([len(p) for p in paths], default=0) or 1
    links = np.full((len(paths), width), -1, dtype=np.int64)
    for f, p in enumerate(paths):
        links[f, : len(p)] = p
    return links, np.array([len(p) for p in paths], dtype=np.int64)


def maxmin(
    capacity: Sequence[float], paths: Sequence[Sequence[int]], prio: Sequence[int], cap: Sequence[float]
) -> np.ndarray:
    """The numba kernel behind :func:`maxmin_reference`'s signature (classes must be in 0..7)."""
    n = len(paths)
    for f, c in enumerate(prio):
        if not 0 <= c < CLASSES:
            raise ValueError(f"prio[{f}] = {c}: classes are 0..{CLASSES - 1}")
    link_cap = np.asarray(capacity, dtype=np.float64)
    flow_links, nhops = pack_paths(paths)
    caps = np.array([math.inf if c is None else c for c in cap], dtype=np.float64)
    rates = np.zeros(n)
    maxmin_kernel(
        link_cap,
        flow_links,
        nhops,
        np.asarray(prio, dtype=np.int64),
        caps,
        np.arange(n, dtype=np.int64),
        n,
        rates,
        np.zeros(len(link_cap)),
        np.zeros(len(link_cap), dtype=np.int64),
        np.zeros(n, dtype=np.int8),
    )
    return rates
