"""What AdaGL's search does on a generated graph: ``python -m scenarios.adagl.search [DATASET] [--scale 0.2]``.

Prints the coarsening's levels, the cut and imbalance (against capacities 6, 6, 12, 12) of each of
Alg. 2's initial samples for Table V's coefficients, projected to the input graph, Alg. 1's best
objective with the crossover as written (``uniform``) and with the parents' servers aligned
(``aligned``), and METIS on the coarsest graph with the capacities' target weights, projected: what
a search could reach on this coarsening (docs/adagl.md reads it).
"""

from __future__ import annotations

import argparse

import numpy as np

from workloads.adagl import CROSSOVERS, TABLE_V, WGraph, coarsen, evolve, greedy_init, imbalance, refine
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
    for crossover in CROSSOVERS:
        best, trace = evolve(co.graphs[-1], 4, CAPACITY, 1e-3, 1e-7, 1000, crossover=crossover)
        full = refine(co, best, 4, CAPACITY)
        imb = imbalance(full, np.ones(g.n), 4, CAPACITY)
        lines.append(f"  Alg. 1 ({crossover}): best f {trace[0]:.4f} at generation 0, {trace[-1]:.4f} after "
                     f"{len(trace) - 1}; cut {edge_cut(g, full):.3f}, imbalance {imb:.3f}")  # fmt: skip
    full = refine(co, coarse_metis(co.graphs[-1], CAPACITY), 4, CAPACITY)
    imb = imbalance(full, np.ones(g.n), 4, CAPACITY)
    lines.append(f"  METIS on the coarsest graph: cut {edge_cut(g, full):.3f}, imbalance {imb:.3f}")
    return "\n".join(lines)


def coarse_metis(c: WGraph, capacity) -> np.ndarray:
    """METIS (pymetis) on a coarse graph: its node and edge weights, target part weights in proportion
    to ``capacity``."""
    import pymetis

    p = np.asarray(capacity, float)
    adj = pymetis.CSRAdjacency(c.indptr, c.indices)
    _, part = pymetis.part_graph(len(p), adj, vweights=np.rint(c.w).astype(np.int64).tolist(),
                                 eweights=np.maximum(1, np.rint(c.ew)).astype(np.int64).tolist(),
                                 tpwgts=(p / p.sum()).tolist())  # fmt: skip
    return np.asarray(part, np.int64)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default="ogbn-arxiv")
    ap.add_argument("--scale", type=float, default=0.2)
    args = ap.parse_args()
    print(report(args.dataset, args.scale))
