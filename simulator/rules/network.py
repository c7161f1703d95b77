"""The rules engine's network when nothing meters it: a step costs the flows an event changes.

:func:`simulator.fluid.network.advance_kernel` (the step the meter needs, and the fluid
engine's) recomputes every active flow's rate whenever the flow set changes, and moves every
flow's remaining bits on at every step: a step costs the active flows (issue 42: 21.7 G
flow-steps at 8192 GPUs). Here:

* **Rates over the changed component.** A flow that joins or ends marks its links (``seeds``);
  the next step finds the flows connected to them (:func:`railbed.maxmin.component_kernel`)
  and runs :func:`railbed.maxmin.maxmin_kernel` over those only; the others keep their rates
  (max-min couples flows only through shared links; see ``component_kernel``). A search that
  reaches more than ``1/DENSE`` of the active flows gives up and every active flow (``act``,
  unordered: a flow that ends takes the last one's place, ``apos``) is re-rated, as
  ``advance_kernel`` would: where every flow shares links with every other (the DP rings
  alone, one component), the search was pure extra (issue 42's 1.6-2.4x).
* **Bits settled lazily.** A flow keeps ``rem`` (bits left at ``tset``) and its rate since then
  (``rset``; ``rates`` is max-min's output); its bits are settled (``rem`` and the links'
  ``link_bits`` brought to ``now``) only when a recomputation changes its rate (an unchanged
  rate keeps its finish time to the bit), when it ends, and when a run stops early
  (:func:`settle_all`).
* **Finishes from a heap.** Whenever a flow's rate changes, its finish time
  ``tset + rem / rate`` is pushed with the flow's version (``ver``, bumped at each push and at
  its end); entries of an older version are skipped when they reach the top, and dropped all
  at once when the heap is full (:func:`finish_room`). When a step changes many rates, or
  many flows end together, the heap is rebuilt in one pass (:func:`heapify`) rather than
  pushed or popped entry by entry (``_new_finishes``, ``_take_finishes``): the same entries,
  so the same finishes.

Everything here but :func:`finish_room` is compiled without numba's reference counting
(``_nrt=False``: it allocates nothing), because the kernel's loop that calls it is
(:mod:`simulator.rules.kernel`): a caller that counts references increfs and decrefs every array
it passes to a call LLVM does not inline, an atomic add each, which was half the time of the DP
rings' run (``perf`` on the kernel). :func:`sort_prefix` is the kernel's sort for that reason.

The step's semantics are ``advance_kernel``'s: the earliest finish ``t_min``, or ``t_limit``
(the next timer) if it is earlier; the flows finishing within ``t_min * (1 + EPS)`` end
together, reported in the order they joined (``aseq``: ``advance_kernel``'s ``act`` order).
Float operations differ in order only: a flow's bits are subtracted once per rate rather than
once per step, and a link's load is summed over the component. ``tests/test_compact.py`` and
``tests/test_differential.py`` hold the engine to the Dispatcher and the fluid engines to
1e-9 as before, on jobs whose times a last-bit change does not move further. A job can amplify
it: 1,500 flows at once under ``hermod`` (Alg. 3's sub-flow chains, the DP flows below them fed in
the gaps between sub-phases) differ between the engines by up to 2.4e-7 relative per item, and by
up to 4 % at 2,500 flows; but the Dispatcher's run alone moves as much when one NIC rate changes
by one ulp (1.2e-7 and 4.25e-2), so neither engine is the wrong one (2026-11-29, traced to this
network's lazy settling; under ``fifo``, ``megatron`` and ``hermod-inter`` they agree within
3e-15). ``tests/test_compact.py``'s 2,500-flow test runs the schedulers where they agree.

Seeds: links (``seeded`` marks them, so each is listed once), and a flow without links, written
``-1 - slot``, when it joins (at most the links plus the slots). Link lists: the flows on link
``lk`` are a doubly linked list of entries ``e = slot * H + hop`` (``H`` the routes' width):
``lhead[lk]``, ``lnext[e]``, ``lprev[e]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from railbed.maxmin import EPS, component_kernel, maxmin_into
from simulator.fluid.network import finish_time

DENSE = 4  # a change reaching more than 1/DENSE of the active flows re-rates them all (no search further)

# ---------------------------------------------------------------- a binary heap on arrays
# ordered by (time, sequence number), as simulator.fluid.run's heapq; the kernel's timers and the
# finish heap below (where the "sequence number" is the flow's version and the item its slot).


@njit(cache=True, _nrt=False)
def heap_push(ht, hs, hi, size, t, seq, item):  # pragma: no cover - numba
    k = size
    ht[k], hs[k], hi[k] = t, seq, item
    while k > 0:
        p = (k - 1) >> 1
        if ht[p] < ht[k] or (ht[p] == ht[k] and hs[p] < hs[k]):
            break
        ht[p], ht[k] = ht[k], ht[p]
        hs[p], hs[k] = hs[k], hs[p]
        hi[p], hi[k] = hi[k], hi[p]
        k = p
    return size + 1


@njit(cache=True, _nrt=False)
def heap_pop(ht, hs, hi, size):  # pragma: no cover - numba
    """Remove the top (the caller read it at index 0); returns the new size."""
    size -= 1
    ht[0], hs[0], hi[0] = ht[size], hs[size], hi[size]
    _sift_down(ht, hs, hi, size, 0)
    return size


@njit(cache=True, _nrt=False)
def _sift_down(ht, hs, hi, size, k):  # pragma: no cover - numba
    """Entry ``k`` moved down below its children until the heap order holds under it."""
    while True:
        a = 2 * k + 1
        if a >= size:
            break
        b = a + 1
        c = a
        if b < size and (ht[b] < ht[a] or (ht[b] == ht[a] and hs[b] < hs[a])):
            c = b
        if ht[k] < ht[c] or (ht[k] == ht[c] and hs[k] < hs[c]):
            break
        ht[c], ht[k] = ht[k], ht[c]
        hs[c], hs[k] = hs[k], hs[c]
        hi[c], hi[k] = hi[k], hi[c]
        k = c


@njit(cache=True, _nrt=False)
def heapify(ht, hs, hi, size):  # pragma: no cover - numba
    """The first ``size`` entries put in heap order (bottom up: O(size), against O(size log size)
    for as many pushes)."""
    for k in range(size // 2 - 1, -1, -1):
        _sift_down(ht, hs, hi, size, k)


@njit(cache=True, _nrt=False)
def sort_prefix(a, n, key):  # pragma: no cover - numba
    """``a[:n]`` sorted in place by ``key[a[x]]``, or by ``a[x]`` itself when ``key`` is empty
    (distinct keys: the order ``np.sort``/``np.argsort`` give). A heapsort, allocating nothing
    (callable from the kernel, which runs without reference counting); a prefix already in
    order, as the items ready at a run's start are, costs one pass."""
    keyed = key.shape[0] > 0
    for x in range(1, n + 1):
        if x == n:
            return
        if (key[a[x]] < key[a[x - 1]]) if keyed else (a[x] < a[x - 1]):
            break
    for k in range(n // 2 - 1, -1, -1):
        _sift_max(a, k, n, key, keyed)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift_max(a, 0, end, key, keyed)


@njit(cache=True, _nrt=False)
def _sift_max(a, k, size, key, keyed):  # pragma: no cover - numba
    """``sort_prefix``'s max-heap: entry ``k`` moved down until its children are not larger."""
    while True:
        c = 2 * k + 1
        if c >= size:
            return
        if c + 1 < size and ((key[a[c]] < key[a[c + 1]]) if keyed else (a[c] < a[c + 1])):
            c += 1
        if (key[a[k]] >= key[a[c]]) if keyed else (a[k] >= a[c]):
            return
        a[k], a[c] = a[c], a[k]
        k = c


# ---------------------------------------------------------------- flows joining and leaving


@njit(cache=True, _nrt=False)
def net_join(sl, order, now, flow_links, nhops, lhead, lnext, lprev, tset, aseq, rset, seeds, nseed, seeded):
    """Slot ``sl`` (filled) joins the network at ``now``, the ``order``-th to join: it enters its
    links' lists and its links become seeds. Returns the new ``nseed``."""  # pragma: no cover
    width = flow_links.shape[1]
    tset[sl] = now
    rset[sl] = -1.0  # no rate yet: whatever the next step gives differs
    aseq[sl] = order
    for h in range(nhops[sl]):
        lk = flow_links[sl, h]
        e = sl * width + h
        lprev[e] = -1
        lnext[e] = lhead[lk]
        if lhead[lk] >= 0:
            lprev[lhead[lk]] = e
        lhead[lk] = e
        if not seeded[lk]:
            seeded[lk] = True
            seeds[nseed] = lk
            nseed += 1
    if nhops[sl] == 0:  # no link reaches it: the flow itself is a seed (its rate is its cap)
        seeds[nseed] = -1 - sl
        nseed += 1
    return nseed


@njit(cache=True, _nrt=False)
def _leave(sl, flow_links, nhops, lhead, lnext, lprev, seeds, nseed, seeded):  # pragma: no cover - numba
    """Slot ``sl`` leaves its links' lists; its links become seeds. Returns the new ``nseed``."""
    width = flow_links.shape[1]
    for h in range(nhops[sl]):
        lk = flow_links[sl, h]
        e = sl * width + h
        if lprev[e] >= 0:
            lnext[lprev[e]] = lnext[e]
        else:
            lhead[lk] = lnext[e]
        if lnext[e] >= 0:
            lprev[lnext[e]] = lprev[e]
        if not seeded[lk]:
            seeded[lk] = True
            seeds[nseed] = lk
            nseed += 1
    return nseed


@njit(cache=True, _nrt=False)
def _settle(f, now, flow_links, nhops, rem, rset, tset, link_bits):  # pragma: no cover - numba
    """Flow ``f``'s bits brought from ``tset[f]`` to ``now`` at its rate since then, ``rset[f]``."""
    dt = now - tset[f]
    if dt > 0.0 and rset[f] > 0.0:
        moved = rset[f] * dt
        rem[f] -= moved
        for h in range(nhops[f]):
            link_bits[flow_links[f, h]] += moved
    tset[f] = now


@njit(cache=True, _nrt=False)
def settle_all(now, slot_item, flow_links, nhops, rem, rset, tset, link_bits):  # pragma: no cover - numba
    """Every flow in the network settled at ``now`` (a run stopped early: its links' bits so far)."""
    for f in range(slot_item.shape[0]):
        if slot_item[f] >= 0:
            _settle(f, now, flow_links, nhops, rem, rset, tset, link_bits)


# ---------------------------------------------------------------- the step


@njit(cache=True, _nrt=False)
def net_rerate(
    link_cap, flow_links, nhops, prio, cap, rates, act, nact, state, lhead, lnext, seeds, nseed, seeded, lmark, fmark,
    epoch, queue, comp, left, count, link_load, peak_load, dense, mm_work, mm_share,
):  # fmt: skip  # pragma: no cover - numba
    """A step's first half: the flows the seeds reach (``comp``) re-rated, their links' loads into
    ``peak_load``. ``epoch``: new at each call; ``act[:nact]`` the active flows. Returns (the
    flows re-rated, in ``comp``; ``dense``: this search gave up, so the next one gives up at an 8th
    of the flows it would otherwise); the seeds are used up. ``mm_work``, ``mm_share``: max-min's
    scratch for every active flow (:func:`railbed.maxmin.scratch_size`)."""
    if nseed == 0:
        return 0, dense
    limit = nact // (8 * DENSE) if dense else nact // DENSE  # after a search gave up, give up sooner
    ncomp = component_kernel(seeds, nseed, lhead, lnext, flow_links, nhops, lmark, fmark, epoch, queue, comp, limit)
    dense = ncomp < 0
    if dense:  # most active flows: all of them re-rated, no search further
        for x in range(nact):
            comp[x] = act[x]
        ncomp = nact
    for k in range(nseed):
        if seeds[k] >= 0:
            seeded[seeds[k]] = False
    maxmin_into(link_cap, flow_links, nhops, prio, cap, comp, ncomp, rates, left, count, state, mm_work, mm_share)
    for x in range(ncomp):  # every flow on these links is in comp: their loads are whole
        f = comp[x]
        for h in range(nhops[f]):
            link_load[flow_links[f, h]] += rates[f]
    for x in range(ncomp):
        f = comp[x]
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            peak_load[lk] = max(peak_load[lk], link_load[lk])
            link_load[lk] = 0.0
    return ncomp, dense


@njit(cache=True, _nrt=False)
def net_advance(
    now, t_limit, flow_links, nhops, rem, rates, rset, tset, ver, aseq, act, apos, nact, lhead, lnext, lprev, seeds,
    seeded, comp, ncomp, link_bits, fh_t, fh_v, fh_s, fh_n, finished,
):  # fmt: skip  # pragma: no cover - numba
    """A step's second half, after :func:`net_rerate` re-rated ``comp[:ncomp]``: advance from ``now``
    to the earliest finish or ``t_limit`` (module docstring). Returns (time reached, finished flows
    written to ``finished``, the seeds their links made, new ``fh_n``); the finish heap needs room for
    one entry per active flow (:func:`finish_room`)."""
    nchg = 0
    for x in range(ncomp):
        f = comp[x]
        if rates[f] != rset[f]:  # settled at the old rate; its finish moves (else it stands, to the bit)
            _settle(f, now, flow_links, nhops, rem, rset, tset, link_bits)
            rset[f] = rates[f]
            ver[f] += 1
            if finish_time(now, rem[f], rates[f]) < np.inf:
                comp[nchg] = f  # comp[x] is read: comp[:nchg] now holds the new finishes
                nchg += 1
    if nchg > 0:
        fh_n = _new_finishes(fh_t, fh_v, fh_s, fh_n, comp, nchg, now, rem, rates, ver)
    while fh_n > 0 and fh_v[0] != ver[fh_s[0]]:  # finishes of an older rate
        fh_n = heap_pop(fh_t, fh_v, fh_s, fh_n)
    t_min = fh_t[0] if fh_n > 0 else np.inf
    if t_min == np.inf and t_limit == np.inf:
        return np.inf, 0, 0, fh_n
    if t_min > t_limit:
        return t_limit, 0, 0, fh_n
    limit = t_min * (1.0 + EPS)
    nfin, fh_n = _take_finishes(fh_t, fh_v, fh_s, fh_n, limit, ver, finished)
    sort_prefix(finished, nfin, aseq)
    nseed = 0
    for x in range(nfin):
        f = finished[x]
        moved = max(rem[f], 0.0)  # all it had left at tset
        for h in range(nhops[f]):
            link_bits[flow_links[f, h]] += moved
        rem[f] = 0.0
        tset[f] = t_min
        ver[f] += 1
        nseed = _leave(f, flow_links, nhops, lhead, lnext, lprev, seeds, nseed, seeded)
        nact -= 1  # act[apos[f]] takes the last active flow's place
        act[apos[f]] = act[nact]
        apos[act[nact]] = apos[f]
    return t_min, nfin, nseed, fh_n


@njit(cache=True, _nrt=False)
def _new_finishes(fh_t, fh_v, fh_s, fh_n, chg, nchg, now, rem, rates, ver):  # pragma: no cover - numba
    """The finish heap with the new finishes of the flows ``chg[:nchg]`` (whose versions were
    bumped): pushed one by one, or, when they are many against the heap (a step that re-rated
    most flows), the heap rebuilt of its entries still current and the new ones (``heapify``).
    Either way the heap holds the same current entries. Returns the new size."""
    if 4 * nchg < fh_n:
        for x in range(nchg):
            f = chg[x]
            fh_n = heap_push(fh_t, fh_v, fh_s, fh_n, finish_time(now, rem[f], rates[f]), ver[f], f)
        return fh_n
    keep = 0
    for k in range(fh_n):
        if fh_v[k] == ver[fh_s[k]]:
            fh_t[keep], fh_v[keep], fh_s[keep] = fh_t[k], fh_v[k], fh_s[k]
            keep += 1
    for x in range(nchg):
        f = chg[x]
        fh_t[keep], fh_v[keep], fh_s[keep] = finish_time(now, rem[f], rates[f]), ver[f], f
        keep += 1
    heapify(fh_t, fh_v, fh_s, keep)
    return keep


@njit(cache=True, _nrt=False)
def _take_finishes(fh_t, fh_v, fh_s, fh_n, limit, ver, finished):  # pragma: no cover - numba
    """The flows whose current finish is at most ``limit`` out of the heap into ``finished``
    (in no particular order): popped one by one, or, once they are more than a 16th of the heap
    (half the flows of a ring ending together), the rest in one pass over the heap, which is then
    rebuilt (``heapify``) of the entries left. Returns (their number, the new heap size)."""
    nfin = 0
    budget = fh_n // 16 + 1
    while fh_n > 0 and fh_t[0] <= limit and budget > 0:
        f = fh_s[0]
        if fh_v[0] == ver[f]:
            finished[nfin] = f
            nfin += 1
        fh_n = heap_pop(fh_t, fh_v, fh_s, fh_n)
        budget -= 1
    if fh_n == 0 or fh_t[0] > limit:
        return nfin, fh_n
    keep = 0
    for k in range(fh_n):
        f = fh_s[k]
        if fh_v[k] != ver[f]:  # of an older rate: dropped
            continue
        if fh_t[k] <= limit:
            finished[nfin] = f
            nfin += 1
        else:
            fh_t[keep], fh_v[keep], fh_s[keep] = fh_t[k], fh_v[k], f
            keep += 1
    heapify(fh_t, fh_v, fh_s, keep)
    return nfin, keep


@njit(cache=True)
def finish_room(fh_t, fh_v, fh_s, fh_n, need, ver):  # pragma: no cover - numba
    """The finish heap with room for ``need`` more entries: entries of an older version dropped,
    in arrays of twice the entries and ``need`` (so this runs after many pushes, not each). Returns
    (fh_t, fh_v, fh_s, fh_n)."""
    if fh_n + need <= fh_t.shape[0]:
        return fh_t, fh_v, fh_s, fh_n
    valid = 0
    for k in range(fh_n):
        if fh_v[k] == ver[fh_s[k]]:
            valid += 1
    size = max(fh_t.shape[0], 2 * (valid + need))
    t2, v2, s2 = np.zeros(size), np.zeros(size, np.int64), np.zeros(size, np.int32)
    keep = 0
    for k in range(fh_n):
        if fh_v[k] == ver[fh_s[k]]:
            keep = heap_push(t2, v2, s2, keep, fh_t[k], fh_v[k], fh_s[k])
    return t2, v2, s2, keep
