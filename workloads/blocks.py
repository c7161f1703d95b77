"""ByteGNN's GNN-tailored partitioning (seed 001 §4.2.3, Alg. 2): BFS blocks assigned by score, pure.

Step 1, neighbourhood blocks
    "We start a K-hop breadth-first search from each vertex v (v is called
    the block center) and broadcast the unique block ID of v to its K-hop
    neighbors being visited. Every vertex only keeps the first block ID it
    receives, except for block centers which keep their own": the centres
    are the training, validation and test vertices; one breadth-first
    search from all of them at once (:func:`workloads.adagl.bfs_claim`,
    centres in id order, so a tie goes to the lower centre). Vertices no
    search reaches form blocks of their own.
Step 2, block assignment (Alg. 2)
    Blocks in descending ``max(|train|, |val|, |test|)`` ("larger blocks
    are assigned to different partitions first"), each to ``argmax_j CE[j]
    BS[j]`` with ``CE[j] = |Cross_Edge(P_j, B_i)| / |P_j|`` and ``BS[j] = 1 -
    alpha |P_j(train)|/C(train) - beta |P_j(val)|/C(val) - gamma
    |P_j(test)|/C(test)``, ``C(x) = |V(x)| / N`` (Alg. 2 writes ``BD`` where
    it computes ``BS``). The paper leaves ``alpha, beta, gamma`` open ("we may
    set a larger alpha to favor the training process"): 1/3 each, so that
    ``BS`` is 0 when a partition holds exactly its share of all three.

``bytegnn-literal`` is Alg. 2 as written: with every partition empty,
``CE`` is 0/0 (taken as 0) and every score 0, and the first partition takes
the first block; afterwards ``CE`` is 0 for every partition without a
cross edge, so a block with no edge into any partition goes to the first
highest score, usually partition 0 again: most blocks end in one partition.
``bytegnn`` (the default) smooths ``CE[j] = (cross + 1) / (|P_j| + 1)`` so
that an empty or unconnected partition still scores by its balance; our
deviation, argued, not measured into place.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workloads.adagl import bfs_claim


def blocks(indptr, indices, centers: np.ndarray, hops: int) -> np.ndarray:
    """Step 1: node -> its block id (0..), blocks numbered by their centre's id order first."""
    owner = bfs_claim(indptr, indices, np.sort(centers), hops)
    owner = np.where(owner < 0, np.arange(len(owner)) + len(indptr), owner)  # unreached: alone
    _, block = np.unique(owner, return_inverse=True)
    return block.astype(np.int64)


def assign_reference(indptr, indices, block, kinds, parts: int, weights=(1 / 3, 1 / 3, 1 / 3), smooth: bool = True):
    """Step 2, the obviously correct twin of :func:`assign`. ``kinds[v]``: 0 train, 1 val, 2 test,
    -1 other."""
    nb = int(block.max()) + 1
    members = [[] for _ in range(nb)]
    for v, b in enumerate(block):
        members[b].append(v)
    count = np.zeros((nb, 3), dtype=np.int64)
    for v, b in enumerate(block):
        if kinds[v] >= 0:
            count[b, kinds[v]] += 1
    c = np.array([(kinds == k).sum() for k in range(3)], dtype=float) / parts
    order = sorted(range(nb), key=lambda b: (-count[b].max(), b))
    where = np.full(len(block), -1, dtype=np.int64)
    size = np.zeros(parts)
    held = np.zeros((parts, 3))
    out = np.zeros(nb, dtype=np.int64)
    for b in order:
        cross = np.zeros(parts)
        for v in members[b]:
            for u in indices[indptr[v] : indptr[v + 1]]:
                if where[u] >= 0:
                    cross[where[u]] += 1
        best, best_j = -np.inf, 0
        for j in range(parts):
            ce = (cross[j] + 1) / (size[j] + 1) if smooth else (cross[j] / size[j] if size[j] else 0.0)
            bs = 1 - sum(weights[k] * held[j, k] / c[k] for k in range(3) if c[k] > 0)
            if ce * bs > best:
                best, best_j = ce * bs, j
        out[b] = best_j
        for v in members[b]:
            where[v] = best_j
        size[best_j] += len(members[b])
        held[best_j] += count[b]
    return out[block].astype(np.int32)


@njit(cache=True)
def _assign_kernel(indptr, indices, bptr, bnodes, order, count, c, parts, w, smooth):  # pragma: no cover
    n = len(indptr) - 1
    where = np.full(n, -1, np.int64)
    size = np.zeros(parts)
    held = np.zeros((parts, 3))
    out = np.zeros(len(bptr) - 1, np.int64)
    cross = np.zeros(parts)
    for b in order:
        cross[:] = 0.0
        for q in range(bptr[b], bptr[b + 1]):
            v = bnodes[q]
            for i in range(indptr[v], indptr[v + 1]):
                u = indices[i]
                if where[u] >= 0:
                    cross[where[u]] += 1
        best, best_j = -np.inf, 0
        for j in range(parts):
            if smooth:
                ce = (cross[j] + 1) / (size[j] + 1)
            else:
                ce = cross[j] / size[j] if size[j] > 0 else 0.0
            bs = 1.0
            for k in range(3):
                if c[k] > 0:
                    bs -= w[k] * held[j, k] / c[k]
            if ce * bs > best:
                best, best_j = ce * bs, j
        out[b] = best_j
        for q in range(bptr[b], bptr[b + 1]):
            where[bnodes[q]] = best_j
        size[best_j] += bptr[b + 1] - bptr[b]
        for k in range(3):
            held[best_j, k] += count[b, k]
    return out


def assign(indptr, indices, block, kinds, parts: int, weights=(1 / 3, 1 / 3, 1 / 3), smooth: bool = True):
    """Step 2 (Alg. 2; module docstring): node -> partition; the same as :func:`assign_reference`."""
    nb = int(block.max()) + 1
    count = np.zeros((nb, 3), dtype=np.int64)
    for k in range(3):
        count[:, k] = np.bincount(block[kinds == k], minlength=nb)
    order = np.lexsort((np.arange(nb), -count.max(axis=1)))
    bptr = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(np.bincount(block, minlength=nb), out=bptr[1:])
    bnodes = np.argsort(block, kind="stable").astype(np.int64)
    c = np.array([(kinds == k).sum() for k in range(3)], dtype=float) / parts
    out = _assign_kernel(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), bptr, bnodes, order, count, c,
                         parts, np.asarray(weights, float), smooth)  # fmt: skip
    return out[block].astype(np.int32)


def kinds_of(train, val, test, n: int) -> np.ndarray:
    """Node -> 0 train, 1 validation, 2 test, -1 none (a node in two masks counts as the first)."""
    out = np.full(n, -1, dtype=np.int64)
    for k, mask in ((2, test), (1, val), (0, train)):
        if mask is not None:
            out[np.asarray(mask, bool)] = k
    return out


def bytegnn(indptr, indices, train, val, test, parts: int, hops: int = 2, smooth: bool = True) -> np.ndarray:
    """ByteGNN's partition (steps 1 and 2) of a graph with its masks: node -> partition."""
    kinds = kinds_of(train, val, test, len(indptr) - 1)
    block = blocks(indptr, indices, np.flatnonzero(kinds >= 0), hops)
    return assign(indptr, indices, block, kinds, parts, smooth=smooth)
