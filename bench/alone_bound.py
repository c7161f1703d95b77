"""How much of a run's room an order of its coflows could take: the run again with flows, coflows or
layers' collectives each as if alone on the network (the fluid engine, model time).

``max_speedup`` (railbed/analysis.py) is what the run would take with no network at all. An
inter-coflow scheduler (priorities, holds, orders between coflows) keeps every flow's bytes, route
and the sharing inside a coflow; what it can remove is the interference between coflows. This probe
runs the job three more times on the fluid model, each flow sharing its ports only with flows of its
own group (max-min inside the group, every group as if alone):

* ``flows``: each flow alone, at its narrowest port's rate (or its cap);
* ``coflows``: each coflow alone (its own flows share, as in the run);
* ``layers``: each collective of ``workloads.moe`` alone with the same collective of the other
  tensor ranks (``i0.dp.l1.p0t2`` with ``i0.dp.l1.p0t0``..): a layer needs all its tensor ranks'
  parameters, so an order between those coflows gains nothing and they share here.

The baseline's (first scheduler's) makespan over the smallest of each gives the room an order at
that grain could take. These are estimates under the fluid model, not proofs: a flow is never
slower alone, but a shorter flow can reorder tasks on a shared device (Graham's anomalies), and
groups of the same priority class still split a port as in the run. Tasks and same-server flows are
as in the run.

    python bench/alone_bound.py scenarios/hermod/testbed-gpt3-sim.yaml --scheduler megatron --scheduler hermod
    python bench/alone_bound.py FILE --set job.args.dp=4 --set job.args.layout=megatron

The network engine is the plain-Python reference (simulator/fluid/network.py): the testbed files
(under a minute each), not the 128-GPU slices.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.maxmin import maxmin_reference  # noqa: E402
from scenarios.leo.report import write_between  # noqa: E402
from scenarios.runner import Scenario  # noqa: E402
from scenarios.sweep import scenario_mapping, set_dotted  # noqa: E402
from schedulers import make  # noqa: E402
from simulator.fluid.network import ReferenceNetwork  # noqa: E402
from simulator.fluid.run import Simulation  # noqa: E402

GRAINS = ("flows", "coflows", "layers")


class GroupNetwork(ReferenceNetwork):
    """The reference fluid network, max-min inside each group (a flow's ``group``) only."""

    def _compute_rates(self) -> None:
        groups: dict = {}
        for s, f in self.flows.items():
            groups.setdefault(f["group"], []).append(s)
        self._rates = {}
        for members in groups.values():
            fl = [self.flows[s] for s in members]
            rates = maxmin_reference(self.capacity, [f["links"] for f in fl], [f["prio"] for f in fl],
                                     [f["cap"] for f in fl])  # fmt: skip
            self._rates.update(zip(members, rates))
        self._dirty = False

    def progress(self, slot: int) -> tuple[float, float]:
        if self._dirty:
            self._compute_rates()
        return self.flows[slot]["rem"], self._rates[slot]


class GroupSimulation(Simulation):
    """The fluid run on a :class:`GroupNetwork`, each flow grouped at ``grain`` (:data:`GRAINS`)."""

    def __init__(self, *args, grain: str, **kw) -> None:
        super().__init__(*args, network=GroupNetwork, **kw)
        self.grain = grain

    def _join(self, flow, route) -> None:
        super()._join(flow, route)
        coflow = self.dispatcher.items[flow.id].coflow
        group = flow.id if self.grain == "flows" or not coflow else coflow
        if self.grain == "layers":
            group = re.sub(r"t\d+$", "", group)
        self.network.flows[self._slot_of[flow.id]]["group"] = group


def _scenario(item: str, extra: list[str]):
    """``FILE`` or ``FILE@KEY=VALUE,KEY=VALUE`` (YAML values) with ``extra`` overrides: the scenario."""
    path, _, sets = item.partition("@")
    data, base = scenario_mapping(path, Path("."))
    for kv in [*filter(None, sets.split(",")), *extra]:
        key, _, value = kv.partition("=")
        set_dotted(data, key, yaml.safe_load(value), f"--set {key}")
    return Scenario.from_dict(data, base)


def probe(sc, labels: list[str] | None) -> list[tuple[str, float, dict[str, float], float]]:
    """Per scheduler of ``sc`` (those labelled ``labels``, in that order; the first is the
    baseline): (label, its run's makespan, each grain's makespan alone, the network-free makespan)."""
    specs = [next(s for s in sc.schedulers if s.run_label == label) for label in labels] if labels else sc.schedulers
    out = []
    for spec in specs:
        run = Simulation(sc.job_of(spec), make(spec), sc.cluster, analysis=True).run()
        alone = {g: GroupSimulation(sc.job_of(spec), make(spec), sc.cluster, grain=g).run().makespan for g in GRAINS}
        out.append((spec.run_label, run.makespan, alone, run.analysis["network_free_makespan"]))
    return out


def rooms(rows) -> dict[str, float]:
    """The baseline's (first row's) makespan over the best of every grain alone, and over no network."""
    base = rows[0][1]
    return {**{g: base / min(r[2][g] for r in rows) for g in GRAINS}, "no network": base / rows[0][3]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="+", help="FILE, or FILE@KEY=VALUE,KEY=VALUE (overrides of that file)")
    ap.add_argument("--scheduler", action="append", help="only these labels (repeatable); the first is the baseline")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE (YAML) for every file, e.g. job.args.dp=4")
    ap.add_argument("--write", type=Path, help="a page: the table of every file goes between its --block markers")
    ap.add_argument("--block", default="alone", help="the page's <!-- rows:BLOCK:begin/end --> markers")
    args = ap.parse_args(argv)
    table = []
    for item in args.scenario:
        rows = probe(_scenario(item, args.set), args.scheduler)
        print(f"{item} {' '.join(args.set)}: makespans, ms (model time)")
        print(
            f"{'scheduler':14} {'run':>9} " + " ".join(f"{g + ' alone':>14}" for g in GRAINS) + f" {'no network':>11}"
        )
        for label, made, alone, free in rows:
            cells = " ".join(f"{1e3 * alone[g]:14.2f}" for g in GRAINS)
            print(f"{label:14} {1e3 * made:9.2f} {cells} {1e3 * free:11.2f}")
        room = rooms(rows)
        print(f"room of {rows[0][0]}'s run (its makespan over the best alone): "
              + ", ".join(f"{g} {x:.3f}x" for g, x in room.items()))  # fmt: skip
        over = [f"{rows[0][1] / r[1]:.3f}x" for r in rows[1:]]
        table.append(
            f"| `{item}` | " + " | ".join(f"{x:.3f}x" for x in room.values()) + " | " + " | ".join(over) + " |"
        )
    if args.write:
        labels = [r[0] for r in rows]
        head = ["scenario (`FILE@overrides`)", *(f"{g} alone" for g in GRAINS), "no network",
                *(f"{x} over {labels[0]}" for x in labels[1:])]  # fmt: skip
        flags = [*(f"--scheduler {x}" for x in args.scheduler or []), *(f"--set {x}" for x in args.set)]
        cmd = " ".join(
            ["python bench/alone_bound.py", *args.scenario, *flags, f"--write {args.write} --block {args.block}"]
        )
        text = (
            f"Generated by `{cmd}` (the room of the first scheduler's run; makespans, model time).\n\n"
            + "| "
            + " | ".join(head)
            + " |\n|"
            + " --- |" * len(head)
            + "\n"
            + "\n".join(table)
            + "\n"
        )
        write_between(args.write, text, f"<!-- rows:{args.block}:begin -->", f"<!-- rows:{args.block}:end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
