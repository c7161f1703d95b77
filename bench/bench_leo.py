"""LEO's path selection: time per decision of the toll heuristic and of the k-step MILP.

    /opt/railbed/venv/bin/python bench/bench_leo.py [--out bench-leo.json]

The thesis reports ~1.5 us per decision for its C++ heuristic and 2.4 ms for
the LP solver (CPLEX) (§6.4.3). Here: the numba decision of eq. 6.5 called
from Python with its arrays ready (the kernel), its plain twin, the whole
``Leo.decide`` (per-type costs looked up, arrays built, eq. 6.5) in a simulated
KVS run, and ``leo-lp``'s HiGHS solve per decision (k = 4 requests, both
hosts' elements) in the same run. Ratios are measured in this one run;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from railbed.spec import ClusterSpec  # noqa: E402
from schedulers.leo import Leo, LeoLp  # noqa: E402
from schedulers.leo_alg import toll_choice, toll_choice_reference  # noqa: E402
from simulator import simulate  # noqa: E402
from workloads.requests import requests  # noqa: E402

CLUSTER = Path(__file__).resolve().parent.parent / "scenarios" / "leo" / "cluster-f-nic-off-path.yaml"


def per_call(fn, args, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t0) / n


def bench_kernel(rng) -> dict:
    base, toll = rng.uniform(1e-6, 9e-6, 4), rng.uniform(1e-7, 1e-6, 4)
    khat, allowed = rng.integers(0, 5, 4).astype(float), np.arange(4)
    toll_choice(base, toll, khat, allowed)  # compile
    fast = min(per_call(toll_choice, (base, toll, khat, allowed), 20000) for _ in range(3))
    slow = min(per_call(toll_choice_reference, (base, toll, khat, allowed), 20000) for _ in range(3))
    return {"kernel_s": fast, "reference_s": slow, "ratio_reference_over_kernel": slow / fast}


class TimedLeo(Leo):
    """Leo whose decisions (``decide``: costs, eq. 6.5 in numba) are timed, wall clock."""

    def __init__(self) -> None:
        super().__init__()
        self.hook_times: list[float] = []

    def decide(self, flow, view, allowed):
        t0 = time.perf_counter()
        out = super().decide(flow, view, allowed)
        self.hook_times.append(time.perf_counter() - t0)
        return out


def bench_runs(n: int) -> dict:
    cluster = ClusterSpec.load(CLUSTER)
    job = requests("kvs-c", load=90e6, requests=n, seed=3)
    leo, lp = TimedLeo(), LeoLp(horizon=4)
    simulate(job, leo, cluster)
    simulate(job, lp, cluster)
    return {
        "requests": n,
        "leo_decision_median_s": statistics.median(leo.hook_times),
        "leo_lp_decision_median_s": statistics.median(lp.decision_times),
        "leo_lp_decision_mean_s": statistics.fmean(lp.decision_times),
        "ratio_lp_over_leo_decision": statistics.median(lp.decision_times) / statistics.median(leo.hook_times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
    out = {"toll_decision": bench_kernel(np.random.default_rng(1)), "in_a_run": bench_runs(args.requests)}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
