"""DGCL (seed 002): the calibration's command, and its tables in docs/dgcl.md.

``python -m scenarios.dgcl.calibration [--write] [--audit] [--doc docs/dgcl.md]``
computes the model's numbers (:mod:`scenarios.dgcl.calibration_model`: one graphAllgather
of feature size 128 on 8 GPUs per graph of Table 4 and variant, timed as the runs time
it), and with ``--write`` stores them under ``model``, ``derived``, ``summary`` and
``attribution`` in ``calibration.yaml``, with ``--write`` or ``--audit`` the audit's
sensitivities and cross-checks under ``audit``; with ``--doc`` writes the stored
tables into that file's ``calibration:begin/end`` block and its
``calibration-<name>:begin/end`` blocks (``AUDIT_TABLES``). The tables are rendered
from the stored ``calibration.yaml`` alone, never recomputed.

What each variant and derived number is, and the audit's pieces:
:mod:`scenarios.dgcl.calibration_model`, whose names the tests take from here (``__all__``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from scenarios.dgcl.calibration_model import (
    DATA,
    GRAPHS,
    HERE,
    T7_FEATURE,
    TABLE1_QPI,
    VARIANTS,
    attribution,
    audit,
    compute_from_table5,
    crossing,
    derive,
    derive_qpi,
    dgcl_links,
    epoch_ms,
    fig8_4gpus,
    gathers_ms,
    load,
    measure,
    measure_all,
    near_range,
    others_over_nvlink,
    summary,
    swap_rates,
    tables_2_and_7,
    with_near,
)

# the model's names the tests and users take from here, as before the split by concern
__all__ = [
    "HERE",
    "TABLE1_QPI",
    "compute_from_table5",
    "crossing",
    "derive_qpi",
    "dgcl_links",
    "epoch_ms",
    "fig8_4gpus",
    "gathers_ms",
    "measure",
    "near_range",
    "others_over_nvlink",
    "swap_rates",
    "tables_2_and_7",
    "with_near",
]
BEGIN, END = "<!-- calibration:begin -->", "<!-- calibration:end -->"


def table(doc: dict) -> str:
    """The ratio table: per variant, p2p / DGCL on the DGX-1 per graph with mean and max, and the PCIe
    box's p2p / DGCL and swap / DGCL per graph; then the paper's."""
    head = "| model | " + " | ".join(f"DGX-1 {g}" for g in GRAPHS) + " | mean | max | PCIe p2p/DGCL | PCIe swap/DGCL |"
    rows = [head, "|" + " --- |" * (len(GRAPHS) + 5)]
    for variant, graphs in doc["model"].items():
        s = doc["summary"][variant]
        dgx = " | ".join(f"{graphs[g]['p2p_over_dgcl']:.1f}x" for g in GRAPHS)
        pcie = " / ".join(f"{graphs[g]['pcie_p2p_over_dgcl']:.2f}" for g in GRAPHS)
        swap = " / ".join(f"{graphs[g]['pcie_swap_over_dgcl']:.1f}" for g in GRAPHS)
        rows.append(f"| {VARIANTS[variant].label} | {dgx} | {s['mean']:.1f}x | {s['max']:.1f}x | {pcie} | {swap} |")
    p = doc["paper"]
    t6 = p["table6_pcie_ms"]
    pcie = " / ".join(f"{t6[g]['p2p'] / t6[g]['dgcl']:.2f}" for g in GRAPHS)
    swap = " / ".join(f"{t6[g]['swap'] / t6[g]['dgcl']:.1f}" for g in GRAPHS)
    mean, top = p["p2p_over_dgcl_dgx1"]["mean"], p["p2p_over_dgcl_dgx1"]["max"]
    rows.append(f"| paper | {' | '.join('-' for _ in GRAPHS)} | {mean:g}x | {top:g}x | {pcie} | {swap} |")
    return "\n".join(rows)


def attribution_table(doc: dict) -> str:
    keys = ("ratio", "dgcl_model_over_table7", "ratio_with_paper_dgcl", "others_model_over_table2",
            "pcie_dgcl_model_over_table6", "pcie_swap_model_over_table6")  # fmt: skip
    rows = ["| graph | " + " | ".join(keys) + " |", "|" + " --- |" * (len(keys) + 1)]
    for name, a in doc["attribution"].items():
        rows.append(f"| {name} | " + " | ".join(f"{a[k]:g}" if k in a else "-" for k in keys) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------ the audit's tables (docs/dgcl.md)
def _f(x, fmt: str = ".2f", unit: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{unit}"


def _rows(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    )


def near_table(doc: dict) -> str:
    derived, p = doc["derived"], doc["paper"]
    of = {v: g for g, v in derived["near"].items() if v is not None}
    rows = []
    for r in doc["audit"]["near_com_orkut"]:
        label = (
            "uniform (3/7, the default)"
            if r["near"] is None
            else f"{r['near']:.3f}" + (f" ({of[r['near']]})" if r["near"] in of else "")
        )
        rows.append(
            [
                label,
                _f(r["ratio"], ".2f", "x"),
                _f(r["mean"], ".2f", "x"),
                _f(r["max"], ".2f", "x"),
                _f(r["pcie_p2p_over_dgcl"]),
                _f(r["pcie_swap_over_dgcl"]),
                _f(r["pcie_dgcl_ms"], ".1f"),
            ]
        )
    t6, ref = p["table6_pcie_ms"]["com-orkut"], p["p2p_over_dgcl_dgx1"]
    rows.append(
        [
            "paper",
            "-",
            f"{ref['mean']:g}x",
            f"{ref['max']:g}x",
            f"{t6['p2p'] / t6['dgcl']:.2f}",
            f"{t6['swap'] / t6['dgcl']:.2f}",
            f"{t6['dgcl']:g}",
        ]
    )
    head = [
        "Com-Orkut near",
        "DGX-1 p2p/DGCL (Com-Orkut)",
        "mean of 4 graphs",
        "max of 4 graphs",
        "PCIe p2p/DGCL",
        "PCIe swap/DGCL",
        "PCIe DGCL ms",
    ]
    return _rows(head, rows)


def tables_2_7_table(doc: dict) -> str:
    p, implied = doc["paper"], doc["audit"]["tables_2_and_7"]
    rows = []
    for g, r in implied.items():
        sz = p["table4_sizes"][g]
        rows.append(
            [
                g,
                _f(max(p["table2_p2p_ms"][g].values()), "g"),
                _f(max(p["table7_dgcl_ms"][g].values()), "g"),
                f"{r['hidden']:.2f}x ({sz['hidden']})",
                f"{r['input']:.2f}x ({sz['feature']})",
                f"{r['same']:.2f}x",
            ]
        )
    mean = {k: sum(r[k] for r in implied.values()) / len(implied) for k in ("hidden", "input", "same")}
    rows.append(["mean", "-", "-", f"{mean['hidden']:.2f}x", f"{mean['input']:.2f}x", f"{mean['same']:.2f}x"])
    rows.append(
        [
            "paper §7.1",
            "-",
            "-",
            f"mean {p['p2p_over_dgcl_dgx1']['mean']:g}x, max {p['p2p_over_dgcl_dgx1']['max']:g}x",
            "",
            "",
        ]
    )
    head = [
        "graph",
        "Table 2 p2p, slower link (ms)",
        "Table 7 DGCL, slower link (ms)",
        "implied p2p/DGCL, Table 2 at the hidden size",
        "at the input feature size",
        f"at {T7_FEATURE} (Table 7's)",
    ]
    return _rows(head, rows)


def dgcl_links_table(doc: dict) -> str:
    rows = []
    for g, r in doc["audit"]["dgcl_links"].items():
        a = doc["attribution"][g]
        per6 = a["dgcl_model_over_table7"] / a["pcie_dgcl_model_over_table6"]
        rows.append(
            [
                g,
                f"{r['nvlink_ms']:.3f} / {r['table7_nvlink_ms']:g}",
                f"{r['others_ms']:.3f} / {r['table7_others_ms']:g}",
                f"{r['nvlink_over_table7']:.2f} / {r['others_over_table7']:.2f}",
                f"{r['bytes_max_factor']:.2f}",
                f"{r['nvlink_rate_max']:.2f}",
                f"{per6:.2f}",
            ]
        )
    head = [
        "graph",
        "NVLink hops: model / Table 7 (ms)",
        "other hops: model / Table 7 (ms)",
        "model / Table 7 (NVLink / others)",
        "bytes at most x (every GPU needs every vertex)",
        "NVLink rate at most (x Table 1)",
        "model / Table 7 over model / Table 6 (PCIe box)",
    ]
    return _rows(head, rows)


def locality_table(doc: dict) -> str:
    p, rows = doc["paper"], []
    for g, s in doc["audit"]["locality"].items():
        t6 = p["table6_pcie_ms"][g]
        for loc, r in s["rows"].items():
            rows.append(
                [
                    g,
                    f"{float(loc):.2f}",
                    _f(r["pcie_dgcl_ms"]),
                    _f(r["rf1"]),
                    _f(r["p2p_over_dgcl"], ".1f", "x"),
                    _f(r["pcie_p2p_over_dgcl"]),
                    _f(r["pcie_swap_over_dgcl"], ".1f"),
                ]
            )
        rows.append(
            [
                f"{g}: Table 6",
                f"{_f(s['implied_locality'], '.3f')} (implied)",
                f"{t6['dgcl']:g}",
                "-",
                "-",
                f"{t6['p2p'] / t6['dgcl']:.2f}",
                f"{t6['swap'] / t6['dgcl']:.1f}",
            ]
        )
    head = ["graph", "locality", "PCIe DGCL ms", "one-layer rf", "DGX-1 p2p/DGCL", "PCIe p2p/DGCL", "PCIe swap/DGCL"]
    return _rows(head, rows)


def epoch_table(doc: dict) -> str:
    p, rows = doc["paper"], []
    for g, r in doc["audit"]["epoch"].items():
        ok = r["compute16_ms"] > 0
        pair = lambda k, r=r, ok=ok: f"{r['paper_' + k]:.2f}x / {r['runs_' + k]:.2f}x" if ok else "- (compute < 0)"  # noqa: E731
        rows.append(
            [
                g,
                f"{r['table5_ms']:g}",
                f"{r['comm16_dgcl_ms']:.1f}",
                f"{r['compute16_ms']:.2f} / {r['compute8_ms']:.2f}",
                pair("epoch_p2p"),
                pair("epoch_swap"),
                pair("fig8_16"),
            ]
        )
    e, f8 = p["epoch_over_dgcl_dgx1"], p["fig8"]["p2p_over_dgcl_epoch_16"]
    rows.append(
        ["paper", "-", "-", "-", f"{e['p2p']:g}x (all graphs, 3 models)", f"{e['swap']:g}x", f"{f8:g}x (Reddit)"]
    )
    head = [
        "graph",
        "Table 5 DGCL epoch, 16 GPUs (ms)",
        "model's DGCL communication in it (ms)",
        "compute per layer, 16 / 8 GPUs (ms)",
        "epoch p2p/DGCL, 8 GPUs (paper's gathers / runs')",
        "epoch swap/DGCL, 8 GPUs",
        "Fig. 8, 16 GPUs p2p/DGCL epoch",
    ]
    return _rows(head, rows)


def fig8_4_table(doc: dict) -> str:
    r = doc["audit"]["fig8_4gpus"]
    head = [
        "4 GPUs (Fig. 8, Reddit)",
        "p2p/DGCL at Table 1's NV2",
        "NV2 rate under DGCL's plan for 1.00x (x Table 1)",
        "paper",
    ]
    return _rows(
        head, [["calibrated model", f"{r['ratio_table1']:.2f}x", f"{r['nv2_for_target']:.3f}", "1.00x (identical)"]]
    )


def swap_table(doc: dict) -> str:
    rows, t4 = [], doc["paper"]["table4_graphs_m"]
    for g, r in doc["audit"]["swap"].items():
        rf = doc["model"]["calibrated"][g]["rf1"]
        rows.append(
            [
                g,
                f"{t4[g]['vertices']:g} / {t4[g]['edges']:g}",
                f"{rf:.2f}",
                f"{r['bytes_per_vertex']:,} ({round(4 * T7_FEATURE * rf):,})",
                f"{r['model_ns_per_vertex']:.0f} ({r['model_gbps']:.1f} GB/s)",
                f"{r['paper_ns_per_vertex']:.0f} ({r['paper_gbps']:.1f} GB/s)",
                f"{r['paper_ns_per_vertex'] / r['model_ns_per_vertex']:.2f}",
            ]
        )
    head = [
        "graph",
        "Table 4: vertices / edges (M)",
        "one-layer rf (model)",
        "model's swap bytes per vertex (needed rows only)",
        "model ns per vertex (rate)",
        "Table 6 ns per vertex (rate for the model's bytes)",
        "paper / model",
    ]
    return _rows(head, rows)


AUDIT_TABLES = {
    "near": near_table,
    "tables27": tables_2_7_table,
    "links": dgcl_links_table,
    "locality": locality_table,
    "epoch": epoch_table,
    "fig8-4": fig8_4_table,
    "swap": swap_table,
}


def marks(name: str) -> tuple[str, str]:
    return f"<!-- calibration-{name}:begin -->", f"<!-- calibration-{name}:end -->"


def _replace(text: str, begin: str, end: str, body: str) -> str:
    head, rest = text.split(begin)
    return f"{head}{begin}\n{body}\n{end}{rest.split(end)[1]}"


def write_doc(path: Path, doc: dict) -> None:
    """Replace the block between ``BEGIN`` and ``END`` in ``path`` by the two tables, and each audit
    block (``marks``) the file has by its table."""
    text = _replace(path.read_text(), BEGIN, END, f"{table(doc)}\n\n{attribution_table(doc)}")
    for name, render in AUDIT_TABLES.items():
        begin, end = marks(name)
        if begin in text and "audit" in doc:
            text = _replace(text, begin, end, render(doc))
    path.write_text(text)


def store(updates: dict) -> None:
    """Write ``updates`` into ``calibration.yaml``'s generated sections, keeping the others and the
    commented ``paper`` section."""
    doc = load()
    head = DATA.read_text().split("\nderived:")[0].rstrip()
    generated = {k: v for k, v in doc.items() if k != "paper"} | updates
    DATA.write_text(head + "\n" + yaml.safe_dump(generated, sort_keys=False))


def main(argv: list[str]) -> None:
    doc = load()
    derived = derive(doc["paper"]) if "--write" in argv else doc["derived"]
    model = measure_all(derived)
    for variant, graphs in model.items():
        for name, row in graphs.items():
            print(f"{variant:18s} {name:11s} " + "  ".join(f"{k} {v:.3g}" for k, v in row.items()))
    if "--write" in argv:
        store({"derived": derived, "model": model, "summary": summary(model),
               "attribution": attribution(model, doc["paper"])})  # fmt: skip
    if "--write" in argv or "--audit" in argv:
        store({"audit": audit(derived, model, doc["paper"])})
    print(yaml.safe_dump({"derived": derived, "summary": summary(model)}, sort_keys=False))
    if "--doc" in argv:
        write_doc(Path(argv[argv.index("--doc") + 1]), load())


if __name__ == "__main__":
    main(sys.argv[1:])
