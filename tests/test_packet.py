"""The packet backend (ns-3): hand-computed FCTs, strict priority, caps, ECMP pinning, results.

Every test but the pure ones runs ns-3 (import ~10 s once per process, then well under a second
a run); they are marked ``packet`` and skip, saying why, where the ``ns3`` package is missing.
"""

import json

import pytest
import yaml
from test_interface import Spines  # the fluid test's scheduler: pins x and y to the spines given

from railbed.backend import TCP_CONGESTION, RunOptions, backend
from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import FRAME, MSS, RateScale, wire_bytes
from schedulers import Decision, Scheduler, by_name
from simulator.packet import engine
from simulator.packet.fabric import address, plan
from simulator.packet.options import NOT_HERE, TCPS, PacketOptions, check_tcp, parse_packet

needs_ns3 = pytest.mark.skipif(not engine.available(), reason="the ns3 package is not installed (railbed[packet])")
GBIT = 1e9
S = MSS * 2000  # 2000 full segments


def star(n=4, rate=GBIT, latency=5e-6) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {
            "name": "star",
            "servers": [{"count": n, "gpus": 1, "nic_rate": rate}],
            "fabric": {"type": "single_switch", "latency": latency},
        }
    )


def flows_job(*flows, servers=4) -> Job:
    job = Job("hand")
    for s in range(servers):
        job.endpoint(f"s{s}", Location(s, "gpu0", 0))
    for fid, src, dst, size, *tags in flows:
        job.flow(fid, f"s{src}", f"s{dst}", size, tags=tags[0] if tags else {})
    return job


class Marked(Scheduler):
    """Gives each flow the DSCP and cap listed for it."""

    name = "marked"

    def __init__(self, dscp=None, caps=None):
        self.dscp, self.caps = dscp or {}, caps or {}

    def on_ready(self, item, view):
        return Decision(dscp=self.dscp.get(item.id, 0), rate=self.caps.get(item.id))


def run(job, scheduler, cluster, policy="dscp-priority", tcp="cubic", **packet):
    options = RunOptions(policy=policy, analysis=False, tcp=tcp, settings={"packet": PacketOptions(**packet)})
    return backend("packet").run(job, scheduler, cluster, options)


def fct(result, fid):
    return result.items[fid].end - result.items[fid].start


# ------------------------------------------------------------------ pure: the address plan
def test_every_nic_has_one_address_per_spine_slot_and_the_tables_cover_every_port():
    spec = ClusterSpec.load("examples/rail-4x4.yaml")
    topo = Topology(spec)
    p = plan(topo, None, 1000, RateScale(1000))
    addrs = {p.nic_address(nic, spine) for nic in p.host_ports for spine in [None, 0, 1]}
    assert len(addrs) == 16 * 3  # 16 NICs, slots 0, 1, 2
    # NIC 1 of server 2 is port 2 of rail 1; spine 1 is slot 2
    assert p.nic_address((2, 1), 1) == address(2, 1, 2) == (10 << 24) | (2 << 18) | (1 << 10) | 3
    assert len(p.down) == 16 + 2 * 4  # each rail's host ports; each spine's port to each rail
    assert len(p.up) == 4 * 2  # each rail's uplink to each spine
    assert all(lim >= 64 for link in p.links for lim in link.limits)


def test_packet_settings_are_checked_and_name_the_field():
    opts = parse_packet({"buffer": 50, "rto_min": "200us"})
    assert opts.buffer == 50 and opts.rto_min == pytest.approx(2e-4) and opts.tcp == "cubic"
    for raw, field in (
        ({"buffer": 0}, "packet.buffer"),
        ({"tcp": "bbr"}, "packet.tcp"),
        ({"tcp": "dctcp"}, "packet.tcp"),
        ({"rto": 1}, "packet.rto"),
        ({"rto_min": "1h"}, "packet.rto_min"),
    ):
        with pytest.raises(SpecError) as err:
            parse_packet(raw)
        assert err.value.field == field


def test_the_congestion_control_is_the_runs_and_dctcp_needs_ecn():
    """``tcp`` is a run option both packet-level backends read (the emulator's test: test_runtime)."""
    with pytest.raises(SpecError) as err:
        check_tcp("dctcp", parse_packet({"buffer": 50}))
    assert err.value.field == "tcp" and "ecn" in err.value.message
    with pytest.raises(SpecError) as err:
        backend("packet").check(star(), RunOptions(tcp="vegas"))
    assert err.value.field == "tcp"
    check_tcp("dctcp", parse_packet({"ecn": 4}))
    with pytest.raises(SpecError) as err:
        check_tcp("bbr", None)
    assert err.value.field == "tcp" and "bench_sharing" in err.value.message
    assert set(TCPS) | set(NOT_HERE) == set(TCP_CONGESTION)  # every name the scenario takes: run or refused


def test_a_missing_ns3_is_one_error_naming_the_extra(monkeypatch):
    monkeypatch.setattr(engine, "available", lambda: False)
    with pytest.raises(SpecError) as err:
        backend("packet").check(star(), RunOptions())
    assert "railbed[packet]" in str(err.value)


# ------------------------------------------------------------------ ns-3 runs
@needs_ns3
@pytest.mark.packet
def test_one_flow_takes_its_frames_over_the_link_rate_plus_the_handshake():
    lat = 5e-6
    res = run(flows_job(("a", 0, 1, S)), by_name("fifo"), star(latency=lat))
    serialise = wire_bytes(S) * 8 / GBIT  # 2000 frames of 1514 bytes at 1 Gbit/s
    # SYN out and back (2 links each way), the first segment's 2 links, its second serialisation
    # at the switch; small packets' own serialisation is under 1 us
    expected = serialise + 4 * lat + 2 * lat + FRAME * 8 / GBIT
    assert fct(res, "a") == pytest.approx(expected, abs=3e-6)
    assert res.links["h0:h0-eth0"]["bytes"] == pytest.approx(wire_bytes(S), rel=1e-3)
    assert res.counters["packet"]["drops"] == 0 and res.counters["packet"]["tcp"]["retransmissions"] == 0


@needs_ns3
@pytest.mark.packet
def test_a_higher_dscp_flow_finishes_as_if_alone_beside_a_lower_one():
    alone = fct(run(flows_job(("hi", 0, 1, S)), by_name("fifo"), star()), "hi")
    job = flows_job(("hi", 0, 1, S), ("lo", 2, 1, S))
    prio = run(job, Marked(dscp={"hi": 46}), star())
    assert fct(prio, "hi") == pytest.approx(alone, rel=0.02)
    assert fct(prio, "lo") > 1.9 * alone  # it waited for the link
    fifo = run(job, Marked(dscp={"hi": 46}), star(), policy="fifo")  # one class: they share
    assert fct(fifo, "hi") > 1.5 * alone


@needs_ns3
@pytest.mark.packet
def test_a_capped_flow_is_paced_at_its_goodput():
    alone = fct(run(flows_job(("a", 0, 1, S)), by_name("fifo"), star()), "a")
    capped = fct(run(flows_job(("a", 0, 1, S)), Marked(caps={"a": GBIT / 4}), star()), "a")
    assert capped == pytest.approx(4 * alone, rel=0.03)


@needs_ns3
@pytest.mark.packet
def test_cross_rail_flows_cross_the_spine_ecmp_chose():
    spec = ClusterSpec.load("examples/rail-4x4.yaml")
    topo = Topology(spec)
    job = Job("cross")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu1", 1))
    ids = [f"f{i}" for i in range(6)]
    for fid in ids:
        job.flow(fid, "a", "b", MSS * 100)
    res = run(job, by_name("fifo"), spec)
    for p in (0, 1):
        pinned = [f for f in ids if topo.ecmp_spine((0, 0), (1, 1), f) == p]
        carried = res.links.get(f"rail0:rail0-sp{p}", {}).get("bytes", 0)
        assert carried == pytest.approx(len(pinned) * wire_bytes(MSS * 100), rel=0.01)
    assert {res.items[f].spine for f in ids} == {0, 1}


INCAST = """
name: incast
cluster: {name: star, servers: [{count: 5, gpus: 1, nic_rate: 10Gbit}], fabric: {type: single_switch, latency: 2us}}
job: {generator: all_to_all, args: {n: 5, size: 2MB}}
schedulers: [fifo]
backend: packet
packet: {buffer: 16}
"""


@needs_ns3
@pytest.mark.packet
def test_simulate_writes_results_with_drops_queue_peaks_and_retransmissions(tmp_path):
    from cli import main

    path = tmp_path / "incast.yaml"
    path.write_text(INCAST)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 0  # backend: from the scenario
    result = json.loads((tmp_path / "out" / "fifo" / "result.json").read_text())
    pk = result["counters"]["packet"]
    assert result["backend"] == "packet" and pk["congestion"] == "cubic" and "tcp" not in result
    assert result["packet"] == pk  # the key before counters, still written (docs/packet.md reads it)
    assert pk["drops"] > 0 and pk["tcp"]["retransmissions"] > 0  # 4 senders into each 16-packet band
    peaks = [p["queue_peak_packets"] for name, p in pk["ports"].items() if name.startswith("sw0")]
    assert 16 <= max(peaks) <= 2 * 16  # a full data band (the ACK band shares the port's count)
    assert (tmp_path / "out" / "fifo" / "flows.csv").exists()
    assert yaml.safe_load((tmp_path / "out" / "scenario.yaml").read_text())["backend"] == "packet"


@needs_ns3
@pytest.mark.packet
def test_ecn_marks_instead_of_dropping_under_dctcp():
    from workloads.synthetic import all_to_all

    cluster = ClusterSpec.from_dict(yaml.safe_load(INCAST)["cluster"])
    job = all_to_all(5, 2 << 20)
    tail = run(job, by_name("fifo"), cluster, buffer=16)
    dctcp = run(job, by_name("fifo"), cluster, buffer=16, ecn=4, tcp="dctcp")
    assert dctcp.own["congestion"] == "dctcp" and tail.own["congestion"] == "cubic"
    assert dctcp.counters["packet"]["marks"] > 0 and tail.counters["packet"]["marks"] == 0
    assert dctcp.counters["packet"]["drops"] < tail.counters["packet"]["drops"]


@needs_ns3
@pytest.mark.packet
def test_choose_spine_pins_flows_between_leaves_on_ns3():
    """tests/test_interface.py's leaf-spine case on packets: servers 0-1 on leaf 0, 2-3 on leaf 1,
    two spines, every link 1 Gbit/s; x (0 -> 2) and y (1 -> 3) each alone take T. On one spine they
    share leaf 0's uplink to it and end near 2T (TCP: not exactly); on two spines each near T."""
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": 4, "gpus": 1, "nic_rate": GBIT}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": GBIT},
        }
    )
    job = flows_job(("x", 0, 2, S), ("y", 1, 3, S))
    alone = fct(run(flows_job(("x", 0, 2, S)), Spines(0, 0), spec), "x")
    for (sx, sy), share in (((0, 0), 2), ((1, 1), 2), ((0, 1), 1), ((1, 0), 1)):
        res = run(job, Spines(sx, sy), spec)
        assert (res.items["x"].spine, res.items["y"].spine) == (sx, sy)
        last = max(fct(res, "x"), fct(res, "y"))
        assert last == pytest.approx(share * alone, rel=0.08), ((sx, sy), last / alone)
        if (sx, sy) == (0, 0):
            assert res.links["leaf0:leaf0-sp0"]["bytes"] >= 2 * wire_bytes(S)
