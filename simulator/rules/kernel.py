"""The rules engine's kernel: a whole run (:func:`run_kernel`), and its helpers.

Reference counting. numba counts the references of every array a function passes to a call it
does not inline (an atomic increment and decrement per array and call); at an event's few
hundred nanoseconds that was about 40 % of a run, and it made splitting the kernel into
functions 1.7x slower (docs/performance.md). So the loop (:func:`_run`) and everything it calls
are compiled without it (``_nrt=False``) and allocate nothing: :func:`run_kernel` allocates every
array, and when a list or the network's slots are full, ``_run`` returns a ``GROW_*`` code at a
point it can resume from (its scalars kept in ``st``), ``run_kernel`` grows that array and calls
it again. The lists double, so this happens a few dozen times in a run.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from railbed.maxmin import scratch_size
from simulator.contention import meter_component, meter_leave, meter_step
from simulator.rules.arrays import (
    ANY_QUEUED,
    ANY_RULE,
    DO,
    FIRST,
    GROW_FH,
    GROW_HEAP,
    GROW_HELD,
    GROW_NET,
    GROW_READY,
    GROW_STARTED,
    JOIN,
    MAXDEPS,
    NFREE,
    NREADY,
    NST,
    NSUBS,
    SETTLE,
    SLOTS,
    TOP,
    grow,
    new_lazy,
    new_net,
    ready_at_start,
)
from simulator.rules.model import LOCAL, NET, TASK
from simulator.rules.network import (
    heap_pop,
    heap_push,
    net_advance,
    net_join,
    net_rerate,
    settle_all,
    sort_prefix,
)

# ---------------------------------------------------------------- kernel helpers


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


@njit(cache=True, _nrt=False)
def _finish(i, now, kind, device, busy, end_t, dep_ptr, dep_idx, missing, has_gates, parent, kids_left, subready,
            nsub, readyl, nready, any_rule, nic, a_head, a_next, a_prev):  # fmt: skip  # pragma: no cover - numba
    """Item ``i`` ended (Dispatcher._finish): its dependents whose deps are all done join ``readyl`` (or,
    sub-flows of a split gate, ``subready``); if it was its original's last sub-flow, the original ends
    too. ``readyl`` has room for two items' dependents. Returns (the device freed or -1, items ended,
    nready, nsub)."""
    freed = -1
    if kind[i] == NET:
        if any_rule:  # out of its NIC's active list
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
    ended = 1
    while True:
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
        ended += 1
    return freed, ended, nready, nsub


@njit(cache=True, _nrt=False)
def _admit(readyl, nready, now, release, ready_t, has_gates, gate, gcount, queued, held, nheld, ht, hs, hi, hsize,
           seq):  # fmt: skip  # pragma: no cover - numba
    """The items ready now (sorted) join the held list in item order (Dispatcher._settle), except those not
    released yet (a timer at their release time) and a gate's members after its first (they only count,
    unless their keys count for a NIC's best). Returns (nheld, hsize, seq)."""
    for x in range(nready):
        i = readyl[x]
        if release.shape[0] > 0 and release[i] > now:
            hsize = heap_push(ht, hs, hi, hsize, now + (release[i] - now), seq, i)
            seq += 1
            continue
        ready_t[i] = now
        if has_gates and gate[i] >= 0:
            gcount[gate[i]] += 1
            if gcount[gate[i]] > 1 and not queued[i]:
                continue
        held[nheld] = i
        nheld += 1
    return nheld, hsize, seq


@njit(cache=True, _nrt=False)
def _best_keys(held, nheld, kind, queued, nic, key, best, best_set, big):  # pragma: no cover - numba
    """Per NIC, the best key among its held queued flows (``best``, for this round); returns how many
    NICs were set (``best_set``)."""
    nb = 0
    for h in range(nheld):
        i = held[h]
        if kind[i] != TASK and queued[i]:
            m = nic[i]
            if best[m] == big:
                best_set[nb] = m
                nb += 1
            if key[i] < best[m]:
                best[m] = key[i]
    return nb


@njit(cache=True, _nrt=False)
def _holds(i, bar, queued, best, nic, key, a_head, a_next):  # pragma: no cover - numba
    """Does flow ``i``'s rule hold it (Rule.bar): a better key held at its NIC (queued rules) or active
    on it?"""
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


@njit(cache=True, _nrt=False)
def _queue_task(i, device, q_head, q_tail, q_next, touched, ntouched):  # pragma: no cover - numba
    """Task ``i`` joins its device's FIFO queue; returns ``ntouched`` with its device among the touched."""
    d = device[i]
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


@njit(cache=True, _nrt=False)
def _split(g, now, gate_sub, parent, start_t, missing, ready_t, kind, local, nlocal, started, nstarted, any_rule,
           nic, a_head, a_next, a_prev):  # fmt: skip  # pragma: no cover - numba
    """Gate ``g`` is full (Dispatcher._split): its originals start, its sub-flows free of deps start.
    Returns (nlocal, nstarted)."""
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


@njit(cache=True, _nrt=False)
def _offer(freed, subready, nsub, held, held2, nheld, now, kind, device, q_head, q_tail, q_next, touched, has_gates,
           gate, gsplit, gcount, gate_size, gate_sub, parent, missing, ready_t, start_t, bar, queued, key, best, nic,
           a_head, a_next, a_prev, local, started, any_rule, any_queued, best_set,
           big):  # fmt: skip  # pragma: no cover - numba
    """Dispatcher._settle after the ready items joined the held list (:func:`_admit`): the sub-flows whose
    deps are done start at once (_start_sub); then every held item is offered in order (_offer_held, the
    rules deciding with each NIC's best queued key of the round): tasks join their device's queue, a full
    gate splits, a flow its rule does not hold starts; the items still held go to ``held2``. ``touched``
    gets the devices to run (``freed``, if any, first). Returns (items still held, ntouched, nlocal,
    nstarted)."""
    ntouched = nlocal = nstarted = 0
    if freed >= 0:
        touched[0], ntouched = freed, 1
    for x in range(nsub):
        ready_t[subready[x]] = now
        nlocal, nstarted = _start_flow(
            subready[x], now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
        )
    nb = _best_keys(held, nheld, kind, queued, nic, key, best, best_set, big) if any_queued and nheld else 0
    keep = 0
    for h in range(nheld):
        i = held[h]
        if kind[i] == TASK:
            ntouched = _queue_task(i, device, q_head, q_tail, q_next, touched, ntouched)
        elif has_gates and gate[i] >= 0:
            g = gate[i]
            if gsplit[g]:  # split earlier in this round: no longer held
                continue
            if gcount[g] < gate_size[g]:
                held2[keep] = i
                keep += 1
                continue
            gsplit[g] = True
            nlocal, nstarted = _split(g, now, gate_sub, parent, start_t, missing, ready_t, kind, local, nlocal,
                                      started, nstarted, any_rule, nic, a_head, a_next, a_prev)  # fmt: skip
        elif _holds(i, bar, queued, best, nic, key, a_head, a_next):
            held2[keep] = i
            keep += 1
        else:
            nlocal, nstarted = _start_flow(
                i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
            )
    for b in range(nb):
        best[best_set[b]] = big
    return keep, ntouched, nlocal, nstarted


@njit(cache=True, _nrt=False)
def _run_queues(touched, ntouched, now, q_head, q_tail, q_next, busy, device_cap, start_t, waits):
    """Start the queued tasks the touched devices (sorted) have room for, devices in order (_run_queue).
    Returns how many started (``waits``)."""  # pragma: no cover - numba
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


@njit(cache=True, _nrt=False)
def _timers(now, started, nstarted, waits, nwaits, local, nlocal, route, route_latency, duration, ht, hs, hi,
            hsize, seq):  # fmt: skip  # pragma: no cover - numba
    """The settling's actions in order (Simulation._do): a flow behind a latency gets a timer (it joins
    the network when its first byte arrives), a task a timer at its end, a same-server flow one now.
    The flows that join the network now are moved to the front of ``started``.
    Returns (how many join now, hsize, seq)."""
    njoin = 0
    for x in range(nstarted):
        i = started[x]
        if route_latency[route[i]] > 0:
            hsize = heap_push(ht, hs, hi, hsize, now + route_latency[route[i]], seq, i)
            seq += 1
        else:
            started[njoin] = i
            njoin += 1
    for x in range(nwaits):
        hsize = heap_push(ht, hs, hi, hsize, now + duration[waits[x]], seq, waits[x])
        seq += 1
    for x in range(nlocal):
        hsize = heap_push(ht, hs, hi, hsize, now, seq, local[x])
        seq += 1
    return njoin, hsize, seq


@njit(cache=True, _nrt=False)
def _step(now, t_limit, stats, link_cap, flow_links, nhops, sprio, scap, rem, rates, act, nact, state, lhead, lnext,
          lprev, seeds, nseed, seeded, lmark, fmark, steps, queue, comp, left, lcount, link_load, peak_load, dense,
          rset, tset, ver, aseq, apos, link_bits, fh_t, fh_v, fh_s, fh_n, finished, metered, sftype, scont, scount,
          m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes, mm_work,
          mm_share):  # fmt: skip  # pragma: no cover - numba
    """One network step (simulator.rules.network): re-rate the flows the events since the last step reach,
    advance to the next finish or ``t_limit``, and meter the step when ``metered``. Returns (the step's end,
    or inf for no progress; flows finished, in ``finished``; nseed; fh_n; dense)."""
    stats[3] += nact
    ncomp, dense = net_rerate(
        link_cap, flow_links, nhops, sprio, scap, rates, act, nact, state, lhead, lnext, seeds, nseed, seeded, lmark,
        fmark, steps + 1, queue, comp, left, lcount, link_load, peak_load, dense, mm_work, mm_share,
    )  # fmt: skip
    if ncomp > 0:
        stats[4] += 1
        stats[5] += ncomp
        if metered:
            meter_component(link_cap, flow_links, nhops, sprio, scap, rates, comp, ncomp, sftype, scont, scount,
                            m_load, m_mask, m_top, m_classes, m_nhit, m_ntot)  # fmt: skip
    t, nfin, nseed, fh_n = net_advance(
        now, t_limit, flow_links, nhops, rem, rates, rset, tset, ver, aseq, act, apos, nact, lhead, lnext, lprev,
        seeds, seeded, comp, ncomp, link_bits, fh_t, fh_v, fh_s, fh_n, finished,
    )  # fmt: skip
    if metered and t < np.inf:  # the step's time at the counts, then the flows that ended leave them
        meter_step(link_cap, flow_links, nhops, sprio, scap, rates, act, 0, finished, 0, sftype, False, scont, t - now,
                   m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes)  # fmt: skip
        for k in range(nfin):
            meter_leave(finished[k], sftype, scont, scount, m_nhit, m_ntot)
    return t, nfin, nseed, fh_n, dense


@njit(cache=True, _nrt=False)
def _join(sl, i, now, joined, nact, route, flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops,
          prio, cap, bits, act, apos, metered, sftype, ftype, lhead, lnext, lprev, tset, aseq, rset, seeds, nseed,
          seeded):  # fmt: skip  # pragma: no cover - numba
    """Flow ``i`` joins the network in free slot ``sl`` (its links, class, cap and bits; the active list;
    the lazy network's seeds). Returns nseed."""
    _fill_slot(sl, i, route[i], flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops, prio, cap,
               bits)  # fmt: skip
    act[nact] = sl
    apos[sl] = nact
    if metered:
        sftype[sl] = ftype[i]
    return net_join(sl, joined, now, flow_links, nhops, lhead, lnext, lprev, tset, aseq, rset, seeds, nseed, seeded)


@njit(cache=True, _nrt=False)
def _free_finished(finished, nfin, slot_item, fin_items, free, nfree):  # pragma: no cover - numba
    """The slots of the flows that finished are free again; their items are in ``fin_items``. Returns nfree."""
    for k in range(nfin):
        sl = finished[k]
        fin_items[k] = slot_item[sl]
        slot_item[sl] = -1
        free[nfree] = sl
        nfree += 1
    return nfree


@njit(cache=True, _nrt=False)
def _load(st):  # pragma: no cover - numba
    """``_run``'s scalars (in :data:`simulator.rules.arrays.STATE`'s order) out of ``st``."""
    return (
        st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7], st[8], st[9], st[10], st[11], st[12], st[13], st[14],
        st[15], st[16], st[17], st[18], st[19], st[20], st[21], st[22], st[23] != 0, st[24] != 0, st[25] != 0,
        st[26] != 0,
    )  # fmt: skip


@njit(cache=True, _nrt=False)
def _save(st, hsize, seq, nready, nsub, nheld, nfree, nseed, joined, nact, fh_n, done, events, steps, fin_pos, fin_n,
          phase, freed, nstarted, nwaits, nlocal, njoin, jx, slots, dense, timers, first, parity,
          need):  # fmt: skip  # pragma: no cover - numba
    """``_run``'s scalars into ``st`` (:data:`simulator.rules.arrays.STATE`'s order)."""
    st[0], st[1], st[2], st[3], st[4], st[5], st[6] = hsize, seq, nready, nsub, nheld, nfree, nseed
    st[7], st[8], st[9], st[10], st[11], st[12], st[13] = joined, nact, fh_n, done, events, steps, fin_pos
    st[14], st[15], st[16] = fin_n, phase, freed
    st[17], st[18], st[19], st[20], st[21], st[22] = nstarted, nwaits, nlocal, njoin, jx, slots
    st[23], st[24], st[25], st[26], st[27] = dense, timers, first, parity, need


@njit(cache=True, _nrt=False)
def _run(items, clus, fixed, metered, meter, lists, net, fh, st, fst, ctl, stats):  # pragma: no cover - numba
    """The run's loop (Simulation._run over the Dispatcher), from where ``st`` says it stopped until
    the run ends (run_kernel's codes) or an array is full (a ``GROW_*`` code, ``st[NEED]`` entries)."""
    (kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, missing, dep_ptr, dep_idx, ftype, release,
     gate, parent, kids_left, ready_t, start_t, end_t) = items  # fmt: skip
    device_cap, route_links, route_hops, route_latency, link_cap, link_bits, peak_load, gate_size, gate_sub = clus
    (q_head, q_tail, q_next, busy, touched, a_head, a_next, a_prev, best, best_set, gcount, gsplit, subready, waits,
     lhead, seeded, lmark, queue, left, lcount, link_load, mm_share) = fixed  # fmt: skip
    m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes = meter
    readyl, held, held2, started, local, ht, hs, hi = lists
    (flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items, sftype, scont,
     scount, tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds, mm_work) = net  # fmt: skip
    fh_t, fh_v, fh_s = fh
    (hsize, seq, nready, nsub, nheld, nfree, nseed, joined, nact, fh_n, done, events, steps, fin_pos, fin_n, phase,
     freed, nstarted, nwaits, nlocal, njoin, jx, slots, dense, timers, first, parity) = _load(st)  # fmt: skip
    if parity:  # the held list is the second array
        held, held2 = held2, held
    n, maxdeps, nsubs = kind.shape[0], st[MAXDEPS], st[NSUBS]
    any_rule, any_queued = st[ANY_RULE] != 0, st[ANY_QUEUED] != 0
    has_gates, big, now, need, no_key = gate_size.shape[0] > 0, np.iinfo(np.int64).max, fst[0], 0, waits[:0]
    while True:
        if phase == TOP:
            if ctl[0] != 0.0:  # asked to stop (Ctrl-C in the calling thread)
                ctl[1] = now
                settle_all(now, slot_item, flow_links, nhops, rem, rset, tset, link_bits)
                code = 4
                break
            report, freed = -1, -1  # the item whose end is reported (-1: none)
            if first:
                first = False
            elif fin_pos < fin_n:
                report = fin_items[fin_pos]
                fin_pos += 1
            elif timers and hsize > 0 and ht[0] <= now:
                i = hi[0]
                released = release.shape[0] > 0 and np.isnan(ready_t[i])  # its release time came
                if released and nready + 1 + 2 * maxdeps > readyl.shape[0]:
                    code, need = GROW_READY, nready + 1 + 2 * maxdeps
                    break
                hsize = heap_pop(ht, hs, hi, hsize)
                events += 1
                if released:
                    now = max(now, release[i])
                    readyl[nready] = i
                    nready += 1
                elif kind[i] != NET:
                    report = i
                else:  # a flow's first byte crossed its latency: it joins the network
                    started[0], njoin, phase = i, 1, JOIN
            else:  # a network step: to the next finish or timer
                if done == n:
                    code = 0
                    break
                t_limit = ht[0] if hsize > 0 else np.inf
                if t_limit == np.inf and nact == 0:
                    code = 1
                    break
                nfin, t = 0, t_limit
                if nact > 0:
                    if fh_n + nact > fh_t.shape[0]:
                        code, need = GROW_FH, nact
                        break
                    t, nfin, nseed, fh_n, dense = _step(
                        now, t_limit, stats, link_cap, flow_links, nhops, sprio, scap, rem, rates, act, nact, state,
                        lhead, lnext, lprev, seeds, nseed, seeded, lmark, fmark, steps, queue, comp, left, lcount,
                        link_load, peak_load, dense, rset, tset, ver, aseq, apos, link_bits, fh_t, fh_v, fh_s, fh_n,
                        finished, metered, sftype, scont, scount, m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot,
                        m_classes, mm_work, mm_share,
                    )  # fmt: skip
                    if t == np.inf:
                        code = 2
                        break
                    nact -= nfin
                steps += 1
                now, timers = t, nfin == 0
                nfree = _free_finished(finished, nfin, slot_item, fin_items, free, nfree)
                fin_pos, fin_n = 0, nfin
                continue
            if phase == TOP:  # an item ended (or the run began, or an item was released): Dispatcher._finish
                if report >= 0:
                    events += kind[report] == NET
                    freed, ended, nready, nsub = _finish(
                        report, now, kind, device, busy, end_t, dep_ptr, dep_idx, missing, has_gates, parent,
                        kids_left, subready, nsub, readyl, nready, any_rule, nic, a_head, a_next, a_prev,
                    )  # fmt: skip
                    done += ended
                phase = SETTLE
        if phase == SETTLE:  # Dispatcher._settle(now, ready, freed)
            if nheld + nready > held.shape[0]:
                code, need = GROW_HELD, nheld + nready
                break
            if nheld + nready + nsub + nsubs > started.shape[0]:
                code, need = GROW_STARTED, nheld + nready + nsub + nsubs
                break
            if release.shape[0] > 0 and hsize + nready > ht.shape[0]:
                code, need = GROW_HEAP, hsize + nready
                break
            sort_prefix(readyl, nready, no_key)
            nheld, hsize, seq = _admit(readyl, nready, now, release, ready_t, has_gates, gate, gcount, queued, held,
                                       nheld, ht, hs, hi, hsize, seq)  # fmt: skip
            nheld, ntouched, nlocal, nstarted = _offer(
                freed, subready, nsub, held, held2, nheld, now, kind, device, q_head, q_tail, q_next, touched,
                has_gates, gate, gsplit, gcount, gate_size, gate_sub, parent, missing, ready_t, start_t, bar, queued,
                key, best, nic, a_head, a_next, a_prev, local, started, any_rule, any_queued, best_set, big,
            )  # fmt: skip
            held, held2, parity, nready, nsub = held2, held, not parity, 0, 0
            sort_prefix(touched, ntouched, no_key)
            nwaits = _run_queues(touched, ntouched, now, q_head, q_tail, q_next, busy, device_cap, start_t, waits)
            if nheld and nstarted + nwaits + nlocal + hsize + nact == 0 and fin_pos >= fin_n:
                # (flows that finished in this network step and are not reported yet are still in flight)
                code = 3
                break
            phase = DO
        if phase == DO:  # its actions, in order (Simulation._do)
            if hsize + nstarted + nwaits + nlocal > ht.shape[0]:
                code, need = GROW_HEAP, hsize + nstarted + nwaits + nlocal
                break
            njoin, hsize, seq = _timers(now, started, nstarted, waits, nwaits, local, nlocal, route, route_latency,
                                        duration, ht, hs, hi, hsize, seq)  # fmt: skip
            phase = JOIN
        last = min(njoin, jx + nfree)  # phase JOIN: the flows that join the network now, in order
        for x in range(jx, last):
            nfree -= 1
            nseed = _join(free[nfree], started[x], now, joined, nact, route, flow_links, nhops, sprio, scap, rem,
                          slot_item, route_links, route_hops, prio, cap, bits, act, apos, metered, sftype, ftype, lhead,
                          lnext, lprev, tset, aseq, rset, seeds, nseed, seeded)  # fmt: skip
            joined += 1
            nact += 1
        jx = last
        if jx < njoin:  # no free slot left (the slots double only when every one is taken, as before)
            code = GROW_NET
            break
        phase, njoin, jx = TOP, 0, 0
    _save(st, hsize, seq, nready, nsub, nheld, nfree, nseed, joined, nact, fh_n, done, events, steps, fin_pos, fin_n,
          phase, freed, nstarted, nwaits, nlocal, njoin, jx, slots, dense, timers, first, parity, need)  # fmt: skip
    fst[0] = now
    stats[0], stats[1], stats[2] = events, steps, done
    return code


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
    Allocates every array, then runs :func:`_run`, growing what it asks for. Runs without the GIL."""
    n, ndev, nlinks, width = kind.shape[0], max(device_cap.shape[0], 1), link_cap.shape[0], route_links.shape[1]
    n1, nnic1, big, slots = max(n, 1), max(nnics, 1), np.iinfo(np.int64).max, 1024
    # item indices in int32 (27 million items at 8192 GPUs: 4 bytes less per item and array). Work
    # lists start small and double when full (_room): sized per item, they were 1.2 GB at 8192 GPUs.
    readyl, nready, w0, ntasks, maxdeps = ready_at_start(kind, missing, dep_ptr, work)
    has_gates = gate_size.shape[0] > 0
    st = np.zeros(NST, np.int64)
    st[NREADY], st[NFREE], st[SLOTS], st[FIRST] = nready, slots, slots, 1
    st[MAXDEPS], st[NSUBS] = maxdeps, max(n - gate_sub[0] if has_gates else 0, 1)
    st[ANY_RULE], st[ANY_QUEUED] = np.any(bar > 0), np.any((bar > 0) & queued)
    items = (kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, missing, dep_ptr, dep_idx, ftype,
             release, gate, parent, children.copy(), ready_t, start_t, end_t)  # fmt: skip
    clus = (device_cap, route_links, route_hops, route_latency, link_cap, link_bits, peak_load, gate_size, gate_sub)
    tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, lhead, seeds, seeded, lmark, queue = new_lazy(
        slots, width, nlinks
    )
    # device FIFO queues and network flows active per source NIC (linked lists); per NIC a round's best
    # key; per gate its members held and whether it split; sub-flows ready; tasks started in a settling
    fixed = (
        np.full(ndev, -1, np.int64), np.full(ndev, -1, np.int64), np.full(n1, -1, np.int32), np.zeros(ndev, np.int64),
        np.zeros(ndev, np.int64), np.full(nnic1, -1, np.int64), np.full(n1, -1, np.int32), np.full(n1, -1, np.int32),
        np.full(nnic1, big, np.int64), np.zeros(nnic1, np.int32), np.zeros(gate_size.shape[0], np.int32),
        np.zeros(gate_size.shape[0], np.bool_), np.zeros(st[NSUBS], np.int32), np.zeros(max(ntasks, 1), np.int32),
        lhead, seeded, lmark, queue, np.zeros(nlinks), np.zeros(nlinks, np.int64), np.zeros(nlinks), np.zeros(nlinks),
    )  # fmt: skip
    meter = (m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot, m_classes)
    lists = (readyl, np.zeros(w0, np.int32), np.zeros(w0, np.int32), np.zeros(w0, np.int32), np.zeros(w0, np.int32),
             np.zeros(w0), np.zeros(w0, np.int64), np.zeros(w0, np.int32))  # fmt: skip
    lazy = (tset, rset, ver, aseq, apos, fmark, comp, lnext, lprev, seeds)
    net = new_net(slots, width) + lazy + (np.zeros(scratch_size(nlinks, slots), np.int64),)
    fh = (np.zeros(slots), np.zeros(slots, np.int64), np.zeros(slots, np.int32))
    fst = np.zeros(1)
    while True:
        code = _run(items, clus, fixed, metered, meter, lists, net, fh, st, fst, ctl, stats)
        if code < GROW_READY:
            return code
        lists, net, fh = grow(code, lists, net, fh, st, nlinks)
