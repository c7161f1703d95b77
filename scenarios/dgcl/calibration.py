"""Why the DGX-1 model overstates DGCL's gain over peer-to-peer: the issue's candidate causes, measured.

``python -m scenarios.dgcl.calibration [--write] [--readme docs/dgcl-notes.md]``
prints (and with ``--write`` stores in ``calibration.yaml`` beside this
file, under ``model``; with ``--readme`` writes the stored summary as the
table between that page's calibration markers) the stage cost model's numbers (DGCL §5.1: the plan's stages,
each as long as its slowest physical hop) for one graphAllgather of
feature size 128 on 8 GPUs, for each graph of Table 4 (generated with
:mod:`workloads.gnn_fullgraph`), under the unchanged model and under each
candidate alone. The paper's numbers are in the same file under ``paper``;
``tests/test_dgcl_calibration.py`` recomputes the model's and checks them
against the paper's.

Numbers per graph and variant: ``p2p_over_dgcl`` (peer-to-peer time / SPST
time on the DGX-1, §7.2's 4.45x average, 7.04x at most), ``nvlink_ms`` and
``others_ms`` (peer-to-peer's time on the NVLink pairs alone and on the
other pairs alone, Table 2), ``dgcl_ms`` (Table 7's DGCL time), and the
same two times on the 8-GPU PCIe box (``pcie_p2p_ms``, ``pcie_dgcl_ms``,
Table 6).

Candidates (the issue's, one at a time; each a parameter here, not a
change of the presets):
``latency``     a fixed cost per stage (kernel launches, the ready/done flag
                handshake of §6): ``LATENCY`` s added to every non-empty
                stage; peer-to-peer has one stage, SPST up to 7.
``qpi``         QPI contention too harsh: QPI's bandwidth times 2
                (Table 3's values are lost from our copy of the paper; the
                factor says what a QPI that many GPUs share at a higher
                aggregate rate would change).
``pcie_switch`` the DGX-1's PCIe switch sharing: each switch's uplink to
                its CPU twice as fast (as if its two GPUs did not share it).
``metis``       requirement sets closer to METIS partitions of real graphs:
                generated graphs with ``locality`` 0.95 instead of 0.8 and
                partitioned by METIS (pymetis).
``calibrated``  all that the paper's micro-measurements support, together:
                ``latency``, ``metis``, and QPI times ``QPI_FIT`` = 1.3, the
                gain that brings the PCIe box's peer-to-peer times of the two
                dense graphs (Table 6: Reddit 17.9 ms, Com-Orkut 179 ms) to
                the paper's (1.25 leaves them 10 % and 3 % slow, 1.4 makes
                them 2 % and 8 % fast); dense graphs because their
                requirement sets hardly depend on the partition. Nothing here
                is fitted to §7.2's ratios, which the test then compares.
``nvlink_half`` not one of the issue's candidates, and not supported by a
                measurement we can fit: ``calibrated`` with every NVLink at
                half its Table 1 speed (Table 2's peer-to-peer NVLink times
                are 1.4-2.8x the model's if Table 2's GCN layer moves twice
                feature-128's bytes, e.g. hidden 256 of Table 4, which the
                paper does not say), to show what the rest of the gap needs.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from hwmodels.dgcl import Plan, comm_topology, peer_to_peer, plan_cost, spst, stage_times
from hwmodels.graph import IntraHostGraph, load_preset
from workloads.gnn_fullgraph import requirements

HERE = Path(__file__).resolve().parent
DATA = HERE / "calibration.yaml"
GRAPHS = ("web-google", "reddit", "wiki-talk", "com-orkut")
LATENCY = 50e-6  # s per stage: our choice (a few kernel launches and a flag round trip over PCIe)
QPI_FIT = 1.3  # fitted to Table 6's peer-to-peer times of Reddit and Com-Orkut on the PCIe box (below)
VARIANTS = {  # name: (latency s per stage, QPI gain, PCIe-switch uplink gain, METIS-like sets, NVLink gain)
    "model": (0.0, 1.0, 1.0, False, 1.0),
    "latency": (LATENCY, 1.0, 1.0, False, 1.0),
    "qpi": (0.0, 2.0, 1.0, False, 1.0),
    "pcie_switch": (0.0, 1.0, 2.0, False, 1.0),
    "metis": (0.0, 1.0, 1.0, True, 1.0),
    "calibrated": (LATENCY, QPI_FIT, 1.0, True, 1.0),
    "nvlink_half": (LATENCY, QPI_FIT, 1.0, True, 0.5),
}
MAX_EDGES = 500_000  # scale of the generated graphs (each vertex then stands for E / 500k real ones)
LABELS = {  # the calibration table's rows (docs/dgcl-notes.md)
    "model": "Table 1 speeds, locality 0.8 (as the runs use)",
    "latency": "+ 50 us per stage (launch, flag handshake)",
    "qpi": "QPI twice as fast (contention too harsh)",
    "pcie_switch": "PCIe switch uplinks not shared",
    "metis": "METIS-like requirement sets (locality 0.95, METIS)",
    "calibrated": "calibrated: 50 us, METIS-like, QPI x 1.3 (fitted to Table 6's dense graphs)",
    "nvlink_half": "calibrated, and NVLink at half speed (a hypothesis, not fitted)",
}
BEGIN, END = "<!-- calibration:begin -->", "<!-- calibration:end -->"


def graph_of(name: str, variant: str) -> dict:
    metis = VARIANTS[variant][3]
    return {
        "dataset": name, "gpus": 8, "max_edges": MAX_EDGES, "locality": 0.95 if metis else 0.8,
        "partitioner": "metis" if metis else "contiguous", "seed": 0, "hidden": 128,
    }  # fmt: skip


def hardware(preset: str, variant: str) -> IntraHostGraph:
    graph = load_preset(preset)
    _, qpi, uplink, _, nvl = VARIANTS[variant]
    kinds = graph.node_types
    links = []
    for lk in graph.links:
        if lk.kind == "nvlink":
            lk = replace(lk, bandwidth=lk.bandwidth * nvl)
        if lk.kind == "qpi":
            lk = replace(lk, bandwidth=lk.bandwidth * qpi)
        if {kinds[lk.a], kinds[lk.b]} == {"pcie_switch", "cpu"}:
            lk = replace(lk, bandwidth=lk.bandwidth * uplink)
        links.append(lk)
    return IntraHostGraph(graph.name, graph.node_types, links, graph.meta)


def plan_time(topo, plan: Plan, req, latency: float) -> float:
    """The cost model's time of ``plan``, plus ``latency`` per non-empty stage."""
    times = stage_times(topo, plan, req)
    used = np.zeros(len(times), dtype=bool)
    used[np.unique(plan.stage)] = True
    return float(times.sum() + latency * used.sum())


def by_link_class(graph: IntraHostGraph, topo, plan: Plan, req) -> tuple[float, float]:
    """Peer-to-peer's time on the NVLink pairs alone and on the other pairs alone (Table 2)."""
    nvlink = np.array([graph.links[h // 2].kind == "nvlink" for h in range(len(topo.capacity))])
    direct = np.array([all(nvlink[h] for h, _ in topo.hops(a, b)) for a, b in zip(plan.src, plan.dst)])
    out = []
    for keep in (direct, ~direct):
        sub = Plan(plan.vertex[keep], plan.stage[keep], plan.src[keep], plan.dst[keep])
        out.append(plan_cost(topo, sub, req))
    return out[0], out[1]


def measure(name: str, variant: str) -> dict[str, float]:
    req = requirements(graph_of(name, variant))
    latency = VARIANTS[variant][0]
    out: dict[str, float] = {}
    for preset, prefix in (("dgx1-v100", ""), ("pcie8", "pcie_")):
        graph = hardware(preset, variant)
        topo = comm_topology(graph)
        p2p = peer_to_peer(req)
        plan, _ = spst(topo, req)
        p2p_t, dgcl_t = plan_time(topo, p2p, req, latency), plan_time(topo, plan, req, latency)
        out[f"{prefix}p2p_ms"] = p2p_t * 1e3
        out[f"{prefix}dgcl_ms"] = dgcl_t * 1e3
        if not prefix:
            out["p2p_over_dgcl"] = p2p_t / dgcl_t
            nv, others = by_link_class(graph, topo, p2p, req)
            out["nvlink_ms"], out["others_ms"] = (nv + latency) * 1e3, (others + latency) * 1e3
    return {k: round(float(v), 4) for k, v in sorted(out.items())}


def measure_all(variants=VARIANTS, graphs=GRAPHS) -> dict[str, dict[str, dict[str, float]]]:
    return {v: {g: measure(g, v) for g in graphs} for v in variants}


def load() -> dict:
    return yaml.safe_load(DATA.read_text())


def summary(model: dict) -> dict[str, dict[str, float]]:
    """Per variant: mean and max of p2p / DGCL over the graphs (§7.2's two numbers)."""
    out = {}
    for variant, graphs in model.items():
        ratios = [g["p2p_over_dgcl"] for g in graphs.values()]
        out[variant] = {"mean": round(float(np.mean(ratios)), 3), "max": round(float(np.max(ratios)), 3)}
    return out


def table(doc: dict) -> str:
    """The docs' calibration table: mean / max of peer-to-peer over DGCL on the DGX-1 per variant (the
    stored ``summary``), then §7.2's."""
    rows = ["| model | mean | max |", "| --- | --- | --- |"]
    rows += [f"| {LABELS[v]} | {s['mean']:.1f}x | {s['max']:.1f}x |" for v, s in doc["summary"].items()]
    paper = doc["paper"]["p2p_over_dgcl_dgx1"]
    rows.append(f"| paper (§7.2) | {paper['mean']:g}x | {paper['max']:g}x |")
    return "\n".join(rows)


def write_readme(path: Path, doc: dict) -> None:
    """Replace the table between ``BEGIN`` and ``END`` in ``path`` by :func:`table`."""
    head, rest = path.read_text().split(BEGIN)
    path.write_text(f"{head}{BEGIN}\n{table(doc)}\n{END}{rest.split(END)[1]}")


def main(argv: list[str]) -> None:
    model = measure_all()
    for variant, graphs in model.items():
        for name, row in graphs.items():
            print(f"{variant:12s} {name:11s} " + "  ".join(f"{k} {v:.3g}" for k, v in row.items()))
    print(yaml.safe_dump(summary(model), sort_keys=False))
    if "--write" in argv:
        DATA.write_text(
            DATA.read_text().split("\nmodel:")[0].rstrip()
            + "\n"
            + yaml.safe_dump({"model": model}, sort_keys=False)
            + yaml.safe_dump({"summary": summary(model)}, sort_keys=False)
        )
    if "--readme" in argv:
        write_readme(Path(argv[argv.index("--readme") + 1]), load())


if __name__ == "__main__":
    main(sys.argv[1:])
