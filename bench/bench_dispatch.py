"""Benchmark: what the scheduler interface costs the simulator, against an older tree.

The job and cluster are bench/bench_simulator.py's (one iteration of a TP 8 x
PP 8 layout on a rail-optimized cluster). Each measurement runs in a fresh
process on one source tree (this one, or ``--baseline``, a checkout of an
earlier commit, e.g. ``git worktree add /tmp/railbed-v1 d7684ce``), and the
two trees alternate, so a ratio compares runs made minutes apart on the
same machine. Per tree and scheduler: the CPU time of ``Simulation.run``
(process time: other processes on the machine inflate wall time, much less
CPU time; the fastest of ``--repeat`` runs counts), its wall time, the hook
calls the scheduler received, and the CPU time per hook call.

Schedulers:

``tag-priority``  the baseline policy: only ``on_ready`` is overridden.
``hooks``         overrides ``on_ready`` and ``on_flows_changed`` (and on
                  this tree ``on_done``), each doing nothing: the cost of
                  calling the hooks.
``progress``      (this tree only) ``hooks`` plus reading every active flow's
                  delivered bytes and rate in ``on_flows_changed``: the cost
                  of progress reporting.

    python bench/bench_dispatch.py --baseline /tmp/railbed-v1 --gpus 1024 [--repeat 3]
    python bench/bench_dispatch.py --baseline /tmp/railbed-v1 --gpus 8192 --schedulers tag-priority --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
# the editable install would resolve missing modules of an older tree from this one: drop its finder
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
from bench.bench_simulator import job_and_cluster
from simulator import Simulation
from schedulers import by_name
try:
    from railbed.scheduler import Decision, Scheduler
except ImportError:  # a tree before the contract moved to the core
    from schedulers.base import Decision, Scheduler

calls = {"n": 0}


class Hooks(Scheduler):
    name = "hooks"

    def on_ready(self, item, view):
        calls["n"] += 1
        return Decision(dscp=int(item.tags.get("dscp", 0)) if item.kind == "flow" else 0)

    def on_flows_changed(self, view):
        calls["n"] += 1
        return {}

    def on_done(self, item, record, view):
        calls["n"] += 1


class Progress(Hooks):
    name = "progress"

    def on_flows_changed(self, view):
        calls["n"] += 1
        for f in view.active.values():
            calls["reads"] = calls.get("reads", 0) + 1
            f.delivered, f.current_rate
        return {}


def make(name):
    return {"hooks": Hooks, "progress": Progress}.get(name, lambda: by_name(name))()


gpus, name = int(sys.argv[2]), sys.argv[3]
small, cluster = job_and_cluster(64)
Simulation(small, make(name), cluster).run()  # numba kernels from their cache, not in the timing
job, cluster = job_and_cluster(gpus)
sim = Simulation(job, make(name), cluster)
calls["n"] = 0
calls.pop("reads", None)
t0, c0 = time.perf_counter(), time.process_time()
sim.run()
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
out = {"seconds": seconds, "cpu": cpu, "calls": calls["n"], "reads": calls.get("reads", 0), "events": sim.events}
print(json.dumps(out))
"""


def measure(tree: Path, gpus: int, scheduler: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(tree), str(gpus), scheduler],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a checkout of the earlier tree")
    p.add_argument("--gpus", type=int, default=1024)
    p.add_argument("--schedulers", default="tag-priority,hooks,progress")
    p.add_argument("--repeat", type=int, default=3, help="runs per tree and scheduler (the fastest counts)")
    p.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON")
    args = p.parse_args()
    rows = []
    for name in args.schedulers.split(","):
        best: dict[str, dict] = {}
        trees = {"new": ROOT} if name == "progress" else {"old": args.baseline, "new": ROOT}
        for _ in range(args.repeat):
            for label, tree in trees.items():  # alternate, so both see the same machine
                m = measure(tree, args.gpus, name)
                if label not in best or m["cpu"] < best[label]["cpu"]:
                    best[label] = m
        rows.append({"scheduler": name, **{k: v for k, v in best.items()}})
        print(line(name, best), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"gpus": args.gpus, "rows": rows, "when": time.ctime()}, indent=1) + "\n")
    return 0


def line(name: str, best: dict[str, dict]) -> str:
    parts = [f"{name:<13}"]
    for label, m in best.items():
        per = 1e6 * m["cpu"] / max(1, m["calls"])
        parts.append(f"{label}: {m['cpu']:7.2f} s CPU ({m['seconds']:.2f} s wall), {m['calls']:>8} hook calls")
        if m["calls"]:
            parts.append(f"{per:6.2f} us/call")
        if m.get("reads"):
            parts.append(f"{m['reads']} progress reads")
    if "old" in best:
        parts.append(f"new/old {best['new']['cpu'] / best['old']['cpu']:.3f} (CPU)")
    return "  ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
