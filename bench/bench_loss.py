"""How often the fidelity report's loss verdict says the same thing on the same case (needs root).

    sudo /opt/railbed/venv/bin/python bench/bench_loss.py [--runs 10] [--k 200]

The two cases of ``tests/emulation/test_loss_verdict.py`` (imported from it, so the bench
measures exactly what the test asserts on): the issue's cross-rail all-to-all over 25 Gbit/s
uplinks (built to lose packets; under the test's bbr unless ``--tcp``) and a chain of lone flows
(clean, cubic). Each run builds a fresh testbed per case (TCP caches nothing from an earlier
run), FIFO; one row per run and case
with the verdict's numbers, then per case how many runs were flagged. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator.runtime import run  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from schedulers import SchedulerSpec, make  # noqa: E402


def _cases():
    spec = importlib.util.spec_from_file_location("loss_cases", ROOT / "tests" / "emulation" / "test_loss_verdict.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(name: str, i: int, makespan: float, loss: dict, cpu: float) -> str:
    excess = loss["excess_over_fluid"]
    cells = [
        name,
        str(i),
        f"{makespan * 1e3:.3f} ms",
        f"{(loss['fluid_makespan'] or 0) * 1e3:.3f} ms",
        "-" if excess is None else f"{100 * excess:+.1f} %",
        str(loss["drops"]),
        f"{100 * loss['resent_share']:.2f} %",
        str(loss["timeouts"]),
        f"{100 * loss['stall_floor_share']:.2f} %",
        f"{100 * cpu:.0f} %",
        "yes" if loss["flagged"] else "no",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--k", type=float, default=None, help="scale factor (default: the test's)")
    ap.add_argument("--tcp", default=None, help="congestion control of the lossy case (default: the test's)")
    args = ap.parse_args()
    cases = _cases()
    k = args.k or cases.K
    tcps = {"lossy": args.tcp or cases.LOSSY_TCP, "clean": "cubic"}
    print(f"loss verdict, {args.runs} runs per case, k = {k:g}, {cases.CLUSTER.name}, fifo, TCP {tcps}")
    print("| case | run | makespan | fluid | excess | drops | resent | timeouts | floor share | CPU | flagged |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    flagged: dict[str, list[bool]] = {"lossy": [], "clean": []}
    for i in range(args.runs):
        for name, job in {"lossy": cases.lossy_job(), "clean": cases.chain()}.items():
            with Testbed(cases.CLUSTER, scale=k, tcp=tcps[name]) as tb:
                res = run(job, make(SchedulerSpec("fifo")), tb)
                loss = res.fidelity_report["loss"]
                flagged[name].append(loss["flagged"])
                print(_row(name, i + 1, res.makespan, loss, res.fidelity_report["cpu_mean"]), flush=True)
    for name, marks in flagged.items():
        print(f"{name}: flagged in {sum(marks)} of {len(marks)} runs")


if __name__ == "__main__":
    main()
