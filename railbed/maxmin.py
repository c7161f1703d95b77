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
of flows or a cap changes (public: :func:`simulator.fluid.network.advance_kernel`
calls it inside numba).
:func:`maxmin` is its thin public wrapper; the tests make the two agree to the
bit (``tests/test_maxmin.py``, near-ties included): within a round, flows
frozen at their cap leave their links first, in cap order, then those frozen
at the water level (equal rates: their order cannot change a float). So the
rates do not depend on the order of the active flows either.

:func:`component_kernel` finds the flows an event can change (those connected, through shared
links, to the links whose flow set changed; twin :func:`component_reference`): the rules
engine recomputes only those (:mod:`simulator.rules.network`).

It lives in the core because the network (:mod:`simulator.fluid.network`, the rules engine's
kernel) and the host models (:mod:`hwmodels.transfer`) both run it, and DGTP's evaluator
(:mod:`schedulers.dgtp_eval`) too: ``tests/test_layering.py`` lets a package import only lower
layers, and the core is the one below all three (issue 43; it was ``hwmodels/maxmin.py``).
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
    (``inf``: none). A flow with no link gets its cap.

    The rates equal the kernel's to the bit: a round's frozen flows leave their
    links in one stated order, those frozen at their cap first, by cap (then by
    index), then those frozen at the water level (equal rates, so their order
    does not change ``left``)."""
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
            at_cap = sorted((f for f in unfrozen if cap[f] <= water * (1 + EPS)), key=lambda f: (cap[f], f))
            at_link = [
                f for f in sorted(unfrozen - set(at_cap)) if any(share[lk] <= water * (1 + EPS) for lk in paths[f])
            ]
            for f in at_cap:
                rates[f] = cap[f]
            for f in at_link:
                rates[f] = water
            for f in at_cap + at_link:
                for lk in paths[f]:
                    left[lk] = max(0.0, left[lk] - rates[f])
            unfrozen -= set(at_cap + at_link)
    return rates


@njit(cache=True)
def scratch_size(nlinks, n):
    """The length of :func:`maxmin_into`'s ``work`` for ``nlinks`` links and ``n`` flows."""
    return nlinks + 3 * n + 2 * CLASSES + 2


@njit(cache=True)
def maxmin_kernel(
    link_cap, flow_links, nhops, prio, cap, act, n, rates, left, count, state
):  # pragma: no cover - numba
    """Rates of the ``n`` active flows ``act[:n]`` into ``rates``.

    ``flow_links[f, :nhops[f]]`` are flow f's links; ``left``/``count`` (per
    link) and ``state`` (per flow) are scratch arrays. :func:`maxmin_into` with its
    scratch allocated here."""
    nlinks = link_cap.shape[0]
    work = np.empty(scratch_size(nlinks, n), dtype=np.int64)
    maxmin_into(link_cap, flow_links, nhops, prio, cap, act, n, rates, left, count, state, work, np.empty(nlinks))


@njit(cache=True, _nrt=False)
def maxmin_into(
    link_cap, flow_links, nhops, prio, cap, act, n, rates, left, count, state, work, share
):  # pragma: no cover - numba
    """:func:`maxmin_kernel` allocating nothing (so callable from code compiled without reference
    counting, the rules engine's kernel): ``work`` (int64, :func:`scratch_size`) and ``share``
    (one per link) are scratch. The flows are grouped by class (act order kept inside a class)
    and each class, highest first, is filled by :func:`_fill_class`."""
    nlinks = link_cap.shape[0]
    used, order, capped = work[:nlinks], work[nlinks : nlinks + n], work[nlinks + n : nlinks + 2 * n]
    sortbuf = work[nlinks + 2 * n : nlinks + 3 * n]
    first = work[nlinks + 3 * n : nlinks + 3 * n + CLASSES + 1]
    pos = work[nlinks + 3 * n + CLASSES + 1 : nlinks + 3 * n + 2 * CLASSES + 2]
    first[:] = 0
    for i in range(n):
        f = act[i]
        first[prio[f] + 1] += 1
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            left[lk] = link_cap[lk]
            count[lk] = 0
    for c in range(CLASSES):  # class c is order[first[c]:first[c + 1]]
        first[c + 1] += first[c]
        pos[c] = first[c]
    for i in range(n):
        f = act[i]
        order[pos[prio[f]]] = f
        pos[prio[f]] += 1
    for c in range(CLASSES - 1, -1, -1):
        if first[c] < first[c + 1]:
            flows = order[first[c] : first[c + 1]]
            _fill_class(flows, flow_links, nhops, cap, rates, left, count, state, share, used, capped, sortbuf)


@njit(cache=True, _nrt=False)
def sort_by(a, n, key, buf):  # pragma: no cover - numba
    """``a[:n]`` sorted stably by ``key[a[x]]`` in place (the order of ``np.argsort(..., kind="mergesort")``),
    bottom-up merges through ``buf[:n]``; allocates nothing."""
    width, into_buf = 1, True
    while width < n:
        if into_buf:
            _merge_pass(a, buf, n, width, key)
        else:
            _merge_pass(buf, a, n, width, key)
        into_buf = not into_buf
        width *= 2
    if not into_buf:  # the last pass wrote buf
        for x in range(n):
            a[x] = buf[x]


@njit(cache=True, _nrt=False)
def _merge_pass(src, dst, n, width, key):  # pragma: no cover - numba
    """Runs of ``width`` in ``src[:n]`` merged pairwise into ``dst`` (ties: the left run first)."""
    for lo in range(0, n, 2 * width):
        mid, hi = min(lo + width, n), min(lo + 2 * width, n)
        i, j = lo, mid
        for k in range(lo, hi):
            if j >= hi or (i < mid and key[src[i]] <= key[src[j]]):
                dst[k] = src[i]
                i += 1
            else:
                dst[k] = src[j]
                j += 1


@njit(cache=True, _nrt=False)
def _fill_class(
    flows, flow_links, nhops, cap, rates, left, count, state, share, used, capped, sortbuf
):  # pragma: no cover - numba
    """Progressive filling of one class's ``flows`` (scratch: the unfrozen ones are kept in
    front). Each round finds the water level (the smallest fair share of a link still in
    use, or the smallest cap of an unfrozen flow), then freezes the flows capped at or below
    it, in cap order, then the flows with a link at it (at the level: equal rates, so their
    order does not change ``left``); shares are those of the round's start."""
    m = flows.shape[0]
    nused = 0
    ncapped = 0
    for f in flows:
        state[f] = 0  # 0 unfrozen, 2 frozen
        if cap[f] < np.inf:
            capped[ncapped] = f
            ncapped += 1
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            if count[lk] == 0:
                used[nused] = lk
                nused += 1
            count[lk] += 1
    sort_by(capped, ncapped, cap, sortbuf)  # cap order, stable
    next_cap = 0
    while m > 0:
        water = np.inf
        keep = 0
        for k in range(nused):  # links whose flows are all frozen leave the list
            lk = used[k]
            if count[lk] > 0:
                share[lk] = left[lk] / count[lk]
                water = min(water, share[lk])
                used[keep] = lk
                keep += 1
        nused = keep
        while next_cap < ncapped and state[capped[next_cap]] != 0:
            next_cap += 1
        if next_cap < ncapped and cap[capped[next_cap]] < water:
            water = cap[capped[next_cap]]
        limit = water * (1 + EPS)
        frozen = 0
        k = next_cap
        while k < ncapped and cap[capped[k]] <= limit:
            f = capped[k]
            if state[f] == 0:
                _freeze(f, cap[f], flow_links, nhops, rates, left, count, state)
                frozen += 1
            k += 1
        keep = 0
        for x in range(m):
            f = flows[x]
            if state[f] != 0:
                continue
            at_level = False
            for h in range(nhops[f]):
                at_level = at_level or share[flow_links[f, h]] <= limit
            if at_level:
                _freeze(f, water, flow_links, nhops, rates, left, count, state)
                frozen += 1
            else:
                flows[keep] = f
                keep += 1
        m = keep
        if frozen == 0:  # only flows without links and without a cap are left
            for x in range(m):
                rates[flows[x]] = np.inf
                state[flows[x]] = 2
            return


@njit(cache=True, inline="always")
def _freeze(f, rate, flow_links, nhops, rates, left, count, state):  # pragma: no cover - numba
    """Flow ``f`` frozen at ``rate``: its links lose it."""
    rates[f] = rate
    state[f] = 2
    for h in range(nhops[f]):
        lk = flow_links[f, h]
        left[lk] = max(0.0, left[lk] - rate)
        count[lk] -= 1


def component_reference(paths: Sequence[Sequence[int]], active: Sequence[int], seeds: Sequence[int]) -> list[int]:
    """The active flows connected to ``seeds`` (a link ``lk >= 0``, or a flow ``f`` written
    ``-1 - f``): a seed flow, a flow on a seed link, and every active flow sharing a link with
    one already found (transitively), as sorted flow ids. The slow twin of
    :func:`component_kernel` (a plain fixpoint over sets)."""
    links = {s for s in seeds if s >= 0}
    comp = {-1 - s for s in seeds if s < 0}
    for f in comp:
        links.update(paths[f])
    grew = True
    while grew:
        grew = False
        for f in active:
            if f not in comp and links.intersection(paths[f]):
                comp.add(f)
                links.update(paths[f])
                grew = True
    return sorted(comp)


@njit(cache=True)
def component_kernel(
    seeds, nseed, lhead, lnext, flow_links, nhops, lmark, fmark, epoch, queue, comp, limit
):  # pragma: no cover - numba
    """The active flows connected to ``seeds[:nseed]`` (links; a flow ``f`` written ``-1 - f``,
    as a flow without links must be) into ``comp``; returns their number, or -1 as soon as
    they are more than ``limit`` (the caller then re-rates every active flow: a search that
    would reach most of them costs more than it saves).

    Why it is enough: max-min with strict priority couples two flows only through a link they
    share (a class sees what the classes above left on *its* links), so the flows connected to
    the links whose flow set changed are the only ones whose rates can change; the others keep
    theirs. :func:`maxmin_kernel` over ``comp`` then gives the rates the full recomputation
    gives: to the bit, except where another component's water level lies within ``1 + EPS``
    of this one's (the full run freezes both at the lower level; ``tests/test_maxmin.py``
    bounds the difference, far below 1e-9).

    The link lists: ``lhead[lk]`` is the first entry ``e`` of link ``lk`` (-1: none), ``lnext[e]``
    the next; entry ``e`` is hop ``e % H`` of flow ``e // H``, ``H = flow_links.shape[1]``.
    Breadth first over links; ``lmark``/``fmark`` (per link and flow) hold the epoch of the last
    search that reached them, so nothing is cleared between searches (``epoch`` must be new);
    ``queue`` (one per link) is scratch."""
    width = flow_links.shape[1]
    nq = 0
    ncomp = 0
    for k in range(nseed):
        s = seeds[k]
        if s < 0 and fmark[-1 - s] != epoch:
            f = -1 - s
            if ncomp == limit:
                return -1
            fmark[f] = epoch
            comp[ncomp] = f
            ncomp += 1
            for h in range(nhops[f]):
                lk = flow_links[f, h]
                if lmark[lk] != epoch:
                    lmark[lk] = epoch
                    queue[nq] = lk
                    nq += 1
        elif s >= 0 and lmark[s] != epoch:
            lmark[s] = epoch
            queue[nq] = s
            nq += 1
    q = 0
    while q < nq:
        e = lhead[queue[q]]
        q += 1
        while e >= 0:
            f = e // width
            if fmark[f] != epoch:
                if ncomp == limit:
                    return -1
                fmark[f] = epoch
                comp[ncomp] = f
                ncomp += 1
                for h in range(nhops[f]):
                    lk = flow_links[f, h]
                    if lmark[lk] != epoch:
                        lmark[lk] = epoch
                        queue[nq] = lk
                        nq += 1
            e = lnext[e]
    return ncomp


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
