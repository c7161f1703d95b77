"""What AdaGL's search does on a generated graph: ``python -m scenarios.adagl.search [DATASET] [--scale 0.2]``.

Prints the coarsening's levels, the cut and imbalance (against capacities 6, 6, 12, 12) of each of
Alg. 2's initial samples for Table V's coefficients, projected to the input graph, and Alg. 1's
best objective per generation (docs/adagl.md reads it).
"""

from __future__ import annotations

import argparse

import numpy as np

from workloads.adagl import TABLE_V, WGraph, coarsen, evolve, greedy_init, imbalance, refine
from workloads.graphs import dataset_graph
from workloads.partition import edge_cut

CAPACITY = [6, 6, 12, 12]


def report(name: str, scale: float) -> str:
    g = dataset_graph(name, scale)
    wg = WGraph(g.indptr, g.indices.astype(np.int64), np.ones(len(g.indices)), np.ones(g.n), g.train.astype(float))
    co = coarsen(wg)
    lines = [f"{name} at scale {scale:g}: coarsening levels {[x.n for x in co.graphs]} nodes"]
    for coef in TABLE_V:
        full = refine(co, greedy_init(co.graphs[-1], 4, CAPACITY, coef), 4, CAPACITY)
        lines.append(f"  Alg. 2 with {coef}: cut {edge_cut(g, full):.3f}, "
                     f"imbalance {imbalance(full, np.ones(g.n), 4, CAPACITY):.3f}")  # fmt: skip
    best, trace = evolve(co.graphs[-1], 4, CAPACITY, 1e-3, 1e-7, 1000)
    full = refine(co, best, 4, CAPACITY)
    imb = imbalance(full, np.ones(g.n), 4, CAPACITY)
    lines.append(f"  Alg. 1: best f {trace[0]:.4f} at generation 0, {trace[-1]:.4f} after {len(trace) - 1}; "
                 f"cut {edge_cut(g, full):.3f}, imbalance {imb:.3f}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default="ogbn-arxiv")
    ap.add_argument("--scale", type=float, default=0.2)
    args = ap.parse_args()
    print(report(args.dataset, args.scale))
