"""The share of CAGNET's bytes each SANCUS variant still sends, by model shape (docs/sancus.md).

``python -m scenarios.sancus.shares`` prints, for Reddit on 8 GPUs over 6
epochs, the bytes every variant's job sends (all flows: broadcasts and
all-reduces) over CAGNET's, for hidden sizes and layer counts the seed does
not fix. When broadcasts take time in proportion to their bytes (one
server, nothing else on the links: what ``tests/test_sancus.py`` checks),
this share is the communication ratio Table 5 reports; the measured rows
of ``railbed reproduce sancus`` sit beside it.
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


if __name__ == "__main__":
    print(share_table())
