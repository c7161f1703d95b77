"""Hermod on the emulator: under ``hermod-literal`` (one wait per NIC, §5.4 as written) a
lower-priority flow on the same NIC waits at the host for a higher one, measured from the
agents' reports; under ``hermod`` (a wait per switch queue) flows of different queues start
together and the switch's strict priority orders them; each flow's DSCP is on the wire (scapy
reads a capture of the sender's NIC).

Cluster: 2 servers with one 1 Gbit/s NIC (model) on one switch, k = 10 (100 Mbit/s real).
The pure side is tests/test_hermod_sim.py (same job, exact times)."""

import pytest

from emulator.capture import Capture, parse_capture, pcap_name
from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import wire_bytes
from schedulers import by_name
from workloads.mechanisms import ep_shared_nic

scapy_all = pytest.importorskip("scapy.all")
K = 10
LINK = 1e9
SPEC = ClusterSpec.from_dict({"servers": [{"count": 2, "nic_rate": LINK}], "fabric": {"type": "single_switch"}})
S = 6_250_000
T = 8 * wire_bytes(S) / LINK  # one flow alone: 0.05 s model, 0.5 s real


def three_coflows() -> Job:
    job = Job("hermod-order")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("dp", "a", "b", S, coflow="dp", coflow_type="DP", microbatch=3, layer=0, tags={"dp_phase": "rs"})
    job.flow("pp1", "a", "b", S, coflow="pp1", coflow_type="PP", microbatch=1, layer=2)
    job.flow("pp0", "a", "b", S, coflow="pp0", coflow_type="PP", microbatch=0, layer=2)
    return job.validate()


def test_lower_priority_waits_at_the_host_and_dscp_is_on_the_wire(tmp_path):
    port = ("h0", "h0-eth0")
    spec = parse_capture({"ports": [f"{port[0]}:{port[1]}"], "snaplen": 96, "max_bytes": "20MB"}, Topology(SPEC))
    with Testbed(SPEC, scale=K) as tb:
        cap = Capture(tb, spec, tmp_path)
        cap.start()
        try:
            res = run(three_coflows(), by_name("hermod"), tb)
        finally:
            cap.stop()
        literal = run(three_coflows(), by_name("hermod-literal"), tb).items
    # the agents' receive reports: under hermod-literal each flow starts only after the higher one
    # ended, alone at line rate
    assert literal["pp0"].end <= literal["pp1"].start + 1e-9 and literal["pp1"].end <= literal["dp"].start + 1e-9
    r = res.items
    for items in (literal, r):  # hermod: strict priority in the network gives the same ends
        for fid, n in (("pp0", 1), ("pp1", 2), ("dp", 3)):
            assert items[fid].end == pytest.approx(n * T, rel=0.15), fid
    dscp = {fid: r[fid].dscp for fid in ("pp0", "pp1", "dp")}
    assert dscp["pp0"] > dscp["pp1"] > dscp["dp"]
    seen = set()
    for pkt in scapy_all.PcapReader(str(tmp_path / pcap_name(*port))):
        if scapy_all.IP in pkt and scapy_all.TCP in pkt and len(pkt[scapy_all.TCP].payload) > 0:
            seen.add(pkt[scapy_all.IP].tos >> 2)
    assert set(dscp.values()) <= seen


def test_pp_preempts_dp_in_flight_of_the_same_microbatch():
    """Issue 25's mechanism on real sockets: a DP flow on the wire from 0, a PP flow of the same
    microbatch ready at T/2 on the same NIC. hermod's queues (PP 7, DP 0) give the PP flow the
    link at once: it ends at 1.5 T (by hand, tests/test_hermod_sim.py gives it exactly);
    hermod-literal's one queue shares it: 2 T."""
    job = Job("pp-over-dp")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("dp", "a", "b", S, coflow="dp", coflow_type="DP", microbatch=0, layer=0)
    job.task("c", "a", T / 2)
    job.flow("pp", "a", "b", S, ["c"], coflow="pp", coflow_type="PP", microbatch=0, layer=0)
    job.validate()
    with Testbed(SPEC, scale=K) as tb:
        got = {name: run(job, by_name(name), tb).items for name in ("hermod", "hermod-literal")}
    assert got["hermod"]["pp"].end == pytest.approx(1.5 * T, rel=0.1)
    assert got["hermod"]["dp"].end == pytest.approx(2 * T, rel=0.1)
    assert got["hermod-literal"]["pp"].end == pytest.approx(2 * T, rel=0.1)
    assert got["hermod-literal"]["pp"].end > got["hermod"]["pp"].end * 1.15  # beyond the band: the mechanism shows


def test_metadata_all_gather_is_not_held_behind_an_ep_transfer():
    """hermod's metadata queue on real sockets: an EP transfer of microbatch 0 on the wire from 0,
    microbatch 1's 512-byte metadata ready at T/2 on the same NIC. hermod (top queue, never held)
    sends it at once: it ends near T/2; ordered as EP (hermod-literal) it waits: about T
    (tests/test_hermod_sim.py has both exactly)."""
    job = Job("metadata-beside-ep")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("ep", "a", "b", S, coflow_type="EP", microbatch=0, layer=0)
    job.task("c", "a", T / 2)
    job.flow("meta", "a", "b", 512, ["c"], coflow_type="EP", microbatch=1, layer=0, tags={"metadata": True})
    job.validate()
    with Testbed(SPEC, scale=K) as tb:
        got = {name: run(job, by_name(name), tb).items["meta"].end for name in ("hermod", "hermod-literal")}
    assert got["hermod"] == pytest.approx(0.5 * T, rel=0.15)
    assert got["hermod-literal"] == pytest.approx(T, rel=0.15)


def test_ep_matching_over_shared_nics_meets_the_busiest_nics_bytes():
    """Alg. 3 over the NICs (hermod's ``match: nic``) on real sockets: 3 servers of 2 GPUs behind
    one NIC, an EP coflow whose busiest NIC sends and receives 4 S
    (``workloads.mechanisms.ep_shared_nic``; tests/test_hermod_sim.py has 4 T exactly). Every
    sub-phase is a matching of NICs, so each NIC sends to one NIC and receives from one at a time:
    the coflow ends at 4 T within 15 %, each original carried whole."""
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 3, "gpus": 2, "nic_rate": LINK}], "fabric": {"type": "single_switch"}}
    )
    job = ep_shared_nic(S)
    with Testbed(spec, scale=K) as tb:
        res = run(job, by_name("hermod-intra"), tb)
    assert [r for r in res.items.values() if r.parent], "Alg. 3 split nothing"
    assert all(res.items[f.id].received == f.size for f in job.flows)
    assert res.makespan == pytest.approx(4 * T, rel=0.15)
