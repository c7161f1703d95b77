"""G3's partition balancing and bin packing (seed 004 chapter 4, §4.3.2 Alg. 2, §4.4.3), pure.

Locality-aware iterative re-partitioning (§4.3.2, Alg. 2): :func:`swap_refine`
    From a partition (G3 starts from multi-constraint METIS balancing node
    count and degree sum, eqs. 4.1-4.2), repeat: ``V_max`` and ``V_min`` are
    the parts with the most and the fewest out-of-partition neighbours
    ``|V_p^remote|`` (line 4-5); stop when ``(|V_max^remote| -
    |V_min^remote|) / |V_max^remote|`` is below ``gamma`` (0.5 %, "we use
    0.5% in our experiment"); else swap ``v_max``, the node of ``V_max``
    with the most neighbours outside ``V_max`` (line 9), with ``v_min``, the
    node of ``V_min`` with the fewest neighbours outside ``V_max`` ("the
    lowest number of remote neighbors if moved out of V_min", line 10:
    ``|N(v) - V_max|``). Every part keeps its size. The counts are kept
    incrementally as §4.3.2's fast neighbour tracking does: the in-partition
    degree ``cnt[p, u]`` of every node ``u`` towards every part ``p``; a
    move of ``v`` changes ``cnt`` of ``v``'s neighbours only (``O(d_v)``).
    "We also stop the process if cyclic swapping": when a pair of nodes is
    swapped a second time (in either direction). Where the paper is silent:
    ties go to the lowest node id; ``max_swaps`` (default ``n``; the ``g3``
    partitioner uses 20,000) bounds the loop, and the result says whether
    it converged.
    Numba kernel :func:`swap_refine`, plain twin :func:`swap_refine_reference`
    (recounts ``|V_p^remote|`` from scratch at every step), equal results.

Multi-level pipeline scheduling (§4.4.3): :func:`priority_order`, :func:`pack_bins`
    Step 1: a BFS over the worker's part, started from the lowest
    unvisited node of each connected component, visits neighbours in
    adjacency order; the nodes with remote neighbours are moved to the front,
    each group in BFS order (the priority list). Step 3: consecutive runs of
    ``bin_size`` nodes of the list are the bins (index-based packing). Step
    2's size limit ("half of the GPU memory size by the per-node memory
    usage") is the ``bin_size`` the experiments set (§4.6: "the initial bin
    size is set to 5000" for ogbn-products and Amazon). ``consecutive``
    (Fig. 4.17's inter-layer variant, "naively packs nodes with consecutive
    node IDs into bins"): the part's nodes in id order.

Bin statistics (:func:`bin_stats`, numba, twin :func:`bin_stats_reference`)
    per bin: its nodes, the edges into them (neighbour entries), the
    distinct input nodes a layer reads (its nodes and their neighbours), the
    nodes of the bin each other part needs (``send[b, r]``: nodes with a
    neighbour in part ``r``, whose embeddings go there), and the bins each
    bin reads (``reads``: CSR of the bins holding its nodes' neighbours,
    itself included), which the next layer's bin waits for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


# ------------------------------------------------------------ Alg. 2: swaps
@dataclass(frozen=True)
class SwapResult:
    part: np.ndarray
    swaps: int
    converged: bool
    cyclic: bool
    remote_before: np.ndarray
    remote_after: np.ndarray


def remote_counts(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, parts: int) -> np.ndarray:
    """``|V_p^remote|`` per part: distinct nodes outside ``p`` adjacent to a node of ``p``."""
    n = len(indptr) - 1
    src = np.repeat(part.astype(np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    far = src != part[dst]
    key = np.unique(src[far] * n + dst[far])
    return np.bincount(key // n, minlength=parts)


def swap_refine_reference(indptr, indices, part, parts: int, gamma: float = 0.005, max_swaps: int | None = None):
    """The obviously correct twin of :func:`swap_refine` (every count recomputed at each step)."""
    part = np.asarray(part, dtype=np.int64).copy()
    n = len(indptr) - 1
    limit = n if max_swaps is None else max_swaps
    before = remote_counts(indptr, indices, part, parts)
    seen: set[tuple[int, int]] = set()
    swaps, converged, cyclic = 0, False, False
    while True:
        rem = remote_counts(indptr, indices, part, parts)
        hi, lo = int(np.argmax(rem)), int(np.argmin(rem))
        if rem[hi] == 0 or (rem[hi] - rem[lo]) / rem[hi] < gamma:
            converged = True
            break
        if swaps >= limit:
            break

        def outside(v: int, p: int) -> int:
            return sum(1 for u in indices[indptr[v] : indptr[v + 1]] if part[u] != p)

        v_max = min((v for v in range(n) if part[v] == hi), key=lambda v: (-outside(v, hi), v))
        v_min = min((v for v in range(n) if part[v] == lo), key=lambda v: (outside(v, hi), v))
        pair = (min(v_max, v_min), max(v_max, v_min))
        if pair in seen:
            cyclic = True
            break
        seen.add(pair)
        part[v_max], part[v_min] = lo, hi
        swaps += 1
    after = remote_counts(indptr, indices, part, parts)
    return SwapResult(part.astype(np.int32), swaps, converged, cyclic, before, after)


@njit(cache=True)
def _move(indptr, indices, part, cnt, rem, v, a, b):  # pragma: no cover - numba
    """Move ``v`` from part ``a`` to ``b``, keeping ``cnt`` (in-part degrees) and ``rem`` exact."""
    for i in range(indptr[v], indptr[v + 1]):
        u = indices[i]
        cnt[a, u] -= 1
        if cnt[a, u] == 0 and part[u] != a:
            rem[a] -= 1
        cnt[b, u] += 1
        if cnt[b, u] == 1 and part[u] != b:
            rem[b] += 1
    if cnt[a, v] > 0:
        rem[a] += 1  # v is outside a now, next to a node of a
    if cnt[b, v] > 0:
        rem[b] -= 1  # v was outside b, next to it; now inside
    part[v] = b


@njit(cache=True)
def _swap_kernel(indptr, indices, part, parts, gamma, limit):  # pragma: no cover - numba
    n = len(indptr) - 1
    cnt = np.zeros((parts, n), dtype=np.int32)
    for v in range(n):
        for i in range(indptr[v], indptr[v + 1]):
            cnt[part[v], indices[i]] += 1
    rem = np.zeros(parts, dtype=np.int64)
    for p in range(parts):
        for u in range(n):
            if part[u] != p and cnt[p, u] > 0:
                rem[p] += 1
    before = rem.copy()
    members = [np.flatnonzero(part == p) for p in range(parts)]
    pos = np.zeros(n, dtype=np.int64)
    for p in range(parts):
        for k in range(len(members[p])):
            pos[members[p][k]] = k
    seen = set()
    swaps, converged, cyclic = 0, False, False
    while True:
        hi, lo = np.argmax(rem), np.argmin(rem)
        if rem[hi] == 0 or (rem[hi] - rem[lo]) / rem[hi] < gamma:
            converged = True
            break
        if swaps >= limit:
            break
        v_max, best = -1, -1
        for v in members[hi]:
            out = (indptr[v + 1] - indptr[v]) - cnt[hi, v]
            if out > best or (out == best and v < v_max):
                v_max, best = v, out
        v_min, best = -1, n + 1
        for v in members[lo]:
            out = (indptr[v + 1] - indptr[v]) - cnt[hi, v]
            if out < best or (out == best and v < v_min):
                v_min, best = v, out
        key = min(v_max, v_min) * n + max(v_max, v_min)
        if key in seen:
            cyclic = True
            break
        seen.add(key)
        _move(indptr, indices, part, cnt, rem, v_max, hi, lo)
        _move(indptr, indices, part, cnt, rem, v_min, lo, hi)
        members[hi][pos[v_max]] = v_min
        members[lo][pos[v_min]] = v_max
        pos[v_max], pos[v_min] = pos[v_min], pos[v_max]
        swaps += 1
    return swaps, converged, cyclic, before, rem


def swap_refine(indptr, indices, part, parts: int, gamma: float = 0.005, max_swaps: int | None = None) -> SwapResult:
    """Alg. 2 (module docstring); the same result as :func:`swap_refine_reference`."""
    out = np.asarray(part, dtype=np.int64).copy()
    limit = len(indptr) - 1 if max_swaps is None else max_swaps
    swaps, converged, cyclic, before, after = _swap_kernel(
        np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64), out, parts, float(gamma), int(limit)
    )
    return SwapResult(out.astype(np.int32), int(swaps), bool(converged), bool(cyclic), before, after)


# ------------------------------------------------------------ §4.4.3: bins
def has_remote(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray) -> np.ndarray:
    """Per node: has it a neighbour in another part?"""
    deg = np.diff(indptr)
    far = np.repeat(part, deg) != part[indices]
    return np.bincount(np.repeat(np.arange(len(deg)), deg), weights=far, minlength=len(deg)) > 0


def priority_order(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, p: int, remote: np.ndarray) -> np.ndarray:
    """Step 1: part ``p``'s nodes in BFS order over its own edges, those with remote neighbours
    (``remote``, :func:`has_remote`) first."""
    mine = np.flatnonzero(part == p)
    inside = np.zeros(len(part), dtype=bool)
    inside[mine] = True
    order = _bfs(indptr, indices, mine, inside)
    first = remote[order]
    return np.concatenate([order[first], order[~first]])


@njit(cache=True)
def _bfs(indptr, indices, mine, inside):  # pragma: no cover - numba
    seen = np.zeros(len(inside), dtype=np.bool_)
    out = np.empty(len(mine), dtype=np.int64)
    head = tail = 0
    for s in mine:
        if seen[s]:
            continue
        seen[s] = True
        out[tail] = s
        tail += 1
        while head < tail:
            v = out[head]
            head += 1
            for i in range(indptr[v], indptr[v + 1]):
                u = indices[i]
                if inside[u] and not seen[u]:
                    seen[u] = True
                    out[tail] = u
                    tail += 1
    return out


def pack_bins(order: np.ndarray, bin_size: int) -> list[np.ndarray]:
    """Step 3: consecutive runs of ``bin_size`` nodes of the list."""
    return [order[k : k + bin_size] for k in range(0, len(order), bin_size)]


@dataclass(frozen=True)
class BinStats:
    """Per bin (global index): ``nodes``, ``edges`` (neighbour entries of its nodes), ``inputs``
    (distinct nodes a layer reads: its own and their neighbours), ``send[b, r]`` (its nodes with a
    neighbour in part ``r``, ``r`` != its own part), ``reads`` (CSR ``reads_ptr``/``reads``: the bins
    holding any neighbour of its nodes, itself included, ascending)."""

    nodes: np.ndarray
    edges: np.ndarray
    inputs: np.ndarray
    send: np.ndarray
    reads_ptr: np.ndarray
    reads: np.ndarray


def bin_stats_reference(indptr, indices, part, parts: int, bins: list[np.ndarray]) -> BinStats:
    """The obviously correct twin of :func:`bin_stats`."""
    binof = np.full(len(part), -1, dtype=np.int64)
    for b, nodes in enumerate(bins):
        binof[nodes] = b
    B = len(bins)
    nodes_, edges, inputs = np.zeros(B, np.int64), np.zeros(B, np.int64), np.zeros(B, np.int64)
    send = np.zeros((B, parts), dtype=np.int64)
    reads: list[list[int]] = []
    for b, members in enumerate(bins):
        seen, read = set(), set()
        for v in members:
            nbrs = [int(u) for u in indices[indptr[v] : indptr[v + 1]]]
            edges[b] += len(nbrs)
            seen.add(int(v))
            seen.update(nbrs)
            read.add(b)
            read.update(int(binof[u]) for u in nbrs)
            for r in {int(part[u]) for u in nbrs} - {int(part[v])}:
                send[b, r] += 1
        nodes_[b], inputs[b] = len(members), len(seen)
        reads.append(sorted(read))
    ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum([len(r) for r in reads], out=ptr[1:])
    flat = np.array([x for r in reads for x in r], dtype=np.int64)
    return BinStats(nodes_, edges, inputs, send, ptr, flat)


@njit(cache=True)
def _stats_kernel(indptr, indices, part, parts, bin_ptr, bin_nodes, binof):  # pragma: no cover - numba
    B = len(bin_ptr) - 1
    n = len(part)
    nodes = np.zeros(B, np.int64)
    edges = np.zeros(B, np.int64)
    inputs = np.zeros(B, np.int64)
    send = np.zeros((B, parts), np.int64)
    node_mark = np.full(n, -1, np.int64)
    bin_mark = np.full(B, -1, np.int64)
    part_mark = np.full(parts, -1, np.int64)
    counts = np.zeros(B, np.int64)
    flat = []
    for b in range(B):
        nodes[b] = bin_ptr[b + 1] - bin_ptr[b]
        k = 0
        for q in range(bin_ptr[b], bin_ptr[b + 1]):
            v = bin_nodes[q]
            edges[b] += indptr[v + 1] - indptr[v]
            if node_mark[v] != b:
                node_mark[v] = b
                inputs[b] += 1
            if bin_mark[b] != b:
                bin_mark[b] = b
                flat.append(b)
                k += 1
            stamp = b * n + v
            for i in range(indptr[v], indptr[v + 1]):
                u = indices[i]
                if node_mark[u] != b:
                    node_mark[u] = b
                    inputs[b] += 1
                c = binof[u]
                if bin_mark[c] != b:
                    bin_mark[c] = b
                    flat.append(c)
                    k += 1
                r = part[u]
                if r != part[v] and part_mark[r] != stamp:
                    part_mark[r] = stamp
                    send[b, r] += 1
        counts[b] = k
    return nodes, edges, inputs, send, counts, np.array(flat, dtype=np.int64)


def bin_stats(indptr, indices, part, parts: int, bins: list[np.ndarray]) -> BinStats:
    """Per-bin statistics (:class:`BinStats`); the same as :func:`bin_stats_reference`."""
    sizes = np.array([len(b) for b in bins], dtype=np.int64)
    bin_ptr = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bin_ptr[1:])
    bin_nodes = np.concatenate(bins).astype(np.int64) if bins else np.zeros(0, np.int64)
    binof = np.full(len(part), -1, dtype=np.int64)
    binof[bin_nodes] = np.repeat(np.arange(len(bins)), sizes)
    nodes, edges, inputs, send, counts, flat = _stats_kernel(
        np.asarray(indptr, np.int64), np.asarray(indices, np.int64), np.asarray(part, np.int64), parts,
        bin_ptr, bin_nodes, binof,
    )  # fmt: skip
    ptr = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    reads = np.concatenate([np.sort(flat[ptr[b] : ptr[b + 1]]) for b in range(len(bins))]) if bins else flat
    return BinStats(nodes, edges, inputs, send, ptr, reads)
