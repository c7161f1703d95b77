"""DGCL in a run: plans as hops, the planners as schedulers on the simulator, the interface's
multicast sub-flows (``SubFlow.carries``) and concurrent same-server legs."""

import numpy as np
import pytest

from hwmodels.dgcl import Requirements, comm_topology, spst
from hwmodels.graph import load_preset
from railbed.dispatch import Dispatcher, SchedulerError
from railbed.job import Job, Location
from railbed.metrics import coflow_completion_times
from railbed.scheduler import Scheduler, Split, SubFlow
from railbed.spec import ClusterSpec
from schedulers import by_name
from schedulers.dgcl_alg import delivered, p2p_hops, pair_bytes, reverse, spst_hops, swap_hops
from simulator import simulate
from workloads.gnn_fullgraph import gnn_fullgraph

TOPO = comm_topology(load_preset("dgx1-v100"))
DGX1 = ClusterSpec.from_dict(
    {"servers": [{"count": 1, "gpus": 8, "nics": 1, "nic_rate": "50Gbit", "intra_host": "dgx1-v100"}],
     "fabric": {"type": "single_switch"}}
)  # fmt: skip
TWO = ClusterSpec.from_dict(
    {"servers": [{"count": 2, "gpus": 8, "nics": 1, "nic_rate": "50Gbit", "intra_host": "dgx1-v100"}],
     "fabric": {"type": "single_switch"}}
)  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_spst_hops_deliver_every_embedding_exactly_once(seed):
    req = Requirements.random(8, 400, 512 * (seed + 1), density=0.4 + 0.1 * seed, seed=seed)
    plan, _ = spst(TOPO, req, seed=seed)
    arrivals = {}
    for v, _k, _a, b in plan.rows():
        arrivals[(v, b)] = arrivals.get((v, b), 0) + 1
    assert set(arrivals.values()) == {1}  # a tree: no GPU gets a vertex twice
    assert {(v, g) for v in range(len(req)) for g in req.dests_of(v)} <= set(arrivals)
    hops = spst_hops(TOPO, req, seed=seed)
    assert (delivered(hops, 8) == pair_bytes(req, 8)).all()  # byte accounting per GPU pair
    assert sum(h.size for h in hops) == sum(int(req.nbytes[v]) for v, *_ in plan.rows())  # each row once
    for h in hops:
        assert max(h.shares.values()) <= h.size <= sum(h.shares.values())
    back = reverse(hops)
    assert (delivered(back, 8) == pair_bytes(req, 8).T).all()
    assert [h.stage for h in back] == sorted(h.stage for h in back)


def test_p2p_and_swap_hops_account_for_every_byte():
    req = Requirements.random(8, 300, 1024, density=0.5, seed=9)
    assert (delivered(p2p_hops(req, 8), 8) == pair_bytes(req, 8)).all()
    swap = swap_hops(req, 8, [0, 0, 0, 0, 1, 1, 1, 1])
    assert (delivered(swap, 8) == pair_bytes(req, 8)).all()
    writes = [h for h in swap if h.stage == 0]
    assert sum(h.size for h in writes) == int(req.nbytes.sum())  # swap dumps every embedding


def _job(**kw):
    args = {"dataset": "web-google", "gpus": 8, "max_edges": 20_000, "compute": 1e-3, "sockets": 2} | kw
    return gnn_fullgraph(**args)


@pytest.fixture(scope="module")
def runs():
    job = _job()
    return job, {name: simulate(job, by_name(name), DGX1) for name in ("dgcl", "p2p", "swap")}


def test_every_original_receives_its_bytes_and_the_split_is_recorded(runs):
    job, results = runs
    for res in results.values():
        for f in job.flows:
            rec = res.items[f.id]
            assert rec.received == f.size and rec.children
            assert all(res.items[c].parent is not None for c in rec.children)


def test_stage_dependencies_respected_in_the_records(runs):
    _, results = runs
    res = results["dgcl"]
    stages = {}
    for rec in res.items.values():
        if rec.parent is not None:
            coflow, stage = rec.id.split(".k")[0], int(rec.id.split(".k")[1].split(".")[0])
            stages.setdefault(coflow, {}).setdefault(stage, []).append(rec)
    assert any(len(s) > 2 for s in stages.values())  # SPST relays: several stages
    for by_stage in stages.values():
        for k in sorted(by_stage)[1:]:
            assert min(r.start for r in by_stage[k]) >= max(r.end for r in by_stage[k - 1]) - 1e-12


def test_dgcl_beats_p2p_and_swap_on_a_dgx1(runs):
    _, results = runs
    cct = {n: sum(coflow_completion_times(r).values()) for n, r in results.items()}
    assert cct["dgcl"] < cct["p2p"] < cct["swap"]


def test_two_servers_cross_server_hops_are_network_flows():
    job = _job(gpus=16, gpus_per_server=8, sockets=0)
    res = simulate(job, by_name("dgcl"), TWO)
    cross = [r for r in res.items.values() if r.parent is not None and r.server != r.dst_server]
    assert cross and all(r.size > 0 for r in cross)
    assert all(res.items[f.id].received == f.size for f in job.flows)


def test_swap_needs_host_memory_endpoints():
    from railbed.errors import SpecError

    with pytest.raises(SpecError, match="sockets"):
        by_name("swap").check(_job(sockets=0), DGX1)


# ---------------------------------------------- the interface additions, on the simulator
class Multicast(Scheduler):
    """a -> b carries both originals (a->b, a->c); b relays a->c's bytes to c."""

    name = "multicast"

    def __init__(self, share=100):
        self.share = share

    def on_ready(self, item, view):
        if len(view.held) < 2:
            from railbed.scheduler import HOLD

            return HOLD
        hop = SubFlow("ab", 100, "a", "b", carries=(("f_ab", 100), ("f_ac", self.share)))
        return Split({"f_ab": [hop], "f_ac": [SubFlow("bc", 100, "b", "c", ("ab",))]})


def _three(servers):
    job = Job()
    for name, s, g in (("a", 0, 0), ("b", servers[1], 1), ("c", servers[2], 2)):
        job.endpoint(name, Location(s, f"gpu{g}", 0))
    job.flow("f_ab", "a", "b", 100)
    job.flow("f_ac", "a", "c", 100)
    return job


def test_multicast_sub_flows_on_the_simulator():
    res = simulate(_three((0, 1, 0)), Multicast(), TWO)
    assert res.items["f_ab"].received == 100 and res.items["f_ac"].received == 100
    assert sorted(res.items["f_ac"].children) == ["ab", "bc"] and res.items["ab"].end <= res.items["bc"].start
    with pytest.raises(SchedulerError, match="f_ac"):
        Dispatcher(_three((0, 1, 0)), Multicast(share=60), TWO).begin(0.0)


def test_same_server_flows_started_together_share_the_host_links():
    job = Job()
    for g in range(3):
        job.endpoint(f"g{g}", Location(0, f"gpu{g}", 0))
    job.endpoint("far", Location(0, "gpu5", 0))
    job.flow("one", "g0", "far", 10**8)
    alone = Dispatcher(job, by_name("fifo"), DGX1).begin(0.0)[0].seconds
    job.flow("two", "g2", "far", 10**8)  # gpu0 -> gpu5 and gpu2 -> gpu5 cross QPI together
    both = Dispatcher(job, by_name("fifo"), DGX1).begin(0.0)
    assert all(w.seconds == pytest.approx(2 * alone, rel=0.02) for w in both)
    assert np.isfinite(alone) and alone > 0


@pytest.mark.parametrize("name", ["dgcl", "p2p"])
def test_a_runs_forward_exchange_takes_the_cost_models_time(name):
    """Fig. 10's question asked of railbed: the run (hops as concurrent legs of the max-min host model,
    stage after stage) against the stage cost model of §5.1 for the same plan. Within 2 %: the run
    adds the hops' latency (1 us per hop, under 1 % of a millisecond-long exchange) and max-min
    sharing finishes a stage when its busiest hop drains, as the model says."""
    from hwmodels.dgcl import peer_to_peer, plan_cost
    from workloads.gnn_fullgraph import requirements

    job = _job(sockets=0)
    req = requirements(job.flows[0].tags["graph"])
    model = spst(TOPO, req)[1] if name == "dgcl" else plan_cost(TOPO, peer_to_peer(req), req)
    run = coflow_completion_times(simulate(job, by_name(name), DGX1))["e0.fwd2"]
    assert run == pytest.approx(model, rel=0.02)


def test_requirements_are_the_graphs_own_after_the_graph_cache_evicts():
    """More graphs than partitioned_graph caches: a freed graph's arrays may be reused at the same
    address, so a cache keyed by the arrays' id handed one graph another's requirement set."""
    from workloads.gnn_fullgraph import partitioned_graph, requirements

    base = {"dataset": "web-google", "gpus": 4, "max_edges": 5000, "locality": 0.8, "partitioner": "contiguous"}
    for seed in range(20):
        req = requirements(base | {"seed": seed, "hidden": 8})
        indptr, indices, part, scale = partitioned_graph("web-google", 4, 5000, 0.8, "contiguous", seed)
        fresh = Requirements.from_csr(indptr, indices, part, 32 * scale)
        assert np.array_equal(req.dest_ptr, fresh.dest_ptr) and np.array_equal(req.dest, fresh.dest), seed


@pytest.mark.parametrize("seed", range(3))
def test_requirements_from_csr_agree_with_from_graph(seed):
    """The vectorised CSR builder against the obvious per-edge loop of from_graph."""
    from workloads.gnn_graph import power_law_graph

    indptr, indices = power_law_graph(300, 4.0, 4, seed, locality=0.7)
    part = np.random.default_rng(seed).integers(0, 4, 300)
    edges = np.stack([np.repeat(np.arange(300), np.diff(indptr)), indices], axis=1)
    fast, slow = Requirements.from_csr(indptr, indices, part, 64.0), Requirements.from_graph(edges, part, 64.0)
    assert np.array_equal(fast.source, slow.source) and np.array_equal(fast.dest_ptr, slow.dest_ptr)
    assert np.array_equal(fast.dest, slow.dest) and np.array_equal(fast.nbytes, slow.nbytes)
    assert len(fast.dest) > 0


class Merge(Scheduler):
    """a -> x and c -> x, then one hop x -> b carrying both originals (60 + 40 of its 100 bytes)."""

    name = "merge"

    def on_ready(self, item, view):
        from railbed.scheduler import HOLD

        if len(view.held) < 2:
            return HOLD
        xb = SubFlow("xb", 100, "x", "b", ("ax", "cx"), carries=(("f_ab", 60), ("f_cb", 40)))
        return Split({"f_ab": [SubFlow("ax", 60, "a", "x"), xb], "f_cb": [SubFlow("cx", 40, "c", "x")]})


def test_a_multicast_hop_that_lost_bytes_counts_for_no_original_whole():
    """xb delivers 60 of its 100 bytes: as many as f_ab's share, but not f_ab's whole share."""
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 4, "gpus": 8, "nics": 1, "nic_rate": "50Gbit"}], "fabric": {"type": "single_switch"}}
    )
    job = Job()
    for name, server in (("a", 0), ("c", 1), ("x", 2), ("b", 3)):
        job.endpoint(name, Location(server, "gpu0", 0))
    job.flow("f_ab", "a", "b", 60)
    job.flow("f_cb", "c", "b", 40)
    whole = simulate(job, Merge(), spec)
    assert whole.items["f_ab"].received == 60 and whole.items["f_cb"].received == 40
    d = Dispatcher(job, Merge(), spec)
    assert {a.id for a in d.begin(0.0) if hasattr(a, "id")} == {"ax", "cx"}
    d.flow_done("ax", 1.0)
    assert [a.id for a in d.flow_done("cx", 1.0) if hasattr(a, "id")] == ["xb"]
    with pytest.raises(SchedulerError, match="f_ab: its sub-flows delivered 36 bytes of 60"):
        d.flow_done("xb", 2.0, received=60)


def test_one_dgcl_instance_plans_for_each_cluster_it_runs_on():
    """The plan cache belongs to one cluster: run on the DGX-1 then on the PCIe box, the instance
    times the PCIe run as a fresh one does (plans differ: NVLink trees against PCIe ones)."""
    pcie = ClusterSpec.from_dict(
        {"servers": [{"count": 1, "gpus": 8, "nics": 1, "nic_rate": "50Gbit", "intra_host": "pcie8"}],
         "fabric": {"type": "single_switch"}}
    )  # fmt: skip
    job = _job(sockets=0)
    reused = by_name("dgcl")
    on_dgx = simulate(job, reused, DGX1).makespan
    on_pcie = simulate(job, reused, pcie).makespan
    assert on_pcie == simulate(job, by_name("dgcl"), pcie).makespan and on_pcie != on_dgx


class Cross(Scheduler):
    """f_ab and f_cd meet at x and share the hop x -> y of ``size`` bytes; y sends each on."""

    name = "cross"

    def __init__(self, size):
        self.size = size

    def on_ready(self, item, view):
        from railbed.scheduler import HOLD

        if len(view.held) < 2:
            return HOLD
        xy = SubFlow("xy", self.size, "x", "y", ("ax", "cx"), carries=(("f_ab", 60), ("f_cd", 40)))
        return Split({"f_ab": [SubFlow("ax", 60, "a", "x"), xy, SubFlow("yb", 60, "y", "b", ("xy",))],
                      "f_cd": [SubFlow("cx", 40, "c", "x"), SubFlow("yd", 40, "y", "d", ("xy",))]})  # fmt: skip


def test_originals_of_different_sources_and_destinations_cannot_share_a_hops_bytes():
    """One copy serves one source's originals (multicast) or one destination's (reduction); f_ab and
    f_cd have neither in common, so x -> y needs 100 bytes, not 60."""
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 6, "gpus": 8, "nics": 1, "nic_rate": "50Gbit"}], "fabric": {"type": "single_switch"}}
    )
    job = Job()
    for server, name in enumerate("acxybd"):
        job.endpoint(name, Location(server, "gpu0", 0))
    job.flow("f_ab", "a", "b", 60)
    job.flow("f_cd", "c", "d", 40)
    with pytest.raises(SchedulerError, match="xy carries at least 100 distinct bytes in 60"):
        Dispatcher(job, Cross(60), spec).begin(0.0)
    res = simulate(job, Cross(100), spec)
    assert res.items["f_ab"].received == 60 and res.items["f_cd"].received == 40


def test_dgcl_without_intra_host_presets_is_refused_before_the_run():
    from railbed.errors import SpecError

    bare = ClusterSpec.from_dict(
        {"servers": [{"count": 1, "gpus": 8, "nics": 1, "nic_rate": "50Gbit"}], "fabric": {"type": "single_switch"}}
    )
    with pytest.raises(SpecError, match="intra_host"):
        by_name("dgcl").check(_job(sockets=0), bare)
    by_name("dgcl").check(_job(sockets=0), DGX1)


@pytest.mark.parametrize(
    "field, value",
    [("gpus", 8.0), ("gpus", 40), ("gpus_per_server", 2.5), ("max_edges", "x"), ("max_edges", 10**9),
     ("hidden", 1.5), ("sockets", -1), ("locality", "hi"), ("locality", 1.5), ("compute", -1.0),
     ("partitioner", "kl")],
)  # fmt: skip
def test_bad_gnn_fullgraph_arguments_are_spec_errors_naming_them(field, value):
    """Called directly too (generate() checks types from the annotations; a library caller does not)."""
    from railbed.errors import SpecError

    with pytest.raises(SpecError) as err:
        gnn_fullgraph(**{"max_edges": 5000, field: value})
    assert err.value.field == field
