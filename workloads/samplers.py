"""Layer-wise samplers and DGS's surrogate (seed 004 ch. 3, §3.1.2, §3.4): what a mini-batch touches.

The node-wise fan-out sampler (GraphSAGE's, "Random" in DGS's Table 3.2) is
:class:`workloads.gnn_graph.Sampler`. Here, for the same outputs (distinct
nodes and sampled edges per partition, new nodes and edges per hop):

FastGCN (:class:`LayerSampler` with ``mode="fastgcn"``)
    Every layer draws ``budget[h]`` nodes, with replacement, from one
    distribution over all nodes, ``q(u)`` proportional to ``deg(u)^2`` (the
    squared column norm of the unnormalised adjacency, FastGCN's importance
    distribution); the distribution is computed once before training ("FastGCN
    pre-computes and synchronizes the probability tensor before training",
    §3.4.1).
LADIES (``mode="ladies"``)
    Layer ``h`` draws ``budget[h]`` nodes, with replacement, among the
    neighbours of layer ``h - 1``'s nodes, ``q(u)`` proportional to the
    squared number of edges from layer ``h - 1`` into ``u`` (the squared
    column norm of the layer's rows: "layer-dependent sampling probability").
    The probabilities need every part's rows, so each layer of each batch
    synchronises a probability tensor among the workers
    (:func:`workloads.gnn_epoch.gnn_epoch` adds those flows).
    For both, a layer's sampled edges are the adjacency entries between
    the previous layer's nodes and the drawn ones.
DGS (:func:`dgs_counts`, a parameterised surrogate)
    DGS's masks come from a GNN explainer trained online (§3.2.3), which
    railbed does not train. The surrogate applies what the masks do to the
    node-wise sample: of the remote nodes drawn, a fraction ``remote_keep``
    is kept and the rest are replaced by local ones ("remaining the number
    of total sampled nodes unchanged", §3.2.3), and remote nodes send
    ``feature_keep`` of their features ("top-N_f sub-features", N_f = 0.85,
    §3.4). The replaced nodes' own expansions are not re-drawn (a count
    surrogate). ``remote_keep`` is not stated (0.5, ours, swept); Table
    3.3's byte reductions are a consistency check of it, not a result.

Random numbers: the layer-wise kernels take their uniform draws as an array
(``draws[h]``: ``budget[h]`` numbers in [0, 1)), so the numba kernel and
its twin (:func:`layer_counts_reference`) see the same ones and agree exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MODES = ("fastgcn", "ladies")


def layer_counts_reference(indptr, indices, part, parts, seeds, draws, mode: str):
    """(nodes per part, edges per part, new nodes per hop, edges per hop): the obviously correct twin."""
    n = len(indptr) - 1
    deg = np.diff(indptr).astype(float)
    seen = set(int(v) for v in seeds)
    nodes = np.zeros(parts, np.int64)
    edges = np.zeros(parts, np.int64)
    for v in seen:
        nodes[part[v]] += 1
    hop_nodes = [len(seen)]
    hop_edges = []
    layer = sorted(seen)
    for u_h in draws:
        if mode == "fastgcn":
            cand = list(range(n))
            weight = [deg[u] ** 2 for u in cand]
        else:
            hits: dict[int, int] = {}
            for v in layer:
                for u in indices[indptr[v] : indptr[v + 1]]:
                    hits[int(u)] = hits.get(int(u), 0) + 1
            cand = sorted(hits)
            weight = [float(hits[u]) ** 2 for u in cand]
        cum = np.cumsum(weight)
        picked = set()
        if len(cand) and cum[-1] > 0:
            for x in u_h:
                picked.add(cand[int(np.searchsorted(cum, x * cum[-1], side="right"))])
        members = set(picked)
        count = 0
        for v in layer:
            for u in indices[indptr[v] : indptr[v + 1]]:
                if int(u) in members:
                    edges[part[v]] += 1
                    count += 1
        hop_edges.append(count)
        new = [u for u in sorted(picked) if u not in seen]
        for u in new:
            seen.add(u)
            nodes[part[u]] += 1
        hop_nodes.append(len(new))
        layer = sorted(picked)
    return nodes, edges, np.array(hop_nodes, np.int64), np.array(hop_edges, np.int64)


@njit(cache=True)
def _layer_kernel(indptr, indices, part, parts, seeds, ptr, draws, ladies, mark, stamp, sq_cum):  # pragma: no cover
    n = len(indptr) - 1
    nodes = np.zeros(parts, np.int64)
    edges = np.zeros(parts, np.int64)
    H = len(ptr) - 1
    hop_nodes = np.zeros(H + 1, np.int64)
    hop_edges = np.zeros(H, np.int64)
    # mark: 0 unseen; seen nodes carry stamp; layer membership via a second array
    in_layer = np.zeros(n, np.int64)
    layer = np.unique(seeds)
    for v in layer:
        if mark[v] != stamp:
            mark[v] = stamp
            nodes[part[v]] += 1
            hop_nodes[0] += 1
    hits = np.zeros(n, np.int64)
    for h in range(H):
        lo, hi = ptr[h], ptr[h + 1]
        picked = np.empty(hi - lo, np.int64)
        k = 0
        if ladies:
            cand = []
            for v in layer:
                for q in range(indptr[v], indptr[v + 1]):
                    u = indices[q]
                    if hits[u] == 0:
                        cand.append(u)
                    hits[u] += 1
            cands = np.sort(np.array(cand, dtype=np.int64)) if len(cand) else np.zeros(0, np.int64)
            cum = np.zeros(len(cands))
            acc = 0.0
            for t in range(len(cands)):
                acc += float(hits[cands[t]]) ** 2
                cum[t] = acc
            if len(cands) and acc > 0:
                for x in draws[lo:hi]:
                    picked[k] = cands[np.searchsorted(cum, x * acc, side="right")]
                    k += 1
            for u in cands:
                hits[u] = 0
        else:
            total = sq_cum[-1]
            if total > 0:
                for x in draws[lo:hi]:
                    picked[k] = np.searchsorted(sq_cum, x * total, side="right")
                    k += 1
        members = np.unique(picked[:k])
        h_stamp = stamp * (H + 2) + h + 1
        for u in members:
            in_layer[u] = h_stamp
        for v in layer:
            for q in range(indptr[v], indptr[v + 1]):
                if in_layer[indices[q]] == h_stamp:
                    edges[part[v]] += 1
                    hop_edges[h] += 1
        for u in members:
            if mark[u] != stamp:
                mark[u] = stamp
                nodes[part[u]] += 1
                hop_nodes[h + 1] += 1
        layer = members
    return nodes, edges, hop_nodes, hop_edges


class LayerSampler:
    """FastGCN's or LADIES's layer-wise sampler over one graph (module docstring)."""

    def __init__(self, indptr, indices, part, parts: int, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"layer-wise mode {mode!r}: one of {MODES}")
        self.indptr, self.indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
        self.part, self.parts, self.mode = np.asarray(part, np.int64), parts, mode
        deg = np.diff(self.indptr).astype(float)
        self.sq_cum = np.cumsum(deg**2)
        self.mark = np.zeros(len(deg), np.int64)
        self.stamp = 0

    def counts(self, seeds, draws: list[np.ndarray]):
        """The counts of one batch; ``draws[h]``: the uniform numbers of hop ``h`` (one per draw)."""
        self.stamp += 1
        ptr = np.zeros(len(draws) + 1, np.int64)
        np.cumsum([len(d) for d in draws], out=ptr[1:])
        flat = np.concatenate(draws) if draws else np.zeros(0)
        return _layer_kernel(self.indptr, self.indices, self.part, self.parts, np.asarray(seeds, np.int64), ptr, flat,
                             self.mode == "ladies", self.mark, self.stamp, self.sq_cum)  # fmt: skip


def dgs_counts(nodes: np.ndarray, edges: np.ndarray, home: int, remote_keep: float) -> tuple[np.ndarray, np.ndarray]:
    """DGS's surrogate on a node-wise sample's counts: remote nodes and their edges kept at
    ``remote_keep``, the rest moved to the home part (totals unchanged)."""
    n, e = nodes.astype(float).copy(), edges.astype(float).copy()
    far = np.arange(len(n)) != home
    moved_n, moved_e = n[far] * (1 - remote_keep), e[far] * (1 - remote_keep)
    n[far] -= moved_n
    e[far] -= moved_e
    n[home] += moved_n.sum()
    e[home] += moved_e.sum()
    return n, e
