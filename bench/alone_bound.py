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
import math
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.maxmin import maxmin_reference  # noqa: E402
from scenarios.runner import Scenario, _selected  # noqa: E402
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--scheduler", action="append", help="only these (repeatable); the first is the baseline")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE (YAML), e.g. job.args.dp=4")
    args = ap.parse_args(argv)
    data, base = scenario_mapping(args.scenario, Path("."))
    for kv in args.set:
        key, _, value = kv.partition("=")
        set_dotted(data, key, yaml.safe_load(value), f"--set {key}")
    sc = Scenario.from_dict(data, base)
    specs = _selected(sc, args.scheduler)
    print(f"{args.scenario} {' '.join(args.set)}: makespans, ms (model time)")
    print(f"{'scheduler':14} {'run':>9} " + " ".join(f"{g + ' alone':>14}" for g in GRAINS) + f" {'no network':>11}")
    best = dict.fromkeys(GRAINS, math.inf)
    baseline = free0 = None
    for spec in specs:
        run = Simulation(sc.job_of(spec), make(spec), sc.cluster, analysis=True).run()
        alone = {g: GroupSimulation(sc.job_of(spec), make(spec), sc.cluster, grain=g).run() for g in GRAINS}
        free = run.analysis["network_free_makespan"]
        baseline, free0 = baseline or run, free0 or free
        for g in GRAINS:
            best[g] = min(best[g], alone[g].makespan)
        cells = " ".join(f"{1e3 * alone[g].makespan:14.2f}" for g in GRAINS)
        print(f"{spec.run_label:14} {1e3 * run.makespan:9.2f} {cells} {1e3 * free:11.2f}")
    rooms = ", ".join(f"{g} alone {baseline.makespan / best[g]:.3f}x" for g in GRAINS)
    print(f"room of {specs[0].run_label}'s run (its makespan over the best alone): {rooms}, "
          f"no network {baseline.makespan / free0:.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
