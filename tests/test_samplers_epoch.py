"""The layer-wise samplers and DGS's surrogate by hand, the kernel against its twin, and gnn_epoch's
items (fetches, synchronisations, heterogeneous speeds)."""

import numpy as np
import pytest

from railbed.errors import SpecError
from workloads.gnn_epoch import gnn_epoch
from workloads.graphs import community_graph, csr_from_edges_reference
from workloads.samplers import LayerSampler, dgs_counts, layer_counts_reference

# a star 0-(1,2,3) and a path 3-4-5; parts {0,1,2} and {3,4,5}
STAR = csr_from_edges_reference(6, np.array([0, 0, 0, 3, 4]), np.array([1, 2, 3, 4, 5]))
PART = np.array([0, 0, 0, 1, 1, 1])


def test_ladies_draws_among_the_layers_neighbours_by_squared_hits():
    indptr, indices = STAR
    # seeds {1, 2}: candidates 0 (hit twice, weight 4) only; any draw picks 0; edges 1-0 and 2-0
    for run in (LayerSampler(indptr, indices, PART, 2, "ladies").counts, None):
        draws = [np.array([0.1, 0.9])]
        out = run([1, 2], draws) if run else layer_counts_reference(indptr, indices, PART, 2, [1, 2], draws, "ladies")
        nodes, edges, hop_nodes, hop_edges = out
        assert nodes.tolist() == [3, 0] and edges.tolist() == [2, 0]
        assert hop_nodes.tolist() == [2, 1] and hop_edges.tolist() == [2]


def test_fastgcn_draws_from_squared_degrees_over_all_nodes():
    indptr, indices = STAR
    # degrees 3,1,1,2,2,1: squares 9,1,1,4,4,1 (cumulative 9,10,11,15,19,20); draws 0.5 -> 10 -> node 1,
    # 0.6 -> 12 -> node 3; seeds {0}: layer {1, 3}, edges 0-1 and 0-3
    s = LayerSampler(indptr, indices, PART, 2, "fastgcn")
    nodes, edges, hop_nodes, hop_edges = s.counts([0], [np.array([0.5, 0.6])])
    assert nodes.tolist() == [2, 1] and edges.tolist() == [2, 0] and hop_edges.tolist() == [2]


@pytest.mark.parametrize("mode", ["fastgcn", "ladies"])
def test_layer_kernel_agrees_with_its_twin(mode):
    indptr, indices, _ = community_graph(1500, 12000, 0.2, 3)
    part = np.random.default_rng(3).integers(0, 3, 1500)
    rng = np.random.default_rng(4)
    s = LayerSampler(indptr, indices, part, 3, mode)
    for _ in range(4):  # the marks carry over between calls
        seeds = rng.choice(1500, 40, replace=False)
        draws = [rng.random(60), rng.random(90), rng.random(30)]
        a, b = s.counts(seeds, draws), layer_counts_reference(indptr, indices, part, 3, seeds, draws, mode)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_dgs_surrogate_moves_remote_nodes_home():
    nodes, edges = dgs_counts(np.array([10, 4, 6]), np.array([20, 8, 2]), home=0, remote_keep=0.5)
    assert nodes.tolist() == [15, 2, 3] and edges.tolist() == [25, 4, 1]


SMALL = {"dataset": "ogbn-arxiv", "servers": 3, "scale": 0.02, "batch": 200, "partitioner": "metis", "epochs": 1}


def test_epoch_fetches_then_trains_and_syncs_as_each_sampler_does():
    job = gnn_epoch(**SMALL)
    n = job.flows[0].tags["epoch"]["nodes"]
    trains = [t for t in job.tasks if t.id.endswith(".t")]
    fetches = {f.coflow: f.id for f in job.flows if f.coflow_type == "graph-data"}
    assert trains and any(t.id[:-2] in fetches for t in trains)
    for t in trains:  # a batch trains after its own fetches, which go to its server
        mine = [f for f in job.flows if f.coflow == t.id[:-2]]
        assert {f.id for f in mine} <= set(t.deps) and all(f.dst == t.endpoint for f in mine)
    batches = job.flows[0].tags["epoch"]["batches"]
    lad = gnn_epoch(**SMALL, sampler="ladies", fanout=[8, 8])
    syncs = [f for f in lad.flows if f.coflow_type == "probability"]
    assert len(syncs) == batches * 2 * 2  # per batch, per layer, from the two other servers
    assert {f.size for f in syncs} == {4 * n}
    fast = gnn_epoch(**SMALL, sampler="fastgcn", fanout=[8, 8])
    assert len([f for f in fast.flows if f.coflow_type == "probability"]) == 3 * 2  # once per server
    dgs = gnn_epoch(**SMALL, sampler="dgs", t_ex=2)
    per_server = [len([t for t in trains if t.endpoint == f"t{i}"]) for i in range(3)]
    expected = sum(-(-k // 2) for k in per_server) * 2
    assert len([f for f in dgs.flows if f.coflow_type == "probability"]) == expected
    remote = lambda j: j.flows[0].tags["epoch"]["remote_bytes"]  # noqa: E731
    assert remote(dgs) < remote(job)


def test_heterogeneous_servers_train_at_their_capacity():
    even = gnn_epoch(**SMALL)
    slow = gnn_epoch(**SMALL, capacity=[1, 2, 2])
    t_even = {t.id: t.duration for t in even.tasks if t.id.endswith(".t")}
    t_slow = {t.id: t.duration for t in slow.tasks if t.id.endswith(".t")}
    checked = 0
    for tid, d in t_slow.items():  # server 0 runs at half speed, the others at full
        factor = 2 if tid.split(".")[1] == "s0" else 1
        assert d == pytest.approx(factor * t_even[tid])
        checked += factor == 2
    assert checked > 0
    for args, field in (({"capacity": [1, 2]}, "capacity"), ({"capacity": [1, 0, 2]}, "capacity[1]"),
                        ({"sampler": "mystery"}, "sampler"), ({"remote_keep": 2}, "remote_keep"),
                        ({"hardware": "tpu"}, "hardware"), ({"fanout": [0]}, "fanout")):  # fmt: skip
        with pytest.raises(SpecError) as exc:
            gnn_epoch(**{**SMALL, **args})
        assert exc.value.field == field


def test_layer_budget_node_draws_what_the_node_wise_sampler_draws(monkeypatch):
    """``layer_budget: layer``: ``fanout[h]`` draws at hop h (LADIES's samp_num); ``node``: the
    batch's seeds times fanout[0] ... fanout[h], the node-wise sampler's number of draws."""
    from types import SimpleNamespace

    import workloads.samplers as samplers
    from workloads.gnn_epoch import _drawer

    sizes = []
    record = lambda self, seeds, draws: sizes.append([len(d) for d in draws])  # noqa: E731
    monkeypatch.setattr(samplers.LayerSampler, "counts", record)
    seeds, rng = np.array([0, 3, 4]), np.random.default_rng(0)
    for budget, want in (("layer", [3, 2]), ("node", [9, 18])):
        sizes.clear()
        graph = SimpleNamespace(indptr=STAR[0], indices=STAR[1])
        _drawer(graph, PART, 2, "fastgcn", [3, 2], 0.5, budget)(seeds, 0, rng)
        assert sizes == [want], budget
    with pytest.raises(SpecError) as exc:
        gnn_epoch(**SMALL, sampler="fastgcn", layer_budget="batch")
    assert exc.value.field == "layer_budget"
