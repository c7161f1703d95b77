"""The three-way cross-check table of docs/packet.md, generated from results directories.

Reads every ``<run>/result.json`` and ``<run>/simulated.json`` under the directories given
(``railbed crosscheck --backends emulate,packet`` and ``--backends packet,fluid`` write both),
groups the results by (scenario, scheduler) and backend (each file's own ``backend`` field),
and prints, per scenario and scheduler, the makespan on each backend and, per pair of
backends, the makespan difference and the per-flow completion time difference (median and
worst of |a - b| / b over network flows, :func:`scenarios.crosscheck.compare`). Nothing is typed::

    python bench/crosscheck_table.py bench/crosscheck/*
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.backend import BACKENDS, backend  # noqa: E402
from railbed.results import RunResult, fmt_time, percentile  # noqa: E402
from scenarios.crosscheck import compare  # noqa: E402

NAMES = {"emulate": "emulated", "packet": "packet", "fluid": "fluid"}  # a backend's registered name -> its column
PAIRS = (("packet", "emulated"), ("fluid", "emulated"), ("packet", "fluid"))


def collect(dirs: list[Path]) -> dict[tuple[str, str], dict[str, RunResult]]:
    """(scenario, scheduler) -> backend name -> its result (the last directory given wins)."""
    out: dict[tuple[str, str], dict[str, RunResult]] = {}
    for d in dirs:
        scenario = yaml.safe_load((d / "scenario.yaml").read_text())["name"]
        for path in sorted([*d.glob("*/result.json"), *d.glob("*/simulated.json")]):
            r = RunResult.load(path)
            out.setdefault((scenario, r.scheduler), {})[NAMES[BACKENDS.canonical(r.backend, "backend")]] = r
    return out


def pair(a: RunResult, b: RunResult) -> str:
    """``a`` against ``b``: makespan difference; per-flow median / worst; flows out of order."""
    c = compare(a, b)  # a as "emulated", b as "simulated": (a - b) / b
    rels = [abs(f.rel) for f in c.flows]
    order = "same order" if not c.order_violations else f"{len(c.order_violations)} out of order"
    flows = f"{100 * percentile(rels, 50):.1f} / {100 * max(rels):.1f} %" if rels else "-"
    return f"{100 * c.makespan_rel:+.1f} % ({flows}; {order})"


def cell(r: RunResult) -> str:
    """The makespan; an emulated run's k and its own fidelity verdict beside it."""
    if backend(r.backend).capabilities.exact:  # a model: no k, no fidelity report
        return fmt_time(r.makespan)
    ok = r.fidelity_report.get("ok")
    return f"{fmt_time(r.makespan)} (k = {r.scale:g}, fidelity {'ok' if ok else 'BROKEN' if ok is False else 'n/a'})"


def table(results: dict[tuple[str, str], dict[str, RunResult]]) -> str:
    head = ["scenario", "scheduler", "emulated", "packet", "fluid"] + [f"{a} vs {b}" for a, b in PAIRS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for (scenario, scheduler), runs in sorted(results.items()):
        cells = [scenario, scheduler]
        cells += [cell(runs[n]) if n in runs else "-" for n in ("emulated", "packet", "fluid")]
        cells += [pair(runs[a], runs[b]) if a in runs and b in runs else "-" for a, b in PAIRS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", type=Path, nargs="+", help="results directories of railbed crosscheck")
    print(table(collect(ap.parse_args().dirs)))


if __name__ == "__main__":
    main()
