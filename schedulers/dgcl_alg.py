"""DGCL's communication plans as hops (seed 002 §5-§7): SPST, peer-to-peer, swap; pure functions.

A graphAllgather moves, for every vertex ``v`` computed on GPU ``s_v``, its
embedding to every GPU in ``D_v`` (:class:`hwmodels.dgcl.Requirements`).
The job carries one flow per GPU pair (``s`` -> ``d``: the bytes of ``s``'s
vertices that ``d`` needs). A plan turns those into *hops*: one transfer
per (stage, from node, to node) with every vertex that crosses it batched
together (DGCL §6's ``(d_i, d_j, k, T^s_ij, T^r_ij)`` tuples), and for each
hop the bytes of every GPU pair it serves (``shares``). A hop of a tree
serves every destination below it, so one copy counts for several pairs
(multicast, :class:`railbed.scheduler.SubFlow`'s ``carries``).

:func:`spst_hops`
    SPST's trees (:func:`hwmodels.dgcl.spst`, Alg. 1-2) on the
    communication topology of the GPUs: edge ``(v, k, a, b)`` carries ``v``
    at stage ``k`` and serves the destinations of ``v`` in the subtree of
    ``b`` (computed from the deepest stage up, as bit masks).
:func:`p2p_hops`
    Peer-to-peer (ROC's, §7): every pair direct, all in stage 0.
:func:`swap_hops`
    Swap (NeuGraph's, §7): "dumping vertex embeddings to main memory after
    each layer for communication, and we also implemented the chain-transfer
    optimization in NeuGraph". Stage 0, every GPU writes *all* its
    vertices' embeddings to the memory of its CPU socket (§7.1: "it needs to
    dump all vertex embeddings to main memory"). Then, with ``load="chunks"``
    (the default): NeuGraph streams vertex data in chunks, and with the
    non-overlapping partitioning the three methods share (§7) a chunk is a
    GPU's partition, so a GPU loads *every* partition it needs any vertex
    of, whole (§7.1: Swap "performs well for the small and dense Reddit graph
    because a large portion of the vertices swapped to main memory are
    required by remote GPUs", i.e. its cost does not shrink with the
    required ones); chain transfer: the GPUs under one PCIe switch that need
    a partition form a chain, the first reads it from host memory (stage 1),
    each forwards it to the next (stages 2, 3, ...), and a partition whose
    owner is under the switch starts its chain at the owner. With
    ``load="needed"`` (the previous model): stage 1, every GPU reads from
    host memory only the vertices it needs. Our choices where the paper is
    silent: the socket a GPU writes to is its own (readers on the other
    socket read across QPI); chains in GPU index order.
:func:`reverse`
    The backward pass (§6): stages in reverse order, every hop reversed,
    and the pair ``(s, d)`` becomes ``(d, s)`` (gradients flow back). A
    reversed tree hop keeps its size: one gradient per vertex, the sum of
    the destinations' below it (a relay adds what it receives before sending
    on). §6 only says the send and receive tables are switched; tables of
    vertex ids, each once, imply this reduction, our reading.

Stages run in order; the planners make every hop of stage ``k`` wait for
every hop of stage ``k - 1`` (the cost model's assumption, §5.1: "a stage
finishes only when all its communications complete"; DGCL's runtime
synchronises peers pairwise with ready/done flags, which we do not model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodels.dgcl import CommTopology, Requirements, spst


@dataclass(frozen=True)
class Hop:
    """``size`` bytes from node ``src`` to node ``dst`` at ``stage``; ``shares[(s, d)]``: the bytes
    of GPU pair ``s -> d`` among them. Nodes ``< m`` are GPUs, ``m + c`` host memory of socket ``c``."""

    stage: int
    src: int
    dst: int
    size: int
    shares: dict[tuple[int, int], int]


def pair_bytes(req: Requirements, m: int) -> np.ndarray:
    """(m, m) integer bytes GPU ``s`` sends GPU ``d`` in one graphAllgather."""
    return req.pair_bytes(m)


def p2p_hops(req: Requirements, m: int) -> list[Hop]:
    sizes = pair_bytes(req, m)
    return [Hop(0, s, d, int(sizes[s, d]), {(s, d): int(sizes[s, d])}) for s, d in zip(*np.nonzero(sizes))]


def swap_hops(
    req: Requirements, m: int, socket_of: list[int], switch_of: list[int] | None = None, load: str = "chunks"
) -> list[Hop]:
    """Swap's hops (module docstring); ``switch_of[g]``: GPU ``g``'s PCIe switch (chains), each its own
    switch when None."""
    sizes = pair_bytes(req, m)
    per_gpu = np.bincount(req.source, weights=np.rint(req.nbytes), minlength=m).astype(np.int64)
    switch_of = list(range(m)) if switch_of is None else list(switch_of)
    hops = []
    for s in range(m):  # the dump: all of s's embeddings; it carries the pairs that read them back
        near = switch_of[s] if load == "chunks" else None  # chained from s itself, not through memory
        shares = {(s, int(d)): int(sizes[s, d]) for d in np.nonzero(sizes[s])[0] if switch_of[d] != near}
        if shares:  # a hop carries some pair's bytes (a dump nobody reads back is left out)
            hops.append(Hop(0, s, m + socket_of[s], int(per_gpu[s]), shares))
    if load == "needed":
        reads: dict[tuple[int, int], dict[tuple[int, int], int]] = {}
        for s, d in zip(*np.nonzero(sizes)):
            reads.setdefault((m + socket_of[s], int(d)), {})[(int(s), int(d))] = int(sizes[s, d])
        return hops + [Hop(1, mem, d, sum(sh.values()), sh) for (mem, d), sh in sorted(reads.items())]
    if load != "chunks":
        raise ValueError(f"swap load {load!r}: 'chunks' or 'needed'")
    for w in sorted(set(switch_of)):
        under = [g for g in range(m) if switch_of[g] == w]
        for s in range(m):
            chain = [d for d in under if d != s and sizes[s, d] > 0]
            if not chain:
                continue
            head = [s] if s in under else [m + socket_of[s]]
            for k, (a, b) in enumerate(zip(head + chain, chain)):
                shares = {(s, d): int(sizes[s, d]) for d in chain[k:]}
                hops.append(Hop(1 + k, a, b, int(per_gpu[s]), shares))
    return _batched(hops)


def _batched(hops: list[Hop]) -> list[Hop]:
    """One hop per (stage, from, to), the partitions crossing it together (§6's tuples)."""
    merged: dict[tuple[int, int, int], Hop] = {}
    for h in hops:
        key = (h.stage, h.src, h.dst)
        old = merged.get(key)
        merged[key] = h if old is None else Hop(*key, old.size + h.size, {**old.shares, **h.shares})
    return [merged[k] for k in sorted(merged)]


def spst_hops(topo: CommTopology, req: Requirements, seed: int | None = 0) -> list[Hop]:
    """SPST's plan as hops (module docstring); ``topo.gpus[i]`` is GPU ``i`` of ``req``."""
    m = topo.m
    plan, _ = spst(topo, req, seed=seed)
    v, k, a, b = plan.vertex, plan.stage, plan.src, plan.dst
    if len(v) == 0:
        return []
    need = np.zeros(len(req), dtype=np.int64)  # bit d set: d needs v
    counts = np.diff(req.dest_ptr)
    np.bitwise_or.at(need, np.repeat(np.arange(len(req)), counts), np.left_shift(1, req.dest))
    below = np.zeros(len(req) * m, dtype=np.int64)  # (v, node): destinations served through node
    served = np.zeros(len(v), dtype=np.int64)
    for stage in range(int(k.max()), -1, -1):  # children first
        rows = np.nonzero(k == stage)[0]
        served[rows] = (need[v[rows]] & np.left_shift(1, b[rows])) | below[v[rows] * m + b[rows]]
        np.bitwise_or.at(below, v[rows] * m + a[rows], served[rows])
    nbytes = np.rint(req.nbytes).astype(np.int64)
    src = req.source[v]
    hop_key = (k * m + a) * m + b
    size = np.bincount(hop_key, weights=nbytes[v], minlength=m**3)
    shares: dict[int, dict[tuple[int, int], int]] = {}
    for d in range(m):
        rows = np.nonzero((served >> d) & 1)[0]
        pair = np.bincount(hop_key[rows] * m + src[rows], weights=nbytes[v[rows]], minlength=m**4)
        for key in np.nonzero(pair)[0]:
            shares.setdefault(int(key // m), {})[(int(key % m), d)] = int(pair[key])
    return [Hop(key // (m * m), key // m % m, key % m, int(size[key]), shares[key]) for key in sorted(shares)]


def reverse(hops: list[Hop]) -> list[Hop]:
    """The backward pass's hops (module docstring)."""
    last = max((h.stage for h in hops), default=0)
    return [
        Hop(last - h.stage, h.dst, h.src, h.size, {(d, s): n for (s, d), n in h.shares.items()})
        for h in sorted(hops, key=lambda h: (-h.stage, h.dst, h.src))
    ]


def delivered(hops: list[Hop], m: int) -> np.ndarray:
    """(m, m): the bytes of pair ``s -> d`` that arrive at ``d`` over the hops (a plan delivers
    every requirement exactly once when this equals :func:`pair_bytes`)."""
    out = np.zeros((m, m), dtype=np.int64)
    for h in hops:
        for (s, d), n in h.shares.items():
            if h.dst == d:
                out[s, d] += n
    return out
