"""Benchmark: Hermod's Mixtral-8x22B scenario (scenarios/hermod/full/sim-*-mixtral-8x22b-100g.yaml)
on the Python simulator (``simulator.simulate``: Dispatcher + scheduler at every event) and on the
compact engine (``simulator.compact``: one numba kernel over arrays), issue 14's performance goal.

Per size (GPUs = 64 x dp: TP 8, PP 8, EP 8 on 8-GPU servers, ZeRO-2 ring, 8 microbatches, one
iteration) and scheduler, each engine in a fresh process (its own peak RSS): items by kind,
seconds to generate the job, to set the run up (placement, Dispatcher / compaction) and to run
it, peak RSS, the makespan; then the ratio of the two engines' totals and whether the makespans
agree. The item counts at sizes not built (8192 GPUs) come from the formulas in ``counts``,
checked here against every job that is built.

    python bench/bench_compact.py                        # 128 and 1024 GPUs, both engines
    python bench/bench_compact.py --sizes 128 --python   # also the Python engine's numbers
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ARGS = dict(model="mixtral-8x22b", microbatches=8, iterations=1, zero2=True, nics_per_server=8)
LAYERS_PER_STAGE, MB, TP, PP, EP = 32 // 8, 8, 8, 8, 8


def counts(gpus: int) -> dict[str, int]:
    """Items of the scenario's job by kind, from its structure (workloads/moe.py)."""
    dp = gpus // (TP * PP)
    groups = gpus // EP
    pairs = EP * (EP - 1)
    return {
        "task": gpus * LAYERS_PER_STAGE * MB * 4,  # attention and experts, forward and backward
        "EP all-to-all (same server)": groups * LAYERS_PER_STAGE * MB * 2 * 2 * pairs,  # F, B x dispatch, combine
        "EP metadata (same server)": groups * LAYERS_PER_STAGE * MB * pairs,  # ring all-gather, forward
        "PP": 2 * MB * (PP - 1) * dp * TP,
        "DP (dense + expert rings)": 2 * PP * LAYERS_PER_STAGE * TP * 2 * (dp - 1) * dp,
    }


def measured_counts(job) -> dict[str, int]:
    from railbed.job import Task

    c: Counter = Counter()
    for it in job.items.values():
        if isinstance(it, Task):
            c["task"] += 1
        elif it.tags.get("metadata"):
            c["EP metadata (same server)"] += 1
        elif it.coflow_type == "EP":
            c["EP all-to-all (same server)"] += 1
        else:
            c["PP" if it.coflow_type == "PP" else "DP (dense + expert rings)"] += 1
    return dict(c)


def cluster(gpus: int):
    """The scenario's cluster file; other sizes as the 8192-GPU one (8 servers per leaf, 16 spines)."""
    from railbed.spec import ClusterSpec

    path = ROOT / f"scenarios/hermod/full/cluster-{gpus}gpu-100g.yaml"
    if path.exists():
        return ClusterSpec.load(path)
    return ClusterSpec.from_dict(
        {
            "name": f"hermod-{gpus}gpu-100g",
            "servers": [{"count": gpus // 8, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 8, "spines": 16, "uplink_rate": "400Gbit",
                       "latency": "1us"},
        }
    )  # fmt: skip


def one(gpus: int, engine: str, scheduler: str) -> dict:
    from schedulers import by_name
    from simulator import Simulation
    from simulator.compact import compact, run_compact
    from workloads.moe import moe_training

    spec = cluster(gpus)
    warm = moe_training(**{**ARGS, "dp": 1, "layers": 8, "microbatches": 2})  # compile / load numba caches
    if engine == "compact":
        run_compact(compact(warm, by_name(scheduler), cluster(1024)))
    t0 = time.perf_counter()
    job = moe_training(dp=gpus // 64, **ARGS)
    t1 = time.perf_counter()
    kinds = measured_counts(job)
    row = {"gpus": gpus, "engine": engine, "scheduler": scheduler, "items": len(job.items), "kinds": kinds}
    if engine == "compact":
        t1 = time.perf_counter()
        cj = compact(job, by_name(scheduler), spec)
        del job
        t2 = time.perf_counter()
        res = run_compact(cj)
        t3 = time.perf_counter()
        row.update(events=res.events, steps=res.steps, makespan=res.makespan, compact_mb=cj.nbytes() / 2**20)
        row.update(flow_steps=res.flow_steps, rate_updates=res.rate_updates)
    else:
        t1 = time.perf_counter()
        sim = Simulation(job, by_name(scheduler), spec)
        t2 = time.perf_counter()
        res = sim.run()
        t3 = time.perf_counter()
        row.update(events=sim.events, steps=sim.steps, makespan=res.makespan)
    row.update(
        generate_s=t1 - t0, setup_s=t2 - t1, run_s=t3 - t2, total_s=t3 - t0,
        peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    )  # fmt: skip
    return row


def in_subprocess(gpus: int, engine: str, scheduler: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(gpus), engine, scheduler], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 1024])
    ap.add_argument("--schedulers", nargs="*", default=["megatron", "lina", "hermod"])
    ap.add_argument("--python", action="store_true", help="also run the Python engine (minutes at 1024 GPUs)")
    ap.add_argument("--one", nargs=3, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.one[2])))
        return 0
    print("Mixtral-8x22B, TP 8 x PP 8 x EP 8, DP = GPUs / 64, ZeRO-2 ring, 8 microbatches, one iteration")
    print("items by kind (formula; '=' where a built job was counted and agreed):")
    for gpus in sorted(set(args.sizes) | {8192}):
        c = counts(gpus)
        print(f"  {gpus:>5} GPUs: {sum(c.values()):>10,}  " + ", ".join(f"{k} {v:,}" for k, v in c.items()))
    head = f"{'GPUs':>6} {'scheduler':>9} {'engine':>8} {'items':>9} {'generate':>9} {'setup':>7} {'run':>8} "
    print("\n" + head + f"{'total':>8} {'peak RSS':>8} {'makespan':>10}")
    rows = []
    engines = ["compact", "python"] if args.python else ["compact"]
    for gpus in args.sizes:
        for sched in args.schedulers:
            got = {}
            for engine in engines:
                r = got[engine] = in_subprocess(gpus, engine, sched)
                rows.append(r)
                agree = "=" if r["kinds"] == counts(gpus) else "counts DIFFER from the formula"
                print(
                    f"{gpus:>6} {sched:>9} {engine:>8} {r['items']:>9} {r['generate_s']:>8.1f}s {r['setup_s']:>6.1f}s "
                    f"{r['run_s']:>7.2f}s {r['total_s']:>7.1f}s {r['peak_rss_gb']:>6.2f}GB "
                    f"{r['makespan']:>9.5f}s {agree}",
                    flush=True,
                )
                if engine == "compact":
                    print(
                        f"{'':>26} network steps {r['steps']:,}, active flows summed over steps {r['flow_steps']:,}, "
                        f"rate updates {r['rate_updates']:,}, compact job {r['compact_mb']:.0f} MB",
                        flush=True,
                    )
            if len(got) == 2:
                c, p = got["compact"], got["python"]
                slow, fast = p["setup_s"] + p["run_s"], c["setup_s"] + c["run_s"]
                same = abs(c["makespan"] - p["makespan"]) <= 1e-9 * p["makespan"]
                print(
                    f"       compact vs python: setup + run {slow:.1f} s -> {fast:.1f} s ({slow / fast:.1f}x), "
                    f"run alone {p['run_s'] / c['run_s']:.0f}x, peak RSS {p['peak_rss_gb']:.2f} -> "
                    f"{c['peak_rss_gb']:.2f} GB; makespans {'equal' if same else 'DIFFER'}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
