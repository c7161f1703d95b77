"""The kernel paths a stock Debian or Ubuntu kernel gives railbed, measured on packets.

* strict priority through the ``prio`` qdisc under the HTB shaper (and, as
  the same measurement's twin, through HTB prio classes);
* link latency through ``netem`` leaves: ping RTT and a flow's completion
  time are the configured latency times k;
* per-flow pacing (``SO_MAX_PACING_RATE``) when the leaf queue is ``fq``.

Each test is selected by kernel feature (``emulator.features.probe``, which
tries the qdisc in a throwaway namespace): on a kernel without the module
it is skipped with the reason, in CI too (the set-up is fine, the kernel
lacks a module). ``scripts/vm-test.sh`` runs this file on Debian's 6.1
kernel, which has them all, and fails if any test here was skipped.

Rates are modest (20 Mbit/s real) so the tests hold in a guest under
software emulation (qemu TCG) as well as on hardware.
"""

from __future__ import annotations

import re
import statistics

import pytest

from emulator import features
from emulator.loadtest import Flow, measure
from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import GOODPUT_FRACTION, wire_bytes
from schedulers import by_name
from tc_policies.plan import DscpPriorityPolicy

RATE = 20e6  # real bit/s of every link
PORT = ("sw0", "sw0-eth0")  # the switch port towards h0: both senders' bottleneck
HIGH, LOW = 56, 0  # class 7 (a DSCP filter, band 0) and class 0 (no filter: HTB default / priomap)


def need(qdisc: str) -> None:
    """Skip, with the reason, unless this kernel can create ``qdisc``."""
    if not features.probe().has(qdisc):
        pytest.skip(f"this kernel has no {qdisc} qdisc (sch_{qdisc}): {features.MEANING[qdisc][1]}")


def qdiscs_of(tb: Testbed, node: str, ifname: str) -> str:
    return tb.node(node).cmd(f"tc -s qdisc show dev {ifname}")


def star(servers: int, rate: float = RATE, latency: float = 0.0) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": servers, "nic_rate": rate}], "fabric": {"type": "single_switch", "latency": latency}}
    )


# ------------------------------------------------------------- priority
@pytest.mark.parametrize("use_prio", [True, False], ids=["prio-qdisc", "htb-classes"])
def test_high_class_gets_at_least_97_percent_under_contention(use_prio):
    """Class 7 against class 0 into one shaped port: class 7 keeps >= 97 % of the wire;
    class 0 alone gets the whole link back (the priority path is work conserving)."""
    if use_prio:
        need("prio")
    with Testbed(star(3), policy=DscpPriorityPolicy(use_prio_qdisc=use_prio), scale=1) as tb:
        shown = qdiscs_of(tb, *PORT)
        assert ("qdisc prio 2:" in shown) == use_prio, shown
        both = measure(tb, [Flow((2, 0), (0, 0), LOW), Flow((1, 0), (0, 0), HIGH)], [PORT])
        port = both.ports[PORT]
        high, low = (port.class_bps.get(c, 0.0) / port.wire_bps for c in (7, 0))
        assert high >= 0.97 and low <= 0.03, f"high {high:.4f} low {low:.4f} of {port.wire_bps / 1e6:.2f} Mbit/s"
        assert abs(port.error) < 0.03, f"wire {port.wire_bps / 1e6:.2f} Mbit/s against {RATE / 1e6:g}"
        alone = measure(tb, [Flow((2, 0), (0, 0), LOW)], [PORT], base_port=5301)
        port = alone.ports[PORT]
        assert port.class_bps.get(0, 0.0) >= 0.97 * port.wire_bps and port.error > -0.03


# --------------------------------------------------------------- netem
K = 1000
MODEL_RATE = RATE * K  # 20 Gbit/s model links
LINK_LATENCY = 2.5e-6  # model seconds per link: 10 us model RTT over 4 links -> 10 ms real


def ping_rtts(tb: Testbed, count: int = 20) -> list[float]:
    out = tb.node("h0").cmd(f"ping -n -c {count} -i 0.05 -W 2 {tb.address(1)}")
    rtts = [float(x) * 1e-3 for x in re.findall(r"time=([0-9.]+) ms", out)]
    assert len(rtts) == count, out
    return rtts[1:]  # the first one waits for ARP


def test_netem_ping_rtt_is_the_configured_latency_times_k():
    """h0 -> sw0 -> h1 and back crosses 4 egress queues, each delaying 2.5 us x k = 2.5 ms:
    every RTT is at least 10 ms, the median within 10 % above it."""
    need("netem")
    with Testbed(star(2, MODEL_RATE, LINK_LATENCY), policy="fifo", scale=K, latency="netem") as tb:
        assert tb.latency_mode == "netem"
        assert "netem" in qdiscs_of(tb, "h0", "h0-eth0")
        rtts = ping_rtts(tb)
    expected = 4 * LINK_LATENCY * K
    assert min(rtts) >= expected * 0.999, f"min RTT {min(rtts) * 1e3:.3f} ms < {expected * 1e3:.1f} ms"
    assert statistics.median(rtts) <= expected * 1.10, f"median RTT {statistics.median(rtts) * 1e3:.3f} ms"


def one_flow_job(size: int) -> Job:
    job = Job("latency")
    for s in range(2):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.flow("f", "w0", "w1", size)
    return job


def test_netem_flow_completion_time_is_transfer_plus_latency_times_k():
    """A 1 MB flow (0.42 s of wire time at 20 Mbit/s real, about 40 RTTs): its completion time,
    in model time, is the wire time plus the path's latency the way TCP meets it: the handshake's
    RTT (4 links) and the data's one-way trip (2 links), within half an RTT more for TCP's ramp
    (initial window 10 segments, the path holds 17) and 2 % of the wire time."""
    need("netem")
    size = 1_000_000
    with Testbed(star(2, MODEL_RATE, LINK_LATENCY), policy="fifo", scale=K, latency="netem") as tb:
        res = run(one_flow_job(size), by_name("fifo"), tb)
    assert any("netem" in n for n in res.notes), res.notes
    wire = wire_bytes(size) * 8 / MODEL_RATE
    rtt = 4 * LINK_LATENCY
    expected = wire + rtt + rtt / 2
    got = res.items["f"].duration
    assert expected * 0.99 <= got <= expected + rtt / 2 + 0.02 * wire, (
        f"FCT {got * 1e6:.1f} us model; wire {wire * 1e6:.1f} us + latency {1.5 * rtt * 1e6:.1f} us"
    )


# ------------------------------------------------------------------ fq
def test_pacing_holds_with_fq_leaves():
    """SO_MAX_PACING_RATE at half the link with fq as the sender's leaf queue: goodput is the
    pacing rate within 2 %, and fq did the pacing (its throttled counter moved)."""
    need("fq")
    pace = RATE / 2 * GOODPUT_FRACTION  # goodput bit/s: SO_MAX_PACING_RATE paces payload here
    with Testbed(star(2), policy="fifo", scale=1) as tb:
        h0 = tb.node("h0")
        out = h0.cmd("tc qdisc replace dev h0-eth0 parent 1:10 handle 10: fq")
        assert not out.strip(), out
        m = measure(tb, [Flow((0, 0), (1, 0), pace_bps=pace)], [("h0", "h0-eth0")])
        shown = qdiscs_of(tb, "h0", "h0-eth0")
    assert "qdisc fq 10:" in shown, shown
    throttled = re.search(r"throttled (\d+)", shown)
    assert throttled and int(throttled.group(1)) > 0, shown
    assert m.goodput_bps[0] == pytest.approx(pace, rel=0.02), f"goodput {m.goodput_bps[0] / 1e6:.3f} Mbit/s"
