"""G3's hybrid-parallel full-graph training, its variants and the barrier baselines (seed 004 ch. 4): ``gnn_hybrid``.

Hybrid parallelism (§4.2.1)
    The graph is partitioned over ``workers`` (one GPU each; a server of
    its own: the thesis's 16 containers, §4.6); every worker trains its
    part and, "once a worker completes computation on one layer, the output
    is ... sent peer-to-peer to other workers that have dependencies on it".
    Layers run in bins of ``bin_size`` nodes (§4.4.1): per bin a *load*
    (its sub-graph and input embeddings, host to GPU) and a *compute*; after
    a bin's compute of layer ``l`` < ``L``, one flow to every other worker
    with the embeddings of the bin's nodes that have a neighbour there
    (``4 d_l`` bytes each, float32). The backward pass mirrors the forward
    (§4.4.1: "performed in exactly the reverse direction"): bins in reverse
    order, the gradient of every embedding sent back to its bin's worker,
    summed over the receiver's bins (one flow per pair). "Once an epoch is
    completed, the GNN model parameters are aggregated ... using the
    AllReduce method" (§4.2.1), layer by layer (§4.5.2: "G3 wraps and
    synchronizes each layer's parameters separately"): a ring all-reduce per
    layer after every worker's backward of that layer.

``pipeline`` (Fig. 4.17's variants, §4.6.7)
    ``g3``: bins in priority order (:func:`workloads.g3.priority_order`:
    nodes with remote neighbours first), a next-layer bin's load waits only
    for the bins it reads (its own inputs: the local bins and the flows
    from the remote bins that hold its nodes' neighbours: eager computation
    and the inter-layer pipeline, §4.4.2), and loads run on the host's copy
    engine beside the GPU, at most two bins on the GPU at once (intra-layer
    pipeline: "one bin can be processed while another is loading");
    ``inter``: the same without the intra-layer pipeline (load and compute
    share the GPU) and bins of consecutive node ids ("naively packs nodes
    with consecutive node IDs into bins"); ``intra``: the intra-layer
    pipeline, but a worker's next layer waits for all its inputs ("waits
    for all required intermediate results"); ``sequential``: neither (load
    and compute in turn, a layer's flows after the whole layer, the next
    layer after all its inputs: "the same manner as [64, 87]'s
    bin-packing"). ``resident`` (``no``): whether a worker's part stays on
    the GPU, so that bins need no loads. ``no`` by default: "the subgraph
    and its node embeddings will be transferred from host memory to GPU
    memory" is a stage of every bin's lifespan (§4.4.1), and G3's workers
    build every bin on the host (§4.5.2, "wrap the bin's nodes and their
    incident edges into DGLBlock format"), and the thesis's ogbn-products
    runs swapped ("at the cost of more CPU-GPU memory swapping" with smaller
    bins, §4.6.4; GAT's "extra memory swapping overhead", §4.6.2); ``auto`` (ours, the other
    reading: bins are swapped "to relieve resource constraints", §4.6.2)
    keeps parts that fit in half of the GPU's 24 GB (:func:`part_bytes`);
    ``yes``. ``barrier``: the full-graph baselines (NeutronStar,
    BNS-GCN: §4.6.2, "both systems require loading every subgraph in each
    assigned worker"): the whole part resident on the GPU (no loads), one
    compute per layer, one flow per worker pair, and a layer-wise barrier:
    every worker's next layer after the whole exchange (§4.1.3: NeuGraph's
    "layer-wise communication barriers for global synchronization").

``partitioner``
    Any of :data:`workloads.partition.PARTITIONERS` (NeutronStar's
    ``contiguous`` chunks, BNS-GCN's and DGL's ``metis``, ``hash`` for
    Fig. 4.16's random) and ``g3``: multi-constraint METIS balancing node
    count and degree sum (eqs. 4.1-4.2), then Alg. 2's swaps
    (:func:`workloads.g3.swap_refine`). Node ids of the generated graphs
    are shuffled (:mod:`workloads.graphs`), so ``contiguous`` is no better
    than ``hash`` here; the datasets' own ids may carry locality that
    chunks keep (not modelled).

Datasets and model
    :func:`workloads.graphs.dataset_graph` (ogbn-products and the other
    generated datasets at ``scale`` of their size); GraphSAGE-mean with
    ``layers`` (2) of ``hidden`` (16) units (§4.6: "standard 2-layer GNNs
    with a hidden dimension of 16"); the input features of a part's
    remote neighbours are fetched once before training (they do not change;
    DGL's partitions hold them as HALO nodes, §4.5.2 builds on DGL's
    partition API), so layer 1 reads them locally and the epoch exchanges
    only hidden embeddings and their gradients.

``model``: ``sage`` (GraphSAGE-mean) or ``gat`` (8 heads, §4.6, their outputs
concatenated: a hidden layer is ``8 hidden`` wide, and so are its exchanged rows).

Compute (per node and per edge; the thesis gives the hardware, §4.6)
    RTX 3090 (35.58 TFLOP/s FP32, 936 GB/s; public figures) behind PCIe
    3.0 x16 (15.75 GB/s: the Xeon Gold 5218R's lanes), all at
    ``efficiency`` of peak (0.3, swept). A layer over a bin of ``n`` nodes,
    ``E`` neighbour entries and ``u`` distinct inputs, ``a -> b`` features:
    load ``16 E + 4 a u + 4 b n`` bytes over PCIe (the block's edge pairs
    and input rows in, the outputs back: "the output will be transferred out
    from GPU", §4.4.1); compute ``4 (E a + n a)`` bytes of gathers and sums at GPU
    memory speed plus ``4 n a b`` FLOPs (self and neighbour weights);
    backward twice the forward compute, the same load. GAT: every input row
    projected (``2 u a b`` FLOPs), per edge an attention score per head and
    the weighted row (``4 E (b + 2 heads)`` bytes). The barrier
    baselines compute the whole part as one bin without loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.g3 import bin_stats, has_remote, pack_bins, priority_order
from workloads.llm import ring_allreduce

FLOAT_BYTES = 4
GPU_FLOPS = 35.58e12  # RTX 3090 FP32
GPU_BYTES = 936e9  # RTX 3090 GDDR6X
PCIE_BYTES = 15.75e9  # PCIe 3.0 x16
GPU_MEMORY = 24e9  # RTX 3090
PIPELINES = ("g3", "inter", "intra", "sequential", "barrier")
MODELS = ("sage", "gat")
GAT_HEADS = 8  # §4.6: "For GAT, we use 8 attention heads"
MAX_WORKERS = 64


@dataclass(frozen=True)
class Layout:
    """Bins of every worker (global bin index ``b``: worker ``owner[b]``, its ``k``-th bin ``rank[b]``)
    and their statistics (:class:`workloads.g3.BinStats`)."""

    owner: np.ndarray
    first: np.ndarray  # first[w]: index of worker w's first bin (first[W] = bins)
    stats: object
    readers_ptr: np.ndarray  # transposed reads: the bins that read bin b
    readers: np.ndarray


def part_bytes(lay: Layout, w: int, dims: list[int]) -> float:
    """GPU memory a worker's whole part needs (ours): its bins' edge pairs (16 bytes each), the input
    rows it reads and every layer's output rows of its nodes, float32."""
    st, bins = lay.stats, slice(int(lay.first[w]), int(lay.first[w + 1]))
    rows = dims[0] * st.inputs[bins].sum() + sum(dims[1:]) * st.nodes[bins].sum()
    return 16.0 * st.edges[bins].sum() + FLOAT_BYTES * rows


def _check(name: str, value, low, kinds=(int,)) -> None:
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low:
        raise SpecError(name, f"must be {'a whole number ' if kinds == (int,) else ''}>= {low}, got {value!r}")


@lru_cache(maxsize=4)
def layout(dataset: str, workers: int, partitioner: str, pipeline: str, bin_size: int, scale: float,
           mixing: float, seed: int) -> tuple[object, np.ndarray, Layout]:  # fmt: skip
    """(graph, part, bins) of one configuration (cached: the variants of a scenario share them)."""
    from workloads.partition import dataset_partition

    graph, part = dataset_partition(dataset, workers, partitioner, scale, mixing, seed)
    indptr, indices = graph.indptr, graph.indices
    remote = has_remote(indptr, indices, part)
    bins: list[np.ndarray] = []
    first = [0]
    for w in range(workers):
        if pipeline == "barrier":
            order = np.flatnonzero(part == w)
            size = max(1, len(order))
        else:
            mine = np.flatnonzero(part == w)
            order = mine if pipeline == "inter" else priority_order(indptr, indices, part, w, remote)
            size = bin_size
        bins += pack_bins(order, size)
        first.append(len(bins))
    stats = bin_stats(indptr, indices, part, workers, bins)
    owner = np.repeat(np.arange(workers), np.diff(first))
    src = np.repeat(np.arange(len(bins)), np.diff(stats.reads_ptr))
    order = np.lexsort((src, stats.reads))
    rptr = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(np.bincount(stats.reads, minlength=len(bins)), out=rptr[1:])
    return graph, part, Layout(owner, np.array(first), stats, rptr, src[order])


def gnn_hybrid(
    dataset: str = "ogbn-products",
    workers: int = 16,
    layers: int = 2,
    hidden: int = 16,
    epochs: int = 1,
    partitioner: str = "g3",
    pipeline: str = "g3",
    bin_size: int = 5000,
    resident: str = "no",
    model: str = "sage",
    efficiency: float = 0.3,
    scale: float = 0.02,
    mixing: float = 0.13,
    seed: int = 0,
    name: str | None = None,
) -> Job:
    """G3's full-graph training on ``dataset`` over ``workers`` (module docstring)."""
    from workloads.graphs import dataset as dataset_of

    ds = dataset_of(dataset)
    _check("workers", workers, 2)
    if workers > MAX_WORKERS:
        raise SpecError("workers", f"at most {MAX_WORKERS}, got {workers}")
    for key, value in (("layers", layers), ("hidden", hidden), ("epochs", epochs), ("bin_size", bin_size)):
        _check(key, value, 1)
    if pipeline not in PIPELINES:
        raise SpecError("pipeline", f"unknown pipeline {pipeline!r} (known: {', '.join(PIPELINES)})")
    ok = isinstance(efficiency, (int, float)) and not isinstance(efficiency, bool) and math.isfinite(efficiency)
    if not ok or not 0 < efficiency <= 1:
        raise SpecError("efficiency", f"must be in (0, 1], got {efficiency!r}")
    if resident not in ("auto", "yes", "no"):
        raise SpecError("resident", f"'auto', 'yes' or 'no', got {resident!r}")
    graph, part, lay = layout(ds.name, workers, partitioner, pipeline, bin_size, float(scale), float(mixing), int(seed))
    if model not in MODELS:
        raise SpecError("model", f"unknown model {model!r} (known: {', '.join(MODELS)})")
    width = hidden * (GAT_HEADS if model == "gat" else 1)  # GAT concatenates its heads' outputs
    dims = [ds.features] + [width] * (layers - 1) + [ds.classes]
    fits = bool(max(part_bytes(lay, w, dims) for w in range(workers)) <= GPU_MEMORY / 2)
    keep = pipeline == "barrier" or resident == "yes" or (resident == "auto" and fits)
    job = Job(name or f"hybrid-{ds.name}-{workers}w-{partitioner}-{pipeline}")
    for w in range(workers):
        job.endpoint(f"w{w}", Location(w, "gpu0", 0), "worker")
        job.endpoint(f"x{w}", Location(w, "cpu", 0), "copy-engine")
    build = _Build(job, lay, dims, pipeline, float(efficiency), workers, keep, model)
    after: dict[int, list[str]] = {w: [] for w in range(workers)}
    for e in range(epochs):
        after = build.epoch(e, after)
    first = job.flows[0] if job.flows else None
    if first is not None:
        first.tags["hybrid"] = {"dataset": ds.name, "nodes": graph.n, "entries": graph.entries, "bins": len(lay.owner),
                                "partitioner": partitioner, "pipeline": pipeline, "dims": dims,
                                "resident": keep}  # fmt: skip
    return job.validate()


class _Build:
    """The items of a ``gnn_hybrid`` job, epoch by epoch (module docstring)."""

    def __init__(
        self, job: Job, lay: Layout, dims: list[int], pipeline: str, eff: float, workers: int, keep: bool, model: str
    ):
        self.model = model
        self.job, self.lay, self.dims, self.pipe, self.eff, self.W = job, lay, dims, pipeline, eff, workers
        self.L = len(dims) - 1
        st = lay.stats
        self.B = len(lay.owner)
        self.eager = pipeline in ("g3", "inter")
        self.resident = keep
        self.copy_engine = pipeline in ("g3", "intra") and not keep
        self.reads = [st.reads[st.reads_ptr[b] : st.reads_ptr[b + 1]] for b in range(self.B)]
        self.readers = [lay.readers[lay.readers_ptr[b] : lay.readers_ptr[b + 1]] for b in range(self.B)]

    # ----------------------------------------------------------- costs
    def load_s(self, b: int, a: int, out: int) -> float:
        st = self.lay.stats
        moved = 16 * st.edges[b] + FLOAT_BYTES * (a * st.inputs[b] + out * st.nodes[b])
        return moved / (PCIE_BYTES * self.eff)

    def compute_s(self, b: int, a: int, out: int) -> float:
        st = self.lay.stats
        if self.model == "gat":  # project every input row, then per edge an attention score and a weighted row
            moved = FLOAT_BYTES * (st.edges[b] * out + 2 * GAT_HEADS * st.edges[b] + st.nodes[b] * out)
            flops = 2.0 * st.inputs[b] * a * out + st.edges[b] * (2 * out + 4 * GAT_HEADS)
        else:  # GraphSAGE-mean: gather and average the neighbours' rows, self and neighbour weights
            moved = FLOAT_BYTES * (st.edges[b] * a + st.nodes[b] * a)
            flops = 4.0 * st.nodes[b] * a * out
        return moved / (GPU_BYTES * self.eff) + flops / (GPU_FLOPS * self.eff)

    # ----------------------------------------------------------- structure
    def bins_of(self, w: int) -> range:
        return range(int(self.lay.first[w]), int(self.lay.first[w + 1]))

    def _bin(self, pre: str, b: int, a: int, out: int, inputs: list[str], before: list[str], factor: float) -> str:
        """A bin's load and compute; returns the compute's id. ``before``: what the load also waits
        for (the GPU memory of two bins, the previous bin in sequence). The output layer's forward
        computes carry ``tags["trained"]``: the nodes an epoch trains (metric ``nodes_per_second``)."""
        w = int(self.lay.owner[b])
        it = {"iteration": self._e, "layer": self._layer}
        if factor == 1.0 and self._layer == self.L:
            it["tags"] = {"trained": int(self.lay.stats.nodes[b])}
        comp = f"{pre}.c{b}"
        if self.resident:  # the part stays on the GPU: no load
            return self.job.task(comp, f"w{w}", factor * self.compute_s(b, a, out), inputs, **it)
        loader = f"x{w}" if self.copy_engine else f"w{w}"
        plain = {k: v for k, v in it.items() if k != "tags"}
        load = self.job.task(f"{pre}.l{b}", loader, self.load_s(b, a, out), inputs + before, **plain)
        return self.job.task(comp, f"w{w}", factor * self.compute_s(b, a, out), [load], **it)

    def _layer_pass(self, pre: str, a: int, out: int, inputs_of, factor: float, order) -> dict[int, str]:
        """One layer over every worker's bins (in ``order``); ``inputs_of(b)``: what bin ``b``'s
        load waits for. Returns bin -> its compute."""
        done: dict[int, str] = {}
        for w in range(self.W):
            seq = list(order(self.bins_of(w)))
            for k, b in enumerate(seq):
                before = []
                if self.copy_engine and k >= 2:
                    before = [done[seq[k - 2]]]  # two bins on the GPU at once
                elif not self.copy_engine and not self.resident and k >= 1:
                    before = [done[seq[k - 1]]]  # load and compute in turn on the GPU
                done[b] = self._bin(pre, b, a, out, inputs_of(b), before, factor)
        return done

    def _flows(self, pre: str, done: dict[int, str], nbytes: int, forward: bool) -> dict[tuple[int, int], str]:
        """After a layer: per (bin, other worker) the embeddings (forward: bin -> worker) or their
        gradients (backward: worker -> bin). Returns (bin, worker) -> flow id."""
        st, out = self.lay.stats, {}
        ctype = "graph-data" if forward else "gradient"
        for b in range(self.B):
            w = int(self.lay.owner[b])
            for r in np.flatnonzero(st.send[b]):
                r = int(r)
                src, dst = (w, r) if forward else (r, w)
                deps = self._flow_deps(b, r, done, forward)
                fid = f"{pre}.{b}{'>' if forward else '<'}{r}"
                attrs = {"coflow": pre, "coflow_type": ctype, "iteration": self._e, "layer": self._layer}
                out[(b, r)] = self.job.flow(fid, f"w{src}", f"w{dst}", int(nbytes * st.send[b, r]), deps, **attrs)
        return out

    def _flow_deps(self, b: int, r: int, done: dict[int, str], forward: bool) -> list[str]:
        w = int(self.lay.owner[b])
        if forward:  # the bin's embeddings: after its compute, or the whole layer (sequential, barrier)
            if self.pipe in ("sequential", "barrier"):
                return [done[c] for c in self.bins_of(w)]
            return [done[b]]
        # gradients for bin b's nodes from worker r: after r's bins that read b (or all of r's)
        if self.pipe in ("sequential", "barrier"):
            return [done[c] for c in self.bins_of(r)]
        return [done[int(c)] for c in self.readers[b] if int(self.lay.owner[c]) == r]

    def _inputs(self, b: int, prev: dict[int, str], flows: dict[tuple[int, int], str], forward: bool) -> list[str]:
        """What bin ``b``'s next-layer load waits for: its own inputs (eager) or all of the
        worker's (or, for the barrier, everyone's)."""
        w = int(self.lay.owner[b])
        if self.pipe == "barrier":
            return [prev[b], *flows.values()]
        if not self.eager:
            local = [prev[c] for c in self.bins_of(w)]
            return local + [f for (c, r), f in flows.items() if (r if forward else int(self.lay.owner[c])) == w]
        near = self.reads[b] if forward else self.readers[b]
        local = [prev[int(c)] for c in near if int(self.lay.owner[c]) == w]
        if forward:
            remote = [flows[(int(c), w)] for c in near if int(self.lay.owner[c]) != w]
        else:
            remote = [flows[(b, r)] for r in range(self.W) if (b, r) in flows]
        return local + remote

    def epoch(self, e: int, after: dict[int, list[str]]) -> dict[int, list[str]]:
        self._e, L, dims = e, self.L, self.dims
        fwd_order, bwd_order = (lambda bins: bins), (lambda bins: reversed(bins))
        prev: dict[int, str] = {}
        flows: dict[tuple[int, int], str] = {}
        computes = []
        for layer in range(1, L + 1):
            self._layer = layer
            if layer == 1:
                inputs = lambda b: list(after[int(self.lay.owner[b])])  # noqa: E731
            else:
                inputs = lambda b, p=prev, f=flows: self._inputs(b, p, f, True)  # noqa: E731
            prev = self._layer_pass(f"e{e}.f{layer}", dims[layer - 1], dims[layer], inputs, 1.0, fwd_order)
            computes.append(prev)
            flows = self._flows(f"e{e}.x{layer}", prev, FLOAT_BYTES * dims[layer], True) if layer < L else {}
        done: dict[int, list[str]] = {w: [] for w in range(self.W)}
        grads: dict[tuple[int, int], str] = {}
        for layer in range(L, 0, -1):
            self._layer = layer
            if layer == L:
                inputs = lambda b, f=computes[L - 1]: [f[b]]  # noqa: E731
            else:
                inputs = lambda b, p=prev, g=grads: self._inputs(b, p, g, False)  # noqa: E731
            prev = self._layer_pass(f"e{e}.b{layer}", dims[layer - 1], dims[layer], inputs, 2.0, bwd_order)
            if layer > 1:
                grads = self._flows(f"e{e}.y{layer - 1}", prev, FLOAT_BYTES * dims[layer - 1], False)
            ws = [f"w{w}" for w in range(self.W)]
            last = {f"w{w}": [prev[b] for b in self.bins_of(w)] for w in range(self.W)}
            weights = FLOAT_BYTES * (2 * dims[layer - 1] * dims[layer] + dims[layer])  # GAT's fewer: an upper bound
            ends = ring_allreduce(self.job, ws, weights, last, f"e{e}.ar{layer}", coflow=f"e{e}.ar{layer}",
                                  coflow_type="DP", iteration=e, layer=layer)  # fmt: skip
            for w in range(self.W):
                done[w].append(ends[f"w{w}"])
        return done


def item_estimate(dataset="ogbn-products", workers=16, layers=2, epochs=1, bin_size=5000, scale=0.02, **_) -> int:
    """gnn_hybrid's items, roughly from above: per epoch and layer, forward and backward, a load and a
    compute per bin and a flow per (bin, other worker); ring all-reduces of 2 (w - 1) w flows."""
    from workloads.graphs import DATASETS, dataset_shape

    ds = DATASETS.get({"products": "ogbn-products"}.get(dataset, dataset))
    nodes = dataset_shape(ds, scale)[0] if ds is not None and isinstance(scale, (int, float)) and scale > 0 else 0
    bins = nodes // max(1, bin_size) + workers if isinstance(bin_size, int) else workers
    return epochs * layers * (4 * bins + 2 * bins * (workers - 1) + 2 * (workers - 1) * workers)
