"""Benchmark: a Python scheduler that holds flows, against one that never holds (issue 42).

The README/ARCHITECTURE example scheduler ``small-first`` (at most ``limit`` = 4 flows
per source NIC, the rest held) and ``fifo`` (never holds) on ``all_to_all`` (``n``
endpoints, ``size`` bytes to every other, ``iterations`` rounds) on
``examples/rail-4x4.yaml``, each in a fresh process (simulate, Python engine). Prints
wall and CPU time of the run per scheduler (after a tiny warm-up run), the makespan,
and the ratio of the two in this run.

    python bench/bench_held.py [--n 32] [--size 16777216] [--iterations 2] [--tree DIR]

``--tree DIR`` runs a checkout of another commit (e.g. ``git worktree add /tmp/base main``)
beside this one, so a before/after pair comes from one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
from railbed.spec import ClusterSpec
from schedulers import by_name
from simulator import simulate
from workloads.synthetic import all_to_all
n, size, iterations, name = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
cluster = ClusterSpec.load(sys.argv[1] + "/examples/rail-4x4.yaml")
simulate(all_to_all(n=3, size=1000), by_name(name), cluster)  # compile (or load) the kernels first
job = all_to_all(n=n, size=size, iterations=iterations)
t0, c0 = time.perf_counter(), time.process_time()
res = simulate(job, by_name(name), cluster)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "makespan": res.makespan,
                  "flows": sum(1 for r in res.items.values() if r.kind == "flow")}))
"""


def one(tree: Path, n: int, size: int, iterations: int, name: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(tree), str(n), str(size), str(iterations), name],
        capture_output=True, text=True, check=True, cwd=tree,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--size", type=int, default=16 << 20)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--tree", type=Path, help="another checkout to run beside this one")
    ap.add_argument("--schedulers", nargs="+", default=["fifo", "small-first"])
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("other", args.tree.resolve())] if args.tree else [])
    print("| tree | scheduler | flows | wall | CPU | makespan |")
    print("| --- | --- | --- | --- | --- | --- |")
    cpu: dict[tuple[str, str], float] = {}
    for label, tree in trees:
        for name in args.schedulers:
            r = one(tree, args.n, args.size, args.iterations, name)
            cpu[label, name] = r["cpu"]
            print(f"| {label} | {name} | {r['flows']:,} | {r['wall']:.2f} s | {r['cpu']:.2f} s | {r['makespan']!r} s |")
            sys.stdout.flush()
    for label, _ in trees:
        if (label, "fifo") in cpu and (label, "small-first") in cpu:
            print(f"{label}: small-first / fifo CPU = {cpu[label, 'small-first'] / cpu[label, 'fifo']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
