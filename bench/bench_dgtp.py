"""Benchmark: DGTP's placement search (ETP, seed 000 Alg. 2) on the §VI-A testbed job.

The testbed job of ``scenarios/dgtp/testbed-products.yaml`` (ogbn-products at ``--scale``, METIS,
4 machines, 6 workers x 2 samplers, 1 PS) on ``examples/dgtp-testbed.yaml``. Each ETP step
evaluates a placement by simulating ``eval_iterations`` (20) profiled iterations under OES. For
both move sets (``dgtp-literal``: Alg. 2 as written from IFS; ``dgtp``: the variant from DistDGL's
placement) it runs 10,000 steps on the fast evaluator (numba) and reports the wall time beside the
paper's "within 5 minutes" (§VI-A) and issue 26's target of 10 s; then ``--steps`` steps on the full
simulator, for the ratio between the two evaluators measured in this run.

    python bench/bench_dgtp.py [--scale 1.0] [--steps 100]
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


def run(job, cluster, kind: str, evaluate, start: str, moves: str, steps: int) -> float:
    names = d._movable(job)
    first = d.start_assignment(job, cluster, start, 0)
    y0 = tuple(first[n] for n in names)
    demands = [dict(job.endpoints[n].demands) for n in names]
    capacity = d._capacity(cluster)
    unit = evaluate(y0) / 100  # percent of the start (and compiles the kernel before the clock)
    propose = (lambda y, rng: alg.propose_variant(y, demands, capacity, rng)) if moves == "variant" else None
    t0 = time.perf_counter()
    _, best, stats = alg.etp(y0, demands, capacity, lambda y: evaluate(y) / unit, 0.1, 1.0, steps, random.Random(0),
                             propose)  # fmt: skip
    dt = time.perf_counter() - t0
    print(
        f"{kind:8s} {moves:7s} from {start:7s}: {steps} steps in {dt:6.2f} s = {steps / dt:7.1f} steps/s "
        f"({stats['evaluations']} placements, {stats['accepted']} accepted); best T' {best * unit * 1e3:.1f} ms "
        f"(start {100 * unit * 1e3:.1f} ms)"
    )
    return dt / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="graph scale (1: full ogbn-products, cached)")
    ap.add_argument("--steps", type=int, default=100, help="steps on the full simulator")
    a = ap.parse_args()
    cluster = ClusterSpec.load(ROOT / "examples" / "dgtp-testbed.yaml")
    t0 = time.perf_counter()
    job = generate("gnn_training", {"dataset": "products", "iterations": 20, "scale": a.scale}).public()
    print(f"job built in {time.perf_counter() - t0:.1f} s (products, scale {a.scale})")
    ev = d.evaluators(job, cluster, 20, 0)
    per_step = {}
    for start, moves in (("ifs", "literal"), ("distdgl", "variant")):
        per_step[moves] = run(job, cluster, "fast", ev["fast"], start, moves, 10_000)
    slow = run(job, cluster, "simulate", ev["simulate"], "distdgl", "variant", a.steps)
    print(f"10,000 steps: literal {1e4 * per_step['literal']:.1f} s, variant {1e4 * per_step['variant']:.1f} s "
          f"(target 10 s; paper: within 300 s); the full simulator would take {1e4 * slow:.0f} s, "
          f"{slow / per_step['variant']:.0f}x the fast evaluator")  # fmt: skip


if __name__ == "__main__":
    main()
