"""Contention on the simulator: which flows a link shared with another coflow type rate-limits.

The ``contention`` field of a run's analysis (``railbed/analysis.py``,
issue 22): the time-weighted share of network flows that were rate-limited
by a link they shared with a flow of another coflow type. The simulator
knows each flow's rate from max-min (:mod:`railbed.maxmin`), so between
two rate computations a flow ``f`` of type ``a`` counts as contended when

* it is below its cap (a capped flow is limited by its cap), and
* some link ``l`` on its path is its bottleneck: ``l`` is saturated (its
  flows' rates sum to its capacity) and no flow of ``f``'s priority class or
  a lower one gets more on ``l`` than ``f`` (in strict priority a lower
  class gets what the higher ones left: ``f``'s class froze on ``l``), and
* ``l`` carries a flow of another type with a positive rate.

A "class" of the issue's wording is a coflow type here (PP, DP, EP, TP, the
GNN workloads' types, ``other`` for untyped flows), as in the overlap: the
thesis's contention is between coflow types (seed 004, §5.1.2). Flows are
weighted by time: the share is contended flow-seconds over active
flow-seconds, where a flow is active while it is in the network (after its
latency, until its last bit).

``meter_step`` (numba) is called after every network advance with the flows
active during it and whether their rates were recomputed; ``step_reference``
is its plain twin (``tests/test_contention.py`` makes them agree and checks
hand-computed cases). Both engines of :mod:`simulator.fluid.network` call it; the
compact engine's kernel, whose steps re-rate only the flows an event reaches
(:mod:`simulator.rules.network`), recomputes those flows' flags
(``meter_component``, counts corrected) and lets ``meter_step`` add the time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from railbed.maxmin import CLASSES

TYPES = 64  # type ids 0..63 (a bit each in a link's mask of the types it carries)
SAT = 1e-9  # a link within this factor of its capacity is saturated; a rate within it of a cap, capped


@njit(cache=True, _nrt=False)
def meter_step(
    link_cap, flow_links, nhops, prio, cap, rates, act, n_act, finished, n_fin, ftype, recompute, contended, dt,
    hit, total, load, mask, top, nhit, ntot, classes,
):  # fmt: skip  # pragma: no cover - numba
    """Account ``dt`` seconds of the flows ``act[:n_act]`` and ``finished[:n_fin]`` (slots).

    With ``recompute`` (their rates were just computed) each one's ``contended`` flag is set
    (module docstring) and ``ntot[type]``, ``nhit[type]`` count the flows and the contended
    ones; ``total[type]`` and ``hit[type]`` gain ``dt`` times those counts. Without it the flows
    are those of the last step that recomputed (rates change only when the flow set or a cap
    does, and the callers recompute then), so the counts stand and a step costs the types,
    not the flows. ``load``, ``mask`` (per link: the types with a rate), ``classes`` (per link:
    the classes present, whose ``top`` entries are set) and ``top`` (per link and class: the
    most a flow of that class gets on the link) are scratch."""
    n = n_act + n_fin
    if recompute:
        for ty in range(ntot.shape[0]):
            ntot[ty] = 0
            nhit[ty] = 0
        _flag(link_cap, flow_links, nhops, prio, cap, rates, act, n_act, finished, n_fin, ftype, contended, load, mask,
              top, classes)  # fmt: skip
        for i in range(n):
            f = act[i] if i < n_act else finished[i - n_act]
            ntot[ftype[f]] += 1
            if contended[f]:
                nhit[ftype[f]] += 1
    if dt > 0.0:
        for ty in range(ntot.shape[0]):
            if ntot[ty] > 0:
                total[ty] += dt * ntot[ty]
                hit[ty] += dt * nhit[ty]


@njit(cache=True, _nrt=False)
def _flag(
    link_cap, flow_links, nhops, prio, cap, rates, act, n_act, finished, n_fin, ftype, contended, load, mask, top,
    classes,
):  # fmt: skip  # pragma: no cover - numba
    """``contended[f]`` of the flows ``act[:n_act]`` and ``finished[:n_fin]`` (module docstring),
    from the rates of those flows alone: every flow on their links must be among them."""
    n = n_act + n_fin
    for i in range(n):
        f = act[i] if i < n_act else finished[i - n_act]
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            load[lk] = 0.0
            mask[lk] = 0
            classes[lk] = 0
    for i in range(n):
        f = act[i] if i < n_act else finished[i - n_act]
        r = rates[f]
        for h in range(nhops[f]):
            lk = flow_links[f, h]
            load[lk] += r
            if r > 0.0:
                mask[lk] |= np.int64(1) << ftype[f]
            bit = np.int64(1) << prio[f]
            if classes[lk] & bit == 0:
                classes[lk] |= bit
                top[lk, prio[f]] = r
            elif r > top[lk, prio[f]]:
                top[lk, prio[f]] = r
    for i in range(n):
        f = act[i] if i < n_act else finished[i - n_act]
        r = rates[f]
        hit_f = False
        if not r >= cap[f] * (1.0 - SAT):
            other = ~(np.int64(1) << ftype[f])
            for h in range(nhops[f]):
                lk = flow_links[f, h]
                if load[lk] >= link_cap[lk] * (1.0 - SAT) and (mask[lk] & other) != 0:
                    best = 0.0  # the most any flow of f's class or a lower one gets on lk
                    for c in range(prio[f] + 1):
                        if classes[lk] & (np.int64(1) << c) != 0 and top[lk, c] > best:
                            best = top[lk, c]
                    if r >= best * (1.0 - SAT):
                        hit_f = True
                        break
        contended[f] = hit_f


@njit(cache=True, _nrt=False)
def meter_component(
    link_cap, flow_links, nhops, prio, cap, rates, comp, ncomp, ftype, contended, counted, load, mask, top, classes,
    nhit, ntot,
):  # fmt: skip  # pragma: no cover - numba
    """``meter_step``'s recomputation for the flows ``comp[:ncomp]`` alone, every flow on their links
    among them (a connected component, :func:`railbed.maxmin.component_kernel`): their flags are
    recomputed and ``nhit``/``ntot`` corrected (minus their old flags where ``counted``, plus the new).

    Exact: a flag depends only on the rates of the flows on the flow's links, so the flags outside
    the component stand, and the counts stay those ``meter_step`` would recount over every active
    flow. Flows that end leave the counts through :func:`meter_leave` (after their last step is
    accounted, ``meter_step`` with ``recompute`` False). ``counted`` (per slot) is False for a
    flow not counted yet."""
    for x in range(ncomp):
        f = comp[x]
        if counted[f]:
            ntot[ftype[f]] -= 1
            if contended[f]:
                nhit[ftype[f]] -= 1
    _flag(link_cap, flow_links, nhops, prio, cap, rates, comp, ncomp, comp, 0, ftype, contended, load, mask, top,
          classes)  # fmt: skip
    for x in range(ncomp):
        f = comp[x]
        counted[f] = True
        ntot[ftype[f]] += 1
        if contended[f]:
            nhit[ftype[f]] += 1


@njit(cache=True, _nrt=False)
def meter_leave(f, ftype, contended, counted, nhit, ntot):  # pragma: no cover - numba
    """Flow ``f`` out of the counts of :func:`meter_component`."""
    if counted[f]:
        counted[f] = False
        ntot[ftype[f]] -= 1
        if contended[f]:
            nhit[ftype[f]] -= 1


def step_reference(capacity, paths, prio, cap, rates, ftype) -> list[bool]:
    """Which flows are contended (module docstring) given their ``rates``: the plain twin of
    ``meter_step``'s flags, one flow per entry of ``paths`` (link ids)."""
    on = {lk: [g for g in range(len(paths)) if lk in paths[g]] for path in paths for lk in path}
    load = {lk: sum(rates[g] for g in flows) for lk, flows in on.items()}

    def limits(f: int, lk: int) -> bool:
        saturated = load[lk] >= capacity[lk] * (1 - SAT)
        other_type = any(rates[g] > 0 and ftype[g] != ftype[f] for g in on[lk])
        bottleneck = all(rates[f] >= rates[g] * (1 - SAT) for g in on[lk] if prio[g] <= prio[f])
        return saturated and other_type and bottleneck

    return [rates[f] < cap[f] * (1 - SAT) and any(limits(f, lk) for lk in path) for f, path in enumerate(paths)]


def contended(capacity, paths, prio, cap, rates, ftype) -> np.ndarray:
    """``meter_step``'s flags for one set of flows (the public face of the kernel, with
    :func:`step_reference`'s signature): which flows are contended at these ``rates``."""
    from railbed.maxmin import pack_paths

    n = len(paths)
    flow_links, nhops = pack_paths(paths)
    link_cap = np.asarray(capacity, dtype=np.float64)
    act = np.arange(n, dtype=np.int64)
    flags = np.zeros(n, np.bool_)
    m = Meter(len(link_cap))
    meter_step(
        link_cap, flow_links, nhops, np.asarray(prio, np.int64), np.asarray(cap, np.float64),
        np.asarray(rates, np.float64), act, n, np.zeros(0, np.int64), 0, np.asarray(ftype, np.int64), True, flags,
        0.0, m.hit, m.total, m.load, m.mask, m.top, m.nhit, m.ntot, m.classes,
    )  # fmt: skip
    return flags


class Meter:
    """Accumulators of one run: ``hit`` and ``total`` flow-seconds per type id, the flows and the
    contended ones per type at the last recomputation (``nhit``, ``ntot``), scratch per link."""

    def __init__(self, nlinks: int) -> None:
        self.hit = np.zeros(TYPES)
        self.total = np.zeros(TYPES)
        self.nhit = np.zeros(TYPES, np.int64)
        self.ntot = np.zeros(TYPES, np.int64)
        self.load = np.zeros(max(nlinks, 1))
        self.mask = np.zeros(max(nlinks, 1), np.int64)
        self.classes = np.zeros(max(nlinks, 1), np.int64)
        self.top = np.zeros((max(nlinks, 1), CLASSES))

    def add(self, hit: float, total: float, ftype: int) -> None:
        self.hit[ftype] += hit
        self.total[ftype] += total


def type_id(types: dict[str, int], name: str | None) -> int:
    """The id of coflow type ``name`` (``other`` for ``None``) in ``types``, added if new;
    types past the 63rd share the last id."""
    from railbed.analysis import UNTYPED

    return types.setdefault(name or UNTYPED, min(len(types), TYPES - 1))


def result(hit: np.ndarray, total: np.ndarray, types: dict[str, int]) -> dict:
    """The ``contention`` field from the accumulators and the type ids."""
    all_time = float(total.sum())
    return {
        "share": float(hit.sum()) / all_time if all_time > 0 else 0.0,
        "by_type": {name: float(hit[k] / total[k]) for name, k in types.items() if total[k] > 0},
        "method": "max-min: below its cap, its bottleneck link saturated and carrying another coflow type",
    }
