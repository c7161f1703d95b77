"""The rules engine kernel's arrays: allocated at a run's start (:func:`ready_at_start`, :func:`new_net`,
:func:`new_lazy`) and grown when the kernel asks (:func:`grow`: it runs without reference counting, so it
allocates nothing itself; :mod:`simulator.rules.kernel`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from railbed.maxmin import scratch_size
from simulator.rules.model import TASK
from simulator.rules.network import finish_room

# ``_run``'s exit codes past run_kernel's own (0-4): which arrays to grow before calling it again
GROW_READY, GROW_HELD, GROW_STARTED, GROW_HEAP, GROW_NET, GROW_FH = 10, 11, 12, 13, 14, 15
# where ``_run`` resumes: an iteration's start, the settling, its actions, the flows joining
TOP, SETTLE, DO, JOIN = 0, 1, 2, 3
# ``st``: _run's scalars between calls, in this order (``_load``), then the run's constants
STATE = tuple(
    (
        "hsize seq nready nsub nheld nfree nseed joined nact fh_n done events steps fin_pos fin_n phase freed "
        "nstarted nwaits nlocal njoin jx slots dense timers first parity need"
    ).split()
)
NREADY, NFREE, FHN, SLOTS, FIRST, NEED = (STATE.index(k) for k in "nready nfree fh_n slots first need".split())
MAXDEPS, NSUBS, ANY_RULE, ANY_QUEUED = range(len(STATE), len(STATE) + 4)
NST = len(STATE) + 4


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


@njit(cache=True)
def ready_at_start(kind, missing, dep_ptr, work):  # pragma: no cover - numba
    """The ready list, with the items ready at the start and room for two items' dependents (the
    kernel's ``_finish``); how many; the work lists' first length; the tasks; the most dependents of
    one item."""
    nready = ntasks = maxdeps = 0
    for i in range(kind.shape[0]):
        nready += missing[i] == 0
        ntasks += kind[i] == TASK
        maxdeps = max(maxdeps, dep_ptr[i + 1] - dep_ptr[i])
    w0 = max(nready, work, 1)
    readyl = np.zeros(w0 + 2 * maxdeps, np.int32)
    nready = 0
    for i in range(kind.shape[0]):
        if missing[i] == 0:
            readyl[nready] = i
            nready += 1
    return readyl, nready, w0, ntasks, maxdeps


@njit(cache=True)
def new_net(slots, width):  # pragma: no cover - numba
    """The network's per-slot arrays (as simulator.fluid.network.NumbaNetwork), every slot free, and the
    contention meter's: a slot's type id, whether it is contended, whether it is in the meter's counts."""
    free = np.zeros(slots, np.int64)
    for k in range(slots):
        free[k] = slots - 1 - k
    return (
        np.full((slots, width), -1, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
        np.full(slots, np.inf), np.zeros(slots), np.zeros(slots), np.zeros(slots, np.int64),
        np.zeros(slots, np.int8), np.zeros(slots, np.int64), np.full(slots, -1, np.int64), free,
        np.zeros(slots, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.bool_), np.zeros(slots, np.bool_),
    )  # fmt: skip


@njit(cache=True)
def new_lazy(slots, width, nlinks):  # pragma: no cover - numba
    """The lazy network's arrays (simulator.rules.network): per slot tset, rset, ver, aseq, apos (a slot's
    index in act, kept unordered), fmark, comp; per slot and hop lnext, lprev; per link lhead, seeded,
    lmark, queue; seeds (links and slots)."""
    return (
        np.zeros(slots), np.zeros(slots), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
        np.zeros(slots, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
        np.full(slots * width, -1, np.int64), np.full(slots * width, -1, np.int64), np.full(nlinks, -1, np.int64),
        np.zeros(nlinks + slots, np.int64), np.zeros(nlinks, np.bool_), np.zeros(nlinks, np.int64),
        np.zeros(nlinks, np.int64),
    )  # fmt: skip


@njit(cache=True)
def grow(code, lists, net, fh, st, nlinks):  # pragma: no cover - numba
    """The arrays ``_run`` asked for (``code``, at least ``st[NEED]`` entries): a work list, the
    timers, the network's slots (doubled, as NumbaNetwork._alloc; with the lazy network's, the
    meter's and max-min's scratch) or the finish heap (:func:`finish_room`)."""
    readyl, held, held2, started, local, ht, hs, hi = lists
    need = st[NEED]
    if code == GROW_READY:
        readyl = _room(readyl, need)
    elif code == GROW_HELD:
        held, held2 = _room(held, need), _room(held2, need)
    elif code == GROW_STARTED:
        started, local = _room(started, need), _room(local, need)
    elif code == GROW_HEAP:
        ht, hs, hi = _room(ht, need), _room(hs, need), _room(hi, need)
    elif code == GROW_FH:
        fh_t, fh_v, fh_s, st[FHN] = finish_room(fh[0], fh[1], fh[2], st[FHN], need, net[17])
        fh = (fh_t, fh_v, fh_s)
    elif code == GROW_NET:
        slots = st[SLOTS]
        meter = (_grow1(net[12], 0), _grow1(net[13], False), _grow1(net[14], False))
        mm_work = np.zeros(scratch_size(nlinks, 2 * slots), np.int64)
        net = _grow_net(*net[:12]) + meter + _grow_lazy(*net[15:25]) + (mm_work,)
        st[NFREE], st[SLOTS] = slots, 2 * slots
    return (readyl, held, held2, started, local, ht, hs, hi), net, fh
