"""The busbw table of docs/collectives.md: every algorithm of workloads/collectives.py at several sizes
on a rail-optimized cluster, on the fluid backend, as nccl-tests reports it (busbw, GB/s).

Cluster: 4 servers x 8 GPUs, one 100 Gbit/s NIC per GPU, rail switch per NIC index, 2 spines, 1 us
per link, no hardware model (same-server flows take no time: an NVLink-free upper bound on what
stays inside a server). Ranks in order: rank *r* on server ``r // 8``, GPU and NIC ``r % 8``.
Rewrites the block between the markers of docs/collectives.md::

    python bench/collectives_table.py            # about a minute on one core
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.metrics import collective_bandwidths  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from schedulers import by_name  # noqa: E402
from simulator import simulate  # noqa: E402
from workloads import generate  # noqa: E402
from workloads.collectives import DEFINED, OPERATIONS  # noqa: E402

SERVERS, GPUS, RATE, LATENCY = 4, 8, 100e9, 1e-6
SIZES = (1 << 20, 16 << 20, 256 << 20)
DOC = ROOT / "docs" / "collectives.md"
BEGIN, END = "<!-- collectives-table:begin -->", "<!-- collectives-table:end -->"


def cluster() -> ClusterSpec:
    return ClusterSpec.from_dict({
        "name": f"rail-{SERVERS}x{GPUS}",
        "servers": [{"count": SERVERS, "gpus": GPUS, "nics": GPUS, "nic_rate": RATE}],
        "fabric": {"type": "rail_optimized", "rails": GPUS, "spines": 2, "latency": LATENCY},
    })  # fmt: skip


def busbw(op: str, algorithm: str, size: int, spec: ClusterSpec) -> float:
    args = {"operation": op, "size": size, "ranks": SERVERS * GPUS, "algorithm": algorithm, "gpus_per_server": GPUS}
    if algorithm == "tree" or (algorithm, op) == ("ring", "broadcast"):
        args["chunks"] = 8
    res = simulate(generate("collective", args), by_name("fifo"), spec)
    (row,) = collective_bandwidths(res)
    return row["busbw"] / 1e9


def table() -> str:
    spec = cluster()
    head = "| operation | algorithm | " + " | ".join(f"{s >> 20} MiB" for s in SIZES) + " |"
    lines = [head, "| --- | --- |" + " ---: |" * len(SIZES)]
    for op in OPERATIONS:
        for algorithm, ops in DEFINED.items():
            if op in ops:
                cells = " | ".join(f"{busbw(op, algorithm, s, spec):.1f}" for s in SIZES)
                lines.append(f"| {op} | {algorithm} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    t0 = time.perf_counter()
    text = table()
    doc = DOC.read_text()
    a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:a] + "\n" + text + "\n" + doc[b:])
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
