"""Benchmark of the traffic engine (needs root): control overhead and concurrency.

    sudo /opt/railbed/venv/bin/python bench/bench_runtime.py [--quick] [--scale K]

1. Control overhead on the rail-4x4 cluster: zero-byte flows and zero-second
   tasks, one after another (a chain: the round trip controller -> agent ->
   controller per item) and many at once (a wide DAG: throughput), as items
   per second of wall time.
2. Concurrency on a 64-GPU rail-optimized cluster (8 servers x 8 GPUs, 8 rails,
   2 spines): C equal flows started together, flow i from NIC i to the NIC of
   the same rail on the next server, so each NIC carries ceil(C/64) flows and
   the fluid ideal is known. Reports the median and worst ratio ideal /
   achieved completion time, the run's fidelity verdict and CPU use: where
   fidelity breaks on this machine.

3. Flow accuracy on 4 servers at 1 Gbit/s model, k = 10 (100 Mbit/s real):
   a flow alone, two flows head-on (A->B and B->A at once: ACKs meet
   reverse data) and two flows sharing a port, as achieved / fluid time.

Numbers are ratios and rates measured in one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.runtime import run  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from railbed.job import Job, Location  # noqa: E402
from railbed.results import percentile  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from railbed.units import GOODPUT_FRACTION, wire_bytes  # noqa: E402
from schedulers import by_name  # noqa: E402


def chain(n: int, kind: str, servers: int) -> Job:
    job = Job(f"chain-{kind}-{n}")
    for s in range(servers):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    prev: list[str] = []
    for i in range(n):
        a, b = f"w{i % servers}", f"w{(i + 1) % servers}"
        item = job.flow(f"f{i}", a, b, 0, prev) if kind == "flow" else job.task(f"t{i}", a, 0.0, prev)
        prev = [item]
    return job


def wide(n: int, kind: str, width: int, servers: int) -> Job:
    """``n`` items in waves of ``width`` concurrent ones (each wave waits for the previous)."""
    job = Job(f"wide-{kind}-{n}", default_capacity=width)
    for s in range(servers):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    prev: list[str] = []
    for wave in range(math.ceil(n / width)):
        cur = []
        for j in range(width):
            i = wave * width + j
            a, b = f"w{i % servers}", f"w{(i + 1) % servers}"
            cur.append(job.flow(f"f{i}", a, b, 0, prev) if kind == "flow" else job.task(f"t{i}", a, 0.0, prev))
        prev = cur
    return job


def control_overhead(n: int) -> None:
    spec = ClusterSpec.load(Path(__file__).resolve().parent.parent / "examples" / "rail-4x4.yaml")
    print(f"control overhead on {spec.name} ({os.cpu_count()} cores), {n} items per case")
    print(f"  {'case':<30} {'items/s':>9} {'ms/item':>8} {'start+stop s':>13}")
    with Testbed(spec) as tb:
        for label, job in [
            ("zero-byte flows, chain", chain(n, "flow", 4)),
            ("zero-second tasks, chain", chain(n, "task", 4)),
            ("zero-byte flows, 64 at once", wide(n, "flow", 64, 4)),
            ("zero-second tasks, 64 at once", wide(n, "task", 64, 4)),
        ]:
            t0 = time.monotonic()
            res = run(job, by_name("fifo"), tb)
            wall = time.monotonic() - t0
            busy = tb.scale.real_time(res.makespan)  # first item to last, real seconds
            print(f"  {label:<30} {n / busy:9.0f} {1e3 * busy / n:8.3f} {wall - busy:13.2f}", flush=True)


def concurrency(counts: list[int], seconds: float, scale: float | None) -> None:
    spec = ClusterSpec.rail_optimized(servers=8, rails=8, spines=2, nic_rate=100e9, uplink_rate=400e9)
    with Testbed(spec, scale=scale) as tb:
        k = tb.scale.k
        real = tb.scale.real_rate(100e9)
        print(
            f"\nconcurrent flows on {spec.gpus} GPUs ({len(spec.servers)} servers, 8 rails), k = {k:g}: "
            f"NIC links {real / 1e6:.0f} Mbit/s real; built in {tb.build_seconds:.1f} s"
        )
        print(
            f"  {'flows':>5} {'per NIC':>7} {'offered':>12} {'ideal/achieved':>22} {'cpu mean':>8} "
            f"{'cpu>=95%':>8}  fidelity"
        )
        print(f"  {'':>5} {'':>7} {'(real)':>12} {'median':>10} {'worst':>11}")
        nics = [(s, n) for s in range(8) for n in range(8)]
        for c in counts:
            per_nic = math.ceil(c / len(nics))
            size = int(seconds * real * GOODPUT_FRACTION / 8 / per_nic)
            job = Job(f"concurrent-{c}", default_capacity=c)
            for i, (s, n) in enumerate(nics):
                job.endpoint(f"src{i}", Location(s, f"gpu{n}", n))
                job.endpoint(f"dst{i}", Location((s + 1) % 8, f"gpu{n}", n))
            for i in range(c):
                e = i % len(nics)
                job.flow(f"f{i}", f"src{e}", f"dst{e}", size)
            res = run(job, by_name("fifo"), tb)
            flows_on = [sum(1 for i in range(c) if i % len(nics) == e) for e in range(len(nics))]
            ratios = sorted(
                flows_on[int(fid[1:]) % len(nics)] * wire_bytes(size) * 8 / 100e9 / d
                for fid, d in res.flow_completion_times().items()
            )
            f = res.fidelity_report
            offered = min(c, len(nics)) * real
            verdict = "ok" if f["ok"] else "BROKEN: " + "; ".join(f["problems"])
            print(
                f"  {c:5d} {per_nic:7d} {offered / 1e9:9.2f} Gb/s {percentile(ratios, 50):10.3f} {ratios[0]:11.3f} "
                f"{f['cpu_mean']:8.2f} {f['cpu_saturated_share']:8.2f}  {verdict}",
                flush=True,
            )


def flow_accuracy(reps: int) -> None:
    spec = ClusterSpec.from_dict({"servers": [{"count": 4, "nic_rate": 1e9}], "fabric": {"type": "single_switch"}})

    def job(pairs: list[tuple[int, int]], size: int) -> Job:
        j = Job("pairs")
        for s in range(4):
            j.endpoint(f"w{s}", Location(s, "gpu0", 0))
        for i, (a, b) in enumerate(pairs):
            j.flow(f"f{i}", f"w{a}", f"w{b}", size)
        return j

    print(f"\nflow accuracy, 4 servers, 1 Gbit/s model links, k = 10; achieved / fluid time over {reps} runs")
    print(f"  {'case':<34} {'min':>6} {'median':>7} {'max':>6}")
    with Testbed(spec, scale=10) as tb:
        for label, pairs, size, fluid_factor in [
            ("one flow alone, 16 MB", [(0, 1)], 16_000_000, 1),
            ("two flows head-on, 4 MB", [(0, 1), (1, 0)], 4_000_000, 1),
            ("two flows into one port, 4 MB", [(1, 0), (2, 0)], 4_000_000, 2),
            ("two flows into one port, 20 MB", [(1, 0), (2, 0)], 20_000_000, 2),
        ]:
            ratios = []
            for _ in range(reps):
                res = run(job(pairs, size), by_name("fifo"), tb)
                fluid = fluid_factor * wire_bytes(size) * 8 / 1e9
                ratios += [d / fluid for d in res.flow_completion_times().values()]
            ratios.sort()
            print(f"  {label:<34} {ratios[0]:6.3f} {percentile(ratios, 50):7.3f} {ratios[-1]:6.3f}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer items and flow counts")
    p.add_argument("--scale", type=float, default=None, help="k for the 64-GPU cluster (default: this machine's)")
    p.add_argument("--seconds", type=float, default=2.0, help="ideal real duration of each concurrency case")
    p.add_argument("--only", choices=["overhead", "concurrency", "flows"], default=None)
    args = p.parse_args()
    if args.only in (None, "flows"):
        flow_accuracy(2 if args.quick else 5)
    if args.only == "flows":
        return 0
    control_overhead(200 if args.quick else 1000)
    if args.only == "overhead":
        return 0
    counts = [8, 32, 64] if args.quick else [8, 16, 32, 64, 128, 256]
    concurrency(counts, args.seconds, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
