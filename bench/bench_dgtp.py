"""Benchmark: DGTP's placement search (ETP, seed 000 Alg. 2) on the §VI-A testbed job.

The testbed job (ogbn-products, 4 machines, 6 workers x 2 samplers, 1 PS)
on ``examples/dgtp-testbed.yaml``; each ETP step evaluates a placement by
simulating ``eval_iterations`` (20) profiled iterations under OES. Reports
steps per second and distinct placements evaluated per second (ETP
memoises revisits), and the time 10,000 steps would take.

    python bench/bench_dgtp.py [--steps 100]   # steps with the full simulator; the fast path runs 10,000
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from railbed.spec import ClusterSpec
from schedulers import dgtp as d
from schedulers import dgtp_alg as alg
from workloads import generate

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--max-edges", type=int, default=1_000_000)
    a = ap.parse_args()
    cluster = ClusterSpec.load(ROOT / "examples" / "dgtp-testbed.yaml")
    job = generate("gnn_training", {"dataset": "products", "iterations": 20, "max_edges": a.max_edges}).public()
    names = d._movable(job)
    start = d.ifs_assignment(job, cluster)
    for kind, evaluate in d.evaluators(job, cluster, 20, 0).items():
        steps = a.steps if kind == "simulate" else 10_000
        demands = [dict(job.endpoints[n].demands) for n in names]
        evaluate(tuple(start[n] for n in names))  # compile / warm up
        t0 = time.perf_counter()
        _, best, stats = alg.etp(
            [start[n] for n in names], demands, d._capacity(cluster), evaluate, 0.1, 1.0, steps, random.Random(0)
        )
        dt = time.perf_counter() - t0
        print(
            f"{kind:9s}: {steps} steps in {dt:.2f} s = {steps / dt:.1f} steps/s "
            f"({stats['evaluations'] / dt:.1f} evaluations/s); 10,000 steps ~ {10_000 * dt / steps:.0f} s; "
            f"best makespan {best:.4f} s"
        )


if __name__ == "__main__":
    main()
