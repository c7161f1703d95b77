"""Platform benchmark (root): build/teardown time and shaping accuracy on this machine.

    sudo /opt/railbed/venv/bin/python bench/bench_platform.py [--out bench-platform.json]

1. Build and teardown time of rail-optimized clusters of 16, 64 and 128 GPUs
   (servers x rails, one GPU per NIC, 2 spines), each built ``--repeat`` times.
2. Shaping error of one saturating TCP flow through one shaped link at rising
   real rates, and the highest rate shaped within 2 % (wire rate, tc counters).

Numbers are for the machine it runs on; no assertion is made here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.loadtest import Flow, measure  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from railbed.results import percentile  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402

CLUSTERS = [(4, 4), (8, 8), (16, 8)]  # servers x rails = 16, 64, 128 GPUs
RATES_MBIT = [10, 50, 100, 200, 500, 1000, 2000, 4000]


def bench_build(repeat: int) -> list[dict]:
    rows = []
    for servers, rails in CLUSTERS:
        spec = ClusterSpec.rail_optimized(servers=servers, rails=rails, spines=2, nic_rate=100e9)
        builds, teardowns = [], []
        for _ in range(repeat):
            tb = Testbed(spec)
            with tb:
                builds.append(tb.build_seconds)
            teardowns.append(tb.teardown_seconds)
        row = {
            "gpus": servers * rails,
            "servers": servers,
            "rails": rails,
            "spines": 2,
            "links": len(tb.topology.links),
            "build_s": percentile(builds, 50),
            "teardown_s": percentile(teardowns, 50),
            "builds": builds,
            "teardowns": teardowns,
        }
        print(
            f"  {row['gpus']:>4} GPUs ({servers}x{rails}, {row['links']} links): build {row['build_s']:.2f} s, "
            f"teardown {row['teardown_s']:.2f} s",
            flush=True,
        )
        rows.append(row)
    return rows


def bench_shaping(window: float) -> list[dict]:
    rows = []
    for mbit in RATES_MBIT:
        rate = mbit * 1e6
        spec = ClusterSpec.from_dict({"servers": [{"count": 2, "nic_rate": rate}], "fabric": {"type": "single_switch"}})
        with Testbed(spec, policy="fifo", scale=1) as tb:
            m = measure(tb, [Flow((0, 0), (1, 0))], [("h0", "h0-eth0")], warmup=1.5, window=window)
        p = m.ports[("h0", "h0-eth0")]
        row = {
            "rate_mbit": mbit,
            "wire_mbit": p.wire_bps / 1e6,
            "error": p.error,
            "goodput_over_wire": m.goodput_bps[0] / p.wire_bps if p.wire_bps else 0.0,
        }
        print(
            f"  {mbit:>5} Mbit/s: wire {row['wire_mbit']:.2f} Mbit/s, error {row['error']:+.2%}, "
            f"goodput/wire {row['goodput_over_wire']:.4f}",
            flush=True,
        )
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--out", default="bench-platform.json")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cpus, kernel {os.uname().release}")
    print("build / teardown of rail-optimized clusters (median):")
    build = bench_build(args.repeat)
    print("shaping accuracy (one saturating TCP flow, one shaped link):")
    shaping = bench_shaping(args.window)
    within = [r["rate_mbit"] for r in shaping if abs(r["error"]) <= 0.02]
    best = max(within) if within else None
    print(f"highest rate shaped within 2 %: {best} Mbit/s")
    Path(args.out).write_text(
        json.dumps({"build": build, "shaping": shaping, "max_rate_within_2pct_mbit": best}, indent=2)
    )
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
