"""Benchmark: Hermod's decision time per EP coflow (seed 004, §5.3.2 and §5.4).

For EP groups of 8, 16 and 32 GPUs (32 is Table 5.5's largest, Qwen-MoE-24L)
the transmission matrices come from :mod:`workloads.moe`'s routing (top-k
over a Dirichlet-skewed expert popularity, ``skew`` 1.0, Qwen's 64 experts
and top-4, 2048 tokens per GPU); per coflow we time what Hermod computes
when the coflow becomes ready: the DSCP of every flow (codec) and Alg. 3's
sub-phases with their dependencies. Median and p99 over ``--coflows``
matrices, in microseconds, plus the number of sub-phases.

    python bench/bench_hermod.py [--coflows 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from schedulers.hermod_alg import Factors, dscp_of, port_matching


def matrices(ep: int, n: int, seed: int = 0, experts: int = 64, topk: int = 4, tokens: int = 2048):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        pop = rng.dirichlet(np.full(experts, 1.0))
        counts = rng.multinomial(tokens * topk, pop, size=ep).reshape(ep, ep, experts // ep).sum(axis=2)
        np.fill_diagonal(counts, 0)
        yield counts * 4096  # bytes: hidden 2048 in bf16


def decide(matrix: np.ndarray) -> int:
    n = matrix.shape[0]
    for i in range(n):
        for j in range(n):
            if i != j:
                dscp_of(Factors(1, "EP", 3), 1, 3)
    flows = [(i, j, int(matrix[i, j])) for i in range(n) for j in range(n) if matrix[i, j]]
    return 1 + max(k for pieces in port_matching(flows) for k, _, _ in pieces)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--coflows", type=int, default=200)
    args = ap.parse_args()
    print(f"{'EP group':>8} {'median us':>10} {'p99 us':>10} {'sub-phases':>10}")
    for ep in (8, 16, 32):
        times, phases = [], []
        for m in matrices(ep, args.coflows):
            t = time.perf_counter()
            phases.append(decide(m))
            times.append((time.perf_counter() - t) * 1e6)
        times.sort()
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        print(f"{ep:>8} {statistics.median(times):>10.0f} {p99:>10.0f} {statistics.median(phases):>10.0f}")


if __name__ == "__main__":
    main()
