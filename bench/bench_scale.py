"""Benchmark: one Mixtral-8x22B iteration under ``hermod`` on the array path, with and without
the run's analysis (issue 23's performance goal: 8192 GPUs in under 60 s and 4 GB, 1024 GPUs
in under 5 s).

Each run is a fresh process (its own peak RSS, from ``getrusage``) that builds the job straight
into arrays (``workloads.moe.moe_arrays``), compacts it (``simulator.rules.compact_arrays``)
and runs it (``run_compact``, ``analysis`` on or off), timing each stage; with the analysis on
it then runs the network-free run alone (``network_free_run``) once more to say what it costs
(not counted in the totals). ``--baseline DIR`` runs the same stages on another tree (for
example ``git archive <commit> | tar -x -C DIR``) in the same invocation, alternating, and
prints the ratios. Rows are appended to ``--json`` so an 8192-GPU table can be made of runs
taken one at a time (``--table`` prints it).

    python bench/bench_scale.py --sizes 1024 --analysis off on --baseline /tmp/base
    python bench/bench_scale.py --sizes 8192 --analysis on --json rows.json
    python bench/bench_scale.py --table rows.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = dict(model="mixtral-8x22b", microbatches=8, iterations=1, zero2=True, nics_per_server=8)


def cluster(gpus: int):
    """The scenario's cluster file (scenarios/hermod/full), else one like the 8192-GPU one."""
    from railbed.spec import ClusterSpec

    path = Path.cwd() / f"scenarios/hermod/full/cluster-{gpus}gpu-100g.yaml"
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


def one(gpus: int, scheduler: str, analysis: bool) -> dict:
    """The stages of one run in this process (the tree is the working directory)."""
    from schedulers import by_name
    from simulator.rules import compact_arrays, network_free_run, run_compact
    from workloads.moe import moe_arrays

    warm = moe_arrays(**{**ARGS, "dp": 1, "layers": 8, "microbatches": 2})  # numba caches, imports
    run_compact(compact_arrays(warm, by_name(scheduler), cluster(64)), analysis=analysis)
    del warm
    t0 = time.perf_counter()
    aj = moe_arrays(dp=gpus // 64, **ARGS)
    t1 = time.perf_counter()
    cj = compact_arrays(aj, by_name(scheduler), cluster(gpus))
    del aj
    t2 = time.perf_counter()
    res = run_compact(cj, analysis=analysis)
    t3 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    row = {
        "gpus": gpus, "scheduler": scheduler, "analysis": analysis, "items": cj.items, "events": res.events,
        "steps": res.steps, "flow_steps": res.flow_steps, "rate_updates": res.rate_updates,
        "rerated": getattr(res, "rerated", None),
        "makespan": res.makespan, "generate_s": t1 - t0, "compact_s": t2 - t1, "run_s": t3 - t2,
        "total_s": t3 - t0, "peak_rss_gb": peak, "events_per_s": res.events / (t3 - t2),
    }  # fmt: skip
    if analysis:
        a = res.analysis
        row.update(
            network_free_makespan=a["network_free_makespan"], max_speedup=a["max_speedup"],
            exposed_comm_fraction=a["exposed_comm_fraction"], contention=(a["contention"] or {}).get("share"),
        )  # fmt: skip
        t4 = time.perf_counter()
        network_free_run(cj)
        row["network_free_run_s"] = time.perf_counter() - t4
    return row


def in_subprocess(tree: Path, gpus: int, scheduler: str, analysis: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    argv = [sys.executable, __file__, "--one", str(gpus), scheduler, "on" if analysis else "off"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tree, env=env)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["tree"] = str(tree)
    return row


def show(rows: list[dict]) -> None:
    print(f"{'tree':>24} {'GPUs':>5} {'analysis':>8} {'items':>11} {'events':>11} {'generate':>9} {'compact':>8} "
          f"{'run':>8} {'total':>8} {'events/s':>10} {'peak RSS':>9} {'makespan':>10}")  # fmt: skip
    for r in rows:
        print(
            f"{Path(r['tree']).name:>24} {r['gpus']:>5} {'on' if r['analysis'] else 'off':>8} {r['items']:>11,} "
            f"{r['events']:>11,} {r['generate_s']:>8.1f}s {r['compact_s']:>7.1f}s {r['run_s']:>7.1f}s "
            f"{r['total_s']:>7.1f}s {r['events_per_s']:>10,.0f} {r['peak_rss_gb']:>7.2f}GB {r['makespan']:>10.6f}"
        )
        if r["analysis"]:
            print(
                f"{'':>24} network-free {r['network_free_makespan']:.6f} s (its run alone "
                f"{r['network_free_run_s']:.1f} s), max speedup {r['max_speedup']:.5f}, contention "
                f"{r['contention']}, exposed comm {r['exposed_comm_fraction']}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024])
    ap.add_argument("--analysis", nargs="*", choices=["on", "off"], default=["off", "on"])
    ap.add_argument("--scheduler", default="hermod")
    ap.add_argument("--baseline", default=None, help="another tree to run alternately (ratios printed)")
    ap.add_argument("--json", default=None, help="append the rows to this file")
    ap.add_argument("--table", default=None, help="print the rows of this file and exit")
    ap.add_argument("--one", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.one[2] == "on")))
        return 0
    if args.table:
        show(json.loads(Path(args.table).read_text()))
        return 0
    trees = [ROOT] + ([Path(args.baseline).resolve()] if args.baseline else [])
    rows: list[dict] = []
    for gpus in args.sizes:
        for mode in args.analysis:
            got = {}
            for tree in reversed(trees) if len(rows) % 2 else trees:  # alternate which tree runs first
                got[tree] = r = in_subprocess(tree, gpus, args.scheduler, mode == "on")
                rows.append(r)
                show([r])
            if len(got) == 2:
                new, old = got[ROOT], got[trees[1]]
                same = new["makespan"] == old["makespan"]
                print(
                    f"   this tree vs baseline: total {old['total_s'] / new['total_s']:.2f}x faster (generate "
                    f"{old['generate_s'] / new['generate_s']:.2f}x, compact {old['compact_s'] / new['compact_s']:.2f}x"
                    f", run {old['run_s'] / new['run_s']:.2f}x), peak RSS {old['peak_rss_gb']:.2f} -> "
                    f"{new['peak_rss_gb']:.2f} GB; makespans {'equal' if same else 'DIFFER'} "
                    f"({new['makespan']!r} vs {old['makespan']!r})",
                    flush=True,
                )
    if args.json:
        path = Path(args.json)
        old_rows = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(old_rows + rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
