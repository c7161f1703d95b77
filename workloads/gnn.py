"""Sampling-based distributed GNN training (DGTP, seed 000 §III-A, §VI): ``gnn_training``.

Tasks (endpoints, with ``role`` and ``demands`` of §VI-A; memory in GB)
    ``g<m>``: graph store of machine ``m``, pinned to server ``m`` (``cpu``),
    no demands (§V-A counts capacity *excluding* the store's, C''_m);
    ``s<w>_<k>``: sampler ``k`` of worker ``w`` (7 GB, 2 cores);
    ``w<w>``: worker (3 GB, 1 core, 1 GPU); ``ps``: the parameter server
    (5 GB, 1 core). Everything but the stores is placed by the scheduler.

Per iteration ``n`` (§III-B's dependency rules (i)-(iii))
    store task ``i<n>.store.g<m>`` -> fetch flow ``i<n>.fetch.g<m>.<s>``
    (features and structure, store -> sampler) -> sampler task
    ``i<n>.sample.<s>`` (after every store's fetch) -> mini-batch flow
    ``i<n>.mb.<s>`` (sampler -> worker) -> worker task ``i<n>.train.<w>``
    (after its samplers' mini-batches and iteration ``n-1``'s parameters) ->
    gradient push ``i<n>.push.<w>`` (worker -> PS) -> PS task
    ``i<n>.update`` (after every push) -> parameter pull ``i<n>.pull.<w>``
    (PS -> worker, read by iteration ``n+1``'s worker task). Eq. (10): every
    task also waits for its own previous iteration; eq. (11): every flow
    waits for its previous-iteration counterpart (same source and
    destination). Same-machine transfers are flows too; railbed gives them
    0 s when the server has no intra-host model, as constraint (9) ignores
    them. The paper bounds nothing else, so samplers may run ahead of their
    workers by any number of iterations (so does this job: DGTP pipelines
    across iterations, §II-C; the baselines' schedulers add their own
    bounds, :mod:`schedulers.dgtp`'s ``depth``).

Sizes (bytes)
    From real fan-out sampling (:mod:`workloads.gnn_graph`) on a generated
    graph of the dataset (:mod:`workloads.graphs`: communities of mixed
    sizes, shuffled ids, the dataset's nodes, edges, features and split)
    partitioned over the machines by ``partitioner`` (a name in
    :data:`workloads.partition.PARTITIONERS`; METIS by default, as DGTP's
    testbed, §VI-A). Per sampler and iteration the sampler draws ``batch /
    samplers_per_worker`` seed nodes (the per-sampler batch of §VI-B) among
    the training nodes of its worker's home partition ``w mod machines``
    (DistDGL's owner-compute rule, seed 001 §4.1.5), then samples the
    dataset's fan-outs from the output layer back (DGL's convention, which
    DGTP's fan-outs follow, §VI-A). The fetch from store ``m`` is ``4 F``
    bytes per distinct node of partition ``m`` (float32 features) plus 16
    bytes per edge sampled from its nodes (an int64 pair); the mini-batch is
    the sum over partitions (the sampler forwards the sub-graph with its
    features). Fetch and mini-batch sizes are ``reveal="on_ready"``.
    Gradient and parameter flows carry the model: GraphSAGE (mean
    aggregator) with ``len(fanout)`` layers of ``hidden`` units, each layer
    ``2 in out + out`` float32 parameters (self and neighbour weights,
    bias); the output layer has the dataset's classes.

Graph scale
    ``scale`` is the fraction of the dataset's nodes generated, at the
    dataset's mean degree (:func:`workloads.graphs.dataset_shape`): 1 is
    the full graph (ogbn-products: 2.4 M nodes, 124 M neighbour entries,
    about a minute to generate and another for METIS, cached on disk after
    the first run); papers100M is limited to ``scale`` <= 0.12 (the graph is
    built in memory). A smaller graph repeats nodes more often inside a
    sampled neighbourhood, so it under-estimates distinct nodes. The first
    fetch's ``tags["graph"]`` records the scale, the partition's edge cut and
    the **home-store share**: the share of the job's fetched bytes that come
    from each sampler's home store (what a co-located sampler need not send
    over the network).

Profile (what ETP reads)
    The paper profiles 50 iterations (§V-B, §VI-A). The first-iteration
    fetch and mini-batch flow of every (source, destination) pair carries
    ``tags["profile"]``: the sizes of ``profile`` further sampled
    iterations (other seeds), public before the run (``Job.public`` keeps
    tags). Samplers drawing from the same home partition have the same size
    distribution, so they share one profile (sampled once per partition).
    Task durations are in the job (public, as the paper's p_j).

Peak-to-mean ratio (§VI-B's PMR sweep)
    The paper defines the PMR as the largest store-to-sampler flow rate over
    the mean of all of them, and varies it by "scaling up and down the
    transmitted graph data sizes", without saying how. Here every fetch
    size ``x`` becomes ``mean + spread (x - mean)`` (``spread`` = 1: as
    sampled; the mean over the job's fetches is kept), mini-batches are
    re-summed, and the PMR (largest fetch over the mean fetch, per
    iteration's volume) is recorded in the first fetch's ``tags["graph"]``.
    Task times keep the sampled counts.

Compute times (:mod:`workloads.gnn_compute`)
    Each store, sampler, worker and PS task of each iteration takes the time
    the testbed's CPU or GPU needs for what that iteration sampled (bytes
    gathered, edges stitched, GraphSAGE FLOPs and the PCIe copy, Adam), at
    ``efficiency`` of peak (unstated, swept); a store works with
    ``store_cores`` cores (the paper excludes the store's resources, C''_m,
    without stating them; we give it a sampler's 2). Reddit's 602 features
    cost six times products' 100 per node gathered and in layer 1's FLOPs.
"""

from __future__ import annotations

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads import gnn_compute as hw
from workloads.gnn_compute import Batch
from workloads.gnn_graph import Sampler
from workloads.graphs import GraphDataset, check_scale
from workloads.graphs import dataset as dataset_of
from workloads.partition import dataset_partition, edge_cut

FLOAT_BYTES = 4
EDGE_BYTES = 16
ROLE_DEMANDS = {  # §VI-A; mem in GB
    "worker": {"mem": 3, "cpu": 1, "gpu": 1},
    "sampler": {"mem": 7, "cpu": 2},
    "ps": {"mem": 5, "cpu": 1},
    "store": {},
}


def graphsage_bytes(features: int, hidden: int, layers: int, classes: int) -> int:
    """Parameter bytes of GraphSAGE-mean: per layer 2 in out + out float32 values."""
    dims = [features] + [hidden] * (layers - 1) + [classes]
    return FLOAT_BYTES * sum(2 * a * b + b for a, b in zip(dims, dims[1:]))


class _Draws:
    """Sampled batches on the partitioned graph, per home partition."""

    def __init__(self, ds: GraphDataset, machines: int, partitioner: str, scale: float, mixing: float, seed: int):
        self.ds, self.machines = ds, machines
        self.graph, self.part = dataset_partition(ds.name, machines, partitioner, scale, mixing, seed)
        self.sampler = Sampler(self.graph.indptr, self.graph.indices, self.part, machines)
        self.fanout = tuple(reversed(ds.fanout))  # hop 0 at the seeds: the output layer's fan-out
        self.pools = [np.flatnonzero((self.part == h) & self.graph.train) for h in range(machines)]
        self.rng = np.random.default_rng(seed + 1)

    def draw(self, home: int, seeds_per_sampler: int) -> Batch:
        pool = self.pools[home] if len(self.pools[home]) else np.flatnonzero(self.part == home)
        seeds = self.rng.choice(pool, seeds_per_sampler, replace=seeds_per_sampler > len(pool))
        return Batch(*self.sampler.counts(seeds, self.fanout, int(self.rng.integers(1 << 62))))

    def fetch(self, b: Batch) -> tuple[list[int], int]:
        """(bytes from each store, mini-batch bytes) of one sampled batch."""
        f = [int(FLOAT_BYTES * self.ds.features * a + EDGE_BYTES * e) for a, e in zip(b.nodes, b.edges)]
        return f, sum(f)


def _positive(name: str, value, low=1):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise SpecError(name, f"must be >= {low}, got {value!r}")
    return value


def gnn_training(
    dataset: str = "ogbn-products",
    machines: int = 4,
    workers: int = 6,
    samplers_per_worker: int = 2,
    iterations: int = 10,
    batch: int = 2000,
    hidden: int = 256,
    scale: float = 0.01,
    partitioner: str = "metis",
    mixing: float = 0.13,
    efficiency: float = 0.3,
    store_cores: float = 2,
    profile: int = 50,
    spread: float = 1.0,
    seed: int = 0,
    name: str | None = None,
) -> Job:
    """GraphSAGE training on ``dataset`` with one store per machine (see the module docstring)."""
    ds = dataset_of(dataset)
    for key, value in (("machines", machines), ("workers", workers), ("samplers_per_worker", samplers_per_worker)):
        _positive(key, value)
    _positive("iterations", iterations)
    _positive("batch", batch, samplers_per_worker)
    _positive("hidden", hidden)
    _positive("profile", profile, 0)
    _positive("spread", spread, 0)
    _positive("store_cores", store_cores, 0.01)
    check_scale(ds, scale)
    if isinstance(efficiency, bool) or not isinstance(efficiency, (int, float)) or not 0 < efficiency <= 1:
        raise SpecError("efficiency", f"must be in (0, 1], got {efficiency!r}")
    draws = _Draws(ds, machines, partitioner, scale, mixing, seed)
    job = Job(name or f"gnn-{ds.name}-m{machines}-w{workers}x{samplers_per_worker}")
    job.capacity["cpu"] = 1 << 20  # CPU tasks of a server run in parallel; their cores are the demands
    stores = [job.endpoint(f"g{m}", Location(m, "cpu", 0), "store", ROLE_DEMANDS["store"]) for m in range(machines)]
    group = {f"w{w}": [f"s{w}_{k}" for k in range(samplers_per_worker)] for w in range(workers)}
    for w, samplers in group.items():
        job.endpoint(w, role="worker", demands=ROLE_DEMANDS["worker"])
        for s in samplers:
            job.endpoint(s, role="sampler", demands=ROLE_DEMANDS["sampler"])
    job.endpoint("ps", role="ps", demands=ROLE_DEMANDS["ps"])
    per_sampler = batch // samplers_per_worker
    home = {s: int(w[1:]) % machines for w, ss in group.items() for s in ss}
    batches = {s: [draws.draw(home[s], per_sampler) for _ in range(iterations)] for s in home}
    drawn = {s: [draws.fetch(b) for b in bs] for s, bs in batches.items()}
    by_home = {h: [draws.fetch(draws.draw(h, per_sampler)) for _ in range(profile)] for h in sorted(set(home.values()))}
    profiles = {s: by_home[home[s]] for s in home}  # samplers of one home partition share a size distribution
    home_bytes = sum(f[home[s]] for s, fs in drawn.items() for f, _ in fs)
    total_bytes = sum(mb for fs in drawn.values() for _, mb in fs)
    drawn, profiles, pmr = _spread(drawn, profiles, spread)
    model = graphsage_bytes(ds.features, hidden, len(ds.fanout), ds.classes)
    times = _times(ds, batches, group, hidden, model, efficiency, store_cores)
    for n in range(iterations):
        _iteration(job, n, stores, group, drawn, profiles if n == 0 else None, model, times)
    first = job.items[f"i0.fetch.g0.{next(iter(home))}"]
    first.tags["graph"] = {
        **{k: draws.graph.meta[k] for k in ("dataset", "scale", "nodes", "entries", "mixing", "communities")},
        "partitioner": partitioner, "edge_cut": round(edge_cut(draws.graph, draws.part), 4),
        "home_share": round(home_bytes / max(total_bytes, 1), 4), "pmr": pmr,
        "efficiency": efficiency, "mean_times_ms": _mean_ms(times),
    }  # fmt: skip
    return job.validate()


def _times(ds: GraphDataset, batches: dict, group: dict, hidden: int, model: int, eff: float, store_cores: float):
    """Per iteration: {task key: seconds} for stores ``g<m>``, samplers, workers and ``update``."""
    shapes = hw.dims(ds.features, hidden, len(ds.fanout), ds.classes)
    iterations = len(next(iter(batches.values())))
    out = []
    for n in range(iterations):
        t: dict[str, float] = {}
        nodes = sum(bs[n].nodes for bs in batches.values())
        edges = sum(bs[n].edges for bs in batches.values())
        for m in range(len(nodes)):
            t[f"g{m}"] = hw.store_seconds(float(nodes[m]), float(edges[m]), ds.features, store_cores, eff)
        mb = {s: FLOAT_BYTES * ds.features * float(bs[n].nodes.sum()) + EDGE_BYTES * float(bs[n].edges.sum())
              for s, bs in batches.items()}  # fmt: skip
        for s, bs in batches.items():
            t[s] = hw.sampler_seconds(mb[s], float(bs[n].edges.sum()), eff)
        for w, samplers in group.items():
            t[w] = hw.worker_seconds([batches[s][n] for s in samplers], sum(mb[s] for s in samplers), shapes, eff)
        t["update"] = hw.update_seconds(model // FLOAT_BYTES, len(group), eff)
        out.append(t)
    return out


def _mean_ms(times: list[dict[str, float]]) -> dict[str, float]:
    kinds = {"store": "g", "sampler": "s", "worker": "w"}
    out = {k: 1e3 * float(np.mean([v for t in times for key, v in t.items() if key.startswith(p)]))
           for k, p in kinds.items()}  # fmt: skip
    out["update"] = 1e3 * float(np.mean([t["update"] for t in times]))
    return {k: round(v, 3) for k, v in out.items()}


def _spread(drawn: dict, profiles: dict, k: float) -> tuple[dict, dict, float]:
    """Fetch sizes moved ``k`` times as far from their mean (``k`` = 1: as sampled), mini-batches
    re-summed, and the resulting peak-to-mean ratio (largest fetch over the mean fetch)."""
    every = [f for batches in drawn.values() for fetch, _ in batches for f in fetch]
    mean = sum(every) / len(every)

    def move(batch: tuple[list[int], int]) -> tuple[list[int], int]:
        fetch = [max(0, round(mean + k * (f - mean))) for f in batch[0]]
        return fetch, sum(fetch)

    drawn = {s: [move(b) for b in batches] for s, batches in drawn.items()}
    profiles = {s: [move(b) for b in batches] for s, batches in profiles.items()}
    every = [f for batches in drawn.values() for fetch, _ in batches for f in fetch]
    return drawn, profiles, round(max(every) / (sum(every) / len(every)), 4)


def _iteration(job: Job, n: int, stores, group, drawn, profiles, model: int, times) -> None:
    """Add iteration ``n``'s tasks and flows (see the module docstring)."""
    t = times[n]
    prev = (lambda item: [f"i{n - 1}.{item}"]) if n else (lambda item: [])
    it = {"iteration": n}
    for g in stores:
        job.task(f"i{n}.store.{g}", g, t[g], prev(f"store.{g}"), **it)
    for w, samplers in group.items():
        for s in samplers:
            fetch, minibatch = drawn[s][n]
            fids = []
            for m, g in enumerate(stores):
                tags = {"profile": [p[0][m] for p in profiles[s]]} if profiles else {}
                fid = job.flow(
                    f"i{n}.fetch.{g}.{s}", g, s, fetch[m], [f"i{n}.store.{g}", *prev(f"fetch.{g}.{s}")],
                    reveal="on_ready", coflow=f"i{n}.{s}", coflow_type="graph-data", tags=tags, **it,
                )  # fmt: skip
                fids.append(fid)
            job.task(f"i{n}.sample.{s}", s, t[s], [*fids, *prev(f"sample.{s}")], **it)
            tags = {"profile": [p[1] for p in profiles[s]]} if profiles else {}
            job.flow(
                f"i{n}.mb.{s}", s, w, minibatch, [f"i{n}.sample.{s}", *prev(f"mb.{s}")],
                reveal="on_ready", coflow=f"i{n}.{w}", coflow_type="mini-batch", tags=tags, **it,
            )  # fmt: skip
        deps = [f"i{n}.mb.{s}" for s in samplers] + prev(f"train.{w}") + prev(f"pull.{w}")
        job.task(f"i{n}.train.{w}", w, t[w], deps, **it)
        job.flow(
            f"i{n}.push.{w}", w, "ps", model, [f"i{n}.train.{w}", *prev(f"push.{w}")],
            coflow=f"i{n}.ps", coflow_type="gradient", **it,
        )  # fmt: skip
    job.task(f"i{n}.update", "ps", t["update"], [f"i{n}.push.{w}" for w in group] + prev("update"), **it)
    for w in group:
        job.flow(
            f"i{n}.pull.{w}", "ps", w, model, [f"i{n}.update", *prev(f"pull.{w}")],
            coflow=f"i{n + 1}.{w}", coflow_type="parameter", **it,
        )  # fmt: skip


def item_estimate(machines=4, workers=6, samplers_per_worker=2, iterations=10, **_) -> int:
    """gnn_training's items per iteration: stores, fetches, samplers, mini-batches, 4 per worker, the PS."""
    s = workers * samplers_per_worker
    return iterations * (machines + s * (machines + 2) + 3 * workers + 1)
