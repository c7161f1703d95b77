"""Hardware-model kinds by registry (railbed/hosts.py): a kind is one object registered under its
cluster-file key; the cluster loader, placement checks and the Dispatcher read it through the
registry only, so a kind made here runs without any change to the core."""

import pytest

from railbed.errors import SpecError
from railbed.hosts import KINDS, HostLeg, LegTiming
from railbed.job import Job, Leg, Location, PathOption
from railbed.spec import ClusterSpec
from railbed.units import parse_duration, wire_bytes
from schedulers import by_name
from simulator import simulate


class FixedModel:
    """Every leg takes ``seconds``, alone or not; a flow with options waits ``delay`` at the NIC."""

    def __init__(self, seconds: float, server: int) -> None:
        self.seconds, self.server, self.asked = seconds, server, []

    def leg(self, leg: HostLeg) -> LegTiming:
        self.asked.append(leg)
        return LegTiming(self.seconds, 1e9)  # feeds the NIC at 1 Gbit/s: caps the flow

    def legs(self, legs: list[HostLeg]) -> list[LegTiming]:
        return [self.leg(lg) for lg in legs]

    def nic_delay(self) -> float:
        return 1e-3 * (self.server + 1)


class FixedKind:
    field = "fixed_leg"

    def parse(self, raw, where, gpus):
        return parse_duration(raw, where)

    def to_doc(self, spec):
        return spec

    def describe(self, spec):
        return f"fixed legs of {spec:g} s"

    def devices(self, spec):
        return ("fpga0",)

    def model(self, spec, server):
        return FixedModel(spec, server)


@pytest.fixture
def fixed_kind():
    KINDS.register("fixed_leg", FixedKind())
    yield
    KINDS.unregister("fixed_leg")


def cluster(**group) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 1, "nic_rate": "8Gbit", **group}], "fabric": {"type": "single_switch"}}
    )


def test_a_kind_registered_outside_the_core_is_read_placed_and_timed(fixed_kind):
    spec = cluster(fixed_leg="2ms")
    assert spec.servers[1].host_spec("fixed_leg") == 0.002 and spec.servers[1].host_spec("datapath") is None
    assert "fixed legs of 0.002 s" in spec.summary()
    assert ClusterSpec.from_dict(spec.to_dict()) == spec
    job = Job("k")
    job.endpoint("g", Location(0, "gpu0", 0))
    job.endpoint("f", Location(0, "fpga0", 0))  # a device only the kind has
    job.endpoint("r", Location(1, "gpu0", 0))
    job.flow("local", "g", "f", 1000)
    job.flow("net", "g", "r", 10**6, options=[PathOption("via", src_leg=Leg("gpu0", "nic0"))])
    res = simulate(job, by_name("fifo"), spec)
    assert res.items["local"].end == pytest.approx(0.002)
    # the net flow waits its source leg (2 ms) plus the NIC delays of servers 0 and 1 (1 + 2 ms),
    # then crosses the network capped at the leg's 1 Gbit/s inject rate
    net = res.items["net"]
    assert net.jitter == pytest.approx(0.003) and net.intra == pytest.approx(0.002)
    assert net.end == pytest.approx(0.005 + 8 * wire_bytes(10**6) / 1e9, rel=1e-12)


def test_a_device_the_kind_does_not_add_is_refused_by_placement():
    job = Job("k")
    job.endpoint("f", Location(0, "fpga0", 0))
    job.task("t", "f", 1e-3)
    with pytest.raises(SpecError, match="fpga0"):
        simulate(job, by_name("fifo"), cluster())


def test_one_kind_per_server_and_unregistered_keys_are_refused(fixed_kind):
    with pytest.raises(SpecError) as err:
        cluster(fixed_leg="2ms", datapath={"preset": "bf-3"})
    assert err.value.field == "servers[0].fixed_leg" and "one hardware model" in str(err.value)
    with pytest.raises(SpecError) as err:
        cluster(other_leg="2ms")
    assert err.value.field == "servers[0].other_leg" and "unknown key" in str(err.value)


@pytest.mark.parametrize(
    "group", [{"intra_host": "pcie8", "gpus": 8}, {"datapath": {"preset": "bf-3", "jitter": ["3us", "9us"]}}]
)
def test_the_registered_kinds_write_back_what_they_read(group):
    spec = cluster(**group)
    kind = next(iter(set(group) - {"gpus"}))
    assert spec.servers[0].host.kind == kind
    assert ClusterSpec.from_dict(spec.to_dict()) == spec
