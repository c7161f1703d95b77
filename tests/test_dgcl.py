"""DGCL: cost model, SPST (numba == literal reference), SPST beats peer-to-peer."""

import numpy as np
import pytest

from hwmodels.dgcl import (
    Requirements,
    comm_topology,
    peer_to_peer,
    plan_cost,
    plan_time_transfer_model,
    spst,
    spst_reference,
    stage_times,
)
from hwmodels.graph import GB, load_preset

DGX1 = load_preset("dgx1-v100")
TOPO = comm_topology(DGX1)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("preset", ["dgx1-v100", "pcie8"])
def test_spst_kernel_equals_reference(seed, preset):
    topo = comm_topology(load_preset(preset))
    rng = np.random.default_rng(seed)
    req = Requirements.random(
        8, int(rng.integers(1, 40)), float(rng.integers(1, 4096)), density=float(rng.uniform(0.1, 1.0)), seed=seed
    )
    plan, cost = spst(topo, req, seed=seed)
    ref, ref_cost = spst_reference(topo, req, seed=seed)
    assert plan.rows() == ref.rows()
    assert cost == pytest.approx(ref_cost, rel=1e-12)
    assert cost == pytest.approx(plan_cost(topo, plan, req), rel=1e-12)


def test_spst_edge_cases():
    one_gpu = Requirements.from_lists([0, 0], [[0], []], 1024)  # the source itself, nobody
    plan, cost = spst(TOPO, one_gpu)
    assert plan.rows() == [] and cost == 0.0
    zero = Requirements.from_lists([0], [[1, 2, 3]], 0.0)
    plan, cost = spst(TOPO, zero)
    assert cost == 0.0 and {r[3] for r in plan.rows()} == {1, 2, 3}
    empty = Requirements.from_lists([], [], 1.0)
    assert spst(TOPO, empty)[0].rows() == []


def test_every_destination_reached_through_a_tree():
    req = Requirements.random(8, 200, 512, density=0.6, seed=5)
    plan, _ = spst(TOPO, req)
    by_vertex = {}
    for v, k, a, b in plan.rows():
        by_vertex.setdefault(v, []).append((k, a, b))
    for v in range(len(req)):
        edges = sorted(by_vertex.get(v, []))
        have = {int(req.source[v])}
        for _stage, a, b in edges:  # stage order: a sender already holds the vertex
            assert a in have and b not in have
            have.add(b)
        assert set(req.dests_of(v)) <= have


def qpi_time(nbytes: float) -> float:
    """Seconds for ``nbytes`` over the DGX-1's QPI (9.56 GB/s, DGCL Table 1)."""
    return 8 * nbytes / (9.56 * GB)


def test_cost_model_contention_on_a_shared_hop():
    """gpu0->gpu5 and gpu1->gpu4 both cross QPI (CPU0 to CPU1) in stage 0: the stage time
    is their bytes added up over QPI, not the larger of the two."""
    shared = set(TOPO.hops(0, 5)) & set(TOPO.hops(1, 4))
    assert shared, "the two routes were chosen to share QPI"
    single = Requirements.from_lists([0], [[5]], 1e6)
    assert plan_cost(TOPO, peer_to_peer(single), single) == pytest.approx(qpi_time(1e6), rel=1e-12)
    both = Requirements.from_lists([0, 1], [[5], [4]], [1e6, 3e6])
    times = stage_times(TOPO, peer_to_peer(both), both)
    assert times[0] == pytest.approx(qpi_time(4e6), rel=1e-12)
    assert times[1:].sum() == 0.0
    # a transfer on its own NVLink (gpu0 -> gpu4: NV2) adds nothing to the QPI bottleneck
    beside = Requirements.from_lists([0, 1, 0], [[5], [4], [4]], [1e6, 3e6, 1e6])
    assert plan_cost(TOPO, peer_to_peer(beside), beside) == pytest.approx(qpi_time(4e6), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_spst_beats_peer_to_peer_on_dgx1(seed):
    req = Requirements.random(8, 2000, 1024, density=0.7, seed=seed)
    plan, cost = spst(TOPO, req, seed=seed)
    p2p = peer_to_peer(req)
    assert cost < plan_cost(TOPO, p2p, req)
    assert plan_time_transfer_model(DGX1, TOPO, plan, req) < plan_time_transfer_model(DGX1, TOPO, p2p, req)


def test_graph_derived_requirements_and_plan():
    rng = np.random.default_rng(7)
    n = 400
    edges = rng.integers(0, n, (2000, 2))
    part = rng.integers(0, 8, n)
    req = Requirements.from_graph(edges, part, 256)
    for u, v in edges[:50]:
        if part[u] != part[v]:
            assert part[v] in req.dests_of(u) and part[u] in req.dests_of(v)
    assert all(int(part[u]) not in req.dests_of(u) for u in range(n))
    plan, cost = spst(TOPO, req)
    assert cost < plan_cost(TOPO, peer_to_peer(req), req)
