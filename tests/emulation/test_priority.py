"""DSCP strict priority at a shared, shaped switch port (and FIFO as the control)."""

from emulator.loadtest import Flow, measure
from emulator.testbed import Testbed
from railbed.spec import ClusterSpec

SPEC = ClusterSpec.from_dict({"servers": [{"count": 3, "nic_rate": 100e6}], "fabric": {"type": "single_switch"}})
PORT = ("sw0", "sw0-eth0")  # the switch port towards h0: both flows' bottleneck
HIGH, LOW = 46, 0  # classes 5 and 0


def shares(m):
    p = m.ports[PORT]
    return p.share(5), p.share(0), p


def test_high_class_takes_the_link_and_low_class_alone_gets_it_all():
    with Testbed(SPEC, policy="dscp-priority", scale=1) as tb:
        both = measure(tb, [Flow((2, 0), (0, 0), LOW), Flow((1, 0), (0, 0), HIGH)], [PORT])
        high, low, port = shares(both)
        assert high >= 0.95 and low <= 0.05, f"high {high:.3f} low {low:.3f}"
        # shaped: never over the configured rate. Under it is the senders' (a TCP stall: one run
        # beside another section's run was 3.1 % under, with 62 drops; 10 quiet runs within 0.2 %):
        # the port's use is checked alone, below.
        assert port.error < 0.03, port
        alone = measure(tb, [Flow((2, 0), (0, 0), LOW)], [PORT], base_port=5301)
        _, low_alone, port = shares(alone)
        assert low_alone >= 0.95 and port.wire_bps >= 0.95 * port.configured_bps


def test_fifo_gives_no_priority():
    """Control: with the FIFO policy the same two flows share the port."""
    with Testbed(SPEC, policy="fifo", scale=1) as tb:
        m = measure(tb, [Flow((2, 0), (0, 0), LOW), Flow((1, 0), (0, 0), HIGH)], [PORT])
        assert min(m.goodput_bps) > 0.15 * sum(m.goodput_bps), m.goodput_bps
