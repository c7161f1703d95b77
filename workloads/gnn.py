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
    workers by any number of iterations (so does this job).

Sizes (bytes)
    From real fan-out sampling (:mod:`workloads.gnn_graph`) on a generated
    graph of the dataset's shape (Table II). Per sampler and iteration the
    sampler draws ``batch / samplers_per_worker`` seed nodes (the per-sampler
    batch of §VI-B) from its worker's home partition ``w mod machines``
    (DistDGL's owner-compute rule, seed 001 §4.1.5), then samples the
    dataset's fan-outs. The fetch from store ``m`` is ``4 F`` bytes per
    distinct node of partition ``m`` (float32 features) plus 16 bytes per
    edge sampled from its nodes (an int64 pair); the mini-batch is the sum
    over partitions (the sampler forwards the sub-graph with its features).
    Fetch and mini-batch sizes are ``reveal="on_ready"``. Gradient and
    parameter flows carry the model: GraphSAGE (mean aggregator) with
    ``len(fanout)`` layers of ``hidden`` units, each layer ``2 in out + out``
    float32 parameters (self and neighbour weights, bias); the output layer
    has the dataset's classes (47, 41, 172: OGB's and GraphSAGE's figures,
    not in the paper).

Graph scale
    Table II's graphs do not fit here (114.6 M edges for Reddit). The graph
    keeps the dataset's mean neighbour count ``E / N`` (Table II does not
    say whether edges count once or twice; we take E / N) and node count
    while ``N E/N <= max_edges``; above, the mean degree is first lowered
    (to no less than twice the largest fan-out), then the node count. A
    smaller graph has more repeats among sampled nodes, so it
    under-estimates distinct nodes of products and papers100M: the job's
    ``tags`` on ``g0``'s first fetch say the scale used. The default
    (250,000 edges) builds a job in well under a second; the scenarios in
    ``scenarios/dgtp`` ask for 4 M (a products mini-batch of about 50 MB
    there, 5 MB at the default).

Profile (what ETP reads)
    The paper profiles 50 iterations (§V-B, §VI-A). The first-iteration
    fetch and mini-batch flow of every (source, destination) pair carries
    ``tags["profile"]``: the sizes of ``profile`` further sampled
    iterations (other seeds), public before the run (``Job.public`` keeps
    tags). Samplers drawing from the same home partition have the same size
    distribution, so they share one profile (sampled once per partition).
    Compute times are constant parameters, so their profile is the value
    itself.

Peak-to-mean ratio (§VI-B's PMR sweep)
    The paper defines the PMR as the largest store-to-sampler flow rate over
    the mean of all of them, and varies it by "scaling up and down the
    transmitted graph data sizes", without saying how. Here every fetch
    size ``x`` becomes ``mean + spread (x - mean)`` (``spread`` = 1: as
    sampled; the mean over the job's fetches is kept), mini-batches are
    re-summed, and the PMR (largest fetch over the mean fetch, per
    iteration's volume) is recorded in the first fetch's ``tags["graph"]``.

Compute times (the paper gives none; defaults documented here)
    ``t_store`` 2 ms (a store serving one iteration's requests),
    ``t_sample`` 10 ms (a sampler building its sub-graphs), ``t_train``
    30 ms (a worker's forward and backward pass), ``t_update`` 5 ms (the
    PS's update).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.gnn_graph import Sampler, first_node, power_law_graph

FLOAT_BYTES = 4
EDGE_BYTES = 16
ROLE_DEMANDS = {  # §VI-A; mem in GB
    "worker": {"mem": 3, "cpu": 1, "gpu": 1},
    "sampler": {"mem": 7, "cpu": 2},
    "ps": {"mem": 5, "cpu": 1},
    "store": {},
}


@dataclass(frozen=True)
class Dataset:
    """Table II's numbers (nodes, edges, feature length, fan-out) and the number of classes."""

    nodes: int
    edges: int
    features: int
    fanout: tuple[int, ...]
    classes: int


DATASETS = {
    "ogbn-products": Dataset(2_400_000, 61_800_000, 100, (5, 10, 15), 47),
    "reddit": Dataset(200_000, 114_600_000, 602, (5, 10, 25), 41),
    "ogbn-papers100M": Dataset(100_000_000, 1_600_000_000, 128, (12, 12, 12), 172),
}
ALIASES = {"products": "ogbn-products", "papers100M": "ogbn-papers100M", "papers": "ogbn-papers100M"}


def dataset_preset(name: str) -> Dataset:
    key = ALIASES.get(name, name)
    if key not in DATASETS:
        raise SpecError("dataset", f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    return DATASETS[key]


def graphsage_bytes(features: int, hidden: int, layers: int, classes: int) -> int:
    """Parameter bytes of GraphSAGE-mean: per layer 2 in out + out float32 values."""
    dims = [features] + [hidden] * (layers - 1) + [classes]
    return FLOAT_BYTES * sum(2 * a * b + b for a, b in zip(dims, dims[1:]))


def graph_scale(ds: Dataset, max_edges: int) -> tuple[int, float]:
    """(nodes, mean degree) of the generated graph (see "Graph scale" in the module docstring)."""
    n, d = ds.nodes, ds.edges / ds.nodes
    if n * d > max_edges:
        d = max(min(d, 2.0 * max(ds.fanout)), max_edges / n)
    if n * d > max_edges:
        n = int(max_edges / d)
    return n, d


class _Sizes:
    """Fetch and mini-batch sizes of sampled iterations, per sampler."""

    def __init__(self, ds: Dataset, machines: int, max_edges: int, locality: float, seed: int) -> None:
        self.ds, self.machines = ds, machines
        self.n, self.degree = graph_scale(ds, max_edges)
        indptr, indices = power_law_graph(self.n, self.degree, machines, seed, locality=locality)
        self.sampler = Sampler(indptr, indices, machines)
        self.rng = np.random.default_rng(seed + 1)

    def draw(self, home: int, seeds_per_sampler: int) -> tuple[list[int], int]:
        """(fetch bytes per store, mini-batch bytes) of one sampled batch from partition ``home``."""
        lo, hi = first_node(self.n, self.machines, home), first_node(self.n, self.machines, home + 1)
        replace = seeds_per_sampler > hi - lo
        seeds = lo + self.rng.choice(hi - lo, seeds_per_sampler, replace=replace)
        nodes, edges = self.sampler.counts(seeds, self.ds.fanout, int(self.rng.integers(1 << 62)))
        fetch = [int(FLOAT_BYTES * self.ds.features * a + EDGE_BYTES * b) for a, b in zip(nodes, edges)]
        return fetch, sum(fetch)


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
    max_edges: int = 250_000,
    locality: float = 0.8,
    profile: int = 50,
    spread: float = 1.0,
    t_store: float = 2e-3,
    t_sample: float = 10e-3,
    t_train: float = 30e-3,
    t_update: float = 5e-3,
    seed: int = 0,
    name: str | None = None,
) -> Job:
    """GraphSAGE training on ``dataset`` with one store per machine (see the module docstring)."""
    ds = dataset_preset(dataset)
    for key, value in (("machines", machines), ("workers", workers), ("samplers_per_worker", samplers_per_worker)):
        _positive(key, value)
    _positive("iterations", iterations)
    _positive("batch", batch, samplers_per_worker)
    _positive("hidden", hidden)
    _positive("max_edges", max_edges, 1000)
    _positive("profile", profile, 0)
    _positive("spread", spread, 0)
    if not 0.0 <= locality <= 1.0:
        raise SpecError("locality", f"must be in [0, 1], got {locality!r}")
    for key, value in (("t_store", t_store), ("t_sample", t_sample), ("t_train", t_train), ("t_update", t_update)):
        _positive(key, value, 0)
    sizes = _Sizes(ds, machines, max_edges, locality, seed)
    job = Job(name or f"gnn-{ALIASES.get(dataset, dataset)}-m{machines}-w{workers}x{samplers_per_worker}")
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
    drawn = {s: [sizes.draw(home[s], per_sampler) for _ in range(iterations)] for s in home}
    by_home = {h: [sizes.draw(h, per_sampler) for _ in range(profile)] for h in sorted(set(home.values()))}
    profiles = {s: by_home[home[s]] for s in home}  # samplers of one home partition share a size distribution
    drawn, profiles, pmr = _spread(drawn, profiles, spread)
    model = graphsage_bytes(ds.features, hidden, len(ds.fanout), ds.classes)
    times = (t_store, t_sample, t_train, t_update)
    for n in range(iterations):
        _iteration(job, n, stores, group, drawn, profiles if n == 0 else None, model, times)
    first = job.items[f"i0.fetch.g0.{next(iter(home))}"]
    first.tags["graph"] = {"nodes": sizes.n, "mean_degree": round(sizes.degree, 3), "locality": locality, "pmr": pmr}
    return job.validate()


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
    t_store, t_sample, t_train, t_update = times
    prev = (lambda item: [f"i{n - 1}.{item}"]) if n else (lambda item: [])
    it = {"iteration": n}
    for g in stores:
        job.task(f"i{n}.store.{g}", g, t_store, prev(f"store.{g}"), **it)
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
            job.task(f"i{n}.sample.{s}", s, t_sample, [*fids, *prev(f"sample.{s}")], **it)
            tags = {"profile": [p[1] for p in profiles[s]]} if profiles else {}
            job.flow(
                f"i{n}.mb.{s}", s, w, minibatch, [f"i{n}.sample.{s}", *prev(f"mb.{s}")],
                reveal="on_ready", coflow=f"i{n}.{w}", coflow_type="mini-batch", tags=tags, **it,
            )  # fmt: skip
        deps = [f"i{n}.mb.{s}" for s in samplers] + prev(f"train.{w}") + prev(f"pull.{w}")
        job.task(f"i{n}.train.{w}", w, t_train, deps, **it)
        job.flow(
            f"i{n}.push.{w}", w, "ps", model, [f"i{n}.train.{w}", *prev(f"push.{w}")],
            coflow=f"i{n}.ps", coflow_type="gradient", **it,
        )  # fmt: skip
    job.task(f"i{n}.update", "ps", t_update, [f"i{n}.push.{w}" for w in group] + prev("update"), **it)
    for w in group:
        job.flow(
            f"i{n}.pull.{w}", "ps", w, model, [f"i{n}.update", *prev(f"pull.{w}")],
            coflow=f"i{n + 1}.{w}", coflow_type="parameter", **it,
        )  # fmt: skip
