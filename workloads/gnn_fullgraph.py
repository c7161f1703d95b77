"""Full-graph GNN training with embedding exchange between GPUs (DGCL, seed 002): ``gnn_fullgraph``.

The graph is partitioned over ``gpus`` GPUs without replication (DGCL §3,
§7: "the same non-overlapping graph partitioning" for DGCL, peer-to-peer
and swap). Before every layer but the first, each GPU needs the previous
layer's embeddings of the remote neighbours of its vertices: a
*graphAllgather*. Layer 1 reads input features, which fit in GPU memory and
are cached (DGCL §3, "Other options" (1)), so a ``layers``-layer model makes
``layers - 1`` graphAllgathers forward; the backward pass sends the
gradients of those embeddings back along the reverse plan (DGCL §6: stages
in reverse order, send and receive tables switched).

Items of epoch ``e`` (``G`` GPUs, endpoint ``w<g>`` pinned on server
``g // gpus_per_server``, device ``gpu<g mod gpus_per_server>``, NIC 0: the
paper's servers use one IB NIC each, §7)
    forward compute ``e<e>.f<l>.w<g>`` (layer ``l`` = 1..L, ``compute`` s);
    forward exchange ``e<e>.fwd<l>.<s>-<d>`` for ``l`` >= 2: GPU ``s``'s
    layer-``l-1`` embeddings that GPU ``d`` needs, ``4 hidden`` bytes per
    vertex (float32), after ``e<e>.f<l-1>.w<s>``; ``f<l>.w<d>`` waits for
    every exchange into ``d``. Backward compute ``e<e>.b<l>.w<g>``
    (``backward`` x ``compute`` s) from L down to 1; the gradient exchange
    ``e<e>.bwd<l>.<d>-<s>`` (same bytes, reverse direction) after
    ``b<l>.w<d>``, and ``b<l-1>.w<s>`` waits for every gradient into ``s``.
    The next epoch's first layer waits for the last backward layer.
    With ``sockets`` > 0, endpoints ``mem<server>c<c>`` (pinned on device
    ``cpu<c>``: the host memory of CPU socket ``c``, a node of the server's
    intra-host preset) are relays for the ``swap`` planner, which sends each
    GPU's embeddings to the socket nearest to it (DGX-1 and pcie8: GPUs 0-3
    under CPU 0).
    Exchanges of one graphAllgather share ``coflow`` (``e<e>.fwd<l>``),
    ``coflow_type`` ``"graph-data"`` (``"gradient"`` backward), ``layer``;
    their ``tags["graph"]`` say how to rebuild the requirement set
    (:func:`requirements`), which the planners in :mod:`schedulers.dgcl`
    read to plan every vertex's tree.

The graph
    :func:`workloads.gnn_graph.power_law_graph` (the DGTP generator: Pareto
    out-degrees, a fraction ``locality`` of each vertex's edges inside its
    own block of ``gpus`` contiguous blocks, Chung-Lu inside a block) with
    Table 4's vertex count and mean degree (edges / vertices, as Table 4's
    "Avg. Degree" is). Partitioned by any partitioner of
    :data:`workloads.partition.PARTITIONERS`: ``contiguous`` (the
    generator's blocks), ``metis`` (as DGCL §3 partitions), ``hash``,
    ``metis-mc``. The paper gives no edge cut; ``locality`` (0.8 by
    default, DGTP's choice) sets how much community structure the graph
    has, and so how much METIS can keep local. ``near`` (None: uniform)
    nests the far edges: a fraction ``near`` of them stay among the GPUs of
    the source's CPU socket (groups of ``SOCKET_GPUS``), as a graph
    partitioned hierarchically, sockets first (DGCL §4.1: "we use
    hierarchical graph partitioning to prioritize communication reduction on
    slow links"), keeps its cut off the QPI; scenarios/dgcl/calibration.py
    sets it per graph from Table 2.

Scale
    Table 4's graphs do not fit here (117 M edges for Com-Orkut). With more
    than ``max_edges`` edges the vertex count is divided by ``scale =
    ceil(E / max_edges)`` at the same mean degree, and each generated vertex
    stands for ``scale`` vertices: its embedding carries ``4 hidden scale``
    bytes. The default (250,000 edges) builds a job in about a second; the
    scenarios in ``scenarios/dgcl`` ask for 2 M. The probability that a vertex is needed by a given other GPU
    depends on its degree and the locality, not on the vertex count, so the
    exchanged bytes keep the dataset's order of magnitude (the job's first
    exchange's ``tags["graph"]`` records the scale).

Compute (the paper gives per-epoch times, not per-layer compute)
    ``compute`` (2 ms) per layer and GPU forward, ``backward`` (2) times
    that backward, the same on every GPU (partitions are balanced).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hwmodels.dgcl import Requirements
from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.gnn_graph import power_law_graph
from workloads.graphs import Graph
from workloads.partition import PARTITIONERS, partition

FLOAT_BYTES = 4
MAX_GPUS = 32
MAX_EDGES = 20_000_000
SOCKET_GPUS = 4  # GPUs under one CPU socket in the DGX-1 and the PCIe box (``near``'s groups)


@dataclass(frozen=True)
class GraphDataset:
    """DGCL Table 4: vertices, edges (counted once: Avg. Degree = edges / vertices)."""

    vertices: int
    edges: int


DATASETS = {
    "reddit": GraphDataset(230_000, 110_000_000),
    "com-orkut": GraphDataset(3_070_000, 117_000_000),
    "web-google": GraphDataset(870_000, 5_100_000),
    "wiki-talk": GraphDataset(2_390_000, 5_000_000),
}


def graph_shape(dataset: str, max_edges: int) -> tuple[int, float, int]:
    """(generated vertices, mean degree, scale) of ``dataset`` under ``max_edges`` (module docstring)."""
    if dataset not in DATASETS:
        raise SpecError("dataset", f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")
    ds = DATASETS[dataset]
    scale = max(1, math.ceil(ds.edges / max_edges))
    return ds.vertices // scale, ds.edges / ds.vertices, scale


@lru_cache(maxsize=8)
def partitioned_graph(
    dataset: str, gpus: int, max_edges: int, locality: float, partitioner: str, seed: int, near: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(indptr, indices, part of every vertex, scale): the generated graph and its partition."""
    n, degree, scale = graph_shape(dataset, max_edges)
    indptr, indices = power_law_graph(n, degree, gpus, seed, locality=locality, near=near, group=SOCKET_GPUS)
    part = partition(partitioner, Graph(indptr, indices, None, None, None, 0), gpus, seed).astype(np.int64)
    return indptr, indices, part, scale


def requirements(graph: dict) -> Requirements:
    """The requirement set of an exchange (``tags["graph"]`` of its flows): which GPU computes every
    vertex, which GPUs need it, and its embedding bytes. A hand-written set (the mechanism tests,
    ``workloads.mechanisms.relay_allgather``) is ``graph["explicit"]``: ``"0>5:1000;1>2,3:64"``,
    one vertex per ``;`` (its GPU, the GPUs that need it, its bytes)."""
    if "explicit" in graph:
        parts = [re.fullmatch(r"(\d+)>([\d,]+):(\d+)", v).groups() for v in graph["explicit"].split(";")]
        dests = [[int(g) for g in b.split(",")] for _, b, _ in parts]
        return Requirements.from_lists([int(a) for a, _, _ in parts], dests, [float(n) for _, _, n in parts])
    keys = ("dataset", "gpus", "max_edges", "locality", "partitioner", "seed", "hidden")
    return _requirements(*(graph[k] for k in keys), graph.get("near"))


@lru_cache(maxsize=8)
def _requirements(dataset, gpus, max_edges, locality, partitioner, seed, hidden, near=None) -> Requirements:
    """Cached by the graph's parameters (not by the arrays' ``id``: a graph evicted from
    :func:`partitioned_graph`'s cache frees its arrays, and a new graph's may reuse the address)."""
    indptr, indices, part, scale = partitioned_graph(dataset, gpus, max_edges, locality, partitioner, seed, near)
    return Requirements.from_csr(indptr, indices, part, FLOAT_BYTES * hidden * scale)


def _check(name: str, value, low, kinds=(int, float)) -> None:
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low:
        raise SpecError(name, f"must be {'a whole number ' if kinds is int else ''}>= {low}, got {value!r}")


def _check_args(counts: dict[str, int], compute, backward, locality, partitioner: str) -> None:
    """A SpecError naming the first bad argument (whole numbers first, then their upper bounds)."""
    low = {"gpus": 2, "max_edges": 1000, "sockets": 0}
    for key, value in counts.items():
        _check(key, value, low.get(key, 1), int)
    if counts["gpus"] > MAX_GPUS:
        raise SpecError(
            "gpus", f"at most {MAX_GPUS} (the planners' per-vertex destination masks), got {counts['gpus']}"
        )
    if counts["max_edges"] > MAX_EDGES:
        raise SpecError("max_edges", f"at most {MAX_EDGES} (the graph is built in memory), got {counts['max_edges']}")
    _check("compute", compute, 0)
    _check("backward", backward, 0)
    if isinstance(locality, bool) or not isinstance(locality, (int, float)) or not 0.0 <= locality <= 1.0:
        raise SpecError("locality", f"must be in [0, 1], got {locality!r}")
    if partitioner not in PARTITIONERS:
        raise SpecError("partitioner", f"unknown partitioner {partitioner!r} (known: {', '.join(PARTITIONERS)})")


def gnn_fullgraph(
    dataset: str = "web-google",
    gpus: int = 8,
    gpus_per_server: int = 8,
    layers: int = 2,
    hidden: int = 128,
    epochs: int = 1,
    compute: float = 2e-3,
    backward: float = 2.0,
    max_edges: int = 250_000,
    locality: float = 0.8,
    partitioner: str = "contiguous",
    sockets: int = 0,
    seed: int = 0,
    name: str | None = None,
    near: float | None = None,
) -> Job:
    """Full-graph training of a ``layers``-layer GNN on ``dataset`` over ``gpus`` GPUs (module docstring)."""
    counts = {"gpus": gpus, "gpus_per_server": gpus_per_server, "layers": layers, "hidden": hidden, "epochs": epochs}
    _check_args(counts | {"max_edges": max_edges, "sockets": sockets}, compute, backward, locality, partitioner)
    if near is not None and (isinstance(near, bool) or not isinstance(near, (int, float)) or not 0.0 <= near <= 1.0):
        raise SpecError("near", f"must be in [0, 1] (or absent: uniform), got {near!r}")
    n, _, scale = graph_shape(dataset, max_edges)
    graph = {"dataset": dataset, "gpus": gpus, "max_edges": max_edges, "locality": locality}
    graph |= {"partitioner": partitioner, "seed": seed, "hidden": hidden, "vertices": n, "scale": scale}
    if near is not None:
        graph["near"] = float(near)
    sizes = requirements(graph).pair_bytes(gpus)
    job = Job(name or f"gnn-full-{dataset}-{gpus}gpu-{partitioner}")
    workers = [job.endpoint(f"w{g}", Location(g // gpus_per_server, f"gpu{g % gpus_per_server}", 0), "worker")
               for g in range(gpus)]  # fmt: skip
    for server in range(-(-gpus // gpus_per_server)):
        for c in range(sockets):
            job.endpoint(f"mem{server}c{c}", Location(server, f"cpu{c}", 0), "host-memory")
    last: list[str] = []
    for e in range(epochs):
        last = _epoch(job, e, workers, layers, sizes, graph, compute, backward, last)
    return job.validate()


def _exchange(job: Job, cid: str, pairs, sizes, deps_of, attrs: dict) -> dict[int, list[str]]:
    """One graphAllgather's flows (``pairs``: (from GPU, to GPU, bytes index)); ids into each GPU."""
    into: dict[int, list[str]] = {}
    for a, b, (s, d) in pairs:
        if sizes[s, d] > 0:
            fid = job.flow(f"{cid}.{a}-{b}", f"w{a}", f"w{b}", int(sizes[s, d]), deps_of(a), coflow=cid, **attrs)
            into.setdefault(b, []).append(fid)
    return into


def _epoch(job: Job, e: int, workers, layers: int, sizes, graph: dict, compute, backward, prev: list[str]):
    g_range = range(len(workers))
    pairs = [(s, d) for s in g_range for d in g_range if s != d]
    into: dict[int, list[str]] = {}
    for layer in range(1, layers + 1):
        if layer > 1:
            cid = f"e{e}.fwd{layer}"
            attrs = {"iteration": e, "coflow_type": "graph-data", "layer": layer, "tags": {"graph": graph}}
            deps_of = lambda a, lyr=layer: [f"e{e}.f{lyr - 1}.w{a}"]  # noqa: E731
            into = _exchange(job, cid, [(s, d, (s, d)) for s, d in pairs], sizes, deps_of, attrs)
        for g in g_range:
            deps = into.get(g, []) + ([f"e{e}.f{layer - 1}.w{g}"] if layer > 1 else prev)
            job.task(f"e{e}.f{layer}.w{g}", workers[g], compute, deps, iteration=e, layer=layer)
    into = {}
    for layer in range(layers, 0, -1):
        for g in g_range:
            before = f"e{e}.b{layer + 1}.w{g}" if layer < layers else f"e{e}.f{layers}.w{g}"
            job.task(f"e{e}.b{layer}.w{g}", workers[g], backward * compute, [before, *into.get(g, [])],
                     iteration=e, layer=layer)  # fmt: skip
        into = {}
        if layer > 1:
            cid = f"e{e}.bwd{layer}"
            attrs = {"iteration": e, "coflow_type": "gradient", "layer": layer, "tags": {"graph": graph}}
            deps_of = lambda a, lyr=layer: [f"e{e}.b{lyr}.w{a}"]  # noqa: E731
            into = _exchange(job, cid, [(d, s, (s, d)) for s, d in pairs], sizes, deps_of, attrs)
    return [f"e{e}.b1.w{g}" for g in g_range]


def item_estimate(gpus=8, layers=2, epochs=1, **_) -> int:
    """gnn_fullgraph's items: per epoch 2 layers x gpus tasks and 2 (layers - 1) exchanges of gpus^2 flows."""
    return epochs * (2 * layers * gpus + 2 * max(0, layers - 1) * gpus * gpus)
