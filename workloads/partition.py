"""Graph partitioners as pure functions over one registry, and the metrics that tell them apart.

Every partitioner is ``f(graph, parts, seed) -> np.ndarray`` (int32, node ->
part), registered in :data:`PARTITIONERS`; :func:`partition` looks one up by
name (a bad name is a :class:`SpecError` naming the field). Partitioners
of :data:`CAPACITY_AWARE` also take ``capacity`` (the servers' ``P_i``, seed
003): :func:`partition` passes it to them only.

``contiguous``
    node ``v`` in part ``v * parts // n``: DistDGL's relabelled ID ranges
    (seed 001 §4.1.2) when ids follow the partition, and no better than
    hashing on a graph with shuffled ids (:mod:`workloads.graphs`).
``hash``
    ``v mod parts``: Euler's round-robin partitioning (seed 000 §II-B,
    "partitions a large graph in a round-robin manner"), P3's random hash.
``metis``
    METIS (pymetis's default: recursive bisection up to 8 parts, k-way
    above) on the graph with self-loops and repeats removed, vertex counts
    balanced: what DGTP's testbed uses (seed 000 §VI-A, "We partition the
    input graph with METIS partitioner").
``metis-capacity``
    METIS (pymetis, as ``metis``) with target part weights in proportion to
    ``capacity`` (``tpwgts``): railbed's diagnostic, not a system of the
    papers: METIS's cut at AdaGL's balance (docs/adagl.md reads it).
``metis-mc``
    METIS with several balance constraints, as DistDGL partitions (seed 001
    §4.1.2: "the multi-constraint mechanism in METIS to balance
    training/validation/test vertices/edges in each partition"): per node
    the weights (1, train, val, test, degree), constraints whose total is
    zero left out; k-way. pymetis (2025.2.2) passes ``ncon = 1`` to METIS
    whatever weights it is given, so this calls ``METIS_PartGraphKway`` of
    the METIS that pymetis's own extension carries, through ctypes, with
    ``ncon`` set (:func:`_metis_kway`).

``g3``
    G3 (seed 004 §4.3.2): METIS balancing node count and degree sum (eqs.
    4.1-4.2), then Alg. 2's swaps (:mod:`workloads.g3`), at most 20,000.
``adagl``, ``adagl-bounded``
    AdaGL (seed 003): coarsening, Alg. 2, Alg. 1, refining
    (:mod:`workloads.adagl`), targets in proportion to ``capacity``; ``adagl``
    stops coarsening by node count only, ``adagl-bounded`` also before a
    node would exceed 5 % of the graph (``max_share``; docs/adagl.md).
``bytegnn``, ``bytegnn-literal``
    ByteGNN's BFS blocks and Alg. 2 (seed 001 §4.2.3, :mod:`workloads.blocks`),
    smoothed or as written.
``hash`` with ``capacity``
    a fixed hash into shares in proportion to ``P`` (AdaGL §V-B's Hash).

Metrics (all over a node -> part array)
    :func:`edge_cut` (fraction of neighbour-list entries whose ends lie in
    different parts), :func:`load_imbalance` (AdaGL eq. 1:
    ``1/(M-1) sum_i |L_i / B_i - 1|``, ``B_i`` the balanced share, optional
    node weights and capacities), :func:`remote_vertices` (``|V_i^remote|``:
    distinct nodes outside part ``i`` adjacent to a node of ``i``),
    :func:`sampled_bytes` (per home part, the bytes of sampled k-hop
    neighbourhoods of its training nodes that come from each part: the
    remote bytes and the home-store share of a sampler's fetched bytes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from railbed.errors import SpecError
from workloads.graphs import Graph

FLOAT_BYTES = 4
EDGE_BYTES = 16  # an int64 pair per sampled edge


def contiguous(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    return (np.arange(graph.n, dtype=np.int64) * parts // graph.n).astype(np.int32)


def hash_partition(graph: Graph, parts: int, seed: int = 0, capacity=None) -> np.ndarray:
    """``v mod parts``; with ``capacity`` (P_i), a fixed hash of ``v`` into shares in proportion
    to ``P`` (AdaGL §V-B: "For both AdaGL and Hash, the heterogeneous server memories are directly
    taken into account"): the fractional part of ``v`` times the golden ratio, cut at the cumulative
    shares."""
    v = np.arange(graph.n, dtype=np.int64)
    if capacity is None:
        return (v % parts).astype(np.int32)
    share = np.cumsum(np.asarray(capacity, float)) / float(np.sum(capacity))
    u = np.modf(v * 0.6180339887498949)[0]
    return np.minimum(np.searchsorted(share, u, side="right"), parts - 1).astype(np.int32)


def adagl_partition(graph: Graph, parts: int, seed: int = 0, capacity=None) -> np.ndarray:
    """AdaGL (seed 003, :mod:`workloads.adagl`) with its defaults, targets in proportion to ``capacity``."""
    from workloads.adagl import adagl

    train = graph.train if graph.train is not None else np.ones(graph.n, dtype=bool)
    return adagl(graph.indptr, graph.indices, train, parts, capacity, seed=seed)


ADAGL_MAX_SHARE = 0.05  # refining's upper bound (seed 003 §IV-C: "between 1-5% of the total weight")


def adagl_bounded(graph: Graph, parts: int, seed: int = 0, capacity=None) -> np.ndarray:
    """AdaGL whose coarsening also stops before a node would exceed 5 % of the graph (``max_share``;
    docs/adagl.md: a documented variant, not the default)."""
    from workloads.adagl import adagl

    train = graph.train if graph.train is not None else np.ones(graph.n, dtype=bool)
    return adagl(graph.indptr, graph.indices, train, parts, capacity, seed=seed, max_share=ADAGL_MAX_SHARE)


def bytegnn_partition(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    """ByteGNN's BFS blocks and Alg. 2 (seed 001 §4.2.3, :mod:`workloads.blocks`), smoothed."""
    from workloads.blocks import bytegnn

    return bytegnn(graph.indptr, graph.indices, graph.train, graph.val, graph.test, parts)


def bytegnn_literal(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    """ByteGNN's Alg. 2 as written (:mod:`workloads.blocks`)."""
    from workloads.blocks import bytegnn

    return bytegnn(graph.indptr, graph.indices, graph.train, graph.val, graph.test, parts, smooth=False)


def metis(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    return _metis(graph, parts, seed, None)


def metis_capacity(graph: Graph, parts: int, seed: int = 0, capacity=None) -> np.ndarray:
    """METIS with target part weights in proportion to ``capacity`` (equal without)."""
    import pymetis

    if parts == 1:
        return np.zeros(graph.n, dtype=np.int32)
    p = np.ones(parts) if capacity is None else np.asarray(capacity, dtype=float)
    indptr, indices = simple_adjacency(graph)
    adj = pymetis.CSRAdjacency(indptr.astype(np.int64), indices.astype(np.int64))
    _, membership = pymetis.part_graph(parts, adj, tpwgts=(p / p.sum()).tolist(), options=pymetis.Options(seed=seed))
    return np.asarray(membership, dtype=np.int32)


def metis_multi(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    cons = [np.ones(graph.n, dtype=np.int64)]
    cons += [m.astype(np.int64) for m in (graph.train, graph.val, graph.test) if m is not None and m.any()]
    cons.append(np.maximum(graph.degrees(), 1))
    if parts == 1:
        return np.zeros(graph.n, dtype=np.int32)
    indptr, indices = simple_adjacency(graph)
    return _metis_kway(indptr, indices, parts, seed, np.stack(cons, axis=1))


def metis_weighted(graph: Graph, parts: int, seed: int, weights: np.ndarray) -> np.ndarray:
    """METIS k-way balancing every column of ``weights`` (node-major, one constraint per column)."""
    if parts == 1:
        return np.zeros(graph.n, dtype=np.int32)
    indptr, indices = simple_adjacency(graph)
    return _metis_kway(indptr, indices, parts, seed, np.asarray(weights, dtype=np.int64).reshape(graph.n, -1))


def g3(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    """G3 (seed 004 §4.3.2): METIS balancing node count and degree sum (eqs. 4.1-4.2), then
    Alg. 2's swaps (:func:`workloads.g3.swap_refine`)."""
    from workloads.g3 import swap_refine

    weights = np.stack([np.ones(graph.n, np.int64), np.maximum(graph.degrees(), 1)], axis=1)
    start = metis_weighted(graph, parts, seed, weights)
    return swap_refine(graph.indptr, graph.indices, start, parts, max_swaps=G3_MAX_SWAPS).part


G3_MAX_SWAPS = 20_000  # Alg. 2 bounds nothing but a cycle; ours, so a part of millions of nodes ends in seconds


def _metis(graph: Graph, parts: int, seed: int, vweights: np.ndarray | None) -> np.ndarray:
    """pymetis (recursive bisection up to 8 parts, k-way above); ``vweights`` one per node."""
    import pymetis

    if parts == 1:
        return np.zeros(graph.n, dtype=np.int32)
    indptr, indices = simple_adjacency(graph)
    adj = pymetis.CSRAdjacency(indptr.astype(np.int64), indices.astype(np.int64))
    _, membership = pymetis.part_graph(parts, adj, vweights=vweights, options=pymetis.Options(seed=seed))
    return np.asarray(membership, dtype=np.int32)


def _metis_kway(indptr: np.ndarray, indices: np.ndarray, parts: int, seed: int, weights: np.ndarray) -> np.ndarray:
    """``METIS_PartGraphKway`` with ``ncon = weights.shape[1]`` (node-major weights), called in the
    METIS library inside pymetis's extension (idx_t is 64-bit there: ``pymetis.zero_copy_dtype``)."""
    import ctypes

    import pymetis
    import pymetis._internal

    lib = ctypes.CDLL(pymetis._internal.__file__)
    idx = np.int64
    if np.dtype(pymetis.zero_copy_dtype()) != np.dtype(idx):
        raise RuntimeError("pymetis's METIS does not use 64-bit indices; metis-mc cannot call it")
    ptr = ctypes.POINTER(ctypes.c_int64)

    def arr(a: np.ndarray):
        return np.ascontiguousarray(a, dtype=idx)

    xadj, adjncy, vwgt = arr(indptr), arr(indices), arr(weights.reshape(-1))
    options = np.zeros(40, dtype=idx)  # METIS_NOPTIONS
    lib.METIS_SetDefaultOptions(options.ctypes.data_as(ptr))
    options[int(pymetis.OptionKey.SEED)] = seed
    part = np.zeros(len(indptr) - 1, dtype=idx)
    scalars = [np.array([v], dtype=idx) for v in (len(indptr) - 1, weights.shape[1], parts, 0)]
    nvtxs, ncon, nparts, edgecut = scalars
    status = lib.METIS_PartGraphKway(
        nvtxs.ctypes.data_as(ptr), ncon.ctypes.data_as(ptr), xadj.ctypes.data_as(ptr), adjncy.ctypes.data_as(ptr),
        vwgt.ctypes.data_as(ptr), None, None, nparts.ctypes.data_as(ptr), None, None,
        options.ctypes.data_as(ptr), edgecut.ctypes.data_as(ptr), part.ctypes.data_as(ptr),
    )  # fmt: skip
    if status != 1:  # METIS_OK
        raise RuntimeError(f"METIS_PartGraphKway failed with status {status}")
    return part.astype(np.int32)


def simple_adjacency(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric adjacency METIS needs: every edge both ways, no self-loops, no repeats. A graph
    from :mod:`workloads.graphs` (``meta["simple"]``) is so already; others are rebuilt."""
    if graph.meta.get("simple"):
        return graph.indptr, graph.indices
    from workloads.graphs import csr_from_edges

    src = np.repeat(np.arange(graph.n, dtype=np.int64), graph.degrees())
    return csr_from_edges(graph.n, src, graph.indices)


PARTITIONERS: dict[str, Callable[[Graph, int, int], np.ndarray]] = {
    "contiguous": contiguous,
    "hash": hash_partition,
    "metis": metis,
    "metis-capacity": metis_capacity,
    "metis-mc": metis_multi,
    "g3": g3,
    "adagl": adagl_partition,
    "adagl-bounded": adagl_bounded,
    "bytegnn": bytegnn_partition,
    "bytegnn-literal": bytegnn_literal,
}
# partitioners that take servers' capacities P_i; the others ignore them
CAPACITY_AWARE = ("hash", "adagl", "adagl-bounded", "metis-capacity")


def partition(
    name: str, graph: Graph, parts: int, seed: int = 0, field: str = "partitioner", capacity=None
) -> np.ndarray:
    """The node -> part array of partitioner ``name`` (errors name ``field``); ``capacity`` (P_i per
    part) reaches the partitioners of :data:`CAPACITY_AWARE` (METIS "does not incorporate the server
    capacity", seed 003 §V-B)."""
    if not isinstance(name, str) or name not in PARTITIONERS:
        raise SpecError(field, f"unknown partitioner {name!r} (known: {', '.join(PARTITIONERS)})")
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise SpecError("parts", f"must be a whole number >= 1, got {parts!r}")
    if capacity is not None and name in CAPACITY_AWARE:
        return PARTITIONERS[name](graph, parts, seed, capacity=capacity)
    return PARTITIONERS[name](graph, parts, seed)


# ------------------------------------------------------------------ metrics
def edge_cut(graph: Graph, part: np.ndarray) -> float:
    """Fraction of neighbour-list entries whose two ends lie in different parts."""
    src = np.repeat(part, graph.degrees())
    return float((src != part[graph.indices]).mean()) if graph.entries else 0.0


def load_imbalance(part: np.ndarray, parts: int, weights=None, capacity=None) -> float:
    """AdaGL eq. (1): ``1/(M-1) sum_i |L_i/B_i - 1|``; ``B_i`` proportional to ``capacity`` (P_i)."""
    w = np.ones(len(part)) if weights is None else np.asarray(weights, dtype=float)
    load = np.bincount(part, weights=w, minlength=parts)
    p = np.ones(parts) if capacity is None else np.asarray(capacity, dtype=float)
    balanced = w.sum() * p / p.sum()
    return float(np.abs(load / balanced - 1).sum() / max(parts - 1, 1))


def remote_vertices(graph: Graph, part: np.ndarray, parts: int) -> np.ndarray:
    """``|V_i^remote|`` per part: distinct nodes of other parts adjacent to a node of part ``i``."""
    src_part = np.repeat(part, graph.degrees()).astype(np.int64)
    far = src_part != part[graph.indices]
    key = np.unique(src_part[far] * graph.n + graph.indices[far])
    return np.bincount(key // graph.n, minlength=parts)


def sampled_bytes(
    graph: Graph, part: np.ndarray, parts: int, fanout, batch: int, trials: int = 4, seed: int = 0
) -> np.ndarray:
    """``out[h, p]``: mean bytes a sampler whose seeds are ``batch`` training nodes of part ``h``
    fetches from part ``p`` (features of distinct nodes, 16 bytes per sampled edge), over ``trials``
    sampled batches; fan-outs in hop order from the seeds."""
    from workloads.gnn_graph import Sampler

    sampler = Sampler(graph.indptr, graph.indices, part, parts)
    rng = np.random.default_rng(seed)
    out = np.zeros((parts, parts))
    for h in range(parts):
        pool = np.flatnonzero((part == h) & graph.train) if graph.train is not None else np.array([])
        if len(pool) == 0:
            pool = np.flatnonzero(part == h)
        for _ in range(trials):
            seeds = rng.choice(pool, batch, replace=batch > len(pool))
            nodes, edges, _, _ = sampler.counts(seeds, fanout, int(rng.integers(1 << 62)))
            out[h] += FLOAT_BYTES * graph.features * nodes + EDGE_BYTES * edges
    return out / trials


def home_share(fetched: np.ndarray) -> float:
    """Share of fetched bytes that come from the sampler's home part (the diagonal of
    :func:`sampled_bytes`), over all home parts."""
    return float(np.trace(fetched) / fetched.sum()) if fetched.sum() else 1.0


def metrics(graph: Graph, part: np.ndarray, parts: int, fanout, batch: int, seed: int = 0) -> dict:
    """Every metric of one partition, as plain numbers (for notes and tables)."""
    fetched = sampled_bytes(graph, part, parts, fanout, batch, seed=seed)
    train = graph.train.astype(float) if graph.train is not None else None
    return {
        "edge_cut": round(edge_cut(graph, part), 4),
        "imbalance_nodes": round(load_imbalance(part, parts), 4),
        "imbalance_train": round(load_imbalance(part, parts, train), 4) if train is not None else None,
        "remote_vertices": [int(x) for x in remote_vertices(graph, part, parts)],
        "remote_bytes": round(float(fetched.sum() - np.trace(fetched)) / parts),
        "home_share": round(home_share(fetched), 4),
    }


def dataset_partition(
    dataset: str, parts: int, partitioner: str = "metis", scale: float = 1.0, mixing: float = 0.13, seed: int = 0
) -> tuple[Graph, np.ndarray]:
    """The generated graph of ``dataset`` (:func:`workloads.graphs.dataset_graph`) and its partition,
    cached like the graph (in memory; on disk for graphs cached there)."""
    from workloads.graphs import dataset_graph

    graph = dataset_graph(dataset, scale, mixing, seed)
    if not isinstance(partitioner, str) or partitioner not in PARTITIONERS:
        raise SpecError("partitioner", f"unknown partitioner {partitioner!r} (known: {', '.join(PARTITIONERS)})")
    return graph, _cached(graph, partitioner, parts, seed)


_PARTS: dict[tuple, np.ndarray] = {}


def _cached(graph: Graph, partitioner: str, parts: int, seed: int) -> np.ndarray:
    from workloads.graphs import DISK_CACHE_ENTRIES, load_cached, save_cached

    base = {k: graph.meta[k] for k in ("dataset", "scale", "mixing", "seed", "nodes")}
    meta = base | {"partitioner": partitioner, "parts": parts, "partition_seed": seed}
    key = tuple(sorted(meta.items()))
    if key in _PARTS:
        return _PARTS[key]
    disk = graph.entries > DISK_CACHE_ENTRIES
    stored = load_cached(meta) if disk else None
    part = stored["part"] if stored is not None else partition(partitioner, graph, parts, seed)
    if disk and stored is None:
        save_cached(meta, {"part": part})
    if len(_PARTS) >= 8:
        _PARTS.pop(next(iter(_PARTS)))
    _PARTS[key] = part
    return part
