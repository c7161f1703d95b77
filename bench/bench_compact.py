"""Benchmark: Hermod's Mixtral-8x22B scenario (scenarios/hermod/full/sim-*-mixtral-8x22b-100g.yaml)
on the Python simulator (``simulator.simulate``: Dispatcher + scheduler at every event) and on the
compact engine (``simulator.rules``: one numba kernel over arrays), issue 14's performance goal.

Per size (GPUs = 64 x dp: TP 8, PP 8, EP 8 on 8-GPU servers, ZeRO-2 ring, 8 microbatches, one
iteration) and scheduler, each engine in a fresh process (its own peak RSS): items by kind,
seconds to generate the job, to set the run up (placement, Dispatcher / compaction) and to run
it, peak RSS, the makespan; then the ratio of the two engines' totals and whether the makespans
agree. The item counts at sizes not built (8192 GPUs) come from the formulas in ``counts``,
checked here against every job that is built.

    python bench/bench_compact.py                        # 128 and 1024 GPUs, both engines
    python bench/bench_compact.py --sizes 128 --python   # also the Python engine's numbers
    python bench/bench_compact.py --direct 8192          # issue 14's goal: arrays from the start
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
sys.path.insert(1, str(ROOT / "bench"))

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
    from simulator.rules import compact, run_compact
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


def ring_job(gpus: int, python: bool = False):
    """The scenario's DP rings alone (dense and expert gradients, ZeRO-2: 2 (dp - 1) steps of
    dp flows each), ids, sizes, order and dependencies as ``workloads.moe`` makes them, every
    ring starting at time 0 (no compute, no pipeline: all 512 rings at once, so more flows share
    the network than in the real iteration), FIFO. Built straight into a
    :class:`~simulator.rules.CompactJob` with numpy, or (``python``) as a ``Job`` for the
    check that both are the same."""
    import numpy as np

    from railbed.job import Job, Location
    from railbed.topology import Topology
    from railbed.units import wire_bytes
    from simulator.fabric import Fabric
    from simulator.rules import NET, CompactJob
    from workloads.moe import PRESETS

    m = PRESETS["mixtral-8x22b"]
    dp, h, ffn = gpus // 64, m["hidden"], m["ffn"]
    sizes = {"dp": -(-(4 * h * h * 2 // TP) // dp), "edp": -(-((m["experts"] // EP) * 3 * h * ffn * 2) // dp)}
    rings = []  # (prefix, p, t, size) in workloads.moe_dp.dp_sync's order
    for p in range(PP):
        for layer in sorted(range(p * LAYERS_PER_STAGE, (p + 1) * LAYERS_PER_STAGE), reverse=True):
            rings += [(f"i0.dp.l{layer}.p{p}t{t}", p, t, sizes["dp"]) for t in range(TP)]
            rings += [(f"i0.edp.l{layer}.p{p}q{q}", p, q, sizes["edp"]) for q in range(EP)]
    steps = 2 * (dp - 1)
    if python:
        job = Job("rings")
        for p in range(PP):
            for d in range(dp):
                for t in range(TP):
                    job.endpoint(f"p{p}d{d}t{t}", Location(p + PP * d, f"gpu{t}", t))
        for prefix, p, t, size in rings:
            for s in range(steps):
                for i in range(dp):
                    deps = [] if s == 0 else [f"{prefix}.s{s - 1}.r{(i - 1) % dp}", f"{prefix}.s{s - 1}.r{i}"]
                    job.flow(f"{prefix}.s{s}.r{i}", f"p{p}d{i}t{t}", f"p{p}d{(i + 1) % dp}t{t}", size, deps)
        return job.validate()
    spec = cluster(gpus)
    topo = Topology(spec)
    fabric = Fabric(topo)
    per = steps * dp
    n = len(rings) * per
    ids, spine, route = [], np.full(n, -1, np.int32), np.zeros(n, np.int32)
    bits = np.zeros(n)
    size = np.zeros(n, np.int64)
    routes: dict = {}
    route_list = []
    for r, (prefix, p, t, nbytes) in enumerate(rings):
        for s in range(steps):
            for i in range(dp):
                k = r * per + s * dp + i
                fid = f"{prefix}.s{s}.r{i}"
                ids.append(fid)
                a, b = (p + PP * i, t), (p + PP * ((i + 1) % dp), t)
                sp = topo.ecmp_spine(a, b, fid)
                key = (a, b, sp)
                if key not in routes:
                    routes[key] = len(route_list)
                    route_list.append(fabric.route(a, b, sp))
                route[k], spine[k] = routes[key], -1 if sp is None else sp
        size[r * per : (r + 1) * per] = nbytes
        bits[r * per : (r + 1) * per] = 8.0 * wire_bytes(nbytes)
    links = np.full((len(route_list), 4), -1, np.int64)
    for r, rt in enumerate(route_list):
        links[r, : len(rt.links)] = rt.links
    hops = np.array([len(rt.links) for rt in route_list], np.int64)
    lat = np.array([rt.latency for rt in route_list])
    # flow (s, i) of a ring is needed by (s + 1, i) and (s + 1, i + 1), in item order
    base = np.repeat(np.arange(len(rings)) * per, steps * dp)
    s_of = np.tile(np.repeat(np.arange(steps), dp), len(rings))
    i_of = np.tile(np.arange(dp), steps * len(rings))
    nxt = base + (s_of + 1) * dp
    one, two = nxt + i_of, nxt + (i_of + 1) % dp
    has = s_of < steps - 1
    pair = np.sort(np.stack([one, two], axis=1), axis=1)
    counts = np.where(has, 2, 0)
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=dep_ptr[1:])
    dep_idx = pair[has].reshape(-1).astype(np.int32)
    missing = np.where(s_of == 0, 0, 2).astype(np.int32)
    zeros = np.zeros(n, np.int64)
    return CompactJob(
        "rings", ids, np.full(n, NET, np.int8), np.full(n, -1, np.int32), np.zeros(n), route, bits, zeros.copy(),
        np.full(n, np.inf), zeros.copy(), zeros.copy(), np.zeros(n, np.bool_),
        np.array([t + 8 * (p + PP * i) for (_, p, t, _) in rings for _ in range(steps) for i in range(dp)], np.int32),
        np.zeros(n, np.int8), size, missing, dep_ptr, dep_idx, np.zeros(0, np.int32), links, hops, lat,
        fabric.capacity.copy(), list(fabric.names), sum(sv.nics for sv in spec.servers), spine, None,
    )  # fmt: skip


def rings(gpus: int, check: bool) -> dict:
    """The network's work on the DP rings alone (``ring_job``), and at small sizes the check
    that the numpy-built job equals ``compact`` of the Python-built one."""
    import numpy as np

    from schedulers import by_name
    from simulator.rules import compact, run_compact

    t0 = time.perf_counter()
    cj = ring_job(gpus)
    t1 = time.perf_counter()
    same = None
    if check:
        ref = compact(ring_job(gpus, python=True), by_name("megatron"), cluster(gpus))
        same = ref.ids == cj.ids and all(
            np.array_equal(getattr(ref, f), getattr(cj, f))
            for f in ("route", "bits", "size", "missing", "dep_ptr", "dep_idx", "nic", "spine", "route_links")
        )
    t2 = time.perf_counter()
    res = run_compact(cj)
    t3 = time.perf_counter()
    return {
        "gpus": gpus, "flows": cj.items, "build_s": t1 - t0, "run_s": t3 - t2, "steps": res.steps,
        "flow_steps": res.flow_steps, "rate_updates": res.rate_updates, "makespan": res.makespan,
        "same_as_python_built": same, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }  # fmt: skip


def direct(gpus: int, scheduler: str) -> dict:
    """The iteration built straight into arrays (``workloads.moe.moe_arrays``: moe_training's code
    filling an ArrayJob, no Python ``Job``), compacted with numpy (``compact_arrays``) and run;
    the peak RSS of this process (``getrusage``), its seconds per stage."""
    import numpy as np

    from schedulers import by_name
    from simulator.rules import compact_arrays, run_compact
    from workloads.moe import moe_arrays

    spec = cluster(gpus)
    warm = moe_arrays(**{**ARGS, "dp": 1, "layers": 8, "microbatches": 2})  # numba caches
    run_compact(compact_arrays(warm, by_name(scheduler), cluster(64)))
    del warm
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    t0 = time.perf_counter()
    aj = moe_arrays(dp=gpus // 64, **ARGS)
    t1 = time.perf_counter()
    row = {"gpus": gpus, "engine": "direct", "scheduler": scheduler, "items": aj.items, "classes": len(aj.reps),
           "arrays_mb": aj.nbytes() / 2**20}  # fmt: skip
    kinds = np.bincount(aj.kind, minlength=2)
    cj = compact_arrays(aj, by_name(scheduler), spec)
    del aj
    t2 = time.perf_counter()
    res = run_compact(cj)
    t3 = time.perf_counter()
    row.update(
        tasks=int(kinds[0]), flows=int(kinds[1]), net_flows=int((cj.kind == 2).sum()),
        local_flows=int((cj.kind == 1).sum()), events=res.events, steps=res.steps, makespan=res.makespan,
        compact_mb=cj.nbytes() / 2**20, flow_steps=res.flow_steps, rate_updates=res.rate_updates,
        generate_s=t1 - t0, setup_s=t2 - t1, run_s=t3 - t2, total_s=t3 - t0, rss_before_gb=rss0,
        peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    )  # fmt: skip
    return row


def decision_times(coflows: int = 200) -> list[dict]:
    """Hermod's decision per EP coflow (codec + Alg. 3 matching and its dependencies,
    ``bench_hermod.decide``) at EP 8 (Mixtral-8x22B) and 32 (Table 5.5's largest, Qwen-MoE-24L)."""
    import statistics

    from bench_hermod import decide, matrices

    out = []
    for ep in (8, 32):
        times, phases = [], []
        for m in matrices(ep, coflows):
            t = time.perf_counter()
            phases.append(decide(m))
            times.append((time.perf_counter() - t) * 1e6)
        times.sort()
        out.append({"ep": ep, "median_us": statistics.median(times), "p99_us": times[int(0.99 * (len(times) - 1))],
                    "phases": statistics.median(phases)})  # fmt: skip
    return out


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
    ap.add_argument("--rings", type=int, nargs="*", default=None, help="only the DP rings at these sizes")
    ap.add_argument(
        "--direct",
        type=int,
        nargs="*",
        default=None,
        help="build the job straight into arrays at these sizes (8192: issue 14's goal)",
    )
    ap.add_argument("--one", nargs=3, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    rows: list[dict] = []
    if args.one is not None:
        if args.one[1] == "direct":
            print(json.dumps(direct(int(args.one[0]), args.one[2])))
        elif args.one[1] == "rings":
            print(json.dumps(rings(int(args.one[0]), args.one[2] == "check")))
        else:
            print(json.dumps(one(int(args.one[0]), args.one[1], args.one[2])))
        return 0
    if args.direct:
        print("Mixtral-8x22B, TP 8 x PP 8 x EP 8, DP = GPUs / 64, ZeRO-2 ring, 8 microbatches, one iteration,")
        print("built straight into arrays (moe_arrays -> compact_arrays -> run_compact), each run in a fresh process")
        print(f"{'GPUs':>6} {'scheduler':>9} {'items':>11} {'generate':>9} {'compact':>8} {'run':>8} {'total':>8} "
              f"{'peak RSS':>9} {'makespan':>10}")  # fmt: skip
        for gpus in args.direct:
            for sched in args.schedulers:
                r = in_subprocess(gpus, "direct", sched)
                rows.append(r)
                print(
                    f"{gpus:>6} {sched:>9} {r['items']:>11,} {r['generate_s']:>8.1f}s {r['setup_s']:>7.1f}s "
                    f"{r['run_s']:>7.1f}s {r['total_s']:>7.1f}s {r['peak_rss_gb']:>7.2f}GB {r['makespan']:>9.5f}s",
                    flush=True,
                )
                print(
                    f"{'':>17} tasks {r['tasks']:,}, flows {r['flows']:,} ({r['net_flows']:,} between servers, "
                    f"{r['local_flows']:,} inside: EP and its metadata), rule classes {r['classes']:,}, "
                    f"network steps {r['steps']:,}, active flows summed over steps {r['flow_steps']:,}, "
                    f"rate updates {r['rate_updates']:,}, arrays {r['arrays_mb']:.0f} MB, compact job "
                    f"{r['compact_mb']:.0f} MB, RSS before the build {r['rss_before_gb']:.2f} GB",
                    flush=True,
                )
        print("\nHermod's decision per EP coflow (codec + Alg. 3 matching + sub-flow dependencies), this process:")
        for d in decision_times():
            print(f"  EP {d['ep']:>2}: median {d['median_us']:.0f} us, p99 {d['p99_us']:.0f} us, "
                  f"{d['phases']:.0f} sub-phases (median)")  # fmt: skip
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    if args.rings:
        print("DP rings alone (all 512 at once, FIFO), compact engine; the numpy-built job checked where built twice")
        for gpus in args.rings:
            r = in_subprocess(gpus, "rings", "check" if gpus <= 1024 else "-")
            print(
                f"  {gpus:>5} GPUs: {r['flows']:,} flows, built in {r['build_s']:.1f} s, run {r['run_s']:.1f} s, "
                f"{r['steps']:,} steps, active flows summed over steps {r['flow_steps']:,}, "
                f"rate updates {r['rate_updates']:,}, makespan {1e3 * r['makespan']:.2f} ms, "
                f"peak RSS {r['peak_rss_gb']:.2f} GB, same as Python-built: {r['same_as_python_built']}",
                flush=True,
            )
        return 0
    print("Mixtral-8x22B, TP 8 x PP 8 x EP 8, DP = GPUs / 64, ZeRO-2 ring, 8 microbatches, one iteration")
    print("items by kind (formula; EP all-to-all an upper bound: a GPU pair that drew no token has no flow;")
    print("'=' on a row where the built job's counts agreed):")
    for gpus in sorted(set(args.sizes) | {8192}):
        c = counts(gpus)
        print(f"  {gpus:>5} GPUs: {sum(c.values()):>10,}  " + ", ".join(f"{k} {v:,}" for k, v in c.items()))
    head = f"{'GPUs':>6} {'scheduler':>9} {'engine':>8} {'items':>9} {'generate':>9} {'setup':>7} {'run':>8} "
    print("\n" + head + f"{'total':>8} {'peak RSS':>8} {'makespan':>10}")
    engines = ["compact", "python"] if args.python else ["compact"]
    for gpus in args.sizes:
        for sched in args.schedulers:
            got = {}
            for engine in engines:
                r = got[engine] = in_subprocess(gpus, engine, sched)
                rows.append(r)
                want, a2a = counts(gpus), "EP all-to-all (same server)"
                exact = all(r["kinds"].get(k) == v for k, v in want.items() if k != a2a)
                agree = "=" if exact and r["kinds"].get(a2a, 0) <= want[a2a] else "counts DIFFER from the formula"
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
