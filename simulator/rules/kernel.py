"""The rules engine's kernel: a whole run in one numba function (:func:`run_kernel`), and its
helpers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.contention import meter_step
from simulator.network import advance_kernel
from simulator.rules.model import LOCAL, NET, TASK

# ---------------------------------------------------------------- kernel helpers
# Timers: a binary heap on arrays ordered by (time, sequence number), as simulator.run's heapq.


@njit(cache=True)
def _heap_push(ht, hs, hi, size, t, seq, item):  # pragma: no cover - numba
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


@njit(cache=True)
def _heap_pop(ht, hs, hi, size):  # pragma: no cover - numba
    """Remove the top (the caller read it at index 0); returns the new size."""
    size -= 1
    ht[0], hs[0], hi[0] = ht[size], hs[size], hi[size]
    k = 0
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
    return size


@njit(cache=True)
def _grow2(a, fill):  # pragma: no cover - numba
    new = np.full((2 * a.shape[0], a.shape[1]), fill, a.dtype)
    new[: a.shape[0]] = a
    return new


@njit(cache=True)
def _grow1(a, fill):  # pragma: no cover - numba
    new = np.full(2 * a.shape[0], fill, a.dtype)
    new[: a.shape[0]] = a
    return new


@njit(cache=True)
def _room(a, need):  # pragma: no cover - numba
    """``a``, or a copy at least twice as long if it is shorter than ``need``."""
    if need <= a.shape[0]:
        return a
    new = np.zeros(max(need, 2 * a.shape[0]), a.dtype)
    new[: a.shape[0]] = a
    return new


# The fluid network (as simulator.network.NumbaNetwork) is one tuple of arrays, ``net``: per slot its
# flow's links, hops, class, cap, bits left and rate; the active list, slot states, the finished
# list, each slot's item, the free list, the finished items; the contention meter's type id and
# contended flag. FIN_ITEMS: the finished items' place in it.
FIN_ITEMS = 11


@njit(cache=True)
def _new_network(slots, width):  # pragma: no cover - numba
    """``net`` with ``slots`` slots, every one free."""
    free = np.zeros(slots, np.int64)
    for k in range(slots):
        free[k] = slots - 1 - k
    return (
        np.full((slots, width), -1, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
        np.full(slots, np.inf), np.zeros(slots), np.zeros(slots), np.zeros(slots, np.int64), np.zeros(slots, np.int8),
        np.zeros(slots, np.int64), np.full(slots, -1, np.int64), free, np.zeros(slots, np.int64),
        np.zeros(slots, np.int64), np.zeros(slots, np.bool_),
    )  # fmt: skip


@njit(cache=True)
def _grow_net(net):  # pragma: no cover - numba
    """``net`` with twice the slots (as NumbaNetwork._alloc); the new slots are free."""
    flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items, sftype, scont = net
    old = rem.shape[0]
    out = (
        _grow2(flow_links, -1), _grow1(nhops, 0), _grow1(sprio, 0), _grow1(scap, np.inf), _grow1(rem, 0.0),
        _grow1(rates, 0.0), _grow1(act, 0), _grow1(state, 0), _grow1(finished, 0), _grow1(slot_item, -1),
        _grow1(free, 0), _grow1(fin_items, 0), _grow1(sftype, 0), _grow1(scont, False),
    )  # fmt: skip
    for k in range(old):
        out[10][k] = 2 * old - 1 - k
    return out


@njit(cache=True)
def _join(i, r, slots, nfree, nact, net, route_links, route_hops, prio, cap, bits, metered, ftype):
    """Flow ``i`` joins the network on route ``r`` in the last free slot, the slots doubled first
    if none is free. Returns ``slots``, ``nfree``, ``nact``, ``net``."""  # pragma: no cover - numba
    if nfree == 0:
        slots *= 2
        net = _grow_net(net)
        nfree = slots // 2
    flow_links, nhops, sprio, scap, rem, _, act, _, _, slot_item, free, _, sftype, _ = net
    nfree -= 1
    sl = free[nfree]
    flow_links[sl, :] = route_links[r]
    nhops[sl] = route_hops[r]
    sprio[sl] = prio[i]
    scap[sl] = cap[i]
    rem[sl] = bits[i]
    slot_item[sl] = i
    if metered:
        sftype[sl] = ftype[i]
    act[nact] = sl
    return slots, nfree, nact + 1, net


@njit(cache=True)
def _start_flow(i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev):
    """Start flow ``i`` (Dispatcher._start_flow): a same-server one joins this batch's 0 s waits,
    a network one the flows started (and, when rules hold flows, its NIC's active list).
    Returns the new ``nlocal``, ``nstarted``."""  # pragma: no cover - numba
    start_t[i] = now
    if kind[i] == LOCAL:
        local[nlocal] = i
        return nlocal + 1, nstarted
    started[nstarted] = i
    if any_rule:
        m = nic[i]
        a_prev[i] = -1
        a_next[i] = a_head[m]
        if a_head[m] >= 0:
            a_prev[a_head[m]] = i
        a_head[m] = i
    return nlocal, nstarted + 1


@njit(cache=True)
def _counts(kind, missing, bar, queued):  # pragma: no cover - numba
    """Items ready at the start, tasks, and whether a Rule holds any flow (``bar > 0``), and any queued."""
    n0 = 0
    ntasks = 0
    any_rule = False
    any_queued = False
    for i in range(kind.shape[0]):
        if missing[i] == 0:
            n0 += 1
        if kind[i] == TASK:
            ntasks += 1
        if bar[i] > 0:
            any_rule = True
            if queued[i]:
                any_queued = True
    return n0, ntasks, any_rule, any_queued


@njit(cache=True)
def _initially_ready(missing, w0):  # pragma: no cover - numba
    """The items without dependencies, in item order, in a work list of at least ``w0``
    entries, and their count."""
    readyl = np.zeros(w0, np.int32)
    nready = 0
    for i in range(missing.shape[0]):
        if missing[i] == 0:
            readyl[nready] = i
            nready += 1
    return readyl, nready


@njit(cache=True)
def _step_network(now, t_limit, dirty, nact, nfree, net, link_cap, left, lcount, link_load, link_bits, peak_load, stats,
                  metered, meter):  # fmt: skip  # pragma: no cover - numba
    """The network advances to the earliest of its next finish and ``t_limit``, the next timer
    (Simulation._run; :func:`simulator.network.advance_kernel`): active flows and rate updates
    counted in ``stats[3]``, ``stats[4]``, contention metered (``meter``: meter_step's arrays);
    the finished flows' items go to the finished items in the network's order and their slots
    are freed. Returns the time reached (inf: active flows have no rate), the flows finished,
    ``nact``, ``dirty``, ``nfree``."""
    flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items, sftype, scont = net
    m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes = meter
    nfin = 0
    t = t_limit
    if nact > 0:
        stats[3] += nact
        if dirty:
            stats[4] += 1
        t, nfin, nact = advance_kernel(
            now, t_limit, dirty, link_cap, flow_links, nhops, sprio, scap, rem, rates, act, nact,
            left, lcount, state, link_load, link_bits, peak_load, finished,
        )  # fmt: skip
        if t == np.inf:
            return t, nfin, nact, dirty, nfree
        if metered:
            meter_step(
                link_cap, flow_links, nhops, sprio, scap, rates, act, nact, finished, nfin, sftype, dirty,
                scont, t - now, m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot,
                m_classes,
            )  # fmt: skip
        dirty = nfin > 0
    for k in range(nfin):
        sl = finished[k]
        fin_items[k] = slot_item[sl]
        slot_item[sl] = -1
        free[nfree] = sl
        nfree += 1
    return t, nfin, nact, dirty, nfree


@njit(cache=True)
def _finish(i, now, kind, device, busy, nic, any_rule, a_head, a_next, a_prev, end_t, dep_ptr, dep_idx, missing,
            has_gates, parent, kids_left, subready, nsub, readyl, nready, done, events):  # fmt: skip
    """Item ``i`` ended (Dispatcher._finish): a network flow leaves its NIC's active list, a task
    frees its device; dependents whose dependencies are all done become ready (a sub-flow in
    ``subready``: it starts at once); an original ends with its last sub-flow, and then its own
    dependents are done with it. Returns the device freed (-1: none), ``nsub``, ``readyl``,
    ``nready``, ``done``, ``events``."""  # pragma: no cover - numba
    freed = -1
    if kind[i] == NET:
        events += 1
        if any_rule:
            m = nic[i]
            if a_prev[i] >= 0:
                a_next[a_prev[i]] = a_next[i]
            else:
                a_head[m] = a_next[i]
            if a_next[i] >= 0:
                a_prev[a_next[i]] = a_prev[i]
    elif kind[i] == TASK:
        freed = device[i]
        busy[freed] -= 1
    end_t[i] = now
    done += 1
    while True:  # i's dependents; then, if i was its original's last sub-flow, the original's
        readyl = _room(readyl, nready + dep_ptr[i + 1] - dep_ptr[i])
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            j = dep_idx[e]
            missing[j] -= 1
            if missing[j] == 0:
                if has_gates and parent[j] >= 0:
                    subready[nsub] = j
                    nsub += 1
                else:
                    readyl[nready] = j
                    nready += 1
        if not has_gates or parent[i] < 0:
            break
        i = parent[i]
        kids_left[i] -= 1
        if kids_left[i] > 0:
            break
        end_t[i] = now
        done += 1
    return freed, nsub, readyl, nready, done, events


@njit(cache=True)
def _admit(now, readyl, nready, release, ht, hs, hi, hsize, seq, ready_t, has_gates, gate, gcount, queued, held,
           nheld):  # fmt: skip  # pragma: no cover - numba
    """Newly ready items join the held list in item order (Dispatcher._settle): one whose release
    time is later waits for it on a timer; of a gate's members only the first (where the gate
    splits) and those whose keys count for a NIC's best are held, the others only counted.
    Returns ``hsize``, ``seq``, ``nheld``."""
    if nready > 1:
        readyl[:nready] = np.sort(readyl[:nready])
    for x in range(nready):
        i = readyl[x]
        if release.shape[0] > 0 and release[i] > now:  # not ready before its release time
            hsize = _heap_push(ht, hs, hi, hsize, now + (release[i] - now), seq, i)
            seq += 1
            continue
        ready_t[i] = now
        if has_gates and gate[i] >= 0:
            gcount[gate[i]] += 1
            if gcount[gate[i]] > 1 and not queued[i]:
                # a gate's first member holds its place in the held order (where the gate
                # splits); the others only count, unless their keys count for a NIC's best
                continue
        held[nheld] = i
        nheld += 1
    return hsize, seq, nheld


@njit(cache=True)
def _queue_task(i, d, q_head, q_tail, q_next, touched, ntouched):  # pragma: no cover - numba
    """Task ``i`` joins its device ``d``'s FIFO queue; ``d`` is touched (its queue runs this
    settling). Returns ``ntouched``."""
    if q_tail[d] < 0:
        q_head[d] = i
    else:
        q_next[q_tail[d]] = i
    q_tail[d] = i
    q_next[i] = -1
    for x in range(ntouched):
        if touched[x] == d:
            return ntouched
    touched[ntouched] = d
    return ntouched + 1


@njit(cache=True)
def _holds(i, bar, queued, key, nic, best, a_head, a_next):  # pragma: no cover - numba
    """Flow ``i``'s Rule holds it: a network flow active on its NIC has a smaller key than its
    bar, or (``queued``) a held queued flow there had one when the round began."""
    if bar[i] <= 0:
        return False
    m = nic[i]
    if queued[i] and best[m] < bar[i]:
        return True
    f = a_head[m]
    while f >= 0:
        if key[f] < bar[i]:
            return True
        f = a_next[f]
    return False


@njit(cache=True)
def _split_gate(g, now, gate_sub, parent, missing, ready_t, start_t, kind, local, nlocal, started, nstarted, any_rule,
                nic, a_head, a_next, a_prev):  # fmt: skip  # pragma: no cover - numba
    """Gate ``g`` splits (Dispatcher._split): its originals start, its sub-flows without
    dependencies start. Returns ``nlocal``, ``nstarted``."""
    for x in range(gate_sub[g], gate_sub[g + 1]):
        start_t[parent[x]] = now
    for x in range(gate_sub[g], gate_sub[g + 1]):
        missing[x] -= 1
        if missing[x] == 0:
            ready_t[x] = now
            nlocal, nstarted = _start_flow(
                x, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
            )
    return nlocal, nstarted


@njit(cache=True)
def _offer_held(now, held, nheld, held2, kind, device, q_head, q_tail, q_next, touched, ntouched, has_gates, gate,
                gsplit, gcount, gate_size, gate_sub, parent, missing, ready_t, start_t, bar, key, queued, nic, best,
                best_set, any_queued, any_rule, a_head, a_next, a_prev, local, nlocal, started,
                nstarted):  # fmt: skip  # pragma: no cover - numba
    """Dispatcher._offer_held: every held item in order, the rules deciding with ``best`` of the
    round (per NIC, the best key of a held queued flow when the round began): a task joins its
    device's queue, a gate splits once all its members are held, a flow starts unless its Rule
    holds it. The items still held go to ``held2``. Returns their count, ``ntouched``,
    ``nlocal``, ``nstarted``."""
    big = np.iinfo(np.int64).max
    nb = 0
    if any_queued:
        for h in range(nheld):
            i = held[h]
            if kind[i] != TASK and queued[i]:
                m = nic[i]
                if best[m] == big:
                    best_set[nb] = m
                    nb += 1
                if key[i] < best[m]:
                    best[m] = key[i]
    keep = 0
    for h in range(nheld):
        i = held[h]
        if kind[i] == TASK:
            ntouched = _queue_task(i, device[i], q_head, q_tail, q_next, touched, ntouched)
            continue
        if has_gates and gate[i] >= 0:
            g = gate[i]
            if gsplit[g]:  # split earlier in this round: no longer held
                continue
            if gcount[g] < gate_size[g]:
                held2[keep] = i
                keep += 1
                continue
            gsplit[g] = True
            nlocal, nstarted = _split_gate(
                g, now, gate_sub, parent, missing, ready_t, start_t, kind, local, nlocal, started, nstarted, any_rule,
                nic, a_head, a_next, a_prev,
            )  # fmt: skip
            continue
        if _holds(i, bar, queued, key, nic, best, a_head, a_next):
            held2[keep] = i
            keep += 1
            continue
        nlocal, nstarted = _start_flow(
            i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
        )
    for b in range(nb):
        best[best_set[b]] = big
    return keep, ntouched, nlocal, nstarted


@njit(cache=True)
def _run_queues(now, touched, ntouched, q_head, q_tail, q_next, busy, device_cap, start_t, waits):
    """Dispatcher._run_queue for the touched devices in order: tasks start while their device has
    room. Returns how many started (in ``waits``)."""  # pragma: no cover - numba
    if ntouched > 1:
        touched[:ntouched] = np.sort(touched[:ntouched])
    nwaits = 0
    for x in range(ntouched):
        d = touched[x]
        while q_head[d] >= 0 and busy[d] < device_cap[d]:
            i = q_head[d]
            q_head[d] = q_next[i]
            if q_head[d] < 0:
                q_tail[d] = -1
            busy[d] += 1
            start_t[i] = now
            waits[nwaits] = i
            nwaits += 1
    return nwaits


@njit(cache=True)
def _do(now, started, nstarted, waits, nwaits, local, nlocal, ht, hs, hi, hsize, seq, slots, nfree, nact, net, dirty,
        route, route_latency, route_links, route_hops, prio, cap, bits, duration, metered, ftype):  # fmt: skip
    """A settling's actions, in order (Simulation._do): the flows started join the network, or
    after their route's latency (a timer); timers for the tasks started (their duration) and the
    same-server flows (0 s). The heap has room. Returns ``hsize``, ``seq``, ``slots``, ``nfree``,
    ``nact``, ``net``, ``dirty``."""  # pragma: no cover - numba
    for x in range(nstarted):
        i = started[x]
        r = route[i]
        if route_latency[r] > 0:
            hsize = _heap_push(ht, hs, hi, hsize, now + route_latency[r], seq, i)
            seq += 1
            continue
        slots, nfree, nact, net = _join(i, r, slots, nfree, nact, net, route_links, route_hops, prio, cap, bits,
                                        metered, ftype)  # fmt: skip
        dirty = True
    for x in range(nwaits):
        i = waits[x]
        hsize = _heap_push(ht, hs, hi, hsize, now + duration[i], seq, i)
        seq += 1
    for x in range(nlocal):
        hsize = _heap_push(ht, hs, hi, hsize, now, seq, local[x])
        seq += 1
    return hsize, seq, slots, nfree, nact, net, dirty


@njit(cache=True, nogil=True)
def run_kernel(
    kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, missing, dep_ptr, dep_idx, device_cap,
    route_links, route_hops, route_latency, link_cap, nnics, gate, gate_size, gate_sub, parent, children, ready_t,
    start_t, end_t, link_bits, peak_load, stats, metered, ftype, m_hit, m_total, m_load, m_mask, m_top, m_nhit,
    m_ntot, m_classes, work, release, ctl,
):  # fmt: skip  # pragma: no cover - numba
    """The whole run (:mod:`simulator.rules`). Returns 0, or 1 (nothing pending), 2 (no progress), 3
    (stalled), 4 (stopped: ``ctl[0]`` was set by another thread, ``simulator.rules.run``'s
    ``_interruptible``; ``ctl[1]`` is the model time reached). ``metered``: measure contention
    (simulator.contention.meter_step) by the items' type ids ``ftype``. ``release``: items'
    release times (empty: none); an item whose deps are done before its release gets a timer
    then (Dispatcher's ``/release/`` wait), and is ready when it pops. Runs without the GIL.
    Item indices are int32; work lists start small and double when full (:func:`_room`)."""
    n = kind.shape[0]
    ndev = device_cap.shape[0]
    nlinks = link_cap.shape[0]
    n0, ntasks, any_rule, any_queued = _counts(kind, missing, bar, queued)
    w0 = max(n0, work, 1)
    ht, hs, hi = np.zeros(w0), np.zeros(w0, np.int64), np.zeros(w0, np.int32)  # timers: (time, seq) -> item
    hsize = seq = 0
    q_head = np.full(max(ndev, 1), -1, np.int64)  # device FIFO queues as linked lists
    q_tail = np.full(max(ndev, 1), -1, np.int64)
    q_next = np.full(max(n, 1), -1, np.int32)
    busy = np.zeros(max(ndev, 1), np.int64)
    a_head = np.full(max(nnics, 1), -1, np.int64)  # network flows active per source NIC, doubly linked
    a_next = np.full(max(n, 1), -1, np.int32)
    a_prev = np.full(max(n, 1), -1, np.int32)
    best = np.full(max(nnics, 1), np.iinfo(np.int64).max, np.int64)  # per NIC: the best queued key held
    best_set = np.zeros(max(nnics, 1), np.int32)  # the NICs best[] was set for in this round
    has_gates = gate_size.shape[0] > 0  # gates: members held per gate, split yet, sub-flows left per original
    gcount = np.zeros(gate_size.shape[0], np.int32)
    gsplit = np.zeros(gate_size.shape[0], np.bool_)
    kids_left = children.copy()
    nsubs = n - gate_sub[0] if has_gates else 0  # sub-flows (items gate_sub[0]..)
    subready = np.zeros(max(nsubs, 1), np.int32)
    slots = 1024  # the fluid network
    net = _new_network(slots, route_links.shape[1])
    meter = (m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes)
    nfree, nact, dirty = slots, 0, False
    left, lcount, link_load = np.zeros(nlinks), np.zeros(nlinks, np.int64), np.zeros(nlinks)
    held, held2 = np.zeros(w0, np.int32), np.zeros(w0, np.int32)  # work lists
    readyl, nready = _initially_ready(missing, w0)
    started, local = np.zeros(w0, np.int32), np.zeros(w0, np.int32)
    waits = np.zeros(max(ntasks, 1), np.int32)  # tasks started in one settling: at most all
    touched = np.zeros(max(ndev, 1), np.int64)
    nsub = nheld = done = events = steps = fin_pos = fin_n = code = 0
    now = 0.0
    timers = False  # popping the timers due at `now`
    report = -1  # the item whose end is reported; -1: the run's beginning
    first = True
    while True:
        if ctl[0] != 0.0:  # asked to stop (Ctrl-C in the calling thread)
            ctl[1] = now
            code = 4
            break
        # ------------------------------------------------ the next report (Simulation._run)
        if first:
            first = False
        elif fin_pos < fin_n:
            report = net[FIN_ITEMS][fin_pos]
            fin_pos += 1
        elif timers and hsize > 0 and ht[0] <= now:
            i = hi[0]
            hsize = _heap_pop(ht, hs, hi, hsize)
            events += 1
            if release.shape[0] > 0 and np.isnan(ready_t[i]):  # its release time came
                now = max(now, release[i])
                readyl = _room(readyl, nready + 1)
                readyl[nready] = i
                nready += 1
                report = -1
            elif kind[i] != NET:
                report = i
            else:  # a flow's first byte crossed its latency: it joins the network
                slots, nfree, nact, net = _join(i, route[i], slots, nfree, nact, net, route_links, route_hops, prio,
                                                cap, bits, metered, ftype)  # fmt: skip
                dirty = True
                continue
        else:
            timers = False
            if done == n:
                break
            t_limit = ht[0] if hsize > 0 else np.inf
            if t_limit == np.inf and nact == 0:
                code = 1
                break
            t, nfin, nact, dirty, nfree = _step_network(
                now, t_limit, dirty, nact, nfree, net, link_cap, left, lcount, link_load, link_bits, peak_load, stats,
                metered, meter,
            )  # fmt: skip
            if t == np.inf:
                code = 2
                break
            steps += 1
            now = t
            if nfin > 0:
                fin_pos, fin_n = 0, nfin
            else:
                timers = True
            continue
        # ------------------------------------------------ the report: an item ended (Dispatcher._finish)
        freed = -1
        if report >= 0:
            freed, nsub, readyl, nready, done, events = _finish(
                report, now, kind, device, busy, nic, any_rule, a_head, a_next, a_prev, end_t, dep_ptr, dep_idx,
                missing, has_gates, parent, kids_left, subready, nsub, readyl, nready, done, events,
            )  # fmt: skip
        # ------------------------------------------------ Dispatcher._settle(now, ready, freed)
        held, held2 = _room(held, nheld + nready), _room(held2, nheld + nready)
        # flows started in this settling: the held ones, the sub-flows ready, those of gates split
        started = _room(started, nheld + nready + nsub + nsubs)
        local = _room(local, nheld + nready + nsub + nsubs)
        if release.shape[0] > 0 and hsize + nready > ht.shape[0]:
            ht, hs, hi = _room(ht, hsize + nready), _room(hs, hsize + nready), _room(hi, hsize + nready)
        hsize, seq, nheld = _admit(now, readyl, nready, release, ht, hs, hi, hsize, seq, ready_t, has_gates, gate,
                                   gcount, queued, held, nheld)  # fmt: skip
        nready = ntouched = nstarted = nlocal = 0
        if freed >= 0:
            touched[0] = freed
            ntouched = 1
        for x in range(nsub):  # sub-flows whose deps are done start at once (Dispatcher._start_sub)
            ready_t[subready[x]] = now
            nlocal, nstarted = _start_flow(subready[x], now, kind, start_t, local, nlocal, started, nstarted,
                                           any_rule, nic, a_head, a_next, a_prev)  # fmt: skip
        nsub = 0
        if nheld:
            nheld, ntouched, nlocal, nstarted = _offer_held(
                now, held, nheld, held2, kind, device, q_head, q_tail, q_next, touched, ntouched, has_gates, gate,
                gsplit, gcount, gate_size, gate_sub, parent, missing, ready_t, start_t, bar, key, queued, nic, best,
                best_set, any_queued, any_rule, a_head, a_next, a_prev, local, nlocal, started, nstarted,
            )  # fmt: skip
            held, held2 = held2, held
        nwaits = _run_queues(now, touched, ntouched, q_head, q_tail, q_next, busy, device_cap, start_t, waits)
        if nheld and nstarted == 0 and nwaits == 0 and nlocal == 0 and hsize == 0 and nact == 0 and fin_pos >= fin_n:
            code = 3  # (flows that finished in this network step and are not reported yet are still in flight)
            break
        # ------------------------------------------------ its actions, in order (Simulation._do)
        if hsize + nstarted + nwaits + nlocal > ht.shape[0]:
            need = hsize + nstarted + nwaits + nlocal
            ht, hs, hi = _room(ht, need), _room(hs, need), _room(hi, need)
        hsize, seq, slots, nfree, nact, net, dirty = _do(
            now, started, nstarted, waits, nwaits, local, nlocal, ht, hs, hi, hsize, seq, slots, nfree, nact, net,
            dirty, route, route_latency, route_links, route_hops, prio, cap, bits, duration, metered, ftype,
        )  # fmt: skip
    stats[0], stats[1], stats[2] = events, steps, done
    return code
