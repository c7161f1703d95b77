"""Generated graphs that partitioners can tell apart (issue 29's shared machinery), as CSR arrays.

The datasets (:data:`DATASETS`)
    Node and edge counts, feature lengths and splits as the seeds state
    them, with the source of every number in :attr:`GraphDataset.source`.
    ``entries`` is the number of neighbour-list entries a sampler walks
    (each undirected edge in both lists): ogbn-products' 61,859,140 edges
    (seed 000 Table II, seed 001 Table 4) are undirected, and seed 001's
    Table 3 lists the same graph with 123,718,280; Reddit's 114.6 M (seed 000
    Table II) is DGL's count, which stores both directions already (DGTP
    runs on DGL 0.6.1, §VI-A); ogbn-papers100M's 1,615,685,872 directed
    citations (seed 001 Table 3) are sampled symmetrised, 3,231,371,744
    entries (seed 001 Table 2); ogbn-arxiv's 1.2 M (seed 003 §VI) likewise
    doubled. Where a seed gives no split (Reddit, Arxiv), the datasets' own
    published splits are used and marked so.

The generator (:func:`community_graph`)
    ``nodes`` nodes in communities whose sizes follow a power law (exponent
    ``tau`` = 2, between ``4 x mean degree`` and ``nodes / 20``: many
    communities of mixed sizes, each large enough to hold its members'
    edges without repeating them), node weights from a Pareto law
    (exponent ``alpha`` = 2.5: the heavy-tailed degrees of the datasets).
    ``entries / 2`` undirected edges are drawn Chung-Lu style: one end by
    weight over the whole graph, the other by weight inside the first
    end's community with probability ``1 - mixing``, else over the whole
    graph (the LFR benchmark's mixing parameter). Self-loops and repeated
    edges are dropped (and more drawn, in proportion, until the graph has
    the dataset's entries within 1 %), both directions are stored, and node ids are
    shuffled, so that node order says nothing about communities: contiguous
    ranges behave like hash partitions, and only a partitioner that reads
    the edges (METIS) finds the communities. Train/validation/test masks are
    drawn uniformly at random with the dataset's proportions (ogbn-products'
    real split is by sales rank; the paper's samplers only need the count).

Mixing (unstated; ``mixing``)
    The seeds state one edge cut on a real graph: METIS on OGB-Arxiv over
    four servers cuts 0.11 of the edges (seed 003 Fig. 2, "edge cuts 0.09
    for AdaGL, 0.11 for METIS"). The default ``mixing`` (0.1) is the round
    value at which METIS's 4-way cut of the generated Arxiv is that 0.11
    (``tests/test_graphs.py`` checks it); the same value is used for every
    dataset, and the DGTP scenarios sweep it (``--sensitivity``).

Scale
    ``scale`` < 1 keeps the dataset's mean degree and feature length and
    takes that fraction of its nodes (and so of its edges and splits): the
    graph is smaller, not sparser. A sampled neighbourhood then repeats
    nodes more often than on the full graph; :func:`dataset_graph` records
    the scale in :attr:`Graph.meta`.

Arrays: ``indptr`` int64 (n + 1), ``indices`` int32; the CSR build is a
numba counting sort with per-row dedup (:func:`csr_from_edges`), its plain
twin :func:`csr_from_edges_reference` (numpy ``unique``); tests check both
agree. Graphs built from a dataset are cached in memory and, at more than
:data:`DISK_CACHE_ENTRIES` entries, on disk under ``$RAILBED_CACHE``
(default ``~/.cache/railbed``)/``graphs``: full ogbn-products takes about
a minute to generate, METIS about as long again (see :mod:`workloads.partition`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from numba import njit

from railbed.errors import SpecError

DISK_CACHE_ENTRIES = 20_000_000  # graphs with more neighbour-list entries are cached on disk too
MAX_ENTRIES = 400_000_000  # ~1.6 GB of indices; papers100M (3.2 B) runs at a stated scale


@dataclass(frozen=True)
class GraphDataset:
    """One dataset as the seeds state it (see the module docstring); ``source`` cites every number."""

    name: str
    nodes: int
    entries: int
    features: int
    classes: int
    fanout: tuple[int, ...]
    split: tuple[int, int, int]  # train, validation, test nodes
    source: str

    @property
    def mean_degree(self) -> float:
        return self.entries / self.nodes


DATASETS = {
    "ogbn-arxiv": GraphDataset(
        "ogbn-arxiv", 200_000, 2_400_000, 128, 40, (5, 10, 15), (90_941, 29_799, 48_603),
        "seed 003 §VI: V = 0.2M, E = 1.2M (directed, doubled here); features 128, 40 classes, the split "
        "and fan-outs: OGB's and DGL's example (not in the seeds)",
    ),
    "ogbn-products": GraphDataset(
        "ogbn-products", 2_449_029, 123_718_280, 100, 47, (5, 10, 15), (196_615, 39_323, 2_213_091),
        "seed 001 Tables 2-3 (2,449,029 nodes, 123,718,280 directed = 2 x 61,859,140 edges, 100 features, "
        "47 classes, the split); fan-outs seed 000 Table II",
    ),
    "reddit": GraphDataset(
        "reddit", 232_965, 114_600_000, 602, 41, (5, 10, 25), (153_431, 23_831, 55_703),
        "seed 000 Table II (114.6 M edges as DGL stores them, both directions; 602 features; fan-outs); "
        "232,965 nodes and 41 classes seed 001 Table 4; the split is GraphSAGE's (not in the seeds)",
    ),
    "ogbn-papers100M": GraphDataset(
        "ogbn-papers100M", 111_059_956, 3_231_371_744, 128, 172, (12, 12, 12), (1_207_179, 125_265, 214_338),
        "seed 001 Tables 2-3 (111,059,956 nodes, 1,615,685,872 citations = 3,231,371,744 entries "
        "symmetrised, 128 features, 172 classes, the split); fan-outs seed 000 Table II",
    ),
}  # fmt: skip
ALIASES = {
    "products": "ogbn-products",
    "arxiv": "ogbn-arxiv",
    "papers100M": "ogbn-papers100M",
    "papers": "ogbn-papers100M",
}


def dataset(name: str, field_name: str = "dataset") -> GraphDataset:
    key = ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in DATASETS:
        raise SpecError(field_name, f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    return DATASETS[key]


@dataclass(frozen=True, eq=False)
class Graph:
    """An undirected graph as CSR (both directions stored), its masks and what it was made from."""

    indptr: np.ndarray
    indices: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    features: int
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    @property
    def entries(self) -> int:
        return int(self.indptr[-1])

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)


# ------------------------------------------------------------------ CSR build
def csr_from_edges_reference(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected CSR of the edge list: both directions, no self-loops, no repeats, rows sorted."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    keep = src != dst
    a, b = src[keep], dst[keep]
    key = np.unique(np.concatenate([a * n + b, b * n + a]))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=indptr[1:])
    return indptr, (key % n).astype(np.int32)


@njit(cache=True)
def _csr_kernel(n, src, dst):  # pragma: no cover - numba
    count = np.zeros(n + 1, dtype=np.int64)
    for i in range(len(src)):
        if src[i] != dst[i]:
            count[src[i] + 1] += 1
            count[dst[i] + 1] += 1
    for v in range(n):
        count[v + 1] += count[v]
    pos = count[:-1].copy()
    out = np.empty(count[n], dtype=np.int32)
    for i in range(len(src)):
        a, b = src[i], dst[i]
        if a != b:
            out[pos[a]] = b
            pos[a] += 1
            out[pos[b]] = a
            pos[b] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    w = 0
    for v in range(n):
        row = np.sort(out[count[v] : count[v + 1]])
        last = -1
        for x in row:
            if x != last:
                out[w] = x
                w += 1
                last = x
        indptr[v + 1] = w
    return indptr, out[:w].copy()


def csr_from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numba counting sort; same result as :func:`csr_from_edges_reference`."""
    return _csr_kernel(np.int64(n), np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32))


# ------------------------------------------------------------------ generator
def community_sizes(n: int, low: int, high: int, tau: float, rng: np.random.Generator) -> np.ndarray:
    """Power-law community sizes in [low, high] (exponent ``tau``) summing to ``n``."""
    low, high = max(1, min(low, n)), max(1, min(high, n))
    sizes: list[np.ndarray] = []
    total = 0
    while total < n:
        u = rng.random(max(16, 2 * (n - total) // max(low, 1)))
        if tau == 1.0:
            s = low * (high / low) ** u
        else:  # inverse CDF of p(s) ~ s^-tau on [low, high]
            a, b = low ** (1 - tau), high ** (1 - tau)
            s = (a + u * (b - a)) ** (1 / (1 - tau))
        s = np.floor(s).astype(np.int64)
        sizes.append(s)
        total += int(s.sum())
    out = np.concatenate(sizes)
    out = out[: int(np.searchsorted(np.cumsum(out), n)) + 1]
    out[-1] -= int(out.sum()) - n
    return out[out > 0]


def community_graph(
    n: int, entries: int, mixing: float, seed: int = 0, alpha: float = 2.5, tau: float = 2.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr int64, indices int32, community of every node): see the module docstring."""
    rng = np.random.default_rng(seed)
    degree = entries / max(n, 1)
    sizes = community_sizes(n, int(4 * degree), max(int(4 * degree), n // 20), tau, rng)
    start = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    comm = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    weight = (1.0 - rng.random(n)) ** (-1.0 / (alpha - 1.0))
    weight = np.minimum(weight, np.sqrt(n))  # no node may take more than ~sqrt(n) of one's draws
    cum = np.zeros(n + 1)
    np.cumsum(weight, out=cum[1:])
    perm = rng.permutation(n).astype(np.int32)

    def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
        src, dst = np.empty(m, dtype=np.int32), np.empty(m, dtype=np.int32)
        for lo in range(0, m, 1 << 23):
            k = min(1 << 23, m - lo)
            u = _by_weight(cum, rng.random(k) * cum[-1], 0, n)
            c = comm[u]
            a, b = cum[start[c]], cum[start[c + 1]]
            inside = rng.random(k) >= mixing
            r = np.where(inside, a + rng.random(k) * (b - a), rng.random(k) * cum[-1])
            v = _by_weight(cum, r, np.where(inside, start[c], 0), np.where(inside, start[c + 1], n))
            src[lo : lo + k], dst[lo : lo + k] = perm[u], perm[v]
        return src, dst

    src, dst = draw(entries // 2)
    indptr, indices = csr_from_edges(n, src, dst)
    for _ in range(4):  # repeats and self-loops dropped: draw more, in proportion, until within 1 %
        kept = indptr[-1] / max(1, 2 * len(src))
        if indptr[-1] >= 0.99 * entries or kept <= 0:
            break
        more = draw(int((entries - indptr[-1]) / (2 * kept)) + 1)
        src, dst = np.concatenate([src, more[0]]), np.concatenate([dst, more[1]])
        indptr, indices = csr_from_edges(n, src, dst)
    community = np.empty(n, dtype=np.int32)
    community[perm] = comm
    return indptr, indices, community


def _by_weight(cum: np.ndarray, r: np.ndarray, lo, hi) -> np.ndarray:
    """The node whose weight interval [cum[v], cum[v+1]) holds r, kept inside [lo, hi)."""
    v = np.searchsorted(cum, r, side="right") - 1
    return np.clip(v, lo, np.asarray(hi) - 1).astype(np.int64)


def masks(n: int, split: tuple[int, int, int], total: int, seed: int) -> tuple[np.ndarray, ...]:
    """Train/validation/test masks with the split's proportions of ``total`` nodes, drawn at random."""
    rng = np.random.default_rng(seed + 7)
    counts = [max(1, round(s * n / total)) for s in split]
    order = rng.permutation(n)
    out = []
    at = 0
    for c in counts:
        mask = np.zeros(n, dtype=bool)
        mask[order[at : at + c]] = True
        at += c
        out.append(mask)
    return tuple(out)


# ------------------------------------------------------------------ datasets
def dataset_shape(ds: GraphDataset, scale: float) -> tuple[int, int]:
    """(nodes, neighbour-list entries) at ``scale``: the mean degree is kept."""
    n = max(64, round(ds.nodes * scale))
    return n, round(n * ds.mean_degree)


def check_scale(ds: GraphDataset, scale, field_name: str = "scale") -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise SpecError(field_name, f"must be in (0, 1], got {scale!r}")
    entries = dataset_shape(ds, scale)[1]
    if entries > MAX_ENTRIES:
        most = MAX_ENTRIES / ds.entries
        raise SpecError(
            field_name, f"{ds.name} at {scale} has {entries:.3g} neighbour entries; at most {MAX_ENTRIES:.3g} "
            f"(scale <= {most:.4g})",
        )  # fmt: skip
    return float(scale)


def dataset_graph(name: str, scale: float = 1.0, mixing: float = 0.13, seed: int = 0) -> Graph:
    """The generated graph of dataset ``name`` (cached; see the module docstring)."""
    ds = dataset(name)
    scale = check_scale(ds, scale)
    if isinstance(mixing, bool) or not isinstance(mixing, (int, float)) or not 0 <= mixing <= 1:
        raise SpecError("mixing", f"must be in [0, 1], got {mixing!r}")
    return _dataset_graph(ds.name, scale, float(mixing), int(seed))


@lru_cache(maxsize=4)
def _dataset_graph(name: str, scale: float, mixing: float, seed: int) -> Graph:
    ds = DATASETS[name]
    n, entries = dataset_shape(ds, scale)
    meta = {"dataset": name, "scale": scale, "mixing": mixing, "seed": seed, "nodes": n}
    arrays = load_cached(meta) if entries > DISK_CACHE_ENTRIES else None
    if arrays is None:
        indptr, indices, community = community_graph(n, entries, mixing, seed)
        train, val, test = masks(n, ds.split, ds.nodes, seed)
        arrays = {"indptr": indptr, "indices": indices, "community": community,
                  "train": train, "val": val, "test": test}  # fmt: skip
        if entries > DISK_CACHE_ENTRIES:
            save_cached(meta, arrays)
    meta |= {"entries": int(arrays["indptr"][-1]), "communities": int(arrays["community"].max()) + 1}
    meta["simple"] = True  # csr_from_edges: symmetric, no self-loops, no repeats
    return Graph(arrays["indptr"], arrays["indices"], arrays["train"], arrays["val"], arrays["test"], ds.features, meta)


def cache_dir() -> Path:
    return Path(os.environ.get("RAILBED_CACHE") or Path.home() / ".cache" / "railbed") / "graphs"


def _cache_path(meta: dict) -> Path:
    key = hashlib.sha1(json.dumps([GENERATOR_VERSION, meta], sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"{meta['dataset']}-{key}.npz"


GENERATOR_VERSION = 1  # bump when community_graph or masks change what they make


def load_cached(meta: dict) -> dict | None:
    path = _cache_path(meta)
    if not path.exists():
        return None
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError):
        return None


def save_cached(meta: dict, arrays: dict) -> None:
    path = _cache_path(meta)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written only costs the next run the generation
