"""Where each allocation's epoch goes: ``python -m scenarios.adagl.room [DATASET ...] [--scale 0.05]``.

Per partitioner (default ``hash``, ``metis``, ``adagl``; any of
:data:`workloads.partition.PARTITIONERS`) on Table II's heterogeneous
cluster (capacities 6, 6, 12, 12; ``hetero-*.yaml``'s job), simulated on the
fluid backend: the edge cut, eq. (1)'s imbalance against the capacity targets
(nodes and training nodes), and per server its training nodes, the sampled
remote MB per batch (:func:`workloads.partition.sampled_bytes`), the summed
training time, the summed fetch time (its coflows: ``receiver_comm``) and its
last batch's end; the server whose end is the epoch's binds it.
``--efficiency`` and ``--batch`` set the job's, ``--small-nic`` the NIC rate of
the two 6 GB servers (Gbit/s; 10 as the others by default): claims.yaml's
unstated parameters. docs/adagl.md reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

CAPACITY = [6, 6, 12, 12]
HERE = Path(__file__).resolve().parent


def cluster(small_nic: float = 10.0):
    """``cluster-hetero4.yaml`` with the two 6 GB servers' NICs at ``small_nic`` Gbit/s."""
    from railbed.spec import ClusterSpec

    if small_nic == 10.0:
        return ClusterSpec.load(HERE / "cluster-hetero4.yaml")
    group = {"count": 2, "gpus": 1, "nics": 1}
    servers = [group | {"nic_rate": f"{small_nic:g}Gbit"}, group | {"nic_rate": "10Gbit"}]
    return ClusterSpec.from_dict({"name": "adagl-hetero4", "servers": servers, "fabric": {"type": "single_switch"}})


def room(dataset: str, partitioner: str, scale: float, small_nic: float = 10.0, **job_args) -> dict:
    """One simulated epoch's numbers per server (module docstring)."""
    from railbed.backend import RunOptions, backend
    from railbed.metrics import receiver_comm
    from schedulers import by_name
    from workloads.gnn_epoch import allocation, gnn_epoch
    from workloads.graphs import dataset as dataset_of
    from workloads.partition import edge_cut, load_imbalance, sampled_bytes

    args = {"batch": 1000, "hidden": 256, "hardware": "titan-xp", "seed": 0} | job_args
    graph, part = allocation(dataset, 4, partitioner, [float(c) for c in CAPACITY], scale, 0.13, args["seed"])
    job = gnn_epoch(dataset=dataset, servers=4, capacity=CAPACITY, partitioner=partitioner, scale=scale, **args)
    res = backend("fluid").run(job, by_name("fifo"), cluster(small_nic), RunOptions(analysis=False))
    compute, end = np.zeros(4), np.zeros(4)
    for r in res.items.values():
        if r.kind == "task" and r.id.endswith(".t") and r.end is not None:
            s = int(r.id.split(".")[1][1:])
            compute[s] += r.end - r.start
            end[s] = max(end[s], r.end)
    comm = receiver_comm(res)
    fetched = sampled_bytes(graph, part, 4, dataset_of(dataset).fanout, args["batch"])
    train = graph.train.astype(float)
    return {
        "dataset": dataset,
        "partitioner": partitioner,
        "nodes": graph.n,
        "cut": edge_cut(graph, part),
        "imbalance": load_imbalance(part, 4, capacity=CAPACITY),
        "imbalance_train": load_imbalance(part, 4, train, capacity=CAPACITY),
        "train": np.bincount(part[graph.train], minlength=4).tolist(),
        "remote_mb": ((fetched.sum(axis=1) - np.diag(fetched)) / 1e6).tolist(),
        "compute": compute.tolist(),
        "fetch": [comm.get(s, 0.0) for s in range(4)],
        "end": end.tolist(),
        "epoch": res.makespan,
        "binds": int(np.argmax(end)),
    }


def table(rows: list[dict]) -> str:
    cols = ("dataset", "partitioner", "cut", "imb. (nodes/train)", "train nodes", "remote MB/batch",
            "compute s", "fetch s", "epoch s", "binds")  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]

    def fmt(xs, d):
        return " / ".join(f"{x:.{d}f}" for x in xs)

    for r in rows:
        lines.append(f"| {r['dataset']} | {r['partitioner']} | {r['cut']:.3f} | {r['imbalance']:.3f} / "
                     f"{r['imbalance_train']:.3f} | {' / '.join(map(str, r['train']))} | {fmt(r['remote_mb'], 1)} | "
                     f"{fmt(r['compute'], 3)} | {fmt(r['fetch'], 3)} | {r['epoch']:.3f} | s{r['binds']} |")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="*", default=["ogbn-arxiv", "ogbn-products"])
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--partitioners", default="hash,metis,adagl")
    ap.add_argument("--efficiency", type=float, default=0.3)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--small-nic", type=float, default=10.0, help="Gbit/s of the 6 GB servers' NICs")
    args = ap.parse_args(argv)
    rows = [room(d, p, args.scale, args.small_nic, efficiency=args.efficiency, batch=args.batch)
            for d in args.datasets for p in args.partitioners.split(",")]  # fmt: skip
    print(f"scale {args.scale:g}, efficiency {args.efficiency:g}, batch {args.batch}, 6 GB servers' NICs "
          f"{args.small_nic:g} Gbit/s; per server s0 / s1 / s2 / s3 "
          f"(capacities {CAPACITY})\n")  # fmt: skip
    print(table(rows))


if __name__ == "__main__":
    main()
