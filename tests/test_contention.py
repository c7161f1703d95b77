"""The simulator's contention meter (simulator/contention.py): the numba kernel against its
plain twin on random flow sets, and hand-computed cases."""

import math
import random

import pytest

from railbed.maxmin import maxmin_reference
from simulator.contention import contended, step_reference

INF = math.inf


def flags(capacity, paths, prio, cap, ftype):
    """(kernel flags, twin flags) at the max-min rates of the flows."""
    rates = maxmin_reference(capacity, paths, prio, cap)
    return list(contended(capacity, paths, prio, cap, rates, ftype)), step_reference(
        capacity, paths, prio, cap, rates, ftype
    )


def test_two_types_sharing_a_saturated_link_contend():
    """Flows 0 (type 0) and 1 (type 1) share link 0: both at half, both contended."""
    got, want = flags([10.0], [[0], [0]], [0, 0], [INF, INF], [0, 1])
    assert got == want == [True, True]


def test_one_type_alone_or_a_cap_is_no_contention():
    """Same type on the link: no. A flow capped below its share is limited by its cap, not
    the link; the other (type 1) is then limited by a link where a type-0 flow has a rate."""
    got, want = flags([10.0], [[0], [0]], [0, 0], [INF, INF], [0, 0])
    assert got == want == [False, False]
    got, want = flags([10.0], [[0], [0]], [0, 0], [2.0, INF], [0, 1])
    assert got == want == [False, True]


def test_a_starved_lower_class_is_contended_and_the_higher_class_is_not():
    """Strict priority: flow 0 (class 7, type PP) takes the link, flow 1 (class 0, type DP)
    gets 0: flow 1 is limited by the saturated link where PP runs; flow 0's only rival on the
    link has no rate, so it is not limited by another type."""
    got, want = flags([10.0], [[0], [0]], [7, 0], [INF, INF], [0, 1])
    assert got == want == [False, True]


def test_a_flow_limited_by_a_link_of_its_own_type_is_not_contended_elsewhere():
    """Flow 0 (type 0) crosses links 0 and 1. Link 0 (capacity 2) it shares with flow 1 of its
    own type: 1 each, its bottleneck. Link 1 (capacity 10) with flow 2 (type 1), which then
    gets 9: link 1 is saturated and carries another type, but flow 0 is not its largest flow
    there (1 < 9), so link 1 does not limit it. Flow 2 is limited by link 1, where flow 0
    (another type) has a rate: contended."""
    got, want = flags([2.0, 10.0], [[0, 1], [0], [1]], [0, 0, 0], [INF] * 3, [0, 0, 1])
    assert got == want == [False, False, True]


@pytest.mark.parametrize("seed", range(40))
def test_kernel_and_twin_agree_on_random_flow_sets(seed):
    rng = random.Random(seed)
    nlinks = rng.randint(1, 6)
    capacity = [rng.choice([1.0, 2.0, 5.0, 10.0]) for _ in range(nlinks)]
    n = rng.randint(1, 12)
    paths = [rng.sample(range(nlinks), rng.randint(1, min(3, nlinks))) for _ in range(n)]
    prio = [rng.choice([0, 0, 3, 7]) for _ in range(n)]
    cap = [rng.choice([INF, INF, 0.5, 3.0]) for _ in range(n)]
    ftype = [rng.randint(0, 2) for _ in range(n)]
    got, want = flags(capacity, paths, prio, cap, ftype)
    assert got == want


# ------------------------------------- the rules engine's meter: only the re-rated component
def test_counts_corrected_over_the_changed_component_equal_a_full_recount():
    """simulator.rules.network re-rates only the flows connected to a change; meter_component
    recomputes their flags alone and corrects the counts (meter_leave for flows that end). After
    every round of leaves and joins, the flags equal step_reference's over the whole set at its
    max-min rates, and the counts equal a full recount (what meter_step computes), on random
    flow sets (40 sets, 6 rounds each); a version that forgets to subtract old flags fails."""
    import numpy as np

    from railbed.maxmin import component_reference, maxmin_kernel, pack_paths
    from simulator.contention import Meter, meter_component, meter_leave

    for seed in range(40):
        rng = random.Random(seed)
        nlinks = rng.randint(1, 6)
        capacity = [rng.choice([1.0, 2.0, 5.0, 10.0]) for _ in range(nlinks)]
        n = rng.randint(2, 14)
        paths = [rng.sample(range(nlinks), rng.randint(1, min(3, nlinks))) for _ in range(n)]
        prio, cap = [rng.choice([0, 0, 3, 7]) for _ in range(n)], [rng.choice([INF, INF, 0.5, 3.0]) for _ in range(n)]
        ftype = np.array([rng.randint(0, 2) for _ in range(n)], np.int64)
        flow_links, nhops = pack_paths(paths)
        link_cap, aprio, acap = np.array(capacity), np.array(prio, np.int64), np.array(cap)
        rates, flag, counted = np.zeros(n), np.zeros(n, np.bool_), np.zeros(n, np.bool_)
        m = Meter(nlinks)
        active: set[int] = set()
        for _ in range(6):
            gone = {f for f in active if rng.random() < 0.3}
            new = {f for f in range(n) if f not in active and rng.random() < 0.4}
            for f in gone:
                meter_leave(f, ftype, flag, counted, m.nhit, m.ntot)
            active = (active - gone) | new
            seeds = sorted({lk for f in gone | new for lk in paths[f]})
            comp = np.array(component_reference(paths, sorted(active), seeds), np.int64)
            maxmin_kernel(link_cap, flow_links, nhops, aprio, acap, comp, len(comp), rates, np.zeros(nlinks),
                          np.zeros(nlinks, np.int64), np.zeros(n, np.int8))  # fmt: skip
            meter_component(link_cap, flow_links, nhops, aprio, acap, rates, comp, len(comp), ftype, flag, counted,
                            m.load, m.mask, m.top, m.classes, m.nhit, m.ntot)  # fmt: skip
            act = sorted(active)
            full = maxmin_reference(capacity, [paths[f] for f in act], [prio[f] for f in act], [cap[f] for f in act])
            want = step_reference(capacity, [paths[f] for f in act], [prio[f] for f in act], [cap[f] for f in act],
                                  full, [ftype[f] for f in act])  # fmt: skip
            assert [bool(flag[f]) for f in act] == want
            assert list(m.ntot[:3]) == [sum(1 for f in act if ftype[f] == ty) for ty in range(3)]
            assert list(m.nhit[:3]) == [sum(1 for f, w in zip(act, want) if w and ftype[f] == ty) for ty in range(3)]
