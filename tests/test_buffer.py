"""``fabric.buffer``: a switch port's egress queue in bytes, the same at every k, read by the
emulator's leaf queues and the packet backend's bands (docs/emulator.md, "Switch buffer")."""

import pytest
from test_packet import flows_job, needs_ns3, run

from emulator.topo import HOST_QUEUE_PACKETS, ClusterTopo
from railbed.errors import SpecError
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import MSS, RateScale, wire_bytes
from schedulers import by_name
from simulator.packet.fabric import plan
from tc_policies.plan import FifoPolicy, Qdisc


def star(n=4, rate="100Gbit", **fabric) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"name": "star", "servers": [{"count": n, "gpus": 1, "nic_rate": rate}],
         "fabric": {"type": "single_switch", "latency": "1us", **fabric}}  # fmt: skip
    )


def test_the_buffer_is_read_in_bytes_and_counted_in_whole_frames():
    f = star(buffer="1.3MB").fabric
    assert f.buffer == 1_300_000 and f.queue_packets() == 859  # ceil(1.3e6 / 1514)
    assert star(buffer="1.3MB", mtu=9000).fabric.queue_packets() == 145  # ceil(1.3e6 / 9014)
    assert star(buffer=1514).fabric.queue_packets() == 1
    assert star().fabric.buffer is None and star().fabric.queue_packets() is None


@pytest.mark.parametrize("value", [100, "1513B", "2GiB", "lots", -5, "4M"])
def test_a_bad_buffer_is_one_error_naming_the_field(value):
    with pytest.raises(SpecError) as exc:
        star(buffer=value)
    assert exc.value.field == "fabric.buffer"


def test_the_buffer_survives_the_spec_document_and_shows_in_the_summary():
    spec = star(buffer="1.3MB")
    assert ClusterSpec.from_dict(spec.to_dict()) == spec
    assert "switch buffer 1300000 bytes per port (859 frames)" in spec.summary()
    assert "buffer" not in star().to_dict()["fabric"]


def leaf_limits(spec: ClusterSpec, k: float) -> dict[str, set[int]]:
    """Each node's pfifo limits in the emulator's tc plans at scale k."""
    topo = ClusterTopo(spec=spec, policy=FifoPolicy(), scale=RateScale(k))
    out = {}
    for name in topo.nodes():
        cfg = topo.nodeInfo(name)["railbed"]
        out[name] = {q.params["limit"] for i in cfg.ifaces for q in i.plan.items
                     if isinstance(q, Qdisc) and q.kind == "pfifo"}  # fmt: skip
    return out


@pytest.mark.parametrize("k", [100, 1000])
def test_the_emulators_switch_ports_hold_the_buffer_at_every_k_and_hosts_keep_their_queue(k):
    spec = star(buffer="1.3MB")
    limits = leaf_limits(spec, k)
    assert limits["sw0"] == {859}
    assert all(limits[h] == {HOST_QUEUE_PACKETS} for h in Topology(spec).hosts)
    assert leaf_limits(star(), k)["sw0"] != {859}  # the default: 5 ms of frames at the real rate


def test_the_packet_backends_bands_hold_the_buffer_and_packet_buffer_still_overrides():
    spec = star(buffer="1.3MB")
    topo, k = Topology(spec), RateScale(1000)
    switch_limits = lambda p: {lim for link in p.links for lim in link.limits} - {77}  # noqa: E731
    assert switch_limits(plan(topo, None, 77, k)) == {859}
    assert switch_limits(plan(topo, 16, 77, k)) == {16}
    assert switch_limits(plan(Topology(star()), None, 77, k)) == {64}  # max(64, 5 ms at 100 Mbit/s real)


@needs_ns3
@pytest.mark.packet
def test_an_incast_drops_at_the_default_queue_and_not_in_a_switchs_buffer():
    """12 senders of 35 segments each into one 100 Gbit/s port: 420 frames arrive at once. The
    default queue at k = 1000 holds 64 per band (81 drops here, each retransmitted); 1.3 MB holds
    all, and the incast ends near its 420 frames over the port (50.9 us)."""
    job = flows_job(*((f"f{s}", s, 0, MSS * 35) for s in range(1, 13)), servers=13)
    got = {}
    for buffer in (None, "1.3MB"):
        res = run(job, by_name("fifo"), star(13, **({"buffer": buffer} if buffer else {})), policy="fifo")
        got[buffer] = (res.counters["packet"]["drops"], res.counters["packet"]["tcp"]["retransmissions"],
                       max(i.end for i in res.items.values()))  # fmt: skip
    assert got[None][0] > 0 and got[None][1] > 0
    assert got["1.3MB"][:2] == (0, 0)
    frames = 12 * 35 * wire_bytes(MSS) * 8 / 100e9
    assert frames < got["1.3MB"][2] < 1.15 * frames and got["1.3MB"][2] < got[None][2]
