"""Every partitioner's metrics on a generated graph, as a Markdown table (issue 29).

``python -m scenarios.partitions [DATASET] [--parts 4] [--scale 0.2] [--capacity 6,6,12,12]``
prints, per partitioner of :data:`workloads.partition.PARTITIONERS`, the edge
cut, the load imbalance of AdaGL's eq. (1) against equal parts and against
the capacities, the largest and smallest ``|V_i^remote|`` (G3's
communication per part) and the mean bytes a batch of training nodes fetches
from other parts (sampled neighbourhoods with the dataset's fan-outs), with
the seconds each partitioner took. The same graph for all: what tells the
methods apart is what they do with it.
"""

from __future__ import annotations

import argparse
import time

from workloads.graphs import dataset, dataset_graph
from workloads.partition import CAPACITY_AWARE, PARTITIONERS, edge_cut, load_imbalance, partition, remote_vertices
from workloads.partition import metrics as part_metrics

# skipped above this many nodes unless asked for by name (minutes)
SLOW = {"adagl": 2_000_000, "adagl-bounded": 2_000_000}


def table(name: str, parts: int, scale: float, capacity: list[float] | None, only=None, batch: int = 1000) -> str:
    ds = dataset(name)
    graph = dataset_graph(name, scale)
    head = (f"{ds.name} at scale {scale:g} ({graph.n} nodes, {graph.entries} neighbour entries), {parts} parts"
            + (f", capacities {capacity}" if capacity else ""))  # fmt: skip
    cols = ("partitioner", "s", "edge cut", "imbalance", "vs capacity", "remote max", "remote min", "remote MB/batch")
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for pname in only or PARTITIONERS:
        if only is None and graph.n > SLOW.get(pname, graph.n):
            continue
        t0 = time.perf_counter()
        part = partition(pname, graph, parts, 0, capacity=capacity if pname in CAPACITY_AWARE else None)
        secs = time.perf_counter() - t0
        rem = remote_vertices(graph, part, parts)
        sampled = part_metrics(graph, part, parts, ds.fanout, batch)["remote_bytes"] / 1e6
        cap = load_imbalance(part, parts, capacity=capacity) if capacity else float("nan")
        lines.append(f"| {pname} | {secs:.1f} | {edge_cut(graph, part):.3f} | {load_imbalance(part, parts):.3f} | "
                     f"{cap:.3f} | {int(rem.max())} | {int(rem.min())} | {sampled:.1f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default="ogbn-arxiv")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--scale", type=float, default=0.2)
    ap.add_argument("--capacity", default=None, help="comma-separated P_i, one per part")
    ap.add_argument("--only", action="append", help="a partitioner (repeatable)")
    args = ap.parse_args(argv)
    cap = [float(x) for x in args.capacity.split(",")] if args.capacity else None
    if cap is not None and len(cap) != args.parts:
        ap.error(f"--capacity needs {args.parts} values")
    print(table(args.dataset, args.parts, args.scale, cap, args.only))


if __name__ == "__main__":
    main()
