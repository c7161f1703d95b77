"""A generated partitioned power-law graph and the fan-out neighbour sampler (DGTP, seed 000).

The DGTP paper (§III-A, §VI-A) samples mini-batches with uniformly random
fan-out neighbour sampling (GraphSAGE's) on ogbn-products, Reddit and
ogbn-papers100M, partitioned over the machines with METIS. railbed has
neither the datasets nor METIS, so it generates a graph with each dataset's
shape and samples on it for real; the bytes of every flow come from what
the sampler touched.

The graph (:func:`power_law_graph`)
    ``n`` nodes, node ``v`` in partition ``v * parts // n`` (contiguous
    ranges, as DistDGL relabels nodes per partition, seed 001 §4.1.2).
    Out-degrees are drawn from a discrete power law (exponent ``alpha``,
    rescaled to the mean degree); each neighbour lies in the node's own
    partition with probability ``locality`` (a min-edge-cut partitioner
    keeps most edges inside: the paper gives no edge cut; we chose 0.8),
    otherwise in a uniformly chosen other partition (with ``near``: in one of
    the other partitions of its own group of ``group`` consecutive ones, a CPU
    socket's GPUs, with probability ``near``, else in one outside the group:
    graphs whose communities nest, as DGCL's hierarchical partitioning (§4.1)
    exploits; drawn from a second stream so the graph without ``near`` is
    unchanged), and inside the chosen
    partition it is drawn with probability proportional to the nodes'
    degrees (Chung-Lu), so popular nodes are popular neighbours too. Plain
    numpy, vectorised.

The sampler (:func:`sample_counts`, numba, twin :func:`sample_counts_reference`)
    From the seed nodes, hop by hop, each frontier node draws ``min(deg,
    fanout[h])`` distinct neighbours (Floyd's algorithm); the next frontier
    is the newly seen nodes, in order of first sight. Random numbers come
    from one splitmix64 stream advanced once per draw, in the same order in
    both implementations, so they agree exactly. It counts, per partition,
    the distinct nodes touched (whose features the partition's store sends)
    and the edges sampled from the partition's nodes (the structure it
    sends), and per hop the new nodes and the sampled edges (the GNN's
    layer sizes). Partitions are any node -> part array
    (:mod:`workloads.partition`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def power_law_graph(
    n: int,
    mean_degree: float,
    parts: int,
    seed: int = 0,
    alpha: float = 2.5,
    locality: float = 0.8,
    near: float | None = None,
    group: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """(indptr int64, indices int32) of a directed graph in CSR form (see the module docstring)."""
    rng = np.random.default_rng(seed)
    raw = (1.0 - rng.random(n)) ** (-1.0 / (alpha - 1.0))  # Pareto, x_min = 1
    deg = np.maximum(1, np.round(raw * mean_degree / raw.mean())).astype(np.int64)
    deg = np.minimum(deg, max(1, n - 1))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    part = partition_of(n, parts)
    src_part = np.repeat(part, deg)
    m = int(indptr[-1])
    other = rng.integers(0, max(1, parts - 1), m)
    far = rng.random(m) >= locality if parts > 1 else np.zeros(m, dtype=bool)
    dst_part = np.where(far, (src_part + 1 + other) % parts, src_part)
    if near is not None and 1 < group < parts:
        dst_part = np.where(far, _nested_part(src_part, near, group, parts, seed), src_part)
    indices = np.empty(m, dtype=np.int32)
    u = rng.random(m)
    for p in range(parts):
        lo, hi = first_node(n, parts, p), first_node(n, parts, p + 1)
        cum = np.cumsum(deg[lo:hi]).astype(np.float64)
        sel = dst_part == p
        pick = np.searchsorted(cum, u[sel] * cum[-1], side="right")
        indices[sel] = lo + np.minimum(pick, hi - lo - 1)
    return indptr, indices


def _nested_part(src_part: np.ndarray, near: float, group: int, parts: int, seed: int) -> np.ndarray:
    """A far edge's partition: another of the source's group w.p. ``near``, else one outside it."""
    rng = np.random.default_rng([seed, 1])
    start = src_part // group * group
    size = np.minimum(group, parts - start)  # the last group may be smaller
    inside = start + (src_part - start + 1 + (rng.random(len(src_part)) * (size - 1)).astype(np.int64)) % size
    j = (rng.random(len(src_part)) * (parts - size)).astype(np.int64)
    outside = np.where(j < start, j, j + size)
    use_inside = (rng.random(len(src_part)) < near) & (size > 1) | (size == parts)
    return np.where(use_inside, inside, outside)


def first_node(n: int, parts: int, p: int) -> int:
    """The first node of partition ``p`` (node ``v`` is in partition ``v * parts // n``)."""
    return -(-p * n // parts)


def partition_of(n: int, parts: int) -> np.ndarray:
    return (np.arange(n, dtype=np.int64) * parts // n).astype(np.int32)


# ----------------------------------------------------------------- sampler
def _splitmix(state: int) -> tuple[int, int]:
    """(new state, 64-bit random number): splitmix64, Python integers."""
    state = (state + GOLDEN) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def sample_counts_reference(
    indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, parts: int, seeds, fanouts, rng_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(distinct nodes per partition, sampled edges per partition, new nodes per hop (``len(fanouts)
    + 1``: the seeds first), sampled edges per hop): the obviously correct twin."""
    state = rng_seed & MASK
    nodes = np.zeros(parts, dtype=np.int64)
    edges = np.zeros(parts, dtype=np.int64)
    hop_nodes = np.zeros(len(fanouts) + 1, dtype=np.int64)
    hop_edges = np.zeros(len(fanouts), dtype=np.int64)
    seen: set[int] = set()
    frontier: list[int] = []
    for v in seeds:
        if int(v) not in seen:
            seen.add(int(v))
            frontier.append(int(v))
            nodes[part[v]] += 1
    hop_nodes[0] = len(frontier)
    for h, k in enumerate(fanouts):
        nxt: list[int] = []
        for v in frontier:
            lo, deg = int(indptr[v]), int(indptr[v + 1] - indptr[v])
            take = min(deg, int(k))
            chosen: list[int] = []
            for j in range(deg - take, deg):  # Floyd: `take` distinct positions of 0..deg-1
                state, r = _splitmix(state)
                t = r % (j + 1)
                chosen.append(j if t in chosen else t)
            edges[part[v]] += take
            hop_edges[h] += take
            for pos in chosen:
                w = int(indices[lo + pos])
                if w not in seen:
                    seen.add(w)
                    nxt.append(w)
                    nodes[part[w]] += 1
        frontier = nxt
        hop_nodes[h + 1] = len(nxt)
    return nodes, edges, hop_nodes, hop_edges


@njit(cache=True)
def _mix(state):  # pragma: no cover - numba
    state = state + np.uint64(GOLDEN)
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return state, z ^ (z >> np.uint64(31))


@njit(cache=True)
def _sample_kernel(indptr, indices, part, parts, seeds, fanouts, rng_seed, mark, stamp):  # pragma: no cover
    """``mark[v] == stamp`` means v was seen in this call (no clearing between calls)."""
    state = np.uint64(rng_seed)
    nodes = np.zeros(parts, dtype=np.int64)
    edges = np.zeros(parts, dtype=np.int64)
    hop_nodes = np.zeros(len(fanouts) + 1, dtype=np.int64)
    hop_edges = np.zeros(len(fanouts), dtype=np.int64)
    frontier = np.empty(len(seeds), dtype=np.int64)
    nf = 0
    for v in seeds:
        if mark[v] != stamp:
            mark[v] = stamp
            frontier[nf] = v
            nf += 1
            nodes[part[v]] += 1
    hop_nodes[0] = nf
    chosen = np.empty(max(1, fanouts.max()), dtype=np.int64)
    for h in range(len(fanouts)):
        k = fanouts[h]
        nxt = np.empty(nf * k, dtype=np.int64)
        nn = 0
        for i in range(nf):
            v = frontier[i]
            lo = indptr[v]
            deg = indptr[v + 1] - lo
            take = min(deg, k)
            c = 0
            for j in range(deg - take, deg):
                state, r = _mix(state)
                t = np.int64(r % np.uint64(j + 1))
                dup = False
                for q in range(c):
                    if chosen[q] == t:
                        dup = True
                        break
                chosen[c] = j if dup else t
                c += 1
            edges[part[v]] += take
            hop_edges[h] += take
            for q in range(c):
                w = indices[lo + chosen[q]]
                if mark[w] != stamp:
                    mark[w] = stamp
                    nxt[nn] = w
                    nn += 1
                    nodes[part[w]] += 1
        frontier = nxt
        nf = nn
        hop_nodes[h + 1] = nn
    return nodes, edges, hop_nodes, hop_edges


class Sampler:
    """The numba sampler over one graph and a node -> partition array (``part``; contiguous ranges
    when ``None``); keeps its seen-marks array between calls."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, part: np.ndarray | None, parts: int) -> None:
        self.indptr, self.indices, self.parts = indptr, indices, parts
        n = len(indptr) - 1
        self.part = partition_of(n, parts) if part is None else np.asarray(part, dtype=np.int32)
        self.mark = np.zeros(n, dtype=np.int64)
        self.stamp = 0

    def counts(self, seeds, fanouts, rng_seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(distinct nodes per partition, sampled edges per partition, new nodes per hop, sampled
        edges per hop); the same as the reference."""
        self.stamp += 1
        return _sample_kernel(
            self.indptr,
            self.indices,
            self.part,
            self.parts,
            np.asarray(seeds, dtype=np.int64),
            np.asarray(fanouts, dtype=np.int64),
            np.uint64(rng_seed & MASK),
            self.mark,
            self.stamp,
        )


def sample_counts(indptr, indices, part, parts, seeds, fanouts, rng_seed: int):
    """One call of the numba sampler (see :class:`Sampler` to sample many batches on one graph)."""
    return Sampler(indptr, indices, part, parts).counts(seeds, fanouts, rng_seed)
