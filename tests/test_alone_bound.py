"""bench/alone_bound.py's probe: flows share their ports only inside their group (flows, coflows,
a layer's collective over its tensor ranks), computed by hand on two flows out of one NIC."""

import importlib.util
from pathlib import Path

import pytest

from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from schedulers import by_name
from simulator.fluid.run import Simulation

SPEC = ClusterSpec.load("examples/rail-4x4.yaml")
_spec = importlib.util.spec_from_file_location("alone_bound", Path(__file__).parents[1] / "bench" / "alone_bound.py")
alone_bound = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(alone_bound)


def _two_flows(coflows: tuple[str, str]) -> Job:
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    for k, name in enumerate(coflows):
        job.flow(f"f{k}", "a", "b", 100 << 20, coflow=name)
    return job


@pytest.mark.parametrize(
    "coflows, grain, shared",
    [
        (("c0", "c1"), "flows", False),  # each flow alone: its NIC's whole rate
        (("c0", "c1"), "coflows", False),  # two coflows: alone each
        (("c0", "c0"), "coflows", True),  # one coflow: its flows share as in the run
        (("i0.dp.l1.p0t0", "i0.dp.l1.p0t1"), "coflows", False),
        (("i0.dp.l1.p0t0", "i0.dp.l1.p0t1"), "layers", True),  # one layer's tensor ranks share
    ],
)
def test_flows_share_only_inside_their_group(coflows, grain, shared):
    together = Simulation(_two_flows(coflows), by_name("fifo"), SPEC).run().makespan
    alone = Simulation(_two_flows(coflows[:1]), by_name("fifo"), SPEC).run().makespan  # one flow
    assert together > 1.9 * alone  # two equal flows out of one NIC: each at half its rate together
    probe = alone_bound.GroupSimulation(_two_flows(coflows), by_name("fifo"), SPEC, grain=grain).run()
    assert probe.makespan == pytest.approx(together if shared else alone, rel=1e-9)
