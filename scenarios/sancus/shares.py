"""The share of CAGNET's bytes each SANCUS variant still sends, by model shape (docs/sancus.md).

``python -m scenarios.sancus.shares`` prints, for Reddit on 8 GPUs over 6
epochs, the bytes every variant's job sends (all flows: broadcasts and
all-reduces) over CAGNET's, for hidden sizes and layer counts the seed does
not fix. When broadcasts take time in proportion to their bytes (one
server, nothing else on the links: what ``tests/test_sancus.py`` checks),
this share is the communication ratio Table 5 reports; the measured rows
of ``railbed reproduce sancus`` sit beside it.

``python -m scenarios.sancus.shares RESULTS_DIR ...`` prints, for results
directories of the Table 5 scenarios, each variant's communication over
CAGNET's and CAGNET's computation over its communication (Table 5 gives
0.365, 0.093 and 0.437 for its three configurations: a consistency check of
the compute model, not a calibration).
"""

from __future__ import annotations

from workloads.gnn_cagnet import gnn_cagnet

VARIANTS = {
    "SCS-E1": {"staleness": "epoch", "epsilon": 1},
    "SCS-A1": {"staleness": "adaptive", "epsilon": 1},
    "SCS-H (scenario trace)": {"staleness": "trace", "trace": "11111111,10010010,01001001,00100100,10010010,01001001"},
}
SHAPES = [(2, 16), (2, 64), (2, 256), (3, 16), (3, 256)]


def sent(**args) -> int:
    job = gnn_cagnet(dataset="reddit", gpus=8, epochs=6, scale=0.1, **args)
    return sum(f.size for f in job.flows)


def share_table() -> str:
    head = "| layers | hidden | " + " | ".join(VARIANTS) + " |"
    lines = [head, "|" + " --- |" * (2 + len(VARIANTS))]
    for layers, hidden in SHAPES:
        base = sent(layers=layers, hidden=hidden)
        cells = [f"{sent(layers=layers, hidden=hidden, **v) / base:.3f}" for v in VARIANTS.values()]
        lines.append(f"| {layers} | {hidden} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def measured(directory) -> str:
    """Each run's communication (the summed coflow times) over CAGNET's, and CAGNET's compute over
    its communication (the makespan minus the communication: stages are bulk synchronous)."""
    from pathlib import Path

    from railbed.metrics import metric
    from railbed.results import RunResult

    d = Path(directory)
    runs = {p.parent.name: RunResult.load(p) for p in sorted(d.glob("*/result.json"))}
    base = runs["cagnet"]
    comm = metric(base, "cct_sum")
    lines = [f"{d.name}: CAGNET compute / communication {(base.makespan - comm) / comm:.3f}"]
    lines += [f"  {label}: communication over CAGNET's {metric(r, 'cct_sum') / comm:.3f}" for label, r in runs.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print("\n".join(measured(d) for d in sys.argv[1:]) if len(sys.argv) > 1 else share_table())
