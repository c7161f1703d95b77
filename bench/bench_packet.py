"""Packet backend (ns-3) speed: wall time and ns-3 events per second against cluster size, beside
the fluid backend on the same job. Asserts nothing. Two workloads:

* ``all-to-all``: one all-to-all of ``--size`` per GPU pair on a rail-optimized cluster
  (servers x 8 GPUs, 8 rails of 100 Gbit/s, 2 spines at full bisection, 1 us links), fifo;
* ``hermod``: one training iteration of Hermod's testbed job under ``hermod`` (seed 004, §5.5.1:
  Mixtral-8x7B, t1 p2 e8, servers of 8 GPUs with two 100 Gbit/s NICs, rail-optimized, full
  bisection; ``scenarios/hermod/cluster-testbed.yaml`` with ``servers`` of them), REDUCED as the
  emulated testbed file ``testbed-32gpu-mixtral.yaml`` is: 2 layers, 4 microbatches, shrink 8
  (every size and compute time 1/64 of the full layer's), and 1 iteration; data parallelism
  grows with the cluster (d = GPUs / 2).

Each call runs the sizes it is given in one process (ns-3's import and glue compile timed apart)
and appends one JSON line per size to ``--out``; ``--table FILE`` prints those lines as the
markdown table of docs/packet.md. One size at a time keeps each call short (the heavy lock)::

    python bench/bench_packet.py --workload all-to-all --servers 2 --out bench/packet.jsonl
    python bench/bench_packet.py --workload hermod --servers 4 --out bench/packet.jsonl
    python bench/bench_packet.py --table bench/packet.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.backend import RunOptions, backend  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from railbed.units import parse_size  # noqa: E402
from schedulers import by_name  # noqa: E402
from workloads.moe import moe_training  # noqa: E402
from workloads.synthetic import all_to_all  # noqa: E402

TESTBED = ROOT / "scenarios/hermod/cluster-testbed.yaml"
HERMOD_ARGS = {"model": "mixtral-8x7b", "layers": 2, "microbatches": 4, "iterations": 1, "shrink": 8}
HERMOD_ARGS |= {"zero2": True, "nics_per_server": 2}  # as testbed-32gpu-mixtral.yaml, 1 iteration


def rail_cluster(servers: int) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {
            "name": f"rail-{servers}x8",
            "servers": [{"count": servers, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "rail_optimized", "spines": 2, "uplink_rate": "100Gbit", "latency": "1us"},
        }
    )


def testbed_cluster(servers: int) -> ClusterSpec:
    """Hermod's testbed with ``servers`` servers: each rail's uplink carries all of its hosts."""
    raw = yaml.safe_load(TESTBED.read_text())
    raw["name"] = f"hermod-testbed-{servers}x8"
    raw["servers"][0]["count"] = servers
    raw["fabric"]["uplink_rate"] = f"{100 * servers}Gbit"
    return ClusterSpec.from_dict(raw)


def workload(name: str, servers: int, size: int):
    """(job, scheduler name, cluster) of one benchmark point."""
    gpus = 8 * servers
    if name == "all-to-all":
        return all_to_all(gpus, size), "fifo", rail_cluster(servers)
    return moe_training(dp=gpus // 2, **HERMOD_ARGS), "hermod", testbed_cluster(servers)


def measure(name: str, servers: int, size: int) -> dict:
    job, scheduler, cluster = workload(name, servers, size)
    opts = RunOptions(analysis=False)
    load = os.getloadavg()[0]
    pk = backend("packet").run(job, by_name(scheduler), cluster, opts)
    fl = backend("fluid").run(job, by_name(scheduler), cluster, opts)
    flows = [r for r in pk.items.values() if r.kind == "flow" and r.size and not r.children]  # what ran (sub-flows)
    crossing = [r for r in flows if r.server != r.dst_server]
    return {
        "workload": name,
        "size": size if name == "all-to-all" else None,
        "gpus": 8 * servers,
        "flows": len(flows),
        "crossing_flows": len(crossing),
        "crossing_bytes": sum(f.size for f in crossing),
        "makespan_packet": pk.makespan,
        "makespan_fluid": fl.makespan,
        "wall_packet": pk.wall_seconds,
        "build_packet": pk.own["build_seconds"],
        "wall_fluid": fl.wall_seconds,
        "ns3_events": pk.own["ns3_events"],
        "drops": pk.own["drops"],
        "retransmissions": pk.own["tcp"]["retransmissions"],
        "load_before": load,
    }


def table(path: Path) -> str:
    """The measured lines as markdown, one row per workload and size (the latest line wins)."""
    rows: dict[tuple, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            name = f"all-to-all, {r['size'] / 1e6:g} MB a pair" if r["size"] else "Hermod testbed iteration"
            rows[(name, r["gpus"])] = r
    out = [
        "| workload | GPUs | flows (across servers) | GB across | packet makespan | fluid makespan "
        "| packet vs fluid | packet wall | fluid wall | ns-3 events | events/s | drops | retransmissions |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (name, gpus), r in sorted(rows.items()):
        out.append(
            f"| {name} | {gpus} | {r['flows']:,} ({r['crossing_flows']:,}) | {r['crossing_bytes'] / 1e9:.2f} "
            f"| {r['makespan_packet'] * 1e3:.2f} ms | {r['makespan_fluid'] * 1e3:.2f} ms "
            f"| {r['makespan_packet'] / r['makespan_fluid'] - 1:+.1%} | {r['wall_packet']:.1f} s "
            f"| {r['wall_fluid']:.2f} s | {r['ns3_events'] / 1e6:.1f} M "
            f"| {r['ns3_events'] / r['wall_packet'] / 1e3:.0f} k | {r['drops']:,} | {r['retransmissions']:,} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["all-to-all", "hermod"], default="all-to-all")
    ap.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--size", default="1MB", help="bytes per GPU pair (all-to-all)")
    ap.add_argument("--out", type=Path, help="append one JSON line per size here")
    ap.add_argument("--table", type=Path, help="print the lines of this file as markdown and stop")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    size = parse_size(args.size, "--size")
    t0 = time.perf_counter()
    warm = all_to_all(16, 1000), by_name("fifo"), rail_cluster(2), RunOptions(analysis=False)
    backend("packet").run(*warm)
    print(f"ns-3 import and glue compile: {time.perf_counter() - t0:.1f} s", flush=True)
    backend("fluid").run(*warm)  # numba's kernels from their cache: not part of the fluid column
    for servers in args.servers:
        r = measure(args.workload, servers, size)
        print(json.dumps(r), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
