"""One epoch of owner-compute mini-batch training over partitioned servers: ``gnn_epoch``.

The systems of seeds 001 and 003 train the same way: each server holds a
part of the graph and its features (DistDGL's KVStore, §4.1.3; AdaGL's
allocation, §II) and trains on its own training nodes (DistDGL's
owner-compute rule, §4.1.1); a mini-batch's sampled neighbourhood reaches
nodes of other servers, whose features are fetched over the network
(AdaGL §II: "each server should thus retrieve the node and edge features
for its missing neighbor nodes from other remote machines").

Items of epoch ``e`` on server ``i`` (``t<i>``: the trainer on the
server's GPU; ``kv<i>``: its feature store on the CPU)
    per batch ``k`` of the server's training nodes (in a random order,
    ``batch`` per batch): fetch flows ``e<e>.s<i>.b<k>.p<p>`` from every
    other server ``p`` holding sampled nodes (``4 F`` bytes per distinct
    node plus 16 per sampled edge, the convention of
    :func:`workloads.partition.sampled_bytes`; coflow ``e<e>.s<i>.b<k>``,
    type ``graph-data``), then the training task ``e<e>.s<i>.b<k>.t``
    (:func:`workloads.gnn_compute.worker_seconds` of the sampled batch,
    divided by the server's speed). A batch's fetches wait for the previous
    batch's training: communication and computation do not overlap (AdaGL
    Table I reports them as two parts of the epoch). At the end of the
    epoch the servers all-reduce the model (a ring over the trainers).
    Sampling runs on the real generated graph with the fan-out sampler of
    :mod:`workloads.gnn_graph` (uniform node-wise: GraphSAGE's).

Samplers (``sampler``; :mod:`workloads.samplers`, seed 004 §3.4)
    ``neighbor`` (node-wise fan-out, DGS's "Random"), ``fastgcn`` and
    ``ladies`` (layer-wise: ``fanout[h]`` nodes per layer, LADIES's
    ``samp_num``, with ``layer_budget: layer``; with ``layer_budget: node``
    as many draws per layer as the node-wise sampler makes, the batch's
    seeds times ``fanout[0] ... fanout[h]``: DGS's "fanout {64, 64}" read
    as one budget for every sampler), ``dgs`` (the node-wise sample with DGS's surrogate masks:
    ``remote_keep`` of the remote nodes kept, remote features at
    ``feature_keep``). Their synchronisation flows, each a dense probability
    tensor of ``4 N`` bytes from every other server to the batch's server:
    FastGCN once before the epoch ("pre-computes and synchronizes the
    probability tensor before training", §3.4.1), LADIES before every layer
    of every batch, DGS before every ``t_ex``-th batch of a server (§3.4.1:
    "one-time update every T_ex = 30 iterations versus the layer-size x
    updates per iteration in LADIES"; DGS's own tensors cover the remote
    nodes and the features, fewer than ``N``: an upper bound, ours).

Heterogeneous servers (AdaGL §III, §V-A)
    ``capacity`` gives each server's ``P_i`` (AdaGL's heterogeneous testbed:
    "two nodes have 6GB GPU memory, and the other two nodes have 12GB":
    ``[6, 6, 12, 12]``). A server trains at ``P_i / max P`` of the
    hardware's speed: balance in AdaGL's sense (eq. 1, targets ``B_i
    proportional to P_i``) equalises ``L_i / P_i``, which equalises time only
    if a server's throughput is in proportion to ``P_i`` (our reading: the
    GPUs are all Titan Xp; memory sets how much a server processes at a
    time). Capacity-aware partitioners (``hash``, ``adagl``) get ``P``.

Reduced runs
    ``batches`` (None: all) keeps the first ``batches`` batches of each
    server (the emulated rows: the epoch's structure at a fraction of its
    length; the row says so). ``scale`` shrinks the graph
    (:func:`workloads.graphs.dataset_graph`).
"""

from __future__ import annotations

import math

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.gnn_compute import Batch, Hardware, dims, worker_seconds
from workloads.llm import ring_allreduce

FLOAT_BYTES = 4
EDGE_BYTES = 16
HARDWARE = {  # public figures: FP32 peak, memory bandwidth, host link (bytes/s)
    "titan-xp": Hardware(12, 76.8e9, 12.15e12, 547.7e9, 15.75e9),  # seed 003's GPUs, PCIe 3.0 x16
    "v100": Hardware(20, 76.8e9, 15.7e12, 900e9, 15.75e9),  # seed 004 ch. 3's GPUs
    "1080ti": Hardware(8, 76.8e9, 11.34e12, 484e9, 15.75e9),  # seed 000's testbed (gnn_compute.TESTBED)
    "rtx3090": Hardware(40, 76.8e9, 35.58e12, 936e9, 15.75e9),  # seed 004 ch. 4's GPUs behind PCIe 3.0
    # CPU training: the trainer's "GPU" is the machine's cores (AVX-512 FP32 peak, both sockets' memory),
    # and its "host link" the memory itself
    "m5n-cpu": Hardware(96, 281e9, 7.68e12, 281e9, 281e9),  # seed 001 §5.1: m5n.24xlarge, 2 x 24 cores 2.5 GHz
    "xeon-8260": Hardware(96, 281e9, 7.37e12, 281e9, 281e9),  # seed 001 §5.2: 2 x Xeon 8260, 24 cores 2.4 GHz
}
MAX_SERVERS = 64


def _positive(name: str, value, low=1, kinds=(int,)) -> None:
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low:
        raise SpecError(name, f"must be {'a whole number ' if kinds == (int,) else ''}>= {low}, got {value!r}")


def allocation(dataset: str, servers: int, partitioner: str, capacity, scale: float, mixing: float, seed: int):
    """(graph, node -> server) of one configuration; partitions that do not read capacities are
    cached like the graph (:func:`workloads.partition.dataset_partition`)."""
    from workloads.graphs import dataset_graph
    from workloads.partition import CAPACITY_AWARE, dataset_partition, partition

    if capacity is None or partitioner not in CAPACITY_AWARE:
        return dataset_partition(dataset, servers, partitioner, scale, mixing, seed)
    graph = dataset_graph(dataset, scale, mixing, seed)
    return graph, partition(partitioner, graph, servers, seed, capacity=capacity)


def gnn_epoch(
    dataset: str = "ogbn-arxiv",
    servers: int = 4,
    capacity: list[float] | None = None,
    partitioner: str = "metis",
    fanout: list[int] | None = None,
    batch: int = 1000,
    hidden: int = 256,
    hardware: str = "titan-xp",
    efficiency: float = 0.3,
    epochs: int = 1,
    batches: int | None = None,
    sampler: str = "neighbor",
    layer_budget: str = "layer",
    remote_keep: float = 0.5,
    feature_keep: float = 0.85,
    t_ex: int = 30,
    scale: float = 0.1,
    mixing: float = 0.13,
    seed: int = 0,
    name: str | None = None,
) -> Job:
    """Owner-compute mini-batch training on ``servers`` servers (module docstring)."""
    from workloads.graphs import dataset as dataset_of

    ds = dataset_of(dataset)
    _positive("servers", servers, 2)
    if servers > MAX_SERVERS:
        raise SpecError("servers", f"at most {MAX_SERVERS}, got {servers}")
    for key, value in (("batch", batch), ("hidden", hidden), ("epochs", epochs)):
        _positive(key, value)
    if batches is not None:
        _positive("batches", batches)
    cap = _capacity(capacity, servers)
    fan = _fanout(fanout, ds.fanout)
    if hardware not in HARDWARE:
        raise SpecError("hardware", f"unknown hardware {hardware!r} (known: {', '.join(HARDWARE)})")
    ok = isinstance(efficiency, (int, float)) and not isinstance(efficiency, bool) and math.isfinite(efficiency)
    if not ok or not 0 < efficiency <= 1:
        raise SpecError("efficiency", f"must be in (0, 1], got {efficiency!r}")
    if sampler not in SAMPLERS:
        raise SpecError("sampler", f"unknown sampler {sampler!r} (known: {', '.join(SAMPLERS)})")
    if layer_budget not in LAYER_BUDGETS:
        raise SpecError("layer_budget", f"must be one of {', '.join(LAYER_BUDGETS)}, got {layer_budget!r}")
    for key, value in (("remote_keep", remote_keep), ("feature_keep", feature_keep)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not 0 <= value <= 1:
            raise SpecError(key, f"must be in [0, 1], got {value!r}")
    _positive("t_ex", t_ex)
    graph, part = allocation(ds.name, servers, partitioner, cap, scale, mixing, seed)
    draw = _drawer(graph, part, servers, sampler, fan, remote_keep, layer_budget)
    rng = np.random.default_rng(seed + 11)
    shapes = dims(ds.features, hidden, len(fan), ds.classes)
    speed = np.ones(servers) if cap is None else np.asarray(cap, float) / max(cap)
    hw = HARDWARE[hardware]
    job = Job(name or f"epoch-{ds.name}-{servers}s-{partitioner}")
    for i in range(servers):
        job.endpoint(f"t{i}", Location(i, "gpu0", 0), "worker")
        job.endpoint(f"kv{i}", Location(i, "cpu", 0), "store")
    job.capacity["cpu"] = 1 << 20  # a store serves every request at once (its cores are not modelled)
    tensor = FLOAT_BYTES * graph.n  # a dense probability tensor over the graph's nodes
    model = FLOAT_BYTES * sum(2 * a * b + b for a, b in shapes)
    last: dict[str, list[str]] = {f"t{i}": [] for i in range(servers)}
    stats = {"fetched": 0, "local": 0, "batches": 0}
    for e in range(epochs):
        for i in range(servers):
            mine = np.flatnonzero((part == i) & graph.train)
            order = rng.permutation(mine)
            chunks = [order[k : k + batch] for k in range(0, len(order), batch)][: batches or None]
            prev = last[f"t{i}"]
            if sampler == "fastgcn" and e == 0:  # the probabilities, once before training
                prev = _sync(job, f"e{e}.s{i}.q", i, servers, tensor, prev, e)
            for k, seeds in enumerate(chunks):
                nodes, edges, hop_nodes, hop_edges = draw(seeds, i, rng)
                feat = FLOAT_BYTES * ds.features * nodes
                if sampler == "dgs":  # remote nodes send feature_keep of their features
                    feat = np.where(np.arange(servers) != i, feat * feature_keep, feat)
                fetch = np.rint(feat + EDGE_BYTES * edges)
                cid = f"e{e}.s{i}.b{k}"
                for h in range(len(fan) if sampler == "ladies" else 0):  # a tensor before every layer's draw
                    prev = _sync(job, f"{cid}.y{h}", i, servers, tensor, prev, e)
                if sampler == "dgs" and k % t_ex == 0:
                    prev = _sync(job, f"{cid}.y", i, servers, tensor, prev, e)
                flows = [
                    job.flow(f"{cid}.p{p}", f"kv{p}", f"t{i}", int(fetch[p]), prev, coflow=cid,
                             coflow_type="graph-data", iteration=e)
                    for p in range(servers) if p != i and fetch[p] > 0
                ]  # fmt: skip
                b = Batch(nodes, edges, hop_nodes, hop_edges)
                t = worker_seconds([b], float(fetch.sum()), shapes, efficiency, hw) / speed[i]
                prev = [job.task(f"{cid}.t", f"t{i}", t, flows + prev, iteration=e, tags={"trained": len(seeds)})]
                stats["fetched"] += int(fetch.sum() - fetch[i])
                stats["local"] += int(fetch[i])
                stats["batches"] += 1
            last[f"t{i}"] = prev
        ends = ring_allreduce(job, [f"t{i}" for i in range(servers)], model, last, f"e{e}.ar",
                              coflow=f"e{e}.ar", coflow_type="DP", iteration=e)  # fmt: skip
        last = {w: [item] for w, item in ends.items()}
    first = job.flows[0] if job.flows else None
    if first is not None:
        first.tags["epoch"] = {"dataset": ds.name, "nodes": graph.n, "partitioner": partitioner, "capacity": cap,
                               "remote_bytes": stats["fetched"], "local_bytes": stats["local"],
                               "batches": stats["batches"]}  # fmt: skip
    return job.validate()


SAMPLERS = ("neighbor", "fastgcn", "ladies", "dgs")
LAYER_BUDGETS = ("layer", "node")


def _drawer(graph, part, servers: int, sampler: str, fan: list[int], remote_keep: float, budget: str = "layer"):
    """``draw(seeds, home, rng)`` -> (nodes, edges per part, nodes, edges per hop) of one batch; a
    layer-wise sampler draws ``fan[h]`` nodes at hop ``h`` (``budget`` ``layer``) or the node-wise
    sampler's number of draws, ``len(seeds) * fan[0] * ... * fan[h]`` (``node``)."""
    from workloads.gnn_graph import Sampler
    from workloads.samplers import LayerSampler, dgs_counts

    if sampler in ("fastgcn", "ladies"):
        layer = LayerSampler(graph.indptr, graph.indices, part, servers, sampler)
        if budget == "node":
            sizes = lambda seeds: np.cumprod([len(seeds), *fan])[1:]  # noqa: E731
            return lambda seeds, home, rng: layer.counts(seeds, [rng.random(int(k)) for k in sizes(seeds)])
        return lambda seeds, home, rng: layer.counts(seeds, [rng.random(k) for k in fan])
    node = Sampler(graph.indptr, graph.indices, part, servers)
    if sampler == "neighbor":
        return lambda seeds, home, rng: node.counts(seeds, fan, int(rng.integers(1 << 62)))

    def dgs(seeds, home, rng):
        nodes, edges, hop_nodes, hop_edges = node.counts(seeds, fan, int(rng.integers(1 << 62)))
        return (*dgs_counts(nodes, edges, home, remote_keep), hop_nodes, hop_edges)

    return dgs


def _sync(job: Job, cid: str, i: int, servers: int, nbytes: int, prev: list[str], e: int) -> list[str]:
    """A probability tensor from every other server to server ``i`` (coflow ``cid``), after ``prev``."""
    return [
        job.flow(f"{cid}.p{p}", f"kv{p}", f"t{i}", nbytes, prev, coflow=cid, coflow_type="probability", iteration=e)
        for p in range(servers) if p != i
    ]  # fmt: skip


def _capacity(capacity, servers: int) -> list[float] | None:
    if capacity is None:
        return None
    if not isinstance(capacity, list) or len(capacity) != servers:
        raise SpecError("capacity", f"expected one capacity per server ({servers}), got {capacity!r}")
    for k, c in enumerate(capacity):
        ok = isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c > 0
        if not ok:
            raise SpecError(f"capacity[{k}]", f"must be a positive number, got {c!r}")
    return [float(c) for c in capacity]


def _fanout(fanout, default) -> list[int]:
    if fanout is None:
        return list(default)
    if not isinstance(fanout, list) or not fanout or not all(isinstance(k, int) and k >= 1 for k in fanout):
        raise SpecError("fanout", f"expected a list of whole numbers >= 1, got {fanout!r}")
    return list(fanout)
