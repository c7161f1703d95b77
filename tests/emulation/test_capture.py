"""Packet captures of an emulated run, read back with scapy.

The crosscheck-small job under tag-priority (pipeline flows DSCP 46,
all-reduce DSCP 0) with captures on a host NIC and a rail switch port:
every flow whose path crosses a captured link must appear as one TCP
connection carrying the flow's bytes (plus the agents' 16-byte header),
every packet of it marked with the flow's DSCP, and no other connection
may carry data. Records are cut at the snap length but keep the wire
length; the file stays within its size limit. A second test fills a
capture's packet limit and checks the run's note says so.
"""

import subprocess
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from emulator.agent import HEADER
from emulator.capture import Capture, parse_capture, pcap_name
from emulator.settings import EmulateSettings
from emulator.testbed import Testbed
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from scenarios.runner import Scenario, run_scenario

scapy_all = pytest.importorskip("scapy.all")
ROOT = Path(__file__).resolve().parents[2]
PORTS = [("h0", "h0-eth1"), ("rail0", "rail0-eth2")]


def crossing(result, topo, port):
    """Flows of the result whose path includes ``port`` or the port at the other end of its link."""
    peers = {port}
    for link in topo.links:
        ends = [(link.a.node, link.a.ifname), (link.b.node, link.b.ifname)]
        if port in ends:
            peers |= set(ends)
    out = []
    for r in result.items.values():
        if r.kind != "flow" or r.server == r.dst_server:
            continue
        src, dst = (r.server, r.src_nic), (r.dst_server, r.dst_nic)
        hops = {(h.node, h.ifname) for h in topo.path(src, dst, topo.ecmp_spine(src, dst, r.id))}
        if hops & peers:
            out.append(r)
    return out


def connections(pcap: Path):
    """Per TCP connection that carried data: (src ip, dst ip, payload bytes by sequence span, DSCPs, snaps)."""
    conns: dict = {}
    for pkt in scapy_all.PcapReader(str(pcap)):
        if scapy_all.IP not in pkt or scapy_all.TCP not in pkt:
            continue
        ip, tcp = pkt[scapy_all.IP], pkt[scapy_all.TCP]
        c = conns.setdefault((ip.src, tcp.sport, ip.dst, tcp.dport), {"isn": None, "end": 0, "dscp": set()})
        c["dscp"].add(ip.tos >> 2)
        if tcp.flags & 0x02:  # SYN
            c["isn"] = tcp.seq
        payload = ip.len - 4 * ip.ihl - 4 * tcp.dataofs  # from the headers: the snap cut the payload
        if payload > 0 and c["isn"] is not None:
            c["end"] = max(c["end"], (tcp.seq + payload - c["isn"] - 1) % 2**32)
    return {k: v for k, v in conns.items() if v["end"] > 0}


def test_captures_hold_every_crossing_flow_with_its_dscp_and_bytes(tmp_path):
    sc = Scenario.load(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml")
    capture = parse_capture(
        {"ports": [f"{n}:{i}" for n, i in PORTS], "snaplen": 96, "max_bytes": "30MB"}, Topology(sc.cluster)
    )
    sc.settings["emulate"] = replace(sc.settings.get("emulate", EmulateSettings()), capture=capture)
    [result] = run_scenario(sc, tmp_path, echo=lambda _: None, schedulers=["tag-priority"], plots=False)
    topo = Topology(sc.cluster)
    addr = {topo.nic_address(s, n): (s, n) for s in range(len(topo.nics)) for n in range(len(topo.nics[s]))}
    for port in PORTS:
        pcap = tmp_path / "tag-priority" / pcap_name(*port)
        assert 24 < pcap.stat().st_size <= 30e6
        expected = Counter(
            ((r.server, r.src_nic), (r.dst_server, r.dst_nic), r.size + HEADER.size, r.dscp)
            for r in crossing(result, topo, port)
        )
        assert expected and {k[3] for k in expected} == {0, 46}, "pick ports both classes cross"
        got = Counter(
            (addr[src], addr[dst], c["end"], next(iter(c["dscp"])))
            for (src, _, dst, _), c in connections(pcap).items()
            if len(c["dscp"]) == 1
        )
        assert got == expected, port
        assert all(len(c["dscp"]) == 1 for c in connections(pcap).values())
        snaps = [(len(p), p.wirelen) for p in scapy_all.PcapReader(str(pcap))]
        assert max(c for c, _ in snaps) <= 96 and max(w for _, w in snaps) == 1514
        assert any(f"capture {port[0]}:{port[1]}:" in note for note in result.notes)


def test_capture_stops_at_its_size_limit_and_says_so(tmp_path):
    spec = ClusterSpec.rail_optimized(servers=2, rails=1, spines=1, nic_rate=1e9, uplink_rate=1e9)
    topo = Topology(spec)
    cap = parse_capture({"ports": ["h0:h0-eth0"], "snaplen": 64, "max_bytes": 24 + 10 * (16 + 64)}, topo)
    assert cap.max_packets == 10
    with Testbed(spec, scale=10) as tb:
        capture = Capture(tb, cap, tmp_path)
        capture.start()
        ping = tb.popen("h0", ["ping", "-c", "12", "-i", "0.05", topo.nic_address(1, 0)], stdout=subprocess.DEVNULL)
        ping.wait(timeout=30)
        notes = capture.stop()
    pcap = tmp_path / pcap_name("h0", "h0-eth0")
    assert len(scapy_all.rdpcap(str(pcap))) == 10 and pcap.stat().st_size <= cap.max_bytes
    assert "10 packets" in notes[0] and "stopped at its limit" in notes[0]
