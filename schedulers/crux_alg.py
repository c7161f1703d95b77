"""Crux's communication scheduling (Cao et al., "Crux: GPU-Efficient Communication Scheduling for
Deep Learning Training", ACM SIGCOMM 2024, DOI 10.1145/3651890.3672239), as pure functions.

Read from the paper's text (§3-§5); docs/multi-job-schedulers.md has the numbers and choices.

* **GPU intensity** (§3.2, Definition 2, Eq. 2): ``I_j = W_j / t_j`` with ``W_j`` the job's
  computation per iteration (FLOPs) and ``t_j = max_e M_{j,e} / B_e`` the longest time its
  per-iteration traffic takes on any one link (:func:`gpu_intensity`). Theorem 1: over a long
  period, GPU utilisation equals the GPU intensity carried by the bottleneck link, so the
  link should carry the most GPU-intensive jobs' traffic first.
* **Path selection** (§4.1): jobs from the most GPU-intensive to the least; each takes "the
  least congested path from all available options at that moment" (:func:`select_paths`).
* **Priority assignment** (§4.2, Eq. 3): ``P_j = k_j I_j``. The reference job (the one with the
  most network traffic) has ``k = 1``; another job's ``k`` compares the two jobs on one link
  under both strict orders (Figure 11's worked example): if prioritising job j gains it Δ_j
  seconds of transmission and prioritising the reference gains that one Δ_r, the jobs are
  equal when ``I_r Δ_r = I_j Δ_j``, so ``k_j = Δ_j / Δ_r`` (:func:`correction_factor`, over the
  two-job link model of :func:`link_shares`).
* **Priority compression** (§4.3, Algorithm 1): the *communication contention DAG* has an edge
  from j1 to j2 for every pair of jobs sharing a link, j1 the one of higher priority, weighted
  ``I_{j1}`` (the utilisation lost if both land in one class). Mapping jobs onto K classes so
  that no edge points to a higher class, maximise the weight of the edges cut (Max K-cut of a
  DAG). For one topological order the best cut into K consecutive blocks is a dynamic program
  ``f(i, k) = max_j f(j, k-1) + C(j, i)`` (:func:`compress_order`); Crux takes the best over
  ``m = 10`` random topological orders made by breadth-first search (:func:`compress`). The
  paper proves every DAG K-cut is the K-cut of some topological order (its Theorems 2-3), so
  the DP over *all* orders is exact (:func:`compress_exhaustive`, tested against
  :func:`compress_brute`).

Choices the paper leaves open (docs/multi-job-schedulers.md, "Crux: choices"): "least
congested" as the smallest bottleneck load (seconds of traffic per iteration over the path's
busiest link, this job's included), ties to the first option; the two-job link model of the
correction factor (below); the randomised BFS (Kahn's algorithm taking a uniformly random ready
job, seeded); the DP without the quadrangle-inequality speed-up (O(n^2 K), n = jobs); levels
mapped to DSCP class selectors from the top (:func:`dscp_of_level`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from railbed.errors import SpecError

Edges = Mapping[tuple[int, int], float]  # (higher job, lower job) -> weight
Transfer = tuple[float, Sequence[Sequence[str]]]  # (bytes per iteration, candidate paths as link lists)


def gpu_intensity(work: float, traffic: Mapping[str, float], bandwidth: Mapping[str, float]) -> float:
    """Eq. 2: ``work`` (FLOPs per iteration) over the longest per-link transfer time, ``traffic``
    being bytes per iteration per link and ``bandwidth`` bytes/s per link; ``inf`` without traffic."""
    if work < 0:
        raise SpecError("work", f"must be >= 0, got {work}")
    times = []
    for link, size in traffic.items():
        if link not in bandwidth or bandwidth[link] <= 0:
            raise SpecError(f"bandwidth.{link}", "missing or not > 0")
        times.append(size / bandwidth[link])
    t = max(times, default=0.0)
    return work / t if t > 0 else math.inf


@dataclass(frozen=True)
class LinkJob:
    """A job's iteration on one link (§4.2's examples): ``comm`` seconds of transfer at the full
    link, ``compute`` seconds of GPU work, and ``overlap``: the share of ``compute`` that runs
    beside the transfer (0: Figure 11, transfer then compute; 0.5: Figure 12, "starts
    communication when it finishes 50 % computation"). The next transfer waits for the
    overlapped compute and the transfer, then the rest of the compute. A job starts at its
    transfer (as Figure 11 draws it)."""

    comm: float
    compute: float
    overlap: float = 0.0

    def __post_init__(self) -> None:
        if not (self.comm > 0 and self.compute >= 0 and 0 <= self.overlap <= 1):
            raise SpecError("job", f"expected comm > 0, compute >= 0, 0 <= overlap <= 1, got {self}")


@dataclass(frozen=True)
class CruxProfile:
    """A job as Crux measures it: ``work`` per iteration (GPU-seconds or FLOPs, one unit for all
    jobs), ``traffic`` bytes per link per iteration, its iteration on its bottleneck link
    (``link``: transfer and compute seconds, overlap share), and its transfers between leaves
    with their candidate paths (``paths``: ``(bytes, [[link, ...], ...])``) for §4.1."""

    name: str
    work: float
    traffic: Mapping[str, float]
    link: LinkJob
    paths: Sequence[Transfer] = field(default_factory=tuple)


def link_shares(high: LinkJob, low: LinkJob, horizon: float) -> tuple[float, float]:
    """Seconds of ``[0, horizon]`` the link carries each job's traffic when ``high`` has strict,
    preemptive priority over ``low`` (:class:`LinkJob`'s iteration model). Returns (high, low)."""
    jobs = (high, low)
    left = [j.comm for j in jobs]  # seconds still to send this iteration
    ready = [0.0, 0.0]  # this iteration's transfer may start then
    sent, now, eps = [0.0, 0.0], 0.0, 1e-12
    while now < horizon - eps:
        sending = next((i for i in (0, 1) if ready[i] <= now + eps), None)
        events = [horizon] + [r for r in ready if r > now + eps]
        if sending is not None:
            events.append(now + left[sending])
        step = min(events) - now
        if sending is not None:
            left[sending] -= step
            sent[sending] += step
        now += step
        for i, job in enumerate(jobs):
            if left[i] <= eps:  # transfer done: overlapped compute, then the rest, then the next
                ready[i] = max(now, ready[i] + job.overlap * job.compute) + (1 - job.overlap) * job.compute
                left[i] = job.comm
    return sent[0], sent[1]


def correction_factor(job: LinkJob, reference: LinkJob, horizon: float) -> float:
    """§4.2: ``k_j`` of ``job`` against the reference job (whose ``k`` is 1): the transmission
    ``job`` gains by being first over the transmission the reference gains by being first.
    1.0 when the reference gains nothing (the two never contend on this model)."""
    ref_first = link_shares(reference, job, horizon)
    job_first = link_shares(job, reference, horizon)
    gain_ref = ref_first[0] - job_first[1]
    gain_job = job_first[0] - ref_first[1]
    return gain_job / gain_ref if gain_ref > 1e-12 else 1.0


def priority_order(priority: Sequence[float]) -> list[int]:
    """Job indices from the highest ``P_j`` to the lowest (ties: lower index first)."""
    return sorted(range(len(priority)), key=lambda j: (-priority[j], j))


def contention_dag(priority: Sequence[float], intensity: Sequence[float], share: set[tuple[int, int]]) -> dict:
    """§4.3's communication contention DAG: for every pair in ``share`` (jobs on a common link),
    an edge from the higher-priority job to the other, weighted by the higher job's intensity."""
    rank = {j: r for r, j in enumerate(priority_order(priority))}
    edges = {}
    for a, b in share:
        if a == b:
            continue
        hi, lo = (a, b) if rank[a] < rank[b] else (b, a)
        edges[(hi, lo)] = float(intensity[hi])
    return edges


def compress_order(order: Sequence[int], edges: Edges, levels: int) -> tuple[float, list[int]]:
    """Algorithm 1's inner DP: the best cut of the topological ``order`` into at most ``levels``
    consecutive blocks (block 0 highest). Returns (cut weight, level of each job by index)."""
    n = len(order)
    pos = {job: i for i, job in enumerate(order)}
    w = np.zeros((n, n))
    for (a, b), weight in edges.items():
        if pos[a] >= pos[b]:
            raise ValueError(f"edge {a}->{b} points backwards in the order")
        w[pos[a], pos[b]] += weight
    into = np.cumsum(w, axis=0)  # into[j, i]: weight from order[0..j] into order[i]
    cut = np.zeros((n + 1, n + 1))  # cut[j, i]: weight from the first j into order[j..i-1]
    for j in range(1, n + 1):
        cut[j, j + 1 :] = np.cumsum(into[j - 1, j:])
    f = np.full((levels + 1, n + 1), -math.inf)
    g = np.zeros((levels + 1, n + 1), dtype=int)
    f[0, 0] = 0.0
    for k in range(1, levels + 1):
        for i in range(n + 1):
            cand = f[k - 1, : i + 1] + cut[: i + 1, i]
            g[k, i] = int(np.argmax(cand))
            f[k, i] = cand[g[k, i]]
    level = [0] * n
    i = n
    for k in range(levels, 0, -1):
        j = g[k, i]
        for p in range(j, i):
            level[order[p]] = k - 1
        i = j
    return float(f[levels, n]), level


def random_topological_order(n: int, edges: Edges, rng: np.random.Generator) -> list[int]:
    """A topological order by breadth-first search (Kahn's algorithm), the next job drawn
    uniformly from those whose predecessors are all placed."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    ready = [j for j in range(n) if indeg[j] == 0]
    order = []
    while ready:
        job = ready.pop(int(rng.integers(len(ready))))
        order.append(job)
        for b in succ[job]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if len(order) != n:
        raise ValueError("the contention graph has a cycle")
    return order


def compress(n: int, edges: Edges, levels: int, samples: int = 10, seed: int = 0) -> tuple[float, list[int]]:
    """Algorithm 1: the best :func:`compress_order` over ``samples`` random topological orders
    (the paper sets m = 10). Returns (cut weight, level of each job, 0 highest)."""
    if levels < 1:
        raise SpecError("levels", f"must be >= 1, got {levels}")
    rng = np.random.default_rng(seed)
    best = (-math.inf, [0] * n)
    for _ in range(max(1, samples)):
        value, level = compress_order(random_topological_order(n, edges, rng), edges, levels)
        if value > best[0] + 1e-12:
            best = (value, level)
    return best


def topological_orders(n: int, edges: Edges):
    """Every topological order of the DAG (for small ``n``: tests and exhaustive compression)."""
    pred = [set() for _ in range(n)]
    for a, b in edges:
        pred[b].add(a)

    def extend(order, placed):
        if len(order) == n:
            yield list(order)
            return
        for j in range(n):
            if j not in placed and pred[j] <= placed:
                order.append(j)
                placed.add(j)
                yield from extend(order, placed)
                order.pop()
                placed.discard(j)

    yield from extend([], set())


def compress_exhaustive(n: int, edges: Edges, levels: int) -> tuple[float, list[int]]:
    """The DP over every topological order: the exact Max K-cut (the paper's Theorems 2-3)."""
    return max((compress_order(o, edges, levels) for o in topological_orders(n, edges)), key=lambda v: v[0])


def compress_brute(n: int, edges: Edges, levels: int) -> float:
    """The Max K-cut by enumerating every assignment of jobs to levels that keeps each edge's
    head at a level no higher than its tail (the test oracle; ``levels ** n`` assignments)."""
    best = -math.inf
    for level in itertools.product(range(levels), repeat=n):
        if all(level[a] <= level[b] for a, b in edges):
            best = max(best, sum(w for (a, b), w in edges.items() if level[a] != level[b]))
    return best


def select_paths(
    order: Sequence[int], demands: Sequence[Sequence[Transfer]], bandwidth: Mapping[str, float]
) -> list[list[int]]:
    """§4.1: jobs in ``order`` (most GPU-intensive first); each of a job's transfers
    ``(bytes per iteration, [path, ...])`` takes the path whose busiest link would carry the
    least traffic time (bytes / bandwidth summed over the jobs placed so far, this transfer
    included); ties to the first path. Returns, per job (by index), the chosen path indices."""
    load: dict[str, float] = {}
    chosen: list[list[int]] = [[] for _ in demands]
    for job in order:
        for size, paths in demands[job]:
            if not paths:
                raise SpecError(f"demands[{job}]", "a transfer with no path")
            costs = [max((load.get(e, 0.0) + size / bandwidth[e] for e in p), default=0.0) for p in paths]
            pick = int(np.argmin(costs))
            for e in paths[pick]:
                load[e] = load.get(e, 0.0) + size / bandwidth[e]
            chosen[job].append(pick)
    return chosen


def dscp_of_level(level: int, levels: int) -> int:
    """A class level (0 highest, ``levels`` <= 8) as a DSCP: the class selector ``(7 - level) << 3``,
    railbed's strict-priority queue being ``dscp >> 3`` with 7 the highest."""
    if not 1 <= levels <= 8 or not 0 <= level < levels:
        raise SpecError("levels", f"expected 0 <= level < levels <= 8, got level {level} of {levels}")
    return (7 - level) << 3
