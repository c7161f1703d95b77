"""CASSINI's time shifts (Rajasekaran, Ghobadi, Akella, "CASSINI: Network-Aware Job Scheduling in
Machine Learning Clusters", NSDI 2024; arXiv:2308.00852), as pure functions over numpy arrays.

What was read (docs/multi-job-schedulers.md has the sources and every choice): the abstract
(arXiv:2308.00852, the NSDI'24 page), and public descriptions of the paper's §3-§4 (a reading
note that walks through its mechanisms, and third-party re-implementations that cite its
equations and Algorithm 1). The paper's own PDF text was not available to this search, so the
formulas below are the mechanism as those sources agree on it, not a quotation.

The mechanism:

* **Geometric abstraction** (§3): a training job's traffic on a link repeats every iteration.
  Roll one iteration's bandwidth demand onto a circle whose perimeter is the iteration time;
  shifting the job's start by Δ rotates the circle. :func:`demand_curve` discretises one
  iteration into bins of ``tick`` seconds (the rate averaged over each bin).
* **Unified circle** (§3, jobs of different iteration times): the perimeter is the least common
  multiple of the jobs' iteration times; a job of iteration time p appears LCM/p times around it
  (:func:`unified_bins`, :func:`tile`). A job's rotation only matters modulo its own iteration
  time, so its shift is searched in ``[0, p)``.
* **Compatibility score** of a link for given rotations: with ``total(α)`` the summed demand of
  the jobs at angle α and ``C`` the link capacity, ``Excess(α) = max(0, total(α) - C)`` and
  ``score = 1 - mean_α Excess(α) / C``. 1 means the rotated demands never exceed the link; it
  falls by the average overflow as a share of capacity (:func:`link_score`).
  :func:`fraction_within` is the share of the circle where the link is not exceeded (a second
  reading of "compatible"; for on/off jobs at the link's rate both give the same number).
* **Per-link optimum**: the rotations that maximise the link's score (:func:`best_link_shifts`).
* **Affinity graph** (§4): bipartite, jobs on one side and links shared by two or more jobs on
  the other; the edge (job, link) carries the job's optimal shift on that link. A job has one
  start time for all its links, so shifts are propagated by a breadth-first traversal: from a
  job j with global shift t_j through link l to a job k not yet visited,
  ``t_k = (t_j - w(j, l) + w(k, l)) mod p_k`` (:func:`propagate_shifts`). On a loop-free graph
  every link keeps its relative optimum; a loop may make two paths disagree, which is why the
  descriptions read have CASSINI keep only placement candidates whose affinity graph is
  loop-free (:func:`has_loop`). Two jobs sharing two links already make a loop (job, link,
  job, link), and two copies of one job on one placement share every link, so
  :func:`rank_candidates` asks the weaker, sufficient thing: that the global shifts keep every
  link at its own optimum (:attr:`Plan.consistent`, always true without a loop).

Choices the sources leave open (stated in docs/multi-job-schedulers.md, "CASSINI: choices"):
the search of a link's shifts (exact over every combination when at most ``exact_limit``,
otherwise greedy by descending peak demand and a round of coordinate descent), the BFS root
(the job on most shared links, ties by name) and order (names sorted), a loop's handling (the
BFS tree's shifts, with ``loop=True`` reported), and a candidate's score (the mean of its links'
scores under the global shifts; candidates whose shifts keep every link optimal first).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from railbed.errors import SpecError

MAX_BINS = 1_000_000  # a unified circle of more bins than this is refused (pick a coarser tick)


def demand_curve(period: float, phases: Sequence[tuple[float, float, float]], tick: float) -> np.ndarray:
    """One iteration's demand on a link in bins of ``tick`` seconds: ``phases`` are
    ``(start, end, rate)`` inside ``[0, period]`` (seconds, bit/s); each bin holds the rate
    averaged over it (overlapping phases add). ``period`` must be a whole number of ticks."""
    n = _ticks(period, tick, "period")
    curve = np.zeros(n)
    for i, (start, end, rate) in enumerate(phases):
        if not 0 <= start <= end <= period * (1 + 1e-12) or rate < 0:
            raise SpecError(f"phases[{i}]", f"expected 0 <= start <= end <= {period} and rate >= 0")
        a, b = start / tick, min(end, period) / tick
        lo, hi = int(math.floor(a)), min(int(math.ceil(b)), n)
        for k in range(lo, hi):
            curve[k] += rate * (min(b, k + 1) - max(a, k))
    return curve


def unified_bins(periods: Sequence[float], tick: float) -> int:
    """The unified circle's perimeter in bins: the LCM of the iteration times in ticks."""
    ticks = [_ticks(p, tick, f"periods[{i}]") for i, p in enumerate(periods)]
    n = math.lcm(*ticks) if ticks else 1
    if n > MAX_BINS:
        raise SpecError("tick", f"the unified circle would have {n} bins (at most {MAX_BINS}); pick a coarser tick")
    return n


def tile(curve: np.ndarray, bins: int) -> np.ndarray:
    """A one-iteration ``curve`` repeated around a unified circle of ``bins`` bins."""
    if bins % len(curve):
        raise ValueError(f"{bins} bins is not a whole number of {len(curve)}-bin iterations")
    return np.tile(curve, bins // len(curve))


def link_score(curves: np.ndarray, shifts: Sequence[int], capacity: float) -> float:
    """CASSINI's compatibility score of one link: ``curves`` (jobs x bins, on the unified
    circle) each rotated later by its shift in bins; ``1 - mean(max(0, total - C)) / C``."""
    total = _rotated_total(curves, shifts)
    return 1.0 - float(np.maximum(total - capacity, 0.0).mean()) / capacity


def fraction_within(curves: np.ndarray, shifts: Sequence[int], capacity: float) -> float:
    """The share of the circle where the rotated demands stay within ``capacity``."""
    total = _rotated_total(curves, shifts)
    return float((total <= capacity * (1 + 1e-9)).mean())


def _rotated_total(curves: np.ndarray, shifts: Sequence[int]) -> np.ndarray:
    curves = np.atleast_2d(np.asarray(curves, dtype=float))
    total = np.zeros(curves.shape[1])
    for curve, s in zip(curves, shifts, strict=True):
        total += np.roll(curve, int(s))
    return total


@njit(cache=True)
def shift_scores(base: np.ndarray, curve: np.ndarray, period: int, capacity: float) -> np.ndarray:
    """For every shift s in ``[0, period)`` bins, the score of ``base + curve`` rotated by s
    (the hot loop of :func:`best_link_shifts`; :func:`shift_scores_slow` is its twin)."""
    n = base.shape[0]
    twice = np.concatenate((curve, curve))  # curve[(i - s) % n] == twice[n - s + i], no modulo
    out = np.empty(period)
    for s in range(period):
        excess = 0.0
        off = n - (s % n)
        for i in range(n):
            over = base[i] + twice[off + i] - capacity
            if over > 0.0:
                excess += over
        out[s] = 1.0 - excess / n / capacity
    return out


def shift_scores_slow(base: np.ndarray, curve: np.ndarray, period: int, capacity: float) -> np.ndarray:
    """:func:`shift_scores` written plainly with numpy (the agreement tests' reference)."""
    return np.array(
        [1.0 - np.maximum(base + np.roll(curve, s) - capacity, 0.0).mean() / capacity for s in range(period)]
    )


def best_link_shifts(
    curves: np.ndarray, periods: Sequence[int], capacity: float, exact_limit: int = 20_000
) -> tuple[list[int], float]:
    """The rotations (bins, the first job at 0) that maximise :func:`link_score`, and that score.

    Exact over every combination of the other jobs' shifts when there are at most
    ``exact_limit``; otherwise greedy (jobs by descending peak demand, each at its best shift
    against those placed) and one round of coordinate descent. Ties: the smallest shifts."""
    curves = np.atleast_2d(np.asarray(curves, dtype=float))
    n = len(curves)
    if capacity <= 0:
        raise SpecError("capacity", f"must be > 0, got {capacity}")
    if n == 1:
        return [0], link_score(curves, [0], capacity)
    if math.prod(periods[1:]) <= exact_limit:
        return _exact(curves, periods, capacity)
    return _greedy(curves, periods, capacity)


def _exact(curves: np.ndarray, periods: Sequence[int], capacity: float) -> tuple[list[int], float]:
    """Every combination of jobs 1..n-2's shifts, the last job's best shift by :func:`shift_scores`."""
    best, best_score = [0] * len(curves), -math.inf
    for head in itertools.product(*(range(p) for p in periods[1:-1])):
        shifts = [0, *head]
        base = _rotated_total(curves[:-1], shifts)
        scores = shift_scores(base, curves[-1], int(periods[-1]), float(capacity))
        s = int(np.argmax(scores))
        if scores[s] > best_score + 1e-12:
            best, best_score = [*shifts, s], float(scores[s])
    return best, best_score


def _greedy(curves: np.ndarray, periods: Sequence[int], capacity: float) -> tuple[list[int], float]:
    order = sorted(range(len(curves)), key=lambda j: (-curves[j].max(), j))
    shifts = [0] * len(curves)
    placed = [order[0]]
    for j in order[1:]:
        base = _rotated_total(curves[placed], [shifts[k] for k in placed])
        shifts[j] = int(np.argmax(shift_scores(base, curves[j], int(periods[j]), float(capacity))))
        placed.append(j)
    for j in order[1:]:  # one round of coordinate descent
        others = [k for k in range(len(curves)) if k != j]
        base = _rotated_total(curves[others], [shifts[k] for k in others])
        shifts[j] = int(np.argmax(shift_scores(base, curves[j], int(periods[j]), float(capacity))))
    root = shifts[0]  # rotate everything so the first job sits at 0
    shifts = [(s - root) % int(p) for s, p in zip(shifts, periods, strict=True)]
    return shifts, link_score(curves, shifts, capacity)


@dataclass(frozen=True)
class JobTraffic:
    """One job as CASSINI sees it: its iteration time (seconds) and, per link it crosses, its
    demand over one iteration as ``(start, end, rate)`` phases (seconds, bit/s)."""

    name: str
    period: float
    links: Mapping[str, Sequence[tuple[float, float, float]]]


@dataclass
class Plan:
    """CASSINI's answer for a set of jobs: each job's start shift (seconds, in ``[0, period)``),
    each shared link's optimum score alone (``link_best``) and under the global shifts
    (``link_scores``), and whether the affinity graph had a loop."""

    shifts: dict[str, float]
    link_best: dict[str, float] = field(default_factory=dict)
    link_scores: dict[str, float] = field(default_factory=dict)
    loop: bool = False

    @property
    def consistent(self) -> bool:
        """Does every shared link keep its own optimum under the global shifts? Always on a
        loop-free graph; on a loop, only if the paths around it agree."""
        return all(self.link_scores[k] >= self.link_best[k] - 1e-9 for k in self.link_best)

    @property
    def score(self) -> float:
        """The mean of the shared links' scores under the global shifts (1.0 with none shared)."""
        return float(np.mean(list(self.link_scores.values()))) if self.link_scores else 1.0


def shared_links(jobs: Sequence[JobTraffic]) -> dict[str, list[str]]:
    """Link -> the jobs on it, for links that two or more jobs cross (the affinity graph's links)."""
    on: dict[str, list[str]] = {}
    for job in jobs:
        for link in job.links:
            on.setdefault(link, []).append(job.name)
    return {link: names for link, names in sorted(on.items()) if len(names) > 1}


def has_loop(links: Mapping[str, Sequence[str]]) -> bool:
    """Does the bipartite affinity graph (``link -> jobs``) contain a cycle? (union-find)"""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link, names in links.items():
        for name in names:
            a, b = find("L:" + link), find("J:" + name)
            if a == b:
                return True
            parent[a] = b
    return False


def propagate_shifts(
    weights: Mapping[str, Mapping[str, float]], periods: Mapping[str, float]
) -> tuple[dict[str, float], bool]:
    """Global shifts from per-link ones by a BFS of the affinity graph (module docstring):
    ``weights[link][job]`` is the job's optimal shift on that link (seconds). Each connected
    component's root (the job on most links, ties by name) gets 0; a job reached again by
    another path keeps its first value. Returns (shifts, whether the graph had a loop)."""
    job_links: dict[str, list[str]] = {}
    for link in sorted(weights):
        for job in weights[link]:
            job_links.setdefault(job, []).append(link)
    shifts: dict[str, float] = {}
    for root in sorted(job_links, key=lambda j: (-len(job_links[j]), j)):
        if root in shifts:
            continue
        shifts[root] = 0.0
        queue = deque([root])
        while queue:
            j = queue.popleft()
            for link in job_links[j]:
                for k in sorted(weights[link]):
                    if k not in shifts:
                        shifts[k] = (shifts[j] - weights[link][j] + weights[link][k]) % periods[k]
                        queue.append(k)
    loop = has_loop({link: list(w) for link, w in weights.items()})
    return shifts, loop


def plan(jobs: Sequence[JobTraffic], capacity: Mapping[str, float], tick: float, exact_limit: int = 20_000) -> Plan:
    """CASSINI over a set of jobs: each shared link's optimal rotations (:func:`best_link_shifts`
    on the link's unified circle), propagated to one shift per job (:func:`propagate_shifts`),
    then every shared link scored under those global shifts. ``capacity``: bit/s per link."""
    by_name = {j.name: j for j in jobs}
    if len(by_name) != len(jobs):
        raise SpecError("jobs", "two jobs share a name")
    periods = {j.name: j.period for j in jobs}
    weights: dict[str, dict[str, float]] = {}
    best: dict[str, float] = {}
    circles = {}
    for link, names in shared_links(jobs).items():
        if link not in capacity:
            raise SpecError(f"capacity.{link}", "no capacity for a shared link")
        curves, bins_of = _circle(by_name, names, link, tick)
        shifts, score = best_link_shifts(curves, bins_of, capacity[link], exact_limit)
        weights[link] = {n: s * tick for n, s in zip(names, shifts, strict=True)}
        best[link] = score
        circles[link] = (names, curves)
    shifts, loop = propagate_shifts(weights, periods)
    for job in jobs:
        shifts.setdefault(job.name, 0.0)
    scores = {
        link: link_score(curves, [round(shifts[n] / tick) for n in names], capacity[link])
        for link, (names, curves) in circles.items()
    }
    return Plan(shifts=shifts, link_best=best, link_scores=scores, loop=loop)


def _circle(by_name, names, link, tick):
    """The jobs' demand curves on ``link``'s unified circle, and their periods in bins."""
    bins = unified_bins([by_name[n].period for n in names], tick)
    one = [demand_curve(by_name[n].period, by_name[n].links[link], tick) for n in names]
    return np.array([tile(c, bins) for c in one]), [len(c) for c in one]


def rank_candidates(
    candidates: Sequence[Sequence[JobTraffic]], capacity: Mapping[str, float], tick: float
) -> list[tuple[int, Plan]]:
    """Placement candidates (each: the jobs' traffic under that placement), best first: those
    whose shifts keep every link at its optimum (:attr:`Plan.consistent`: every loop-free one)
    before the others, then by :attr:`Plan.score`, then by index."""
    plans = [(i, plan(c, capacity, tick)) for i, c in enumerate(candidates)]
    return sorted(plans, key=lambda ip: (not ip[1].consistent, -ip[1].score, ip[0]))


def _ticks(value: float, tick: float, name: str) -> int:
    if not (tick > 0 and math.isfinite(tick)):
        raise SpecError("tick", f"must be a positive number of seconds, got {tick}")
    n = round(value / tick)
    if n < 1 or abs(n * tick - value) > 1e-6 * max(value, tick):
        raise SpecError(name, f"{value} s is not a whole number of {tick} s ticks")
    return n


def phases_from_transfers(
    transfers: Sequence[tuple[float, float, float, Sequence[str]]], t0: float, period: float
) -> dict[str, list[tuple[float, float, float]]]:
    """A job's per-link phases over one iteration from a profile of it: ``transfers`` are
    ``(start, end, bytes, links)`` of its flows in the iteration starting at ``t0`` (an alone
    run's records and their routes); each becomes ``(start - t0, end - t0, 8 bytes / duration)``
    on every link it crossed, wrapped into ``[0, period)`` (a flow running past the iteration's
    end continues at its start, the circle's reading). Zero-length transfers are skipped."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    for start, end, size, links in transfers:
        if end <= start:
            continue
        rate = 8.0 * size / (end - start)
        a, b = (start - t0) % period, (start - t0) % period + (end - start)
        pieces = [(a, min(b, period))] + ([(0.0, min(b - period, period))] if b > period else [])
        for link in links:
            out.setdefault(link, []).extend((lo, hi, rate) for lo, hi in pieces)
    return out
