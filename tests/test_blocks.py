"""ByteGNN's BFS blocks and Alg. 2 by hand, the kernel against its twin, and the partitioners of
issue 29 telling a community graph apart."""

import numpy as np
import pytest

from workloads.blocks import assign, assign_reference, blocks, bytegnn, kinds_of
from workloads.graphs import community_graph, csr_from_edges_reference, dataset_graph
from workloads.partition import PARTITIONERS, edge_cut, load_imbalance, partition, remote_vertices

# a path 0-1-2-3-4-5-6-7
PATH = csr_from_edges_reference(8, np.arange(7), np.arange(1, 8))


def test_blocks_keep_the_first_id_they_receive():
    indptr, indices = PATH
    # centres 1 and 5, 1 hop: 0, 2 -> 1; 4, 6 -> 5; 3 and 7 unreached (own blocks)
    block = blocks(indptr, indices, np.array([5, 1]), 1)
    assert block.tolist() == [0, 0, 0, 2, 1, 1, 1, 3]
    # 2 hops: 3 is reached by both at hop 2; the lower centre (1) is searched first
    assert blocks(indptr, indices, np.array([1, 5]), 2).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_alg2_by_hand():
    """Blocks {0,1,2} (centre 1: train), {3,4} (centre 4: test), {5,6,7} (centre 6: train), 2 parts.
    C = (2/2, 0, 1/2). Order: max count 1 each, ties by block id: 0, 1, 2. Smoothed CE = (cross+1)/(|P|+1):
    block 0 -> P0 (both (0+1)/1 * 1, tie, lowest); block 1: P0 (1+1)/(3+1) * (1 - 1/3 * 1/1) = 1/3,
    P1 1 * 1 = 1 -> P1; block 2: P0 (0+1)/4 * 2/3 = 1/6, P1 (1+1)/3 * (1 - 1/3 * 1/0.5) = 2/9 -> P1."""
    indptr, indices = PATH
    kinds = np.array([-1, 0, -1, -1, 2, -1, 0, -1])
    block = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    for fn in (assign, assign_reference):
        assert fn(indptr, indices, block, kinds, 2).tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
    # as written: every score is 0 (CE = 0 with nothing placed or no cross edge): all to P0 at first,
    # block 1 then scores 1/3 * 2/3 on P0 (one cross edge) against 0 on P1
    for fn in (assign, assign_reference):
        assert fn(indptr, indices, block, kinds, 2, smooth=False).tolist() == [0] * 8


@pytest.mark.parametrize("seed", range(3))
def test_assign_kernel_agrees_with_its_twin(seed):
    indptr, indices, _ = community_graph(600, 4800, 0.2, seed)
    rng = np.random.default_rng(seed)
    kinds = rng.choice([-1, 0, 1, 2], 600, p=[0.5, 0.2, 0.1, 0.2])
    block = blocks(indptr, indices, np.flatnonzero(kinds >= 0), 1 + seed % 2)
    for smooth in (True, False):
        a = assign(indptr, indices, block, kinds, 4, smooth=smooth)
        assert (a == assign_reference(indptr, indices, block, kinds, 4, smooth=smooth)).all()


def test_bytegnn_balances_the_splits_and_keeps_blocks_together():
    indptr, indices, _ = community_graph(3000, 30000, 0.1, 7)
    rng = np.random.default_rng(7)
    train, val, test = (rng.random(3000) < x for x in (0.1, 0.05, 0.3))
    part = bytegnn(indptr, indices, train, val, test, 4)
    kinds = kinds_of(train, val, test, 3000)
    for k in range(3):
        counts = np.bincount(part[kinds == k], minlength=4)
        assert counts.max() <= 1.5 * counts.mean()  # the balance score keeps each split near its share
    block = blocks(indptr, indices, np.flatnonzero(kinds >= 0), 2)
    same = [len(set(part[block == b])) == 1 for b in np.unique(block)]
    assert all(same)  # a block goes whole to one partition


def test_partitioners_tell_a_community_graph_apart():
    g = dataset_graph("ogbn-arxiv", 0.05, 0.13, 0)
    cap = [6, 6, 12, 12]
    names = ("hash", "metis", "g3", "bytegnn", "adagl", "metis-capacity")
    got = {name: partition(name, g, 4, 0, capacity=cap) for name in names}
    cuts = {name: edge_cut(g, p) for name, p in got.items()}
    assert cuts["metis"] < cuts["bytegnn"] < cuts["hash"] and cuts["g3"] < cuts["hash"]
    assert cuts["metis-capacity"] < 1.5 * cuts["metis"]  # METIS's cut at the capacities' shares
    assert load_imbalance(got["metis-capacity"], 4, capacity=cap) < 0.05
    assert load_imbalance(got["hash"], 4, capacity=cap) < 0.02  # hashed into capacity shares
    assert load_imbalance(got["metis"], 4, capacity=cap) > 0.3  # equal parts: METIS ignores capacity
    assert len({tuple(remote_vertices(g, p, 4)) for p in got.values()}) == len(got)


def test_the_partition_table_prints_every_partitioner():
    from scenarios.partitions import table

    text = table("ogbn-arxiv", 4, 0.02, [6, 6, 12, 12])
    head = ("| partitioner", "| ---")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith(head)]
    names = [r.split("|")[1].strip() for r in rows]
    assert set(names) == set(PARTITIONERS)
    cuts = {r.split("|")[1].strip(): float(r.split("|")[3]) for r in rows}
    assert len(set(cuts.values())) >= len(cuts) - 1  # the methods give different partitions
