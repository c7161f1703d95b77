"""CASSINI's and Crux's algorithms (schedulers/cassini_alg.py, schedulers/crux_alg.py): their cost
at sizes a cluster-scale study uses, and the numba kernel against its slow twin, in one run.

    python bench/bench_multijob_algs.py

Rows: the shift-score kernel (``shift_scores`` vs ``shift_scores_slow``, the ratio of the two in
this run), a CASSINI plan of n jobs on a chain of shared links, and Crux's priority compression
(Algorithm 1, m = 10 orders) of n jobs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schedulers.cassini_alg import JobTraffic, plan, shift_scores, shift_scores_slow  # noqa: E402
from schedulers.crux_alg import compress, contention_dag  # noqa: E402


def clock(f, *args):
    t = time.perf_counter()
    out = f(*args)
    return time.perf_counter() - t, out


def kernel(bins: int) -> None:
    rng = np.random.default_rng(0)
    base, curve = rng.uniform(0, 2, bins), rng.uniform(0, 1, bins)
    shift_scores(base, curve, 8, 1.0)  # compile
    fast, a = clock(shift_scores, base, curve, bins // 2, 1.0)
    slow, b = clock(shift_scores_slow, base, curve, bins // 2, 1.0)
    err = float(np.abs(a - b).max())
    print(
        f"| shift_scores, {bins} bins x {bins // 2} shifts | {fast:.3f} s | slow twin {slow:.3f} s | "
        f"{slow / fast:.1f}x | max diff {err:.1e} |"
    )


def cassini(jobs: int) -> None:
    rng = np.random.default_rng(1)
    traffic = []
    for j in range(jobs):  # job j on links j-1 and j: a chain, loop-free
        period = float(rng.choice([0.2, 0.3, 0.4]))
        comm = (0.0, period * rng.uniform(0.2, 0.5), 100e9)
        links = {f"l{k}": [comm] for k in (j - 1, j) if 0 <= k < jobs - 1}
        traffic.append(JobTraffic(f"j{j}", period, links))
    cap = {f"l{k}": 100e9 for k in range(jobs)}
    t, p = clock(plan, traffic, cap, 0.01)
    print(
        f"| CASSINI plan, {jobs} jobs on a chain of {jobs - 1} links | {t:.3f} s | score {p.score:.3f} | "
        f"loop {p.loop} | |"
    )


def crux(jobs: int) -> None:
    rng = np.random.default_rng(2)
    share = {(a, b) for a in range(jobs) for b in range(a + 1, jobs) if rng.random() < 0.3}
    edges = contention_dag(rng.permutation(jobs).astype(float), rng.uniform(1, 10, jobs), share)
    t, (value, _) = clock(compress, jobs, edges, 4, 10, 0)
    print(f"| Crux compression, {jobs} jobs, {len(edges)} edges, 4 classes | {t:.3f} s | cut {value:.1f} | | |")


if __name__ == "__main__":
    print("| what | time | | | |\n|---|---|---|---|---|")
    for bins in (2000, 6000):
        kernel(bins)
    for n in (8, 32):
        cassini(n)
    for n in (16, 64):
        crux(n)
