"""Packets captured on a switch port carry the DSCP their sender set (tcpdump + scapy)."""

import subprocess
import time

from scapy.all import IP, TCP, rdpcap

from emulator.loadtest import Flow, measure
from emulator.testbed import Testbed
from railbed.spec import ClusterSpec


def test_dscp_on_the_wire(tmp_path):
    spec = ClusterSpec.from_dict({"servers": [{"count": 3, "nic_rate": 20e6}], "fabric": {"type": "single_switch"}})
    pcap = tmp_path / "sw0-eth0.pcap"
    with Testbed(spec, policy="fifo", scale=1) as tb:  # FIFO: neither class starves
        cap = tb.popen(
            "sw0",
            ["tcpdump", "-i", "sw0-eth0", "-U", "-n", "-s", "96", "-w", str(pcap), "tcp"],
            stderr=subprocess.PIPE,
            text=True,
        )
        line = cap.stderr.readline()
        assert "listening" in line, line
        flows = [Flow((1, 0), (0, 0), dscp=46), Flow((2, 0), (0, 0), dscp=10)]
        measure(tb, flows, [], warmup=0.5, window=0.5)
        time.sleep(0.2)
        cap.terminate()
        cap.wait(timeout=10)
    sources = {tb.topology.nic_address(1, 0): 46, tb.topology.nic_address(2, 0): 10}
    seen = {46: 0, 10: 0}
    for pkt in rdpcap(str(pcap)):
        if IP in pkt and TCP in pkt and pkt[IP].src in sources:
            dscp = pkt[IP].tos >> 2
            assert dscp == sources[pkt[IP].src], pkt.summary()
            seen[dscp] += 1
    assert seen[46] > 100 and seen[10] > 100, seen
