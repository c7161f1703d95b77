"""CAGNET's 1-D full-graph GCN training, with SANCUS's skipped broadcasts (seed 001 §4.3): ``gnn_cagnet``.

The decomposition (§4.3.2, Alg. 3, Fig. 12)
    The normalised adjacency ``A`` (``N x N``, self-loops added) and the
    embeddings ``H`` (``N x F``) are split into ``p`` blocks of consecutive
    rows, ``ceil(N / p)`` each (the last smaller); GPU ``i`` holds ``A_i``
    and ``H_i`` and a replica of every weight. Layer ``l`` forward, in ``p``
    stages: in stage ``j`` GPU ``j`` broadcasts ``H_j^{(l-1)}`` and every
    GPU ``i`` adds ``A_ij H_j`` to ``T_i`` (an SpMM); then ``H_i^{(l)} =
    sigma(T_i W^{(l)})`` (a dense product). Backward, layers ``L .. 1``: the
    same stages broadcast the blocks of the gradient ``G^{(l)}`` (Alg. 3:
    "BROADCAST(delta_i)"; "gradients delta_j are broadcast similarly") and
    every GPU computes ``A^T G`` block by block, then its input gradient
    ``(A^T G) W^T`` and its weight gradient ``H^T (A^T G)``, and "an
    AllReduce operation is performed to combine gradients from all workers"
    (§4.3.2): one ring all-reduce of the layer's weights
    (:func:`workloads.llm.ring_allreduce`).

Synchronisation
    Stages are bulk synchronous (§4.3.4: "most implementations of such
    decentralized scheme [70] are based on bulk synchronism"): stage ``j``'s
    broadcast starts when every GPU finished stage ``j - 1``, and its SpMMs
    start when the whole broadcast arrived everywhere. A layer's first stage
    waits for every GPU's dense product of the layer before; a backward
    layer's for the all-reduce of the layer after it; epoch ``e + 1`` for
    epoch ``e``'s last all-reduce.

Skipped broadcasts (SANCUS)
    ``staleness`` picks the policy of :mod:`workloads.sancus` (``none`` is
    CAGNET, ``epoch`` SCS-E, ``adaptive`` SCS-A, ``trace`` SCS-H with
    ``trace``), with bound ``epsilon``. A STALE GPU's forward broadcasts of
    the epoch are left out (its receivers' SpMMs run on their cached copy:
    the same work, no data); gradients and all-reduces always run.

Items of epoch ``e`` (``w<g>`` pinned on server ``g // gpus_per_server``, device ``gpu<g mod gpus_per_server>``, NIC 0)
    forward ``e<e>.f<l>.b<j>.<i>`` (flow ``w<j> -> w<i>``, coflow
    ``e<e>.f<l>.b<j>``, type ``graph-data``, ``tags["broadcast"] = {"root": j,
    "gpus": p}``), ``e<e>.f<l>.s<j>.w<i>`` (SpMM), ``e<e>.f<l>.mm.w<i>``;
    backward ``e<e>.g<l>.b<j>.<i>`` (type ``gradient``), ``e<e>.g<l>.s<j>.w<i>``,
    ``e<e>.g<l>.mm.w<i>`` and the all-reduce ``e<e>.ar<l>.s<k>.r<i>`` (type
    ``DP``). A broadcast flow carries the whole block (``4 rows d`` bytes:
    CAGNET broadcasts dense blocks), or with ``p2p`` only the rows of
    ``H_j`` that GPU ``i``'s block of ``A`` has a non-zero column for (the
    "p2p: yes" configuration of Table 5, our reading: point-to-point sends of
    what each GPU needs; the seed does not define the column), and then has
    no ``broadcast`` tag: those go straight to their destination.

Datasets (seed 001 Table 4) and graph
    Flickr, Reddit, Amazon and ogbn-products with Table 4's nodes, edges
    (counted once: each undirected edge is two non-zeros of ``A``), feature
    length and classes. The graph is :func:`workloads.graphs.community_graph`
    at that shape (ids shuffled, so a block of consecutive ids is an
    unbiased sample of the graph; Table 4 does not say how the datasets'
    ids are ordered); ``scale`` < 1 takes that fraction of the nodes and
    edges (tests). The graph sets the SpMMs' non-zeros and, with ``p2p``,
    the rows each GPU needs; a full broadcast's bytes depend only on ``N``.

Model (the seed does not state SANCUS's; Fig. 22 varies both)
    ``layers`` GCN layers (2) of ``hidden`` units (16): dimensions ``F,
    hidden, ..., classes``; the defaults are the seeds' GNN defaults where
    they are stated (seed 004 §3.4: "2 layers and 16 hidden dimension";
    §4.6: "standard 2-layer GNNs with a hidden dimension of 16").

Compute (the paper gives no hardware; ours, stated)
    On a V100 (15.7 TFLOP/s FP32, 900 GB/s HBM2: public figures) at
    ``efficiency`` of peak (0.3, swept): an SpMM over ``nnz`` non-zeros into
    ``d`` columns moves ``nnz (4 d + 8) + 4 rows d`` bytes (a row gathered per
    non-zero with its index and value, the output written once) and is
    memory-bound; a dense ``m x a`` by ``a x b`` product is ``2 m a b``
    FLOPs. Backward: per layer the two products of §4.3.2's gradients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.llm import ring_allreduce
from workloads.sancus import skip_pattern

FLOAT_BYTES = 4
GPU_FLOPS = 15.7e12  # V100 FP32 peak
GPU_BYTES = 900e9  # V100 HBM2 peak
MAX_GPUS = 64


@dataclass(frozen=True)
class Dataset:
    """Seed 001 Table 4: nodes, edges (counted once), feature length, classes."""

    nodes: int
    edges: int
    features: int
    classes: int


DATASETS = {
    "flickr": Dataset(89_250, 899_756, 500, 7),
    "reddit": Dataset(232_965, 11_606_919, 602, 41),
    "amazon": Dataset(1_598_960, 132_169_734, 200, 107),
    "ogbn-products": Dataset(2_449_029, 61_859_140, 100, 47),
}


def bounds(n: int, p: int) -> np.ndarray:
    """Row ``bounds[i] .. bounds[i+1]`` of block ``i``: ``ceil(n / p)`` rows each, the last smaller."""
    per = -(-n // p)
    return np.minimum(np.arange(p + 1, dtype=np.int64) * per, n)


def block_stats(indptr: np.ndarray, indices: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(``nnz[i, j]``: non-zeros of ``A_ij`` with the self-loops of ``A + I``, ``need[i, j]``:
    distinct rows of block ``j`` that block ``i`` of ``A`` has a non-zero column for)."""
    n = len(indptr) - 1
    b = bounds(n, p)
    block = np.searchsorted(b, np.arange(n), side="right") - 1
    src = np.repeat(block, np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    nnz = np.bincount(src * p + block[dst], minlength=p * p).reshape(p, p)
    nnz[np.arange(p), np.arange(p)] += np.diff(b)
    cols = np.unique(src * n + dst)  # (block i, column) pairs, each once
    need = np.bincount((cols // n) * p + block[cols % n], minlength=p * p).reshape(p, p)
    need[np.arange(p), np.arange(p)] = np.diff(b)
    return nnz, need


@lru_cache(maxsize=4)
def dataset_blocks(dataset: str, p: int, scale: float, mixing: float, seed: int) -> tuple[np.ndarray, ...]:
    """(rows per block, nnz, need) of the generated graph of ``dataset`` (module docstring)."""
    from workloads.graphs import community_graph

    ds = DATASETS[dataset]
    n = max(p, round(ds.nodes * scale))
    indptr, indices, _ = community_graph(n, round(2 * ds.edges * n / ds.nodes), mixing, seed)
    nnz, need = block_stats(indptr, indices, p)
    return np.diff(bounds(n, p)), nnz, need


def spmm_seconds(nnz: float, rows: float, d: int, efficiency: float) -> float:
    return (nnz * (FLOAT_BYTES * d + 8) + FLOAT_BYTES * rows * d) / (GPU_BYTES * efficiency)


def dense_seconds(m: float, a: int, b: int, efficiency: float) -> float:
    return 2.0 * m * a * b / (GPU_FLOPS * efficiency)


def _whole(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(name, f"must be a whole number >= {low}, got {value!r}")
    return value


def _fraction(name: str, value, low: float, high: float, open_low: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value > high or value < low or (open_low and value == low):
        raise SpecError(name, f"must be in {'(' if open_low else '['}{low}, {high}], got {value!r}")
    return float(value)


def gnn_cagnet(
    dataset: str = "reddit",
    gpus: int = 8,
    gpus_per_server: int = 8,
    layers: int = 2,
    hidden: int = 16,
    epochs: int = 6,
    staleness: str = "none",
    epsilon: int = 1,
    trace: str | None = None,
    p2p: bool = False,
    efficiency: float = 0.3,
    scale: float = 0.1,
    mixing: float = 0.13,
    seed: int = 0,
    name: str | None = None,
) -> Job:
    """CAGNET 1-D GCN training on ``dataset`` over ``gpus`` GPUs, SANCUS's skips by ``staleness``."""
    if dataset not in DATASETS:
        raise SpecError("dataset", f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")
    p = _whole("gpus", gpus, 2)
    if p > MAX_GPUS:
        raise SpecError("gpus", f"at most {MAX_GPUS}, got {p}")
    for key, value in (("gpus_per_server", gpus_per_server), ("layers", layers), ("hidden", hidden)):
        _whole(key, value, 1)
    _whole("epochs", epochs, 1)
    if not isinstance(p2p, bool):
        raise SpecError("p2p", f"expected true or false, got {p2p!r}")
    eff = _fraction("efficiency", efficiency, 0.0, 1.0)
    _fraction("scale", scale, 0.0, 1.0)
    _fraction("mixing", mixing, 0.0, 1.0, open_low=False)
    send = skip_pattern(staleness, epochs, p, epsilon, trace)
    ds = DATASETS[dataset]
    rows, nnz, need = dataset_blocks(dataset, p, float(scale), float(mixing), int(seed))
    dims = [ds.features] + [hidden] * (layers - 1) + [ds.classes]
    job = Job(name or f"cagnet-{dataset}-{p}gpu-{staleness}")
    for g in range(p):
        job.endpoint(f"w{g}", Location(g // gpus_per_server, f"gpu{g % gpus_per_server}", 0), "worker")
    shape = _Shape(p, rows, nnz, need if p2p else None, dims, eff)
    after: list[str] = []
    for e in range(epochs):
        after = _epoch(job, e, shape, send[e], after)
    first = next(f for f in job.flows)
    first.tags["cagnet"] = {"dataset": dataset, "nodes": int(rows.sum()), "dims": dims, "staleness": staleness,
                            "epsilon": epsilon, "broadcasts": int(send.sum()), "of": int(send.size)}  # fmt: skip
    return job.validate()


@dataclass(frozen=True)
class _Shape:
    p: int
    rows: np.ndarray
    nnz: np.ndarray
    need: np.ndarray | None  # rows each GPU needs (p2p), or None: whole blocks
    dims: list[int]
    eff: float


def _stages(job: Job, pre: str, s: _Shape, d: int, send, barrier: list[str], attrs: dict) -> list[str]:
    """The ``p`` broadcast-and-SpMM stages of one layer (``pre`` = ``e<e>.f<l>`` or ``e<e>.g<l>``)
    with ``d`` columns; ``send[j]``: GPU ``j`` broadcasts. Returns the last stage's SpMMs."""
    p = s.p
    for j in range(p):
        flows = []
        if send[j]:
            cid = f"{pre}.b{j}"
            tags = {} if s.need is not None else {"broadcast": {"root": j, "gpus": p}}
            for i in range(p):
                if i != j:
                    rows = s.need[i, j] if s.need is not None else s.rows[j]
                    flows.append(job.flow(f"{cid}.{i}", f"w{j}", f"w{i}", int(FLOAT_BYTES * rows * d), barrier,
                                          coflow=cid, tags=dict(tags), **attrs))  # fmt: skip
        deps = flows or barrier
        barrier = [
            job.task(f"{pre}.s{j}.w{i}", f"w{i}", spmm_seconds(s.nnz[i, j], s.rows[i], d, s.eff), deps,
                     iteration=attrs["iteration"], layer=attrs["layer"])
            for i in range(p)
        ]  # fmt: skip
    return barrier


def _epoch(job: Job, e: int, s: _Shape, send: np.ndarray, after: list[str]) -> list[str]:
    """Epoch ``e`` (forward, backward, all-reduces); returns what epoch ``e + 1`` waits for."""
    p, dims, L = s.p, s.dims, len(s.dims) - 1
    ws = [f"w{g}" for g in range(p)]
    barrier = after
    for layer in range(1, L + 1):
        attrs = {"iteration": e, "coflow_type": "graph-data", "layer": layer}
        last = _stages(job, f"e{e}.f{layer}", s, dims[layer - 1], send, barrier, attrs)
        barrier = [
            job.task(f"e{e}.f{layer}.mm.w{i}", ws[i], dense_seconds(s.rows[i], dims[layer - 1], dims[layer], s.eff),
                     [last[i]], iteration=e, layer=layer)
            for i in range(p)
        ]  # fmt: skip
    every = np.ones(p, dtype=bool)
    for layer in range(L, 0, -1):
        attrs = {"iteration": e, "coflow_type": "gradient", "layer": layer}
        last = _stages(job, f"e{e}.g{layer}", s, dims[layer], every, barrier, attrs)
        mm = {
            ws[i]: [job.task(f"e{e}.g{layer}.mm.w{i}", ws[i],
                             2 * dense_seconds(s.rows[i], dims[layer - 1], dims[layer], s.eff), [last[i]],
                             iteration=e, layer=layer)]
            for i in range(p)
        }  # fmt: skip
        weights = FLOAT_BYTES * dims[layer - 1] * dims[layer]
        done = ring_allreduce(job, ws, weights, mm, f"e{e}.ar{layer}", coflow=f"e{e}.ar{layer}",
                              coflow_type="DP", iteration=e, layer=layer)  # fmt: skip
        barrier = [done[w] for w in ws]
    return barrier


def item_estimate(gpus=8, layers=2, epochs=6, **_) -> int:
    """gnn_cagnet's items at most: per epoch and layer, forward and backward, p stages of p - 1
    flows and p SpMMs, p dense products, and a ring all-reduce of 2 (p - 1) p flows."""
    return epochs * layers * (2 * gpus * (2 * gpus - 1) + 2 * gpus + 2 * (gpus - 1) * gpus)
