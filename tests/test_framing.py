"""The fabric's MTU and framing (``fabric.mtu``, ``fabric.framing``): read, validated, and followed
by the fluid model's wire bytes, the tc plans and the packet backend's devices and segments.

The emulator's side (interface MTU, tc packet counters) is tests/emulation/test_mtu.py."""

import pytest

from railbed.backend import RunOptions, backend
from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import ETHERNET, Framing, parse_framing, wire_bytes
from schedulers import by_name
from simulator import simulate
from simulator.packet import engine
from simulator.rules import simulate_compact
from tc_policies.plan import DscpPriorityPolicy, FifoPolicy, HtbClass, shaping_params

GBIT = 1e9
SIZE = 8948 * 1448 * 2  # a whole number of full segments at both MTUs


def star(mtu=1500, framing="ethernet", rate=GBIT, n=2) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {
            "servers": [{"count": n, "gpus": 1, "nic_rate": rate}],
            "fabric": {"type": "single_switch", "mtu": mtu, "framing": framing},
        }
    )


def one_flow(size=SIZE) -> Job:
    job = Job("one")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("f", "a", "b", size)
    return job


# ------------------------------------------------------------------ units
def test_jumbo_frames_carry_the_same_bytes_in_a_sixth_of_the_packets():
    jumbo = Framing(9000)
    assert (jumbo.frame, jumbo.mss) == (9014, 8948)
    assert (ETHERNET.frame, ETHERNET.mss) == (1514, 1448)
    ratio = ETHERNET.packets(SIZE) / jumbo.packets(SIZE)
    assert ratio == pytest.approx(8948 / 1448) and 6.0 < ratio < 6.3
    assert jumbo.wire_bytes(SIZE) == SIZE + jumbo.packets(SIZE) * 66
    assert jumbo.wire_bytes(SIZE) < ETHERNET.wire_bytes(SIZE) == wire_bytes(SIZE)
    assert Framing(4096).mss == 4044


def test_payload_only_links_count_the_payload_and_are_shaped_above_the_rate():
    none = Framing(1500, payload_only=True)
    assert none.wire_bytes(SIZE) == SIZE and none.goodput_fraction == 1.0
    assert none.shaped_rate(1448.0) == pytest.approx(1514.0)
    assert ETHERNET.shaped_rate(1e9) == 1e9


@pytest.mark.parametrize(
    "mtu, framing, field",
    [(1499, "ethernet", "fabric.mtu"), ("9000", "ethernet", "fabric.mtu"), (True, "ethernet", "fabric.mtu"),
     (9000, "roce", "fabric.framing"), (9000, None, "fabric.framing")],
)  # fmt: skip
def test_a_bad_mtu_or_framing_names_its_field(mtu, framing, field):
    with pytest.raises(SpecError) as err:
        parse_framing(mtu, framing)
    assert err.value.field == field
    with pytest.raises(SpecError) as err:
        star(mtu, framing)
    assert err.value.field == field


# ------------------------------------------------------------------- spec
def test_the_fabric_keeps_its_framing_through_to_dict_and_says_it():
    spec = star(9000, "none")
    assert spec.fabric.framing == Framing(9000, True)
    assert ClusterSpec.from_dict(spec.to_dict()).fabric == spec.fabric
    assert "MTU 9000, payload-only links" in spec.summary()
    plain = star()
    assert plain.fabric.framing == ETHERNET and "mtu" not in plain.to_dict()["fabric"]
    assert ClusterSpec.rail_optimized(2, 2, 1, mtu=4096).fabric.framing.mtu == 4096


# --------------------------------------------------------------- tc plans
def test_burst_quantum_and_queues_follow_the_frame():
    rate = 2e6  # 250 kB/s: 1 ms of bytes is below one jumbo frame
    _, burst, quantum, queue = shaping_params(rate, 9014)
    assert burst == quantum == 9014 and queue == 64
    assert shaping_params(rate)[1] == 1514
    for policy in (FifoPolicy(), DscpPriorityPolicy()):
        classes = [c for c in policy.compile(rate, frame=9014).items if isinstance(c, HtbClass)]
        assert all(c.burst >= 9014 or c.rate < c.ceil for c in classes)
        assert all(c.cburst >= 9014 and c.quantum >= 9014 for c in classes)


# ------------------------------------------------------------------ fluid
@pytest.mark.parametrize("engine", ["reference", "compact"])
def test_the_fluid_model_charges_the_fabrics_wire_bytes(engine):
    times = {}
    for mtu, framing in [(1500, "ethernet"), (9000, "ethernet"), (1500, "none")]:
        spec = star(mtu, framing)
        run = simulate if engine == "reference" else simulate_compact
        res = run(one_flow(), by_name("fifo"), spec)
        expected = spec.fabric.framing.wire_bytes(SIZE) * 8 / GBIT
        times[(mtu, framing)] = res.makespan
        assert res.makespan == pytest.approx(expected, rel=1e-9)
    # the header bytes of 1/6.18 the packets: 66 B per 8948 B instead of per 1448 B
    jumbo_overhead = times[(9000, "ethernet")] - times[(1500, "none")]
    plain_overhead = times[(1500, "ethernet")] - times[(1500, "none")]
    assert plain_overhead / jumbo_overhead == pytest.approx(8948 / 1448, rel=1e-6)


# ----------------------------------------------------------------- packet
@pytest.mark.packet
@pytest.mark.skipif(not engine.available(), reason="the ns3 package is not installed (railbed[packet])")
def test_the_packet_backend_sends_a_sixth_of_the_packets_on_a_jumbo_fabric():
    """ns-3's devices take the fabric's MTU and TCP its MSS: the sender's NIC port counts
    1/6.18 of the data packets (plus the handshake's) and the flow takes its wire bytes' time."""
    packets, times = {}, {}
    for mtu in (1500, 9000):
        spec = star(mtu)
        res = backend("packet").run(one_flow(), by_name("fifo"), spec, RunOptions(analysis=False))
        packets[mtu] = res.counters["packet"]["ports"]["h0:h0-eth0"]["packets"]
        assert packets[mtu] == pytest.approx(spec.fabric.framing.packets(SIZE), abs=3)
        assert res.links["h0:h0-eth0"]["bytes"] == pytest.approx(spec.fabric.framing.wire_bytes(SIZE), rel=1e-3)
        times[mtu] = res.makespan
        assert res.makespan == pytest.approx(spec.fabric.framing.wire_bytes(SIZE) * 8 / GBIT, rel=0.02)
    assert packets[1500] / packets[9000] == pytest.approx(8948 / 1448, rel=0.01)


def test_the_default_scale_gives_jumbo_fabrics_the_budget_measured_for_them():
    from railbed.topology import default_scale

    def k(mtu):
        spec = ClusterSpec.rail_optimized(servers=8, rails=8, spines=2, nic_rate=100e9, uplink_rate=400e9, mtu=mtu)
        return default_scale(spec).k

    assert k(9000) < k(1500)  # 4x the per-core budget: half the k or less
    assert k(9000) <= k(1500) / 2


@pytest.mark.packet
@pytest.mark.skipif(not engine.available(), reason="the ns3 package is not installed (railbed[packet])")
def test_payload_only_links_carry_the_payload_at_the_declared_rate_in_ns3():
    spec = star(1500, "none")
    res = backend("packet").run(one_flow(), by_name("fifo"), spec, RunOptions(analysis=False))
    assert res.makespan == pytest.approx(SIZE * 8 / GBIT, rel=0.02)
    fluid = simulate(one_flow(), by_name("fifo"), spec)
    assert fluid.makespan == pytest.approx(SIZE * 8 / GBIT, rel=1e-9)
