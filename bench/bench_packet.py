"""Packet backend (ns-3) speed: wall time and ns-3 events per second against cluster size, for
one all-to-all on a rail-optimized cluster (servers x 8 GPUs, 8 rails, 2 spines, 100 Gbit/s,
1 us links), beside the fluid backend on the same job. Asserts nothing; prints one row per size.

    python bench/bench_packet.py [--servers 1 2 4 8] [--size 1MB]
"""

from __future__ import annotations

import argparse
import time

from railbed.backend import RunOptions, backend
from railbed.spec import ClusterSpec
from railbed.units import parse_size
from schedulers import by_name
from workloads.synthetic import all_to_all


def cluster(servers: int) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {
            "name": f"rail-{servers}x8",
            "servers": [{"count": servers, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "rail_optimized", "spines": 2, "uplink_rate": "100Gbit", "latency": "1us"},
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--size", default="1MB", help="bytes per GPU pair")
    args = ap.parse_args()
    size = parse_size(args.size, "--size")
    opts = RunOptions(analysis=False)
    t0 = time.perf_counter()
    backend("packet").run(all_to_all(2, 1000), by_name("fifo"), cluster(1), opts)  # ns-3's import and glue
    print(f"ns-3 import and glue compile: {time.perf_counter() - t0:.1f} s")
    print("GPUs  flows  makespan(packet)  makespan(fluid)  diff    wall(packet)  wall(fluid)  ns-3 events  events/s")
    for servers in args.servers:
        gpus = 8 * servers
        job = all_to_all(gpus, size)
        pk = backend("packet").run(job, by_name("fifo"), cluster(servers), opts)
        fl = backend("fluid").run(job, by_name("fifo"), cluster(servers), opts)
        events = pk.packet["ns3_events"]
        flows = sum(1 for r in pk.items.values() if r.kind == "flow")
        print(
            f"{gpus:4d} {flows:6d}  {pk.makespan * 1e3:12.3f} ms  {fl.makespan * 1e3:12.3f} ms  "
            f"{pk.makespan / fl.makespan - 1:+6.1%}  {pk.wall_seconds:10.1f} s  {fl.wall_seconds:9.2f} s  "
            f"{events:11d}  {events / pk.wall_seconds:8.0f}"
        )


if __name__ == "__main__":
    main()
