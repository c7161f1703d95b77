"""AdaGL (seed 003): eqs. (1), (2), (5) and Alg. 2 by hand on small graphs, the coarsening's
weights, the numba kernels against their twins, and Alg. 1 never losing its best sample."""

import numpy as np
import pytest

from workloads.adagl import (
    WGraph,
    adagl,
    align_labels,
    bfs_claim,
    bfs_claim_reference,
    coarsen,
    comm_time,
    comm_time_reference,
    contract,
    edge_cut,
    evolve,
    greedy_init,
    greedy_init_reference,
    imbalance,
    objective,
    prune,
)
from workloads.graphs import community_graph, csr_from_edges_reference


def wgraph(n, edges, w=None, wt=None):
    a, b = zip(*edges)
    indptr, indices = csr_from_edges_reference(n, np.array(a), np.array(b))
    w = np.ones(n) if w is None else np.asarray(w, float)
    return WGraph(
        indptr, indices.astype(np.int64), np.ones(len(indices)), w, np.zeros(n) if wt is None else np.asarray(wt, float)
    )


# two triangles {0,1,2} and {3,4,5} joined by 2-3
TRI = [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (4, 5), (3, 5)]


def test_eq1_and_eq2_by_hand():
    part = np.array([0, 0, 0, 1, 1, 1])
    # eq. (1): loads 3, 3; targets 3, 3 -> 0; with capacities 1:2 targets 2, 4 -> (|3/2-1| + |3/4-1|) / 1
    assert imbalance(part, np.ones(6), 2) == 0.0
    assert imbalance(part, np.ones(6), 2, [1, 2]) == pytest.approx(0.5 + 0.25)
    g = wgraph(6, TRI)
    assert edge_cut(g, part) == pytest.approx(2 / 14)  # the bridge, both directions, of 7 edges
    assert edge_cut(g, np.array([0, 1, 0, 1, 0, 1])) == pytest.approx(10 / 14)


def test_greedy_init_on_six_nodes_by_hand():
    """Weights 3,1,1,3,1,1: order 0, 3, 1, 2, 4, 5 (heaviest first); coefficients (0.5, 0, 0.5), two
    equal servers (targets 5, total edge weight 14, both directions). 0 -> s0 (a tie: lowest);
    3 -> s1 (balance 0.5 (0.4 + 0.4) = 0.4 against 0.5 (0.2 + 1) = 0.6, no placed neighbour);
    1 -> s0 (0.3 against 0.3 + 0.5 2/14); 2 -> s0 (0.2 + 0.5 2/14 against 0.2 + 0.5 4/14);
    4 -> s1 (0.1 + 0.5 2/14 against 0.3 + 0.5 4/14); 5 -> s1: the two triangles.
    Cut only (0, 0, 1): every node joins its placed neighbours, all on s0."""
    g = wgraph(6, TRI, w=[3, 1, 1, 3, 1, 1])
    for init in (greedy_init, greedy_init_reference):
        assert init(g, 2, None, (0.5, 0.0, 0.5)).tolist() == [0, 0, 0, 1, 1, 1]
        assert init(g, 2, None, (0.0, 0.0, 1.0)).tolist() == [0] * 6
    # capacities 1:2, balance only: targets 10/3 and 20/3; 0 -> s0 (0.1 + 1 against 1 + 0.55), then
    # 3 -> s1, and the rest fill s1: loads 3 and 7
    part = greedy_init(g, 2, [1, 2], (1.0, 0.0, 0.0))
    assert part[0] == 0 and part[3] == 1 and np.bincount(part, weights=g.w).tolist() == [3, 7]


@pytest.mark.parametrize("seed", range(3))
def test_greedy_kernel_agrees_with_its_twin(seed):
    indptr, indices, _ = community_graph(120, 800, 0.3, seed)
    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(120), np.diff(indptr))
    ew = 1.0 + (src * indices + src + indices) % 4  # symmetric: the graph is undirected
    g = WGraph(indptr, indices.astype(np.int64), ew, rng.integers(1, 9, 120).astype(float),
               (rng.random(120) < 0.3).astype(float))  # fmt: skip
    for coef in ((0.3, 0.3, 0.4), (0.05, 0.05, 0.9), tuple(rng.dirichlet(np.ones(3)))):
        assert (greedy_init(g, 3, [1, 1, 2], coef) == greedy_init_reference(g, 3, [1, 1, 2], coef)).all()


def test_eq5_by_hand_and_against_the_twin():
    """Server 0 holds training nodes 0, 1 (one batch); its remote neighbours are 2 (via 1, and 0:
    edge weight 2) and 3 (via 1: weight 1) on servers 1 and 2: W_r = 2 * w[2] + 1 * w[3] = 2*5 + 4,
    r = 2: T_0 = beta (14) + alpha 2."""
    g = wgraph(5, [(0, 1), (0, 2), (1, 2), (1, 3), (3, 4)], w=[1, 1, 5, 4, 1], wt=[1, 1, 0, 0, 0])
    part = np.array([0, 0, 1, 2, 2])
    t = comm_time(g, part, 3, alpha_c=0.5, beta_c=0.01, batch=10)
    assert t.tolist() == pytest.approx([0.01 * 14 + 0.5 * 2, 0, 0])
    # batch=1: {0} reads 2 (5, one server), {1} reads 2 and 3 (5 + 4, two servers)
    assert comm_time(g, part, 3, 0.5, 0.01, batch=1)[0] == pytest.approx(0.01 * (5 + 9) + 0.5 * 3)
    indptr, indices, _ = community_graph(300, 2400, 0.3, 4)
    rng = np.random.default_rng(4)
    h = WGraph(
        indptr, indices.astype(np.int64), rng.random(len(indices)), rng.random(300) * 3, (rng.random(300) < 0.4) * 1.0
    )
    p = rng.integers(0, 4, 300)
    assert comm_time(h, p, 4, 1e-3, 1e-4, 7.5) == pytest.approx(comm_time_reference(h, p, 4, 1e-3, 1e-4, 7.5))


def test_bfs_claim_and_contraction_by_hand():
    g = wgraph(6, TRI, wt=[1, 0, 0, 0, 0, 1])
    cores = np.array([0, 5])
    owner = bfs_claim(g.indptr, g.indices, cores, 1)
    assert owner.tolist() == [0, 0, 0, 5, 5, 5] and (owner == bfs_claim_reference(g.indptr, g.indices, cores, 1)).all()
    assert bfs_claim(g.indptr, g.indices, np.array([0]), 1).tolist() == [0, 0, 0, -1, -1, -1]
    c = contract(g, np.array([0, 0, 0, 1, 1, 1]))
    assert c.w.tolist() == [3, 3] and c.wt.tolist() == [1, 1] and c.ew.tolist() == [1, 1]  # the bridge
    indptr, indices, _ = community_graph(400, 3000, 0.3, 1)
    cores = np.sort(np.random.default_rng(1).choice(400, 12, replace=False))
    for hops in (1, 2, 3):
        assert (bfs_claim(indptr, indices, cores, hops) == bfs_claim_reference(indptr, indices, cores, hops)).all()


def test_coarsening_keeps_the_weights_and_prunes_light_edges():
    indptr, indices, _ = community_graph(3000, 24000, 0.2, 2)
    train = (np.random.default_rng(2).random(3000) < 0.3).astype(float)
    g = WGraph(indptr, indices.astype(np.int64), np.ones(len(indices)), np.ones(3000), train)
    co = coarsen(g, min_nodes=40, seed=0)
    assert len(co.levels) >= 1 and co.graphs[-1].n < 3000
    for gg in co.graphs:
        assert gg.w.sum() == 3000 and gg.wt.sum() == train.sum()
        src = np.repeat(np.arange(gg.n), np.diff(gg.indptr))
        pairs = set(zip(src.tolist(), gg.indices.tolist()))
        assert all((b, a) in pairs for a, b in pairs)  # still undirected
    h = WGraph(
        np.array([0, 2, 4, 6]), np.array([1, 2, 0, 2, 0, 1]), np.array([5.0, 1, 5, 1, 1, 1]), np.ones(3), np.ones(3)
    )
    kept = prune(h)  # mean 2.33: 0-1 (5) stays; 0-2, 1-2 (1) are 2's heaviest: stay
    assert kept.ew.sum() == h.ew.sum()
    # 0-1, 1-2, 2-3 weigh 9, 0-2 weighs 1 (mean 7): 0-2 is under 1.1 x 7 and nobody's heaviest
    a, b = csr_from_edges_reference(4, np.array([0, 1, 2, 0]), np.array([1, 2, 3, 2]))
    light = lambda u, v: {u, v} == {0, 2}  # noqa: E731
    src = np.repeat(np.arange(4), np.diff(a))
    h2 = WGraph(
        a, b.astype(np.int64), np.array([1.0 if light(u, v) else 9.0 for u, v in zip(src, b)]), np.ones(4), np.ones(4)
    )
    kept = prune(h2)
    assert kept.ew.tolist() == [9.0] * 6 and 2 not in kept.indices[kept.indptr[0] : kept.indptr[1]]


def test_evolution_keeps_its_best_and_adagl_balances_heterogeneous_targets():
    indptr, indices, _ = community_graph(3000, 24000, 0.1, 3)
    train = (np.random.default_rng(3).random(3000) < 0.3).astype(float)
    g = WGraph(indptr, indices.astype(np.int64), np.ones(len(indices)), np.ones(3000), train)
    co = coarsen(g, min_nodes=60, seed=0)
    _, trace = evolve(co.graphs[-1], 4, [1, 1, 2, 2], 1e-3, 1e-6, 100, population=8, generations=10)
    assert all(b <= a for a, b in zip(trace, trace[1:]))  # the best never gets worse
    part = adagl(indptr, indices, train, 4, [1, 1, 2, 2], min_nodes=60, population=8, generations=10)
    counts = np.bincount(part, minlength=4)
    assert counts[2] + counts[3] > counts[0] + counts[1]  # the larger servers take more


def test_align_labels_by_hand():
    ref = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    swapped = np.array([1, 1, 0, 0, 3, 3, 2, 2])
    assert align_labels(ref, swapped, 4).tolist() == ref.tolist()
    assert align_labels(ref, swapped, 4, [1, 1, 2, 2]).tolist() == ref.tolist()  # renamed within equal P
    across = np.array([2, 2, 3, 3, 0, 0, 1, 1])  # the same groups, but on servers of the other capacity
    assert align_labels(ref, across, 4, [1, 1, 2, 2]).tolist() == across.tolist()
    assert align_labels(ref, across, 4).tolist() == ref.tolist()
    # weights decide: node 4 (weight 5) puts other's server 3 with ref's 2, though ref's 0 shares more nodes
    ref2, other2 = np.array([0, 0, 0, 1, 2]), np.array([3, 3, 3, 1, 3])
    assert align_labels(ref2, other2, 4, weights=[1, 1, 1, 1, 5]).tolist() == [2, 2, 2, 1, 2]


def test_relabelling_within_equal_capacities_keeps_f_and_aligns_back():
    indptr, indices, _ = community_graph(800, 6000, 0.1, 5)
    rng = np.random.default_rng(5)
    g = WGraph(indptr, indices.astype(np.int64), np.ones(len(indices)), rng.integers(1, 4, 800).astype(float),
               (rng.random(800) < 0.4).astype(float))  # fmt: skip
    cap = [1, 1, 2, 2]
    part = rng.integers(0, 4, 800)
    renamed = np.array([1, 0, 3, 2])[part]
    args = (4, cap, (0.3, 0.3, 0.4), 1e-3, 1e-6, 50, 1.0)
    assert objective(g, renamed, *args) == pytest.approx(objective(g, part, *args), rel=1e-12)
    assert align_labels(part, renamed, 4, cap, g.w).tolist() == part.tolist()


def test_aligned_evolution_never_worse_than_the_literal_best_initial_sample():
    indptr, indices, _ = community_graph(3000, 24000, 0.1, 3)
    train = (np.random.default_rng(3).random(3000) < 0.3).astype(float)
    g = WGraph(indptr, indices.astype(np.int64), np.ones(len(indices)), np.ones(3000), train)
    c = coarsen(g, min_nodes=60, seed=0).graphs[-1]
    run = dict(population=8, generations=10, seed=1)
    _, literal = evolve(c, 4, [1, 1, 2, 2], 1e-3, 1e-6, 100, **run)
    _, aligned = evolve(c, 4, [1, 1, 2, 2], 1e-3, 1e-6, 100, crossover="aligned", **run)
    assert aligned[0] == literal[0]  # the same Alg. 2 samples
    assert aligned[-1] <= literal[0] and all(b <= a for a, b in zip(aligned, aligned[1:]))
    with pytest.raises(ValueError):
        evolve(c, 4, None, 1e-3, 1e-6, 100, crossover="one-point")


def test_coarsening_with_max_share_stops_before_a_heavy_node():
    # a star of 40 leaves around node 0 and a path 41-...-59: with node 0 a core, one BFS claims the
    # whole star (41 of 60 nodes); the bounded coarsening stops before that iteration
    edges = [(0, v) for v in range(1, 41)] + [(v, v + 1) for v in range(41, 59)] + [(40, 41)]
    g = wgraph(60, edges, wt=np.ones(60))
    free = coarsen(g, k=1, core_fraction=0.5, min_nodes=2, seed=0)
    bounded = coarsen(g, k=1, core_fraction=0.5, min_nodes=2, seed=0, max_share=0.3)
    assert free.graphs[-1].w.max() > 0.3 * 60  # as written: a node of more than 30 % of the graph
    assert all(x.w.max() <= 0.3 * 60 for x in bounded.graphs) and len(bounded.graphs) < len(free.graphs)
    assert all(x.w.sum() == 60 for x in bounded.graphs)


def test_bounded_adagl_meets_the_targets_the_literal_cannot():
    from workloads.graphs import dataset_graph
    from workloads.partition import partition

    g = dataset_graph("ogbn-arxiv", 1.0)
    cap = [6, 6, 12, 12]
    literal, bounded = (partition(n, g, 4, 0, capacity=cap) for n in ("adagl", "adagl-bounded"))
    assert imbalance(literal, np.ones(g.n), 4, cap) > 0.3  # a coarse node of ~49 % of the graph
    assert imbalance(bounded, np.ones(g.n), 4, cap) < 0.1
