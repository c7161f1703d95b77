"""AdaGL's graph allocation (seed 003 §III-§IV), pure: coarsening, greedy initialisation, evolution.

Objectives (§III, §IV-B)
    Load imbalance, eq. (1): ``L(A, W) = 1/(M-1) sum_i |L_i / B_i - 1|``,
    ``B_i = W_total P_i / sum_j P_j`` (heterogeneous targets; equal ``P``:
    ``V / M``). Edge cut, eq. (2): the share of edge weight between servers.
    Eq. (3): ``f~ = alpha L(A, W_n) + beta L(A, W_t) + gamma E(A, W_e)``;
    eq. (4): ``f = alpha L(A, W_n) + beta L(A, W_t) + gamma T(A)`` with
    ``(alpha, beta, gamma) = (0.3, 0.3, 0.4)`` (Table V's best).
    ``T(A)``, eq. (5): per server ``i``, over batches of its training
    nodes (``batch`` training weight each), ``T_i += beta_c W_r + alpha_c
    r`` with ``W_r = sum_{v in N_s \\ G_i} W_e[v] W_n[v]`` (``N_s``: the
    batch's neighbours, ``W_e[v]``: the weight of ``v``'s edges into the
    batch) and ``r`` the number of other servers they are on; ``T`` is the
    largest ``T_i``. ``alpha_c``, ``beta_c`` are the alpha-beta model's
    (seconds per transfer, seconds per feature row), learnt from measured
    transfers (``scenarios/adagl/calibration.py``).

Coarsening (§IV-A): :func:`coarsen`
    Per iteration: a random ``core_fraction`` of the nodes that hold
    training nodes become cores; a breadth-first search of ``k`` (3) hops
    from all cores at once gives every node it reaches to the first core
    to reach it (cores keep their own); each core and its nodes become one
    node whose weights ``W`` and ``W_t`` are the sums, edges between groups
    summed. Then edges are pruned: "only edges with the largest weights
    that sum to 1.1x the average edge weights are kept" (our reading, the
    sentence is ambiguous: an edge stays when its weight is at least 1.1
    times the mean edge weight, or it is the heaviest edge of one of its
    ends, so no node is cut off). "By default, we run the coarsening for 10
    iterations with k=3"; "the number of iterations is automatically
    adjusted": we stop before an iteration would leave fewer than
    ``min_nodes`` (500) nodes. ``core_fraction`` (0.1) is ours. With
    ``max_share`` (the ``adagl-bounded`` partitioner: 0.05; ``adagl``: None)
    we also stop before an iteration would make a node heavier than that
    share of the total weight: refining moves no node above 5 % ("Nodes with
    a larger weight than this range significantly alter the overall load
    balance"), and without the bound OGB-Arxiv's third iteration leaves a
    node of 49 % of the graph, heavier than any server's target (docs/adagl.md).

Greedy initialisation (Alg. 2): :func:`greedy_init`
    Nodes in descending weight (``W``), each to the server with the least
    ``f~`` over the nodes placed so far (loads against the final targets
    ``B_i``, cut among placed nodes over the total edge weight). The
    samples ``S^0`` use "different coefficients alpha, beta, gamma": Table
    V's four triples, then triples drawn from a flat Dirichlet (ours).

Evolution (Alg. 1): :func:`evolve`
    Selection ``p_i = (f_max - f_i) / sum (f_max - f_j)``; the selected are
    paired at random and crossed over ("the elements inside parent samples
    are randomly swapped": each element swapped with probability 1/2);
    mutation reassigns each element to a random server with probability
    ``mutation`` (1/n, ours). The best allocation ever evaluated is returned.
    ``population`` (16) and ``generations`` (40) are ours. The text does not
    say whether the parents' server labels are matched before the swap;
    ``crossover="uniform"`` (the default, as written) does not match them,
    ``crossover="aligned"`` first relabels the second parent's servers to the
    first's (:func:`align_labels`: the assignment of most shared node weight,
    among servers of equal ``P_i`` only, so the relabelled parent's ``f`` is
    unchanged). On the graphs of ``scenarios/adagl/search.py`` both give the
    same best ``f``: Alg. 2's best initial sample (docs/adagl.md).

Refining (§IV-C): :func:`refine`
    The coarse allocation is projected level by level; at each level the
    nodes whose weight is 1-5 % of the total ("we only exchange nodes with
    weight values between 1-5% of the total weight") move to the server
    holding most of their edge weight when that keeps ``L(A, W_n)`` at or
    under its value before refining (the early stop on load balance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

TABLE_V = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.05, 0.05, 0.9), (0.3, 0.3, 0.4))
EQ4 = (0.3, 0.3, 0.4)


@dataclass(frozen=True)
class WGraph:
    """A weighted undirected graph: CSR (both directions) with edge weights, node weights ``w``
    (original nodes) and ``wt`` (original training nodes)."""

    indptr: np.ndarray
    indices: np.ndarray
    ew: np.ndarray
    w: np.ndarray
    wt: np.ndarray

    @property
    def n(self) -> int:
        return len(self.indptr) - 1


# ------------------------------------------------------------ objectives
def imbalance(part: np.ndarray, weights: np.ndarray, parts: int, capacity=None) -> float:
    """Eq. (1) with targets in proportion to ``capacity`` (P_i)."""
    load = np.bincount(part, weights=weights, minlength=parts)
    p = np.ones(parts) if capacity is None else np.asarray(capacity, dtype=float)
    target = weights.sum() * p / p.sum()
    return float(np.abs(load / np.where(target > 0, target, 1) - 1).sum() / max(parts - 1, 1))


def edge_cut(g: WGraph, part: np.ndarray) -> float:
    """Eq. (2): the share of edge weight between servers."""
    src = np.repeat(part, np.diff(g.indptr))
    total = g.ew.sum()
    return float(g.ew[src != part[g.indices]].sum() / total) if total else 0.0


def comm_time(g: WGraph, part: np.ndarray, parts: int, alpha_c: float, beta_c: float, batch: float) -> np.ndarray:
    """Eq. (5) per server (module docstring)."""
    weights = (g.ew.astype(np.float64), g.w.astype(np.float64), g.wt.astype(np.float64))
    return _comm_kernel(g.indptr, g.indices, *weights, part.astype(np.int64), parts, alpha_c, beta_c, float(batch))


@njit(cache=True)
def _comm_kernel(indptr, indices, ew, w, wt, part, parts, alpha_c, beta_c, batch):  # pragma: no cover - numba
    n = len(indptr) - 1
    out = np.zeros(parts)
    into = np.zeros(n)  # W_e[v]: weight of v's edges into the current batch
    touched = np.empty(n, np.int64)
    for i in range(parts):
        acc, nt = 0.0, 0
        for v in range(n + 1):
            last = v == n
            if not last and (part[v] != i or wt[v] == 0):
                continue
            if not last:
                for q in range(indptr[v], indptr[v + 1]):
                    u = indices[q]
                    if part[u] != i:
                        if into[u] == 0:
                            touched[nt] = u
                            nt += 1
                        into[u] += ew[q]
                acc += wt[v]
            if acc >= batch or (last and acc > 0):
                wr, servers = 0.0, np.zeros(parts, np.bool_)
                for t in range(nt):
                    u = touched[t]
                    wr += into[u] * w[u]
                    servers[part[u]] = True
                    into[u] = 0.0
                out[i] += beta_c * wr + alpha_c * servers.sum()
                acc, nt = 0.0, 0
    return out


def objective(g: WGraph, part, parts, capacity, coef, alpha_c, beta_c, batch, t_scale) -> float:
    """Eq. (4), ``T`` divided by ``t_scale`` (the hash allocation's ``T``: the terms' scales; ours)."""
    a, b, c = coef
    t = comm_time(g, part, parts, alpha_c, beta_c, batch).max() / t_scale
    return a * imbalance(part, g.w, parts, capacity) + b * imbalance(part, g.wt, parts, capacity) + c * t


# ------------------------------------------------------------ coarsening
@dataclass(frozen=True)
class Coarsening:
    """``levels[k][v]``: the node of level ``k + 1`` that node ``v`` of level ``k`` became (level 0
    is the input graph); ``graphs[k]``: the graph of level ``k``."""

    levels: list[np.ndarray]
    graphs: list[WGraph]


@njit(cache=True)
def _bfs_claim(indptr, indices, cores, hops):  # pragma: no cover - numba
    n = len(indptr) - 1
    owner = np.full(n, -1, np.int64)
    frontier = np.empty(n, np.int64)
    nf = 0
    for c in cores:
        owner[c] = c
        frontier[nf] = c
        nf += 1
    for _ in range(hops):
        nxt = np.empty(n, np.int64)
        nn = 0
        for t in range(nf):
            v = frontier[t]
            for q in range(indptr[v], indptr[v + 1]):
                u = indices[q]
                if owner[u] < 0:
                    owner[u] = owner[v]
                    nxt[nn] = u
                    nn += 1
        frontier, nf = nxt, nn
    return owner


def contract(g: WGraph, group: np.ndarray) -> WGraph:
    """The graph of the groups (``group[v]`` in ``0..k-1``): weights summed, edges between groups summed."""
    k = int(group.max()) + 1 if len(group) else 0
    src = group[np.repeat(np.arange(g.n), np.diff(g.indptr))]
    dst = group[g.indices]
    keep = src != dst
    key = src[keep].astype(np.int64) * k + dst[keep]
    uniq, inv = np.unique(key, return_inverse=True)
    ew = np.bincount(inv, weights=g.ew[keep])
    indptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(uniq // k, minlength=k), out=indptr[1:])
    return WGraph(indptr, (uniq % k).astype(np.int64), ew, np.bincount(group, g.w, k), np.bincount(group, g.wt, k))


def prune(g: WGraph, factor: float = 1.1) -> WGraph:
    """Keep an edge when its weight is >= ``factor`` x the mean, or it is the heaviest of one of its
    ends (module docstring); symmetric."""
    if not len(g.ew):
        return g
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    heavy = np.zeros(g.n)
    np.maximum.at(heavy, src, g.ew)
    keep = (g.ew >= factor * g.ew.mean()) | (g.ew >= heavy[src]) | (g.ew >= heavy[g.indices])
    indptr = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(src[keep], minlength=g.n), out=indptr[1:])
    return WGraph(indptr, g.indices[keep], g.ew[keep], g.w, g.wt)


def coarsen(g: WGraph, k: int = 3, iterations: int = 10, core_fraction: float = 0.1, min_nodes: int = 500,
            seed: int = 0, max_share: float | None = None) -> Coarsening:  # fmt: skip
    """Multi-resolution BFS coarsening from training cores (module docstring)."""
    rng = np.random.default_rng(seed)
    levels, graphs = [], [g]
    for _ in range(iterations):
        cur = graphs[-1]
        holders = np.flatnonzero(cur.wt > 0)
        cores = rng.choice(holders, max(1, round(core_fraction * len(holders))), replace=False) if len(holders) else []
        owner = _bfs_claim(cur.indptr, cur.indices, np.sort(np.asarray(cores, np.int64)), k)
        owner = np.where(owner < 0, np.arange(cur.n), owner)
        _, group = np.unique(owner, return_inverse=True)
        if group.max() + 1 < min_nodes or group.max() + 1 == cur.n:
            break
        if max_share is not None and np.bincount(group, cur.w).max() > max_share * cur.w.sum():
            break
        levels.append(group.astype(np.int64))
        graphs.append(prune(contract(cur, group)))
    return Coarsening(levels, graphs)


# ------------------------------------------------------------ Alg. 2
def greedy_init(g: WGraph, parts: int, capacity, coef) -> np.ndarray:
    """Alg. 2 with eq. (3)'s coefficients ``coef`` (module docstring)."""
    a, b, c = coef
    p = np.ones(parts) if capacity is None else np.asarray(capacity, float)
    return _greedy_kernel(g.indptr, g.indices, g.ew.astype(np.float64), g.w.astype(np.float64),
                          g.wt.astype(np.float64), parts, p / p.sum(), a, b, c)  # fmt: skip


@njit(cache=True)
def _greedy_kernel(indptr, indices, ew, w, wt, parts, share, a, b, c):  # pragma: no cover - numba
    n = len(indptr) - 1
    order = np.argsort(-w, kind="mergesort")
    part = np.full(n, -1, np.int64)
    load, tload = np.zeros(parts), np.zeros(parts)
    target, ttarget = w.sum() * share, wt.sum() * share
    total, cut = ew.sum(), 0.0
    into = np.zeros(parts)
    for v in order:
        into[:] = 0.0
        placed = 0.0
        for q in range(indptr[v], indptr[v + 1]):
            u = indices[q]
            if part[u] >= 0:
                into[part[u]] += ew[q]
                placed += ew[q]
        best, best_i = np.inf, 0
        for i in range(parts):
            li, ti = 0.0, 0.0
            for j in range(parts):
                lj = load[j] + (w[v] if j == i else 0.0)
                tj = tload[j] + (wt[v] if j == i else 0.0)
                li += abs(lj / target[j] - 1) if target[j] > 0 else 0.0
                ti += abs(tj / ttarget[j] - 1) if ttarget[j] > 0 else 0.0
            e = (cut + 2 * (placed - into[i])) / total if total > 0 else 0.0  # both directions, as ``total``
            f = (a * li + b * ti) / max(parts - 1, 1) + c * e
            if f < best:
                best, best_i = f, i
        part[v] = best_i
        load[best_i] += w[v]
        tload[best_i] += wt[v]
        cut += 2 * (placed - into[best_i])
    return part


# ------------------------------------------------------------ Alg. 1
def align_labels(ref: np.ndarray, other: np.ndarray, parts: int, capacity=None, weights=None) -> np.ndarray:
    """``other`` with its servers renamed to ``ref``'s: the permutation that maximises the node weight
    both put on the same server (``scipy.optimize.linear_sum_assignment`` on the overlap matrix), a
    server renamed only to one of equal ``P_i`` (the targets ``B_i`` stay, so eqs. 1-5 do not change)."""
    from scipy.optimize import linear_sum_assignment

    w = np.ones(len(ref)) if weights is None else np.asarray(weights, float)
    overlap = np.zeros((parts, parts))
    np.add.at(overlap, (np.asarray(ref, np.int64), np.asarray(other, np.int64)), w)
    p = np.ones(parts) if capacity is None else np.asarray(capacity, float)
    cost = np.where(p[:, None] == p[None, :], -overlap, np.inf)  # rows: ref's servers, columns: other's
    rows, cols = linear_sum_assignment(cost)
    rename = np.empty(parts, np.int64)
    rename[cols] = rows
    return rename[np.asarray(other, np.int64)]


CROSSOVERS = ("uniform", "aligned")


def evolve(
    g: WGraph, parts: int, capacity, alpha_c: float, beta_c: float, batch: float, population: int = 16,
    generations: int = 40, mutation: float | None = None, seed: int = 0, coef=EQ4, crossover: str = "uniform",
) -> tuple[np.ndarray, list]:  # fmt: skip
    """Alg. 1 from Alg. 2's samples; returns (best allocation, best f per generation)."""
    if crossover not in CROSSOVERS:
        raise ValueError(f"crossover must be one of {CROSSOVERS}, got {crossover!r}")
    rng = np.random.default_rng(seed)
    coefs = list(TABLE_V) + [tuple(x) for x in rng.dirichlet(np.ones(3), max(0, population - len(TABLE_V)))]
    samples = [greedy_init(g, parts, capacity, cf) for cf in coefs[:population]]
    t_scale = comm_time(g, np.arange(g.n) % parts, parts, alpha_c, beta_c, batch).max() or 1.0
    mut = 1.0 / max(g.n, 1) if mutation is None else mutation
    best, best_f, trace = samples[0], np.inf, []
    for _ in range(generations + 1):
        scores = np.array([objective(g, s, parts, capacity, coef, alpha_c, beta_c, batch, t_scale) for s in samples])
        k = int(np.argmin(scores))
        if scores[k] < best_f:
            best, best_f = samples[k].copy(), float(scores[k])
        trace.append(best_f)
        gap = scores.max() - scores
        prob = gap / gap.sum() if gap.sum() > 0 else np.full(len(scores), 1 / len(scores))
        chosen = rng.choice(len(samples), size=len(samples), p=prob)
        rng.shuffle(chosen)
        nxt = []
        for x, y in zip(chosen[::2], chosen[1::2]):
            px, py = samples[x], samples[y]
            if crossover == "aligned":
                py = align_labels(px, py, parts, capacity, g.w)
            a, b = px.copy(), py.copy()
            swap = rng.random(g.n) < 0.5
            a[swap], b[swap] = py[swap], px[swap]
            nxt += [a, b]
        for s in nxt:
            hit = rng.random(g.n) < mut
            s[hit] = rng.integers(0, parts, int(hit.sum()))
        samples = nxt
    return best, trace


# ------------------------------------------------------------ refining
def refine(coarse: Coarsening, part: np.ndarray, parts: int, capacity=None) -> np.ndarray:
    """Project ``part`` (an allocation of the coarsest graph) to the input graph (module docstring)."""
    for level in range(len(coarse.levels) - 1, -1, -1):
        g = coarse.graphs[level]
        part = part[coarse.levels[level]]
        total = g.w.sum()
        movable = np.flatnonzero((g.w >= 0.01 * total) & (g.w <= 0.05 * total))
        bound = imbalance(part, g.w, parts, capacity)
        for v in movable:
            into = np.bincount(part[g.indices[g.indptr[v] : g.indptr[v + 1]]],
                               weights=g.ew[g.indptr[v] : g.indptr[v + 1]], minlength=parts)  # fmt: skip
            to = int(np.argmax(into))
            if to != part[v]:
                old = part[v]
                part[v] = to
                if imbalance(part, g.w, parts, capacity) > bound:
                    part[v] = old
    return part


def adagl(indptr, indices, train: np.ndarray, parts: int, capacity=None, alpha_c: float = 1e-3,
          beta_c: float = 1e-7, batch: float = 1000, seed: int = 0, **knobs) -> np.ndarray:  # fmt: skip
    """AdaGL's allocation of a graph (coarsen, Alg. 2, Alg. 1, refine): node -> server."""
    n = len(indptr) - 1
    g = WGraph(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), np.ones(len(indices)),
               np.ones(n), np.asarray(train, float))  # fmt: skip
    keys = {"k", "iterations", "core_fraction", "min_nodes", "max_share"}
    co = coarsen(g, seed=seed, **{k: v for k, v in knobs.items() if k in keys})
    evo = {k: v for k, v in knobs.items() if k not in keys}
    best, _ = evolve(co.graphs[-1], parts, capacity, alpha_c, beta_c, batch, seed=seed, **evo)
    return refine(co, best, parts, capacity).astype(np.int32)


# ------------------------------------------------------------ twins
def comm_time_reference(g: WGraph, part, parts: int, alpha_c: float, beta_c: float, batch: float) -> np.ndarray:
    """The obviously correct twin of :func:`comm_time`."""
    out = np.zeros(parts)
    for i in range(parts):
        batches, cur, acc = [], [], 0.0
        for v in range(g.n):
            if part[v] == i and g.wt[v] > 0:
                cur.append(v)
                acc += g.wt[v]
                if acc >= batch:
                    batches.append(cur)
                    cur, acc = [], 0.0
        if cur:
            batches.append(cur)
        for members in batches:
            into: dict[int, float] = {}
            for v in members:
                for q in range(g.indptr[v], g.indptr[v + 1]):
                    u = int(g.indices[q])
                    if part[u] != i:
                        into[u] = into.get(u, 0.0) + float(g.ew[q])
            wr = sum(we * g.w[u] for u, we in into.items())
            out[i] += beta_c * wr + alpha_c * len({int(part[u]) for u in into})
    return out


def bfs_claim_reference(indptr, indices, cores, hops: int) -> np.ndarray:
    """The obviously correct twin of the coarsening's claim (first core to reach a node keeps it)."""
    n = len(indptr) - 1
    owner = [-1] * n
    frontier = []
    for c in cores:
        owner[c] = int(c)
        frontier.append(int(c))
    for _ in range(hops):
        nxt = []
        for v in frontier:
            for u in indices[indptr[v] : indptr[v + 1]]:
                if owner[u] < 0:
                    owner[u] = owner[v]
                    nxt.append(int(u))
        frontier = nxt
    return np.array(owner, dtype=np.int64)


def bfs_claim(indptr, indices, cores, hops: int) -> np.ndarray:
    """Node -> the core that reached it first within ``hops`` (-1: none); as the twin."""
    return _bfs_claim(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), np.asarray(cores, np.int64), hops)


def greedy_init_reference(g: WGraph, parts: int, capacity, coef) -> np.ndarray:
    """The obviously correct twin of :func:`greedy_init`: eq. (3) recomputed for every candidate."""
    a, b, c = coef
    p = np.ones(parts) if capacity is None else np.asarray(capacity, float)
    share = p / p.sum()
    order = sorted(range(g.n), key=lambda v: -g.w[v])  # stable: ties in id order, as mergesort
    part = np.full(g.n, -1, dtype=np.int64)
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))

    def f_tilde(trial):
        placed = trial >= 0
        li = sum(abs(g.w[(trial == j)].sum() / (g.w.sum() * share[j]) - 1) for j in range(parts))
        ti = sum(abs(g.wt[(trial == j)].sum() / (g.wt.sum() * share[j]) - 1) for j in range(parts) if g.wt.sum())
        both = placed[src] & placed[g.indices]
        cut = g.ew[both & (trial[src] != trial[g.indices])].sum() / g.ew.sum() if g.ew.sum() else 0.0
        return (a * li + b * ti) / max(parts - 1, 1) + c * cut

    for v in order:
        scores = []
        for i in range(parts):
            trial = part.copy()
            trial[v] = i
            scores.append(f_tilde(trial))
        part[v] = int(np.argmin(scores))
    return part
