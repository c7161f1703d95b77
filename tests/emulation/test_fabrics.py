"""Rail-optimized routing (same rail never crosses a spine; cross-rail does and
uses both spines) and heterogeneous NIC rates, on real namespaces and tc."""

import re

import pytest

from emulator.loadtest import Flow, measure
from emulator.nodes import RTO_MIN
from emulator.testbed import Testbed
from railbed.spec import ClusterSpec

RAIL = ClusterSpec.rail_optimized(servers=4, rails=4, spines=2, nic_rate=100e9)


def spine_egress(tb):
    return [(sp, f"{sp}-eth{r}") for sp in tb.topology.spines for r in range(4)]


def uplinks(tb):
    return [(rail, f"{rail}-sp{p}") for rail in tb.topology.switches for p in range(2)]


def test_rail_optimized_routing():
    with Testbed(RAIL, scale=5000) as tb:  # 20 Mbit/s real per link
        # every route a server added (NIC tables, spine-pinned tables) floors TCP's RTO at RTO_MIN
        routes = [r for r in tb.node("h0").cmd("ip route show table all").splitlines() if "proto static" in r]
        assert len(routes) >= 4 + 4 * 2, routes
        assert all(f"rto_min lock {RTO_MIN * 1000:g}ms" in r for r in routes), routes
        watch = spine_egress(tb) + uplinks(tb)
        same = measure(
            tb, [Flow((0, 0), (1, 0)), Flow((2, 1), (3, 1)), Flow((0, 2), (3, 2))], watch, warmup=1.0, window=2.0
        )
        spine_bytes = sum(same.ports[w].wire_bps for w in watch) * same.window / 8
        assert sum(same.goodput_bps) > 0.9 * 3 * 20e6 * 0.95
        assert spine_bytes < 2000, f"same-rail traffic reached the spines: {spine_bytes:.0f} bytes"

        # 16 cross-rail flows, paced, from every NIC to the next server's next rail
        flows = [Flow((s, i), ((s + 1) % 4, (i + 1) % 4), pace_bps=2e6) for s in range(4) for i in range(4)]
        cross = measure(tb, flows, watch, warmup=1.0, window=2.0, base_port=6000)
        per_spine = {sp: sum(cross.ports[(sp, f"{sp}-eth{r}")].wire_bps for r in range(4)) for sp in tb.topology.spines}
        carried = sum(per_spine.values())
        assert carried > 0.8 * 16 * 2e6, f"cross-rail traffic should cross a spine: {per_spine}"
        assert min(per_spine.values()) > 0.1 * carried, f"ECMP should use both spines: {per_spine}"


def test_heterogeneous_nics_shape_to_their_own_rates():
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": 2, "nic_rate": "50Gbit"}, {"count": 2, "nic_rate": "10Gbit"}],
            "fabric": {"type": "single_switch"},
        }
    )
    with Testbed(spec, policy="fifo", scale=200) as tb:  # 250 and 50 Mbit/s real
        watch = [("h0", "h0-eth0"), ("h2", "h2-eth0"), ("sw0", "sw0-eth1"), ("sw0", "sw0-eth3")]
        m = measure(tb, [Flow((0, 0), (1, 0)), Flow((2, 0), (3, 0))], watch)
        expected = {"h0-eth0": 250e6, "h2-eth0": 50e6, "sw0-eth1": 250e6, "sw0-eth3": 50e6}
        for w in watch:
            p = m.ports[w]
            assert p.configured_bps == pytest.approx(expected[w[1]])
            assert abs(p.error) <= 0.02, f"{w}: {p.wire_bps / 1e6:.2f} Mbit/s"


def test_every_link_forwards_when_start_returns():
    """Right after ``start()``: each server's first ping to a NIC of the next server, on its
    own rail (bridges only) and across rails (through a spine), is answered without ARP's
    1 s retransmission, no interface of any node waits for the kernel to mark it running
    (``ip link``: NO-CARRIER, state DOWN) and every bridge port forwards (``bridge link``).
    Mininet's start returned before the kernel's linkwatch had run (it batches carrier
    events up to 1 s apart): a bridge port stayed ``disabled`` and dropped the first ARP
    request (the VM lane's netem ping test saw a 1.1 s wait for ARP)."""
    spec = ClusterSpec.rail_optimized(servers=3, rails=2, spines=2, nic_rate=100e9)
    with Testbed(spec, policy="fifo", scale=5000) as tb:  # 20 Mbit/s real
        waits = {}
        for s in range(3):
            for src, dst in ((0, 0), (1, 0)):  # same rail, then across rails
                to = tb.address((s + 1) % 3, dst)
                out = tb.node(f"h{s}").cmd(f"ping -n -c 1 -W 3 -I {tb.address(s, src)} {to}")
                found = re.search(r"time=([0-9.]+) ms", out)
                waits[f"h{s} nic{src} -> {to}"] = float(found.group(1)) if found else float("inf")
        assert max(waits.values()) < 500, waits
        for node in tb.net.hosts + tb.net.switches:
            links = node.cmd("ip -o link show").splitlines()
            down = [ln for ln in links if ": lo:" not in ln and ("NO-CARRIER" in ln or "state DOWN" in ln)]
            assert not down, f"{node.name}: {down}"
        for sw in tb.topology.switches:
            ports = [ln for ln in tb.node(sw).cmd("bridge link show").splitlines() if "master br0" in ln]
            assert ports and all("state forwarding" in ln for ln in ports), f"{sw}: {ports}"
