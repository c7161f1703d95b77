"""The rules engine's kernel: a whole run in one numba function (:func:`run_kernel`), and its
helpers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.contention import meter_component, meter_leave, meter_step
from simulator.rules.model import LOCAL, NET, TASK
from simulator.rules.network import finish_room, heap_pop, heap_push, net_advance, net_join, net_rerate, settle_all

# ---------------------------------------------------------------- kernel helpers


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


@njit(cache=True)
def _grow_net(flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items):
    """Twice the network's slots (as NumbaNetwork._alloc); the new slots are free."""  # pragma: no cover
    old = rem.shape[0]
    out = (
        _grow2(flow_links, -1), _grow1(nhops, 0), _grow1(sprio, 0), _grow1(scap, np.inf), _grow1(rem, 0.0),
        _grow1(rates, 0.0), _grow1(act, 0), _grow1(state, 0), _grow1(finished, 0), _grow1(slot_item, -1),
        _grow1(free, 0), _grow1(fin_items, 0),
    )  # fmt: skip
    for k in range(old):
        out[10][k] = 2 * old - 1 - k
    return out


@njit(cache=True)
def _grow_lazy(tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds):  # pragma: no cover - numba
    """The lazy network's per-slot arrays (simulator.rules.network) for twice the slots."""
    return (
        _grow1(tset, 0.0), _grow1(rset, 0.0), _grow1(ver, 0), _grow1(aseq, 0), _grow1(apos, 0), _grow1(fmark, 0),
        _grow1(comp, 0),
        _grow1(lnext, -1), _grow1(lprev, -1), _grow1(seeds, 0),
    )  # fmt: skip


@njit(cache=True, _nrt=False)
def _fill_slot(sl, i, r, flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops, prio, cap, bits):
    """Network slot ``sl`` takes flow item ``i`` on route ``r`` (its links, class, cap and bits)."""
    for h in range(flow_links.shape[1]):
        flow_links[sl, h] = route_links[r, h]
    nhops[sl] = route_hops[r]
    sprio[sl] = prio[i]
    scap[sl] = cap[i]
    rem[sl] = bits[i]
    slot_item[sl] = i


@njit(cache=True, _nrt=False)
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


@njit(cache=True, nogil=True)
def run_kernel(
    kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, missing, dep_ptr, dep_idx, device_cap,
    route_links, route_hops, route_latency, link_cap, nnics, gate, gate_size, gate_sub, parent, children, ready_t,
    start_t, end_t, link_bits, peak_load, stats, metered, ftype, m_hit, m_total, m_load, m_mask, m_top, m_nhit,
    m_ntot, m_classes, work, release, ctl,
):  # fmt: skip  # pragma: no cover - numba
    """The whole run (module docstring). Returns 0, or 1 (nothing pending), 2 (no progress), 3 (stalled),
    4 (stopped: ``ctl[0]`` was set by another thread, :func:`_interruptible`; ``ctl[1]`` is the model
    time reached). ``metered``: measure contention (simulator.contention: ``meter_component`` over the
    flows each step re-rates, ``meter_step`` for the time) by the items' type ids ``ftype``.
    ``release``: items' release times (empty: none); an item whose deps are done before its release
    gets a timer then (Dispatcher's ``/release/`` wait), and is ready when it pops.
    Runs without the GIL."""
    n = kind.shape[0]
    ndev = device_cap.shape[0]
    nlinks = link_cap.shape[0]
    big = np.iinfo(np.int64).max
    # item indices in int32 (27 million items at 8192 GPUs: 4 bytes less per item and array)
    # timers: (time, seq) -> item; an item has at most one timer at a time
    # work lists start small and double when full (_room): at 8192 GPUs, sized per item, they
    # were 1.2 GB (27 million items) where a few thousand entries are in use at a time
    n0 = 0
    ntasks = 0
    for i in range(n):
        if missing[i] == 0:
            n0 += 1
        if kind[i] == TASK:
            ntasks += 1
    w0 = max(n0, work, 1)
    ht = np.zeros(w0)
    hs = np.zeros(w0, np.int64)
    hi = np.zeros(w0, np.int32)
    hsize = 0
    seq = 0
    # device FIFO queues as linked lists
    q_head = np.full(max(ndev, 1), -1, np.int64)
    q_tail = np.full(max(ndev, 1), -1, np.int64)
    q_next = np.full(max(n, 1), -1, np.int32)
    busy = np.zeros(max(ndev, 1), np.int64)
    # network flows active (started, to their flow_done) per source NIC, doubly linked
    a_head = np.full(max(nnics, 1), -1, np.int64)
    a_next = np.full(max(n, 1), -1, np.int32)
    a_prev = np.full(max(n, 1), -1, np.int32)
    best = np.full(max(nnics, 1), big, np.int64)  # per NIC: the best queued key held at round start
    best_set = np.zeros(max(nnics, 1), np.int32)  # the NICs best[] was set for in this round
    # gates (Rule.gate): members held per gate, split yet, sub-flows left per original
    has_gates = gate_size.shape[0] > 0
    gcount = np.zeros(gate_size.shape[0], np.int32)
    gsplit = np.zeros(gate_size.shape[0], np.bool_)
    kids_left = children.copy()
    nsubs = n - gate_sub[0] if has_gates else 0  # sub-flows (items gate_sub[0]..)
    subready = np.zeros(max(nsubs, 1), np.int32)
    nsub = 0
    any_rule = False
    any_queued = False
    for i in range(n):
        if bar[i] > 0:
            any_rule = True
            if queued[i]:
                any_queued = True
    # the fluid network, as simulator.fluid.network.NumbaNetwork
    slots = 1024
    flow_links = np.full((slots, route_links.shape[1]), -1, np.int64)
    nhops = np.zeros(slots, np.int64)
    sprio = np.zeros(slots, np.int64)
    scap = np.full(slots, np.inf)
    rem = np.zeros(slots)
    rates = np.zeros(slots)
    act = np.zeros(slots, np.int64)
    state = np.zeros(slots, np.int8)
    finished = np.zeros(slots, np.int64)
    slot_item = np.full(slots, -1, np.int64)
    free = np.zeros(slots, np.int64)
    fin_items = np.zeros(slots, np.int64)
    sftype = np.zeros(slots, np.int64)  # the contention meter: a slot's type id and whether it is contended
    scont = np.zeros(slots, np.bool_)
    scount = np.zeros(slots, np.bool_)  # ... and whether it is in the meter's counts (meter_component)
    for k in range(slots):
        free[k] = slots - 1 - k
    nfree = slots
    # the lazy network (simulator.rules.network): a step re-rates the flows an event reaches
    tset = np.zeros(slots)
    rset = np.zeros(slots)
    ver = np.zeros(slots, np.int64)
    aseq = np.zeros(slots, np.int64)
    apos = np.zeros(slots, np.int64)  # a slot's index in act (the lazy network keeps act unordered)
    fmark = np.zeros(slots, np.int64)
    comp = np.zeros(slots, np.int64)
    lnext = np.full(slots * route_links.shape[1], -1, np.int64)
    lprev = np.full(slots * route_links.shape[1], -1, np.int64)
    lhead = np.full(nlinks, -1, np.int64)
    seeds = np.zeros(nlinks + slots, np.int64)
    seeded = np.zeros(nlinks, np.bool_)
    lmark = np.zeros(nlinks, np.int64)
    queue = np.zeros(nlinks, np.int64)
    nseed = 0
    dense = False  # the last search for a component gave up (simulator.rules.network.net_rerate)
    joined = 0
    fh_t, fh_v, fh_s, fh_n = np.zeros(slots), np.zeros(slots, np.int64), np.zeros(slots, np.int32), 0
    nact = 0
    left = np.zeros(nlinks)
    lcount = np.zeros(nlinks, np.int64)
    link_load = np.zeros(nlinks)
    # work lists
    held = np.zeros(w0, np.int32)
    held2 = np.zeros(w0, np.int32)
    nheld = 0
    readyl = np.zeros(w0, np.int32)
    started = np.zeros(w0, np.int32)
    local = np.zeros(w0, np.int32)
    waits = np.zeros(max(ntasks, 1), np.int32)  # tasks started in one settling: at most all
    touched = np.zeros(max(ndev, 1), np.int64)
    done = 0
    events = 0
    steps = 0
    now = 0.0
    fin_pos = 0
    fin_n = 0
    timers = False  # popping the timers due at `now`
    report = -1  # the item whose end is reported; -1: the run's beginning
    nready = 0
    for i in range(n):
        if missing[i] == 0:
            readyl[nready] = i
            nready += 1
    first = True
    while True:
        if ctl[0] != 0.0:  # asked to stop (Ctrl-C in the calling thread)
            ctl[1] = now
            settle_all(now, slot_item, flow_links, nhops, rem, rset, tset, link_bits)
            stats[0], stats[1], stats[2] = events, steps, done
            return 4
        # ------------------------------------------------ the next report (Simulation._run)
        if first:
            first = False
        elif fin_pos < fin_n:
            report = fin_items[fin_pos]
            fin_pos += 1
        elif timers and hsize > 0 and ht[0] <= now:
            i = hi[0]
            hsize = heap_pop(ht, hs, hi, hsize)
            events += 1
            if release.shape[0] > 0 and np.isnan(ready_t[i]):  # its release time came
                now = max(now, release[i])
                if nready + 1 > readyl.shape[0]:
                    readyl = _room(readyl, nready + 1)
                readyl[nready] = i
                nready += 1
                report = -1
            elif kind[i] != NET:
                report = i
            else:  # a flow's first byte crossed its latency: it joins the network
                if nfree == 0:
                    slots *= 2
                    flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items = (
                        _grow_net(
                            flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free,
                            fin_items,
                        )
                    )  # fmt: skip
                    nfree = slots // 2
                    sftype, scont, scount = _grow1(sftype, 0), _grow1(scont, False), _grow1(scount, False)
                    tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds = _grow_lazy(
                        tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds
                    )
                nfree -= 1
                sl = free[nfree]
                _fill_slot(sl, i, route[i], flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops,
                           prio, cap, bits)  # fmt: skip
                act[nact] = sl
                apos[sl] = nact
                if metered:
                    sftype[sl] = ftype[i]
                nseed = net_join(sl, joined, now, flow_links, nhops, lhead, lnext, lprev, tset, aseq, rset, seeds,
                                 nseed, seeded)  # fmt: skip
                joined += 1
                nact += 1
                continue
        else:
            timers = False
            if done == n:
                break
            t_limit = ht[0] if hsize > 0 else np.inf
            if t_limit == np.inf and nact == 0:
                stats[0], stats[1], stats[2] = events, steps, done
                return 1
            nfin = 0
            t = t_limit
            if nact > 0:
                stats[3] += nact
                fh_t, fh_v, fh_s, fh_n = finish_room(fh_t, fh_v, fh_s, fh_n, nact, ver)
                ncomp, dense = net_rerate(
                    link_cap, flow_links, nhops, sprio, scap, rates, act, nact, state, lhead, lnext, seeds, nseed,
                    seeded, lmark, fmark, steps + 1, queue, comp, left, lcount, link_load, peak_load, dense,
                )  # fmt: skip
                nseed = 0
                if ncomp > 0:
                    stats[4] += 1
                    stats[5] += ncomp
                    if metered:
                        meter_component(
                            link_cap, flow_links, nhops, sprio, scap, rates, comp, ncomp, sftype, scont, scount, m_load,
                            m_mask, m_top, m_classes, m_nhit, m_ntot,
                        )  # fmt: skip
                t, nfin, nseed, fh_n = net_advance(
                    now, t_limit, flow_links, nhops, rem, rates, rset, tset, ver, aseq, act, apos, nact, lhead, lnext,
                    lprev, seeds, seeded, comp, ncomp, link_bits, fh_t, fh_v, fh_s, fh_n, finished,
                )  # fmt: skip
                if t == np.inf:
                    stats[0], stats[1], stats[2] = events, steps, done
                    return 2
                nact -= nfin
                if metered:  # the step's time at the counts, then the flows that ended leave them
                    meter_step(
                        link_cap, flow_links, nhops, sprio, scap, rates, act, 0, finished, 0, sftype, False, scont,
                        t - now, m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes,
                    )  # fmt: skip
                    for k in range(nfin):
                        meter_leave(finished[k], sftype, scont, scount, m_nhit, m_ntot)
            steps += 1
            now = t
            if nfin > 0:
                for k in range(nfin):
                    sl = finished[k]
                    fin_items[k] = slot_item[sl]
                    slot_item[sl] = -1
                    free[nfree] = sl
                    nfree += 1
                fin_pos, fin_n = 0, nfin
            else:
                timers = True
            continue
        # ------------------------------------------------ the report: an item ended (Dispatcher._finish)
        freed = -1
        if report >= 0:
            i = report
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
                if nready + dep_ptr[i + 1] - dep_ptr[i] > readyl.shape[0]:
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
        # ------------------------------------------------ Dispatcher._settle(now, ready, freed)
        if nready > 1:
            readyl[:nready] = np.sort(readyl[:nready])
        if nheld + nready > held.shape[0]:  # (a call passing an array costs reference counting: not at every event)
            held = _room(held, nheld + nready)
            held2 = _room(held2, nheld + nready)
        # flows started in this settling: the held ones, the sub-flows ready, those of gates split
        if nheld + nready + nsub + nsubs > started.shape[0]:
            started = _room(started, nheld + nready + nsub + nsubs)
            local = _room(local, nheld + nready + nsub + nsubs)
        if release.shape[0] > 0 and hsize + nready > ht.shape[0]:
            ht, hs, hi = _room(ht, hsize + nready), _room(hs, hsize + nready), _room(hi, hsize + nready)
        for x in range(nready):
            i = readyl[x]
            if release.shape[0] > 0 and release[i] > now:  # not ready before its release time
                hsize = heap_push(ht, hs, hi, hsize, now + (release[i] - now), seq, i)
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
        nready = 0
        ntouched = 0
        if freed >= 0:
            touched[0] = freed
            ntouched = 1
        nstarted = 0
        nlocal = 0
        for x in range(nsub):  # sub-flows whose deps are done start at once (Dispatcher._start_sub)
            i = subready[x]
            ready_t[i] = now
            nlocal, nstarted = _start_flow(
                i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
            )
        nsub = 0
        if nheld:
            nb = 0  # _offer_held: every held item in order; the rules decide with best[] of the round
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
                    d = device[i]
                    if q_tail[d] < 0:
                        q_head[d] = i
                    else:
                        q_next[q_tail[d]] = i
                    q_tail[d] = i
                    q_next[i] = -1
                    seen = False
                    for x in range(ntouched):
                        if touched[x] == d:
                            seen = True
                    if not seen:
                        touched[ntouched] = d
                        ntouched += 1
                    continue
                if has_gates and gate[i] >= 0:
                    g = gate[i]
                    if gsplit[g]:  # split earlier in this round: no longer held
                        continue
                    if gcount[g] < gate_size[g]:
                        held2[keep] = i
                        keep += 1
                        continue
                    gsplit[g] = True  # the split (Dispatcher._split): originals start, free sub-flows start
                    for x in range(gate_sub[g], gate_sub[g + 1]):
                        start_t[parent[x]] = now
                    for x in range(gate_sub[g], gate_sub[g + 1]):
                        missing[x] -= 1
                        if missing[x] == 0:
                            ready_t[x] = now
                            nlocal, nstarted = _start_flow(
                                x, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head,
                                a_next, a_prev,
                            )  # fmt: skip
                    continue
                hold = False
                if bar[i] > 0:
                    m = nic[i]
                    if queued[i] and best[m] < bar[i]:
                        hold = True
                    else:
                        f = a_head[m]
                        while f >= 0:
                            if key[f] < bar[i]:
                                hold = True
                                break
                            f = a_next[f]
                if hold:
                    held2[keep] = i
                    keep += 1
                    continue
                nlocal, nstarted = _start_flow(
                    i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
                )
            for b in range(nb):
                best[best_set[b]] = big
            held, held2 = held2, held
            nheld = keep
        if ntouched > 1:
            touched[:ntouched] = np.sort(touched[:ntouched])
        nwaits = 0
        for x in range(ntouched):  # _run_queue, devices in order
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
        if nheld and nstarted == 0 and nwaits == 0 and nlocal == 0 and hsize == 0 and nact == 0 and fin_pos >= fin_n:
            # (flows that finished in this network step and are not reported yet are still in flight)
            stats[0], stats[1], stats[2] = events, steps, done
            return 3
        # ------------------------------------------------ its actions, in order (Simulation._do)
        if hsize + nstarted + nwaits + nlocal > ht.shape[0]:
            need = hsize + nstarted + nwaits + nlocal
            ht, hs, hi = _room(ht, need), _room(hs, need), _room(hi, need)
        for x in range(nstarted):
            i = started[x]
            r = route[i]
            if route_latency[r] > 0:
                hsize = heap_push(ht, hs, hi, hsize, now + route_latency[r], seq, i)
                seq += 1
                continue
            if nfree == 0:
                slots *= 2
                flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items = (
                    _grow_net(
                        flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items
                    )
                )  # fmt: skip
                nfree = slots // 2
                sftype, scont, scount = _grow1(sftype, 0), _grow1(scont, False), _grow1(scount, False)
                tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds = _grow_lazy(
                    tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds
                )
            nfree -= 1
            sl = free[nfree]
            _fill_slot(sl, i, r, flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops,
                       prio, cap, bits)  # fmt: skip
            act[nact] = sl
            apos[sl] = nact
            if metered:
                sftype[sl] = ftype[i]
            nseed = net_join(sl, joined, now, flow_links, nhops, lhead, lnext, lprev, tset, aseq, rset, seeds, nseed,
                             seeded)  # fmt: skip
            joined += 1
            nact += 1
        for x in range(nwaits):
            i = waits[x]
            hsize = heap_push(ht, hs, hi, hsize, now + duration[i], seq, i)
            seq += 1
        for x in range(nlocal):
            hsize = heap_push(ht, hs, hi, hsize, now, seq, local[x])
            seq += 1
    stats[0], stats[1], stats[2] = events, steps, done
    return 0
