"""CASSINI's pure algorithm (schedulers/cassini_alg.py) against hand-computed answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from railbed.errors import SpecError
from schedulers.cassini_alg import (
    JobTraffic,
    best_link_shifts,
    demand_curve,
    fraction_within,
    has_loop,
    link_score,
    plan,
    propagate_shifts,
    rank_candidates,
    shift_scores,
    shift_scores_slow,
    tile,
    unified_bins,
)

C = 100e9  # link capacity, bit/s


def half_on(period=1.0, tick=0.01):
    return demand_curve(period, [(0.0, period / 2, C)], tick)


def test_two_half_period_jobs_shift_by_half_and_score_one():
    """The issue's mechanism: two jobs each sending at the link's rate for half of a 1 s period.
    Unshifted they overflow by C over half the circle (score 1 - 0.5 = 0.5); shifted by half a
    period they never overlap (score 1.0)."""
    curves = np.array([half_on(), half_on()])
    assert link_score(curves, [0, 0], C) == pytest.approx(0.5)
    assert fraction_within(curves, [0, 0], C) == pytest.approx(0.5)
    shifts, score = best_link_shifts(curves, [100, 100], C)
    assert shifts == [0, 50]
    assert score == pytest.approx(1.0)
    assert fraction_within(curves, shifts, C) == pytest.approx(1.0)


def test_demand_curve_averages_partial_bins():
    curve = demand_curve(1.0, [(0.0, 0.25, 8.0), (0.2, 0.3, 4.0)], 0.1)
    # bin 2 holds half of 0.2-0.3 at 8 and all of the 4; bin 3 nothing
    assert curve.tolist() == pytest.approx([8, 8, 4 + 4, 0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(SpecError, match=r"phases\[0\]"):
        demand_curve(1.0, [(0.5, 0.2, 1.0)], 0.1)
    with pytest.raises(SpecError, match="period"):
        demand_curve(1.05, [], 0.1)


def test_unified_circle_is_the_lcm():
    assert unified_bins([0.4, 0.6], 0.1) == 12  # LCM of 4 and 6 ticks
    assert tile(np.array([1.0, 0.0]), 6).tolist() == [1, 0, 1, 0, 1, 0]
    with pytest.raises(SpecError, match="tick"):
        unified_bins([1.0, 1.0000007], 1e-7)


def test_different_periods_interleave_on_the_unified_circle():
    """A 40 ms job sending 10 ms and a 60 ms job sending 10 ms at the full link: on the 120 ms
    circle the first sends at 0, 40, 80 ms; the second, shifted, fits into a gap."""
    tick = 0.01
    bins = unified_bins([0.04, 0.06], tick / 10)
    a = tile(demand_curve(0.04, [(0, 0.01, C)], tick / 10), bins)
    b = tile(demand_curve(0.06, [(0, 0.01, C)], tick / 10), bins)
    shifts, score = best_link_shifts(np.array([a, b]), [40, 60], C)
    assert score == pytest.approx(1.0)
    assert link_score(np.array([a, b]), [0, 0], C) < 1.0


def test_exact_search_matches_enumeration_for_three_jobs():
    rng = np.random.default_rng(3)
    curves = rng.uniform(0, C, size=(3, 12))
    shifts, score = best_link_shifts(curves, [12, 12, 12], C)
    brute = max(link_score(curves, [0, b, c], C) for b, c in itertools.product(range(12), repeat=2))
    assert score == pytest.approx(brute)
    assert link_score(curves, shifts, C) == pytest.approx(score)


def test_greedy_search_is_reported_honestly():
    """Above exact_limit the search is greedy: its score is the score of the shifts it returns,
    never above the exact optimum."""
    rng = np.random.default_rng(5)
    curves = rng.uniform(0, C, size=(3, 10))
    exact = best_link_shifts(curves, [10, 10, 10], C)[1]
    shifts, greedy = best_link_shifts(curves, [10, 10, 10], C, exact_limit=1)
    assert greedy == pytest.approx(link_score(curves, shifts, C))
    assert greedy <= exact + 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_shift_scores_numba_agrees_with_its_slow_twin(seed):
    rng = np.random.default_rng(seed)
    base, curve = rng.uniform(0, 2 * C, 30), rng.uniform(0, C, 30)
    np.testing.assert_allclose(shift_scores(base, curve, 15, C), shift_scores_slow(base, curve, 15, C), rtol=1e-12)


def test_bfs_propagates_relative_shifts_and_keeps_every_link_optimal():
    """a-l1-b and a-l2-d: on l1 b should start 0.5 s after a, on l2 d 0.4 s after a (given
    per-link optima whose own reference is not a): the BFS from a gives exactly that."""
    weights = {"l1": {"a": 0.3, "b": 0.8}, "l2": {"a": 0.1, "d": 0.5}}
    shifts, loop = propagate_shifts(weights, {"a": 1.0, "b": 1.0, "d": 2.0})
    assert not loop
    assert shifts == pytest.approx({"a": 0.0, "b": 0.5, "d": 0.4})


def test_loop_detection():
    assert not has_loop({"l1": ["a", "b"], "l2": ["b", "c"]})
    assert has_loop({"l1": ["a", "b"], "l2": ["a", "b"]})  # a-l1-b-l2-a


def test_plan_end_to_end_and_loop_ranking():
    a = JobTraffic("a", 1.0, {"l1": [(0, 0.5, C)], "l2": [(0.2, 0.4, C)]})
    b = JobTraffic("b", 1.0, {"l1": [(0, 0.5, C)]})
    d = JobTraffic("d", 2.0, {"l2": [(0, 0.5, C)]})
    p = plan([a, b, d], {"l1": C, "l2": C}, 0.01)
    assert p.shifts == pytest.approx({"a": 0.0, "b": 0.5, "d": 0.4})
    assert p.link_scores == pytest.approx({"l1": 1.0, "l2": 1.0}) and not p.loop
    # a loop whose paths agree: a and b share two links, both optimal with b half a period later
    a1 = JobTraffic("a", 1.0, {"l1": [(0, 0.5, C)], "l2": [(0, 0.2, C)]})
    b1 = JobTraffic("b", 1.0, {"l1": [(0, 0.5, C)], "l2": [(0, 0.2, C)]})
    agreeing = plan([a1, b1], {"l1": C, "l2": C}, 0.01)
    assert agreeing.loop and agreeing.consistent and agreeing.score == pytest.approx(1.0)
    # a loop whose paths disagree: on l2, b must not move by half a period (its send would land
    # on a's); the BFS takes l1's half period, and l2 overflows
    b2 = JobTraffic("b", 1.0, {"l1": [(0, 0.5, C)], "l2": [(0.5, 0.8, C)]})
    a2 = JobTraffic("a", 1.0, {"l1": [(0, 0.5, C)], "l2": [(0, 0.3, C)]})
    looped = plan([a2, b2], {"l1": C, "l2": C}, 0.01)
    assert looped.loop and not looped.consistent
    assert looped.link_best["l2"] == pytest.approx(1.0) and looped.link_scores["l2"] < 1.0
    ranked = rank_candidates([[a2, b2], [a1, b1], [a, b, d]], {"l1": C, "l2": C}, 0.01)
    assert [i for i, _ in ranked] == [1, 2, 0]
    with pytest.raises(SpecError, match="capacity.l1"):
        plan([a, b], {}, 0.01)


def test_phases_from_transfers_wrap_around_the_iteration():
    from schedulers.cassini_alg import phases_from_transfers

    # 1 MB in 8 ms = 1 Gbit/s on two links; a second flow starting 2 ms before the end wraps 1 ms
    phases = phases_from_transfers([(10.0, 10.008, 1e6, ["a", "b"]), (10.017, 10.020, 3e5, ["a"])], 10.0, 0.019)
    assert phases["b"] == [pytest.approx((0.0, 0.008, 1e9))]
    assert phases["a"][1:] == [pytest.approx((0.017, 0.019, 8e8)), pytest.approx((0.0, 0.001, 8e8))]
    curve = demand_curve(0.019, phases["a"], 0.001)
    assert curve.sum() * 0.001 == pytest.approx(8 * 1e6 + 8 * 3e5)  # every bit lands on the circle


@pytest.mark.parametrize("seed", range(3))
def test_loop_free_graph_keeps_every_link_at_its_optimum(seed):
    """On a chain (job j on links j-1 and j: loop-free), the BFS's global shifts give every
    shared link the score of its own optimum, whatever the periods."""
    rng = np.random.default_rng(seed)
    jobs = []
    for j in range(6):
        period = float(rng.choice([0.2, 0.3, 0.4]))
        comm = (0.0, period * rng.uniform(0.2, 0.6), C)
        jobs.append(JobTraffic(f"j{j}", period, {f"l{k}": [comm] for k in (j - 1, j) if 0 <= k < 5}))
    p = plan(jobs, {f"l{k}": C for k in range(5)}, 0.01)
    assert not p.loop
    assert p.link_scores == pytest.approx(p.link_best)
