"""How much room each paper's main scenarios leave a scheduler: the analysis (railbed/analysis.py,
docs/analysis.md) of the baseline's simulated run, one row per scenario, generated from the runs.

For every row: what ran (scenario, baseline scheduler, GPUs, the generator's layers, microbatches
and iterations or requests, any override), then the makespan, the network-free makespan,
``max_speedup``, ``exposed_comm_fraction`` with the critical path's split, the coflow overlap
(nonzero pairs) and contention. Markdown on stdout, the analyses as JSON with ``--json``.

    python bench/analysis_baselines.py            # the scenarios as their files give them
    python bench/analysis_baselines.py --quick    # shrunk where a run is long (the row says how)
    python bench/analysis_baselines.py --full     # also Mixtral-8x22B at 1024 GPUs (compact engine)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (paper, scenario, baseline, overrides of the scenario's job args (full, quick), engine)
ROWS = [
    ("Hermod", "hermod/testbed-gpt3-sim.yaml", "megatron", ({}, {"iterations": 1}), "numba"),
    ("Hermod", "hermod/testbed-mixtral-sim.yaml", "megatron", ({}, {"iterations": 1}), "numba"),
    ("Hermod", "hermod/testbed-qwen-sim.yaml", "megatron", ({}, {"iterations": 1}), "numba"),
    ("Hermod", "hermod/table52-sim.yaml", "megatron", ({}, {"iterations": 1}), "numba"),
    (
        "DGTP",
        "dgtp/testbed-products.yaml",
        "distdgl",
        ({"iterations": 5}, {"iterations": 2, "max_edges": 50000}),
        "numba",
    ),
    ("DGTP", "dgtp/sim-products.yaml", "distdgl", ({"iterations": 5}, {"iterations": 2, "max_edges": 50000}), "numba"),
    ("LEO", "leo/kvs.yaml", "acc-only", ({"requests": 3000}, {"requests": 800}), "numba"),
    ("LEO", "leo/kvs.yaml", "cpu-only", ({"requests": 3000}, {"requests": 800}), "numba"),
    ("DGCL", "dgcl/dgx1-reddit.yaml", "p2p", ({}, {"max_edges": 200000}), "numba"),
    ("DGCL", "dgcl/testbed-dgx1x2-web-google.yaml", "p2p", ({}, {}), "numba"),
]
FULL = [("Hermod", "hermod/full/sim-1024-mixtral-8x22b-100g.yaml", "megatron", ({}, {}), "compact")]
LOADS = {"leo/kvs.yaml": [90_000_000]}  # one offered load: the claims' (leo@9e+07)


def run_row(paper: str, scenario: str, baseline: str, args: dict, engine: str) -> dict:
    from railbed.backend import backend
    from railbed.safeload import load_yaml_file
    from scenarios.runner import Scenario, simulate_scenario

    path = ROOT / "scenarios" / scenario
    data = copy.deepcopy(load_yaml_file(path, str(path)))
    data["job"]["args"].update(args)
    if scenario in LOADS:
        data["loads"] = LOADS[scenario]
    data["schedulers"] = [baseline]
    arrays = "always" if backend(engine).capabilities.array_jobs else False  # the rules engine's array jobs
    sc = Scenario.from_dict(data, base=path.parent, arrays=arrays)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        (result,) = simulate_scenario(sc, Path(tmp) / "out", echo=lambda _: None, backend=engine, plots=False)
    ja = data["job"]["args"]
    what = {
        "GPUs": sum(s.gpus for s in sc.cluster.servers),
        **{
            k: ja[k]
            for k in ("model", "layers", "microbatches", "iterations", "requests", "dataset", "max_edges")
            if k in ja
        },  # fmt: skip
    }
    return dict(paper=paper, scenario=scenario, scheduler=result.scheduler, engine=engine, what=what,
                overrides=args, makespan=result.makespan, analysis=result.analysis,
                wall=time.perf_counter() - t0)  # fmt: skip


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def table(rows: list[dict]) -> str:
    out = [
        "| paper | scenario | baseline | what ran | makespan | network-free | max_speedup | exposed comm "
        "(critical path) | overlap (share of makespan on a common port) | contention |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        a = r["analysis"]
        cp = a.get("critical_path") or {}
        split = ", ".join(f"{k} {100 * v / cp['length']:.0f}%" for k, v in cp.get("time", {}).items() if v > 0)
        ov = a.get("overlap") or {}
        types = ov.get("types", [])
        pairs = [(a2, b2, ov["share"][a2][b2]) for i, a2 in enumerate(types) for b2 in types[i:]]
        overlap = ", ".join(f"{x}/{y} {100 * v:.1f}%" for x, y, v in pairs if v > 0)
        zero = len([p for p in pairs if p[2] == 0])
        if not pairs:
            overlap = "no network flows"
        elif zero:
            overlap = overlap + f"; {zero} other pairs 0" if overlap else f"{zero} pairs, all 0"
        what = ", ".join(f"{k} {v}" for k, v in r["what"].items())
        speed = a.get("max_speedup")
        out.append(
            f"| {r['paper']} | {r['scenario']} | {r['scheduler']} | {what} | {r['makespan'] * 1e3:.4g} ms | "
            f"{(a.get('network_free_makespan') or 0) * 1e3:.4g} ms | "
            f"{'n/a' if speed is None else f'{speed:.3f}x'} | {pct(a.get('exposed_comm_fraction'))} ({split}) | "
            f"{overlap} | {pct((a.get('contention') or {}).get('share'))} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shrink the long runs (each row says what ran)")
    ap.add_argument("--full", action="store_true", help="also the 1024-GPU Mixtral-8x22B scenario (compact engine)")
    ap.add_argument("--json", type=Path, help="write the rows (with the whole analyses) here")
    ap.add_argument("--only", help="rows whose scenario contains this")
    opts = ap.parse_args()
    rows = []
    for paper, scenario, baseline, (full, quick), engine in ROWS + (FULL if opts.full else []):
        if opts.only and opts.only not in scenario:
            continue
        rows.append(run_row(paper, scenario, baseline, quick if opts.quick else full, engine))
        print(f"{scenario} {baseline}: {rows[-1]['wall']:.1f} s", file=sys.stderr, flush=True)
    flags = " ".join(f for f, on in (("--quick", opts.quick), ("--full", opts.full)) if on)
    only = f" --only {opts.only}" if opts.only else ""
    print(f"Generated by `python bench/analysis_baselines.py {flags}{only}`; simulated, baseline schedulers.\n")
    print(table(rows))
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
