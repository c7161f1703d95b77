"""Crux's pure algorithm (schedulers/crux_alg.py) against the paper's worked examples and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from railbed.errors import SpecError
from schedulers.crux_alg import (
    LinkJob,
    compress,
    compress_brute,
    compress_exhaustive,
    compress_order,
    contention_dag,
    correction_factor,
    dscp_of_level,
    gpu_intensity,
    link_shares,
    priority_order,
    select_paths,
    topological_orders,
)


def test_gpu_intensity_is_work_over_the_slowest_link():
    # 8 GB over a 1 GB/s link (8 s) is slower than 20 GB over 10 GB/s (2 s): I = 40 / 8
    assert gpu_intensity(40.0, {"a": 8e9, "b": 20e9}, {"a": 1e9, "b": 10e9}) == pytest.approx(5.0)
    assert gpu_intensity(1.0, {}, {}) == math.inf
    with pytest.raises(SpecError, match="bandwidth.c"):
        gpu_intensity(1.0, {"c": 1.0}, {})


def test_example_1_link_shares_and_correction_factor():
    """§4.2, Figure 11 over its 12 s: Job 1 (2 s transfer, 2 s compute) first: the link carries
    6 s of Job 1 and 3 s of Job 2; Job 2 (1 s, 1 s) first: 4 s and 6 s. Job 1 gains 2 s, Job 2
    gains 3 s, so with Job 1 the reference k_2 = 1.5."""
    job1, job2 = LinkJob(comm=2, compute=2), LinkJob(comm=1, compute=1)
    assert link_shares(job1, job2, 12) == pytest.approx((6, 3))
    assert link_shares(job2, job1, 12) == pytest.approx((6, 4))
    assert correction_factor(job2, job1, 12) == pytest.approx(1.5)
    assert correction_factor(job1, job1, 12) == pytest.approx(1.0)


def test_jobs_that_never_contend_keep_k_one():
    # both fit on the link at once in steady state: neither order changes what it carries
    assert correction_factor(LinkJob(1, 9), LinkJob(1, 9), 100) == pytest.approx(1.0)
    with pytest.raises(SpecError):
        LinkJob(comm=0, compute=1)


def test_priority_order_and_the_contention_dag():
    priority = [1.0, 3.0, 2.0]
    assert priority_order(priority) == [1, 2, 0]
    edges = contention_dag(priority, intensity=[10, 30, 20], share={(0, 1), (2, 0)})
    assert edges == {(1, 0): 30.0, (2, 0): 20.0}


def test_figure_13_two_links_two_levels():
    """§4.3, Figure 13: jobs 1-4 by decreasing priority, 1-2 share a link and 3-4 another.
    The optimal two-level compression puts 1 and 3 high, 2 and 4 low (both edges cut)."""
    edges = {(0, 1): 4.0, (2, 3): 2.0}
    value, level = compress(4, edges, 2, samples=10, seed=1)
    assert value == pytest.approx(6.0)
    assert level[0] == level[2] == 0 and level[1] == level[3] == 1

    def cut(level):
        return sum(w for (a, b), w in edges.items() if level[a] != level[b])

    assert cut([0, 1, 1, 1]) == 4.0 and cut([0, 0, 1, 1]) == 0.0  # Sincronia's, Varys's (Figure 13)
    # one topological order alone may miss it (why Algorithm 1 samples several): the blocks of
    # 1,2,3,4 cut one edge at most, those of 1,3,2,4 both
    assert compress_order([0, 1, 2, 3], edges, 2) == (pytest.approx(4.0), [0, 1, 1, 1])
    assert compress_order([0, 2, 1, 3], edges, 2) == (pytest.approx(6.0), [0, 1, 0, 1])


@pytest.mark.parametrize("seed", range(12))
def test_dp_over_every_topological_order_equals_brute_force(seed):
    """The paper's Theorems 2-3: every DAG K-cut is a K-cut of some topological order, so the DP
    over all orders is exact; checked against enumeration of all level assignments."""
    rng = np.random.default_rng(seed)
    n, levels = int(rng.integers(3, 7)), int(rng.integers(2, 4))
    priority = rng.permutation(n).astype(float)
    share = {(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.6}
    edges = contention_dag(priority, rng.uniform(1, 10, n), share)
    exact, level = compress_exhaustive(n, edges, levels)
    assert exact == pytest.approx(compress_brute(n, edges, levels))
    assert all(level[a] <= level[b] for a, b in edges)  # a valid compression
    sampled = compress(n, edges, levels, samples=10, seed=seed)[0]
    assert sampled <= exact + 1e-9


def test_topological_orders_of_a_chain_and_an_antichain():
    assert list(topological_orders(3, {(0, 1): 1.0, (1, 2): 1.0})) == [[0, 1, 2]]
    assert len(list(topological_orders(3, {}))) == 6


def test_path_selection_spreads_intensive_jobs():
    """Two jobs with two equal paths each: the more intensive job picks first (path 0); the
    other avoids its link. A third, small transfer goes where the load is least."""
    bw = {"s1": 1.0, "s2": 1.0}
    demands = [[(4.0, [["s1"], ["s2"]])], [(5.0, [["s1"], ["s2"]])], [(1.0, [["s1"], ["s2"]])]]
    assert select_paths([1, 0, 2], demands, bw) == [[1], [0], [1]]


def test_dscp_of_level():
    assert [dscp_of_level(k, 3) for k in range(3)] == [56, 48, 40]
    with pytest.raises(SpecError, match="levels"):
        dscp_of_level(0, 9)
