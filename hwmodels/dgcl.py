"""DGCL communication planning (seed 002, section 5): cost model, SPST, peer-to-peer.

Communication topology D: the GPUs of a server; every ordered GPU pair is a
*link* of D made of the physical hops of its peer-to-peer route
(:meth:`IntraHostGraph.routes`: a direct NVLink, or PCIe-QPI-PCIe, or the
NVSwitch planes, each hop weighted by the share of bytes it carries).

A graph with path rates (``path_speeds``) gives every capped D-link one
more hop of its own, of the pair's measured rate (Table 1 measured pairs
alone); the physical hops keep their shared capacities.

Cost model (section 5.1). A plan is a set of rows (vertex, stage, from GPU,
to GPU). The load of physical hop h at stage k is the bytes of all rows of
stage k whose D-link uses h; the time of stage k is ``max_h load/bandwidth``
(the slowest hop of a multi-hop link, contention aggregated); the time of
the plan is the sum over stages (at most m-1 stages for m GPUs).

SPST (Alg. 1 and 2). Vertices are processed one by one in a random order
(the paper shuffles; ``seed`` fixes ours). For vertex u, N_src starts as
{s_u}; |D_u| times, a multi-source Dijkstra from N_src finds the cheapest
path to a destination not yet reached, where edge e leaving a node at tree
depth i costs C(i, e) = increase of the stage-i time if u's bytes were added
to e at stage i (Alg. 2, computed on demand as section 5.2 suggests). The
path's GPUs join N_src, its edges join the plan.

Where the paper is silent (our choices): ties between equal-cost paths (very
common: an under-loaded link adds zero cost) are broken by the smaller sum of
raw transfer times ``bytes/bandwidth`` along the path, then by GPU index;
paths do not pass through GPUs already in N_src (starting from them is never
worse); destinations equal to the source are ignored.

The numba kernel ``_spst_kernel`` has a literal pure-Python reference
(:func:`spst_reference`, which recomputes the cost function from the whole
plan as Alg. 2 writes it) and tests that both produce the same plan.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numba import njit

from hwmodels.graph import IntraHostGraph
from hwmodels.transfer import transfer_times


@dataclass(frozen=True)
class CommTopology:
    """D-links of a server's GPUs: hops of link e = i*m + j in CSR (ptr, hop, frac)."""

    gpus: list[str]
    capacity: np.ndarray  # bit/s per physical directed hop
    ptr: np.ndarray
    hop: np.ndarray
    frac: np.ndarray

    @property
    def m(self) -> int:
        return len(self.gpus)

    def hops(self, i: int, j: int) -> list[tuple[int, float]]:
        e = i * self.m + j
        return list(
            zip(self.hop[self.ptr[e] : self.ptr[e + 1]].tolist(), self.frac[self.ptr[e] : self.ptr[e + 1]].tolist())
        )


def comm_topology(graph: IntraHostGraph, gpus: list[str] | None = None) -> CommTopology:
    gpus = list(gpus or graph.gpus)
    m = len(gpus)
    ptr, hop, frac = [0], [], []
    capacity = list(graph.capacity)
    for i in range(m):
        for j in range(m):
            merged: dict[int, float] = {}
            if i != j:
                for path, share in graph.routes(gpus[i], gpus[j]):
                    for d in path:
                        merged[d] = merged.get(d, 0.0) + share
                cap = graph.path_cap(gpus[i], gpus[j])
                if np.isfinite(cap):  # the pair's own hop (module docstring)
                    capacity.append(cap)
                    merged[len(capacity) - 1] = 1.0
            for d in sorted(merged):
                hop.append(d)
                frac.append(merged[d])
            ptr.append(len(hop))
    return CommTopology(
        gpus,
        np.array(capacity, dtype=np.float64),
        np.array(ptr, dtype=np.int64),
        np.array(hop, dtype=np.int64),
        np.array(frac, dtype=np.float64),
    )


@dataclass(frozen=True)
class Requirements:
    """Which GPU computes each vertex and which GPUs need it, plus its embedding size."""

    source: np.ndarray  # (V,) GPU index
    dest_ptr: np.ndarray  # (V+1,) CSR into dest
    dest: np.ndarray  # GPU indices
    nbytes: np.ndarray  # (V,) bytes per vertex embedding

    @classmethod
    def from_lists(cls, source: list[int], dests: list[list[int]], nbytes: float | list[float]) -> Requirements:
        ptr = np.zeros(len(dests) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(d) for d in dests])
        sizes = np.full(len(source), float(nbytes)) if np.isscalar(nbytes) else np.asarray(nbytes, dtype=np.float64)
        flat = np.array([g for d in dests for g in d], dtype=np.int64)
        return cls(np.asarray(source, dtype=np.int64), ptr, flat, sizes)

    @classmethod
    def random(cls, m: int, vertices: int, nbytes: float, density: float = 0.5, seed: int = 0) -> Requirements:
        """Random all-gather-like sets: each vertex on a random GPU, needed by each other GPU with ``density``."""
        rng = np.random.default_rng(seed)
        source = rng.integers(0, m, vertices)
        dests = []
        for s in source:
            mask = rng.random(m) < density
            mask[s] = False
            if not mask.any():
                mask[(s + 1 + rng.integers(0, m - 1)) % m] = True
            dests.append(np.flatnonzero(mask).tolist())
        return cls.from_lists(source.tolist(), dests, nbytes)

    @classmethod
    def from_graph(cls, edges: np.ndarray, part: np.ndarray, nbytes: float) -> Requirements:
        """Graph-derived sets (embedding passing, DGCL section 2): vertex u lives on GPU
        ``part[u]``; every GPU holding a neighbour of u needs u's embedding. ``edges`` is
        an (E, 2) array of undirected edges."""
        part = np.asarray(part, dtype=np.int64)
        need: list[set[int]] = [set() for _ in range(len(part))]
        for a, b in np.asarray(edges, dtype=np.int64).reshape(-1, 2):
            if part[a] != part[b]:
                need[a].add(int(part[b]))
                need[b].add(int(part[a]))
        return cls.from_lists(part.tolist(), [sorted(n) for n in need], nbytes)

    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, nbytes: float) -> Requirements:
        """:meth:`from_graph` for a CSR graph, vectorised: edge u->w (either direction) makes the
        part of each end need the other end's embedding when the parts differ."""
        part = np.asarray(part, dtype=np.int64)
        n, m = len(part), int(part.max()) + 1 if len(part) else 1
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        dst = np.asarray(indices, dtype=np.int64)
        vertex = np.concatenate([src, dst])
        needer = np.concatenate([part[dst], part[src]])
        cross = part[vertex] != needer
        key = np.unique(vertex[cross] * m + needer[cross])
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // m, minlength=n), out=ptr[1:])
        return cls(part, ptr, (key % m).astype(np.int64), np.full(n, float(nbytes)))

    def pair_bytes(self, m: int) -> np.ndarray:
        """(m, m) integer bytes GPU ``s`` sends GPU ``d`` directly: its vertices that ``d`` needs."""
        counts = np.diff(self.dest_ptr)
        out = np.zeros((m, m), dtype=np.int64)
        sizes = np.repeat(np.rint(self.nbytes).astype(np.int64), counts)
        np.add.at(out, (np.repeat(self.source, counts), self.dest), sizes)
        return out

    def dests_of(self, v: int) -> list[int]:
        return self.dest[self.dest_ptr[v] : self.dest_ptr[v + 1]].tolist()

    def __len__(self) -> int:
        return len(self.source)


@dataclass(frozen=True)
class Plan:
    """Rows (vertex, stage, from GPU, to GPU): stage k sends happen together, stages in order."""

    vertex: np.ndarray
    stage: np.ndarray
    src: np.ndarray
    dst: np.ndarray

    def rows(self) -> list[tuple[int, int, int, int]]:
        return list(zip(self.vertex.tolist(), self.stage.tolist(), self.src.tolist(), self.dst.tolist()))


# ---------------------------------------------------------------- cost model
def stage_times(topo: CommTopology, plan: Plan, req: Requirements) -> np.ndarray:
    """Time of every stage under the cost model (section 5.1)."""
    stages = max(topo.m - 1, 1)
    load = np.zeros((stages, topo.capacity.shape[0]))
    for v, k, a, b in plan.rows():
        for h, f in topo.hops(a, b):
            load[k, h] += 8.0 * req.nbytes[v] * f
    return (load / topo.capacity).max(axis=1) if load.size else np.zeros(stages)


def plan_cost(topo: CommTopology, plan: Plan, req: Requirements) -> float:
    """t(S): the sum of stage times."""
    return float(stage_times(topo, plan, req).sum())


def plan_time_transfer_model(graph: IntraHostGraph, topo: CommTopology, plan: Plan, req: Requirements) -> float:
    """Time of a plan under the max-min transfer model: stages run one after another;
    within a stage, each (from, to) pair sends its vertices as one transfer, all concurrently."""
    total = 0.0
    for k in sorted(set(plan.stage.tolist())):
        pair_bytes: dict[tuple[int, int], float] = {}
        for v, s, a, b in plan.rows():
            if s == k:
                pair_bytes[(a, b)] = pair_bytes.get((a, b), 0.0) + req.nbytes[v]
        transfers = [(topo.gpus[a], topo.gpus[b], nbytes) for (a, b), nbytes in pair_bytes.items()]
        total += float(transfer_times(graph, transfers, with_latency=False).max())
    return total


# ------------------------------------------------------------ peer-to-peer
def peer_to_peer(req: Requirements) -> Plan:
    """The baseline: every destination receives straight from the source, all in stage 0."""
    v, s, d = [], [], []
    for u in range(len(req)):
        for g in req.dests_of(u):
            if g != req.source[u]:
                v.append(u)
                s.append(int(req.source[u]))
                d.append(g)
    z = np.zeros(len(v), dtype=np.int64)
    return Plan(np.array(v, dtype=np.int64), z, np.array(s, dtype=np.int64), np.array(d, dtype=np.int64))


# --------------------------------------------------------------------- SPST
@njit(cache=True)
def _edge_cost(k, e, bits, ptr, hop, frac, cap, load, stage_time):  # pragma: no cover - numba
    new = stage_time[k]
    raw = 0.0
    for x in range(ptr[e], ptr[e + 1]):
        h = hop[x]
        t = (load[k, h] + bits * frac[x]) / cap[h]
        if t > new:
            new = t
        r = bits * frac[x] / cap[h]
        if r > raw:
            raw = r
    return new - stage_time[k], raw


@njit(cache=True)
def _spst_kernel(m, order, source, dptr, dest, nbytes, ptr, hop, frac, cap):  # pragma: no cover - numba
    stages = max(m - 1, 1)
    load = np.zeros((stages, cap.shape[0]))
    stage_time = np.zeros(stages)
    nrows_max = order.shape[0] * (m - 1) if m > 1 else 0
    rv = np.empty(nrows_max, dtype=np.int64)
    rk = np.empty(nrows_max, dtype=np.int64)
    ra = np.empty(nrows_max, dtype=np.int64)
    rb = np.empty(nrows_max, dtype=np.int64)
    nrows = 0
    depth = np.empty(m, dtype=np.int64)
    need = np.zeros(m, dtype=np.bool_)
    d1 = np.empty(m)
    d2 = np.empty(m)
    hd = np.empty(m, dtype=np.int64)
    pred = np.empty(m, dtype=np.int64)
    done = np.empty(m, dtype=np.bool_)
    for u in order:
        s = source[u]
        bits = 8.0 * nbytes[u]
        depth[:] = -1
        depth[s] = 0
        need[:] = False
        remaining = 0
        for x in range(dptr[u], dptr[u + 1]):
            g = dest[x]
            if g != s and not need[g]:
                need[g] = True
                remaining += 1
        while remaining > 0:
            for i in range(m):
                done[i] = False
                pred[i] = -1
                if depth[i] >= 0:
                    d1[i] = 0.0
                    d2[i] = 0.0
                    hd[i] = depth[i]
                else:
                    d1[i] = np.inf
                    d2[i] = np.inf
                    hd[i] = -1
            target = -1
            for _ in range(m):
                best = -1
                for i in range(m):
                    if not done[i] and d1[i] < np.inf:
                        if best < 0 or d1[i] < d1[best] or (d1[i] == d1[best] and d2[i] < d2[best]):
                            best = i
                if best < 0:
                    break
                done[best] = True
                if need[best]:
                    target = best
                    break
                k = hd[best]
                if k >= stages:
                    continue
                for y in range(m):
                    if y == best or depth[y] >= 0 or done[y]:
                        continue
                    inc, raw = _edge_cost(k, best * m + y, bits, ptr, hop, frac, cap, load, stage_time)
                    c1 = d1[best] + inc
                    c2 = d2[best] + raw
                    if c1 < d1[y] or (c1 == d1[y] and c2 < d2[y]):
                        d1[y] = c1
                        d2[y] = c2
                        hd[y] = k + 1
                        pred[y] = best
            # walk back from target, then commit edges from the tree outwards
            chain = np.empty(m, dtype=np.int64)
            n = 0
            y = target
            while depth[y] < 0:
                chain[n] = y
                n += 1
                y = pred[y]
            for c in range(n - 1, -1, -1):
                y = chain[c]
                x = pred[y]
                k = hd[x]
                e = x * m + y
                for z in range(ptr[e], ptr[e + 1]):
                    h = hop[z]
                    load[k, h] += bits * frac[z]
                    t = load[k, h] / cap[h]
                    if t > stage_time[k]:
                        stage_time[k] = t
                depth[y] = k + 1
                rv[nrows] = u
                rk[nrows] = k
                ra[nrows] = x
                rb[nrows] = y
                nrows += 1
                if need[y]:
                    need[y] = False
                    remaining -= 1
    return rv[:nrows], rk[:nrows], ra[:nrows], rb[:nrows], stage_time.sum()


def _order(n: int, seed: int | None) -> np.ndarray:
    order = np.arange(n, dtype=np.int64)
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
    return order


def spst(topo: CommTopology, req: Requirements, seed: int | None = 0) -> tuple[Plan, float]:
    """Plan with SPST (numba). Returns the plan and its cost-model time."""
    v, k, a, b, cost = _spst_kernel(
        topo.m,
        _order(len(req), seed),
        req.source,
        req.dest_ptr,
        req.dest,
        req.nbytes,
        topo.ptr,
        topo.hop,
        topo.frac,
        topo.capacity,
    )
    return Plan(v, k, a, b), float(cost)


def spst_reference(topo: CommTopology, req: Requirements, seed: int | None = 0) -> tuple[Plan, float]:
    """Alg. 1 and 2 written out: the cost function is recomputed from the whole plan."""
    m = topo.m
    stages = max(m - 1, 1)
    rows: list[tuple[int, int, int, int]] = []

    def stage_time_of(rows_: list, k: int) -> float:
        load: dict[int, float] = {}
        for v, kk, a, b in rows_:
            if kk == k:
                for h, f in topo.hops(a, b):
                    load[h] = load.get(h, 0.0) + 8.0 * req.nbytes[v] * f
        return max([0.0] + [x / topo.capacity[h] for h, x in load.items()])

    for u in _order(len(req), seed).tolist():
        s = int(req.source[u])
        depth = {s: 0}
        need = {g for g in req.dests_of(u) if g != s}
        while need:
            times = [stage_time_of(rows, k) for k in range(stages)]
            # multi-source Dijkstra on (cost increase, raw time, gpu index)
            dist = {g: (0.0, 0.0) for g in depth}
            hd = dict(depth)
            pred: dict[int, int] = {}
            heap = [(0.0, 0.0, g) for g in depth]
            heapq.heapify(heap)
            settled: set[int] = set()
            target = None
            while heap:
                c1, c2, x = heapq.heappop(heap)
                if x in settled or (c1, c2) != dist[x]:
                    continue
                settled.add(x)
                if x in need:
                    target = x
                    break
                k = hd[x]
                if k >= stages:
                    continue
                for y in range(m):
                    if y == x or y in depth or y in settled:
                        continue
                    trial = rows + [(u, k, x, y)]
                    inc = stage_time_of(trial, k) - times[k]  # Alg. 2: costFunc(S + e) - costFunc(S)
                    raw = max(8.0 * req.nbytes[u] * f / topo.capacity[h] for h, f in topo.hops(x, y))
                    cand = (c1 + inc, c2 + raw)
                    if y not in dist or cand < dist[y]:
                        dist[y] = cand
                        hd[y] = k + 1
                        pred[y] = x
                        heapq.heappush(heap, (cand[0], cand[1], y))
            chain = []
            y = target
            while y not in depth:
                chain.append(y)
                y = pred[y]
            for y in reversed(chain):
                x = pred[y]
                rows.append((u, hd[x], x, y))
                depth[y] = hd[x] + 1
                need.discard(y)
    arr = np.array(rows, dtype=np.int64).reshape(-1, 4)
    plan = Plan(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
    return plan, plan_cost(topo, plan, req)
