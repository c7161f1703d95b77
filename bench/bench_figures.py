"""Benchmark: the critical-path figure's time against its items (issue 42).

A synthetic result of ``N`` items on 16 lanes (8 servers, a GPU and a NIC each; tasks and
flows alternating, one item in 50 on the critical path), drawn by
:func:`railbed.plots.critical_path` (CSV + PNG), for each size given. Prints seconds per
figure and items per second. ``--tree DIR`` runs another checkout beside this one, each
size in a fresh process.

    python bench/bench_figures.py [--items 1500 4000 100000] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
import matplotlib
matplotlib.use("Agg")
from railbed.results import ItemRecord, RunResult
from railbed.plots import critical_path
n, out = int(sys.argv[2]), Path(sys.argv[3])
items, path, t = {}, [], 0.0
for k in range(n):
    s = k % 8
    if k % 2:
        r = ItemRecord(f"f{k}", "flow", k * 1e-6, k * 1e-6, k * 1e-6 + 5e-6, server=s, src_nic=0,
                       dst_server=(s + 1) % 8, dst_nic=0, size=1000, dscp=0,
                       attrs={"coflow_type": "DP" if k % 3 else "PP"})
    else:
        r = ItemRecord(f"t{k}", "task", k * 1e-6, k * 1e-6, k * 1e-6 + 4e-6, server=s, device="gpu0")
    items[r.id] = r
    if k % 50 == 0:
        path.append(r.id)
res = RunResult("fluid", "synthetic", "fifo", "c", items=items)
res.makespan = n * 1e-6 + 5e-6
half = res.makespan / 2
res.analysis = {"critical_path": {"items": path, "length": res.makespan, "time": {"compute": half, "DP": half}}}
t0 = time.perf_counter()
critical_path(res, out / f"critical-{n}")
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def one(tree: Path, n: int, out: Path) -> float:
    r = subprocess.run([sys.executable, "-c", WORKER, str(tree), str(n), str(out)], capture_output=True, text=True,
                       check=True, cwd=tree)  # fmt: skip
    return json.loads(r.stdout.strip().splitlines()[-1])["seconds"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, nargs="+", default=[1500, 4000, 100_000])
    ap.add_argument("--tree", type=Path, help="another checkout to run beside this one")
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("other", args.tree.resolve())] if args.tree else [])
    print("| tree | items | figure | items/s |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.items:
            for label, tree in trees:
                sec = one(tree, n, Path(tmp))
                print(f"| {label} | {n:,} | {sec:.2f} s | {n / sec:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
