"""LEO's request streams on the emulator: up to which real request rate do emulated latencies agree
with the simulator's? (root; run under ``flock /tmp/railbed-emu.lock``)

    flock /tmp/railbed-emu.lock /opt/railbed/venv/bin/python bench/bench_leo_emulated.py [--out FILE]

KVS YCSB-C (two round trips, four messages per request) on the off-path F-NIC hosts of
``scenarios/leo/cluster-f-nic-off-path.yaml`` at k = 1000, single path (``acc-only``, so both
backends take the same paths), ``--requests`` requests per offered load. The real request rate is
the model load / k. For each load: the median and p99 request latency on both backends (model
time) and their relative difference; "agrees" when the medians are within ``--tolerance``. Each
message is its own TCP connection today (no persistent connections yet). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.runtime import run  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from railbed.errors import RunFailed  # noqa: E402
from railbed.metrics import request_latencies  # noqa: E402
from railbed.results import percentile  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from schedulers import by_name  # noqa: E402
from simulator import simulate  # noqa: E402
from workloads.requests import requests  # noqa: E402

CLUSTER = Path(__file__).resolve().parent.parent / "scenarios" / "leo" / "cluster-f-nic-off-path.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--k", type=float, default=1000.0)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--loads", default="1e5,3e5,1e6,3e6,1e7", help="model requests/s, comma-separated")
    args = ap.parse_args()
    spec = ClusterSpec.load(CLUSTER)
    rows = []
    with Testbed(spec, scale=args.k) as tb:
        for load in (float(x) for x in args.loads.split(",")):
            job = requests("kvs-c", load=load, requests=args.requests, seed=5)
            sim = request_latencies(simulate(job, by_name("acc-only"), spec))
            try:
                emu_run = run(job, by_name("acc-only"), tb, timeout=110)
            except RunFailed as exc:  # too fast for the agents: say so and go on
                row = {"model_load_rps": load, "real_rps": load / args.k, "failed": str(exc)[:300], "agrees": False}
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            emu = request_latencies(emu_run)
            s50, e50 = percentile(sim, 50), percentile(emu, 50)
            row = {
                "model_load_rps": load,
                "real_rps": load / args.k,
                "answered": len(emu),
                "sim_p50_s": s50,
                "emu_p50_s": e50,
                "sim_p99_s": percentile(sim, 99),
                "emu_p99_s": percentile(emu, 99),
                "p50_rel": e50 / s50 - 1,
                "fidelity_ok": bool(emu_run.fidelity_report.get("ok", True)),
            }
            row["agrees"] = row["answered"] == args.requests and abs(row["p50_rel"]) <= args.tolerance
            rows.append(row)
            print(json.dumps(row), flush=True)
    agreeing = [r["real_rps"] for r in rows if r["agrees"]]
    out = {"k": args.k, "requests": args.requests, "tolerance": args.tolerance, "rows": rows}
    out["highest_agreeing_real_rps"] = max(agreeing) if agreeing else None
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
