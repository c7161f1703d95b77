"""Benchmark: the flow-level simulator on rail-optimized clusters of 128, 1024 and 8192 GPUs.

One training iteration of Hermod's simulated 3D-parallel layout (seed 004,
section 5.5.1 and Table 5.5: 8-GPU servers, TP 8, PP 8, data parallelism
growing with the cluster): each server is one tensor-parallel group, every
tensor rank runs a GPipe pipeline of 8 microbatches (activation flows to
the next stage, gradient flows back) and a data-parallel ring all-reduce
over its stage's replicas, all on its rail. Sizes are GPT-3-175B-like and
our choice (the paper gives none): 48 MiB activation per rank and
microbatch, 1 GiB gradient shard per rank. NICs 100 Gbit/s (the paper's
default), 8 rails, 8 spines at full bisection.

Per size, in a fresh process (its own peak memory): items, flows, events,
network steps (events at one instant share one), wall seconds to generate
the job, set the run up (placement, dispatcher) and simulate it, events per
second and the share of the run spent in the numba network engine.

Then the numba engine against the plain-Python reference on the same job,
in one process: whole-run and network-engine speed ratios (the reference
is measured on the sizes ``--reference`` lists: at 1024 GPUs it needs
minutes), and the max-min kernel alone on random instances.

    python bench/bench_simulator.py                # 128, 1024, 8192 GPUs
    python bench/bench_simulator.py --quick        # 128 and 1024 GPUs
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS_PER_SERVER = 8
TP = PP = 8
MICROBATCHES = 8
ACTIVATION = 48 << 20
GRADIENT = 1 << 30
NIC = 100e9
SPINES = 8


def job_and_cluster(gpus: int):
    from railbed.spec import ClusterSpec
    from workloads.llm import hybrid_parallel

    servers = gpus // GPUS_PER_SERVER
    job = hybrid_parallel(
        dp=gpus // (TP * PP), pp=PP, tp=TP, microbatches=MICROBATCHES, iterations=1, fwd=2e-3, bwd=4e-3,
        activation=ACTIVATION, gradient=GRADIENT, gpus_per_server=GPUS_PER_SERVER, layout="megatron",
        dscp={"PP": 46, "DP": 0},
    )  # fmt: skip
    cluster = ClusterSpec.rail_optimized(
        servers, GPUS_PER_SERVER, spines=SPINES, nic_rate=NIC, uplink_rate=NIC * servers / SPINES
    )
    return job, cluster


def one_size(gpus: int, engine: str, scheduler: str) -> dict:
    from schedulers import by_name
    from simulator import Simulation
    from simulator.fluid.network import NumbaNetwork, ReferenceNetwork

    network = {"numba": NumbaNetwork, "reference": ReferenceNetwork}[engine]  # the network's kernel
    small, cluster = job_and_cluster(64)  # load the numba kernels from their cache: not part of the timing
    Simulation(small, by_name(scheduler), cluster, network=network).run()
    t0 = time.perf_counter()
    job, cluster = job_and_cluster(gpus)
    t1 = time.perf_counter()
    sim = Simulation(job, by_name(scheduler), cluster, network=network)
    t2 = time.perf_counter()
    result = sim.run()
    t3 = time.perf_counter()
    return {
        "gpus": gpus,
        "engine": engine,
        "scheduler": scheduler,
        "items": len(job.items),
        "flows": len(job.flows),
        "events": sim.events,
        "steps": sim.steps,
        "generate_s": t1 - t0,
        "setup_s": t2 - t1,
        "run_s": t3 - t2,
        "network_s": sim.network_seconds,
        "total_s": t3 - t0,
        "events_per_s": sim.events / (t3 - t2),
        "makespan": result.makespan,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def in_subprocess(gpus: int, engine: str, scheduler: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(gpus), "--engine", engine, "--scheduler", scheduler],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernel_ratio(flows: int, links: int, repeat: int) -> tuple[float, float]:
    """(reference seconds, numba seconds) per max-min computation on a random instance."""
    from railbed.maxmin import maxmin, maxmin_reference

    rng = random.Random(7)
    capacity = [rng.choice([100e9, 400e9]) for _ in range(links)]
    paths = [rng.sample(range(links), 4) for _ in range(flows)]
    prio = [rng.choice([0, 5]) for _ in range(flows)]
    cap = [float("inf")] * flows
    maxmin(capacity, paths, prio, cap)  # compile / load from cache
    t0 = time.perf_counter()
    for _ in range(repeat):
        maxmin_reference(capacity, paths, prio, cap)
    t1 = time.perf_counter()
    for _ in range(repeat):
        maxmin(capacity, paths, prio, cap)
    t2 = time.perf_counter()
    return (t1 - t0) / repeat, (t2 - t1) / repeat


def contention_ratio(flows: int, links: int, repeat: int) -> tuple[float, float]:
    """(reference seconds, numba seconds) per contention-flag computation (simulator/contention.py)
    on a random instance at its max-min rates."""
    from railbed.maxmin import maxmin
    from simulator.contention import contended, step_reference

    rng = random.Random(7)
    capacity = [rng.choice([100e9, 400e9]) for _ in range(links)]
    paths = [rng.sample(range(links), 4) for _ in range(flows)]
    prio = [rng.choice([0, 5]) for _ in range(flows)]
    cap = [float("inf")] * flows
    ftype = [rng.randrange(3) for _ in range(flows)]
    rates = maxmin(capacity, paths, prio, cap)
    contended(capacity, paths, prio, cap, rates, ftype)  # compile / load from cache
    t0 = time.perf_counter()
    for _ in range(repeat):
        step_reference(capacity, paths, prio, cap, rates, ftype)
    t1 = time.perf_counter()
    for _ in range(repeat):
        contended(capacity, paths, prio, cap, rates, ftype)
    t2 = time.perf_counter()
    return (t1 - t0) / repeat, (t2 - t1) / repeat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 1024, 8192])
    ap.add_argument("--quick", action="store_true", help="128 and 1024 GPUs only")
    ap.add_argument("--reference", type=int, nargs="*", default=[128], help="sizes to also run on the reference")
    ap.add_argument("--scheduler", default="fifo")
    ap.add_argument("--engine", default="numba")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one_size(args.one, args.engine, args.scheduler)))
        return 0
    sizes = [128, 1024] if args.quick else args.sizes
    print(f"one iteration, TP {TP} x PP {PP} x DP (GPUs / 64), {MICROBATCHES} microbatches, scheduler {args.scheduler}")
    head = (
        f"{'GPUs':>6} {'items':>9} {'events':>9} {'steps':>8} {'generate':>9} {'setup':>7} {'run':>7} "
        f"{'total':>7} {'events/s':>9} {'in numba':>8} {'memory':>7} {'makespan':>9}"
    )
    print(head)
    rows = []
    for gpus in sizes:
        r = in_subprocess(gpus, "numba", args.scheduler)
        rows.append(r)
        print(
            f"{gpus:>6} {r['items']:>9} {r['events']:>9} {r['steps']:>8} "
            f"{r['generate_s']:>8.1f}s {r['setup_s']:>6.1f}s "
            f"{r['run_s']:>6.1f}s {r['total_s']:>6.1f}s {r['events_per_s']:>9.0f} "
            f"{100 * r['network_s'] / r['run_s']:>7.0f}% {r['peak_rss_gb']:>5.1f}GB {1e3 * r['makespan']:>7.2f}ms",
            flush=True,
        )
    print("\nnumba engine vs the plain-Python reference (same job, one process each, same machine and run)")
    for gpus in args.reference:
        fast = in_subprocess(gpus, "numba", args.scheduler)
        slow = in_subprocess(gpus, "reference", args.scheduler)
        rows += [fast, slow]
        same = abs(fast["makespan"] - slow["makespan"]) <= 1e-9 * slow["makespan"]
        print(
            f"  {gpus} GPUs: run {slow['run_s']:.1f} s -> {fast['run_s']:.1f} s "
            f"({slow['run_s'] / fast['run_s']:.1f}x); "
            f"network engine {slow['network_s']:.1f} s -> {fast['network_s']:.2f} s "
            f"({slow['network_s'] / fast['network_s']:.0f}x); makespans {'equal' if same else 'DIFFER'}"
        )
    for flows in (100, 1000, 8192):
        ref, fast = kernel_ratio(flows, max(8, flows // 2), repeat=3 if flows > 1000 else 10)
        print(
            f"  max-min alone, {flows} flows: reference {1e3 * ref:.2f} ms, "
            f"numba {1e3 * fast:.3f} ms ({ref / fast:.0f}x)"
        )
    for flows in (100, 1000):
        ref, fast = contention_ratio(flows, max(8, flows // 2), repeat=3)
        print(
            f"  contention flags alone, {flows} flows: reference {1e3 * ref:.2f} ms, "
            f"numba {1e3 * fast:.3f} ms ({ref / fast:.0f}x)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
