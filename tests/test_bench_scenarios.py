"""The probes' scenario files under bench/scenarios/ (kept out of scenarios/<paper>/, whose every
file is an input of that paper's reproduction sections) still load: cluster, job and schedulers."""

import sys
from pathlib import Path

import pytest

from scenarios.runner import Scenario
from schedulers import make

FILES = sorted((Path(__file__).resolve().parents[1] / "bench" / "scenarios").glob("*.yaml"))


def test_there_are_probe_files():
    assert FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_probe_file_loads_with_every_scheduler(path):
    sc = Scenario.load(path)
    assert sc.cluster is not None and sc.schedulers
    labels = [spec.run_label for spec in sc.schedulers]
    assert len(set(labels)) == len(labels), labels
    for spec in sc.schedulers:
        assert make(spec) is not None


def test_sebf_order_ranks_coflows_into_eight_classes():
    from railbed.plugins import load_target

    cls = load_target(str(FILES[0].parent.parent / "schedulers" / "sebf_order.py") + ":SebfOrder", "name")
    assert cls.name == "sebf-order"
    module = sys.modules[cls.__module__]
    order = [f"c{i}" for i in range(9)]
    dscp = module.classes(order)
    assert [dscp[c] >> 3 for c in order] == [7, 6, 5, 4, 3, 2, 1, 0, 0]


@pytest.mark.parametrize("rank", ["remaining", "size"])
def test_sebf_order_serves_the_smaller_coflow_first(rank):
    """Two coflows out of one 100 Gbit/s NIC, 100 MB and 300 MB: the smaller in the higher class ends
    at its own size over the NIC's rate (as if alone), the larger at the sum; max-min would end the
    smaller at twice its size over the rate."""
    from railbed.job import Job, Location
    from railbed.plugins import load_target
    from railbed.spec import ClusterSpec
    from railbed.units import wire_bytes
    from simulator.fluid.run import Simulation

    cls = load_target(str(FILES[0].parent.parent / "schedulers" / "sebf_order.py") + ":SebfOrder", "name")
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("small", "a", "b", 100 << 20, coflow="s")
    job.flow("large", "a", "b", 300 << 20, coflow="l")
    res = Simulation(job, cls(rank=rank), ClusterSpec.load("examples/rail-4x4.yaml")).run()
    ends = {i: r.end for i, r in res.items.items()}
    rate = 100e9
    assert ends["small"] == pytest.approx(8 * wire_bytes(100 << 20) / rate, rel=0.01)
    assert ends["large"] == pytest.approx(8 * wire_bytes(400 << 20) / rate, rel=0.01)


def test_sebf_order_names_a_bad_rank():
    from railbed.errors import SpecError
    from railbed.plugins import load_target

    cls = load_target(str(FILES[0].parent.parent / "schedulers" / "sebf_order.py") + ":SebfOrder", "name")
    with pytest.raises(SpecError, match="rank"):
        cls(rank="arrival")
