"""The scenario key ``capture``: parsed and checked against the topology (no root, no Mininet)."""

import pytest

from emulator.capture import CaptureSpec, parse_capture
from railbed.errors import SpecError
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from scenarios.runner import Scenario

TOPO = Topology(ClusterSpec.rail_optimized(servers=4, rails=4, spines=2, nic_rate=100e9, uplink_rate=100e9))


def test_list_and_mapping_forms():
    assert parse_capture(["rail0:rail0-eth2"], TOPO) == CaptureSpec((("rail0", "rail0-eth2"),))
    spec = parse_capture({"ports": ["h0:h0-eth1"], "snaplen": 96, "max_bytes": "1MB"}, TOPO)
    assert spec == CaptureSpec((("h0", "h0-eth1"),), 96, 10**6)
    assert spec.max_packets == (10**6 - 24) // (16 + 96)
    assert parse_capture(None, TOPO) is None


@pytest.mark.parametrize(
    "raw, field, words",
    [
        (["rail0:rail0-eth9"], "capture[0]", "ports of rail0: rail0-eth0"),
        (["leaf7:x"], "capture[0]", "no node 'leaf7'"),
        (["rail0"], "capture[0]", "node:interface"),
        ([], "capture", "non-empty"),
        ({"ports": ["h0:h0-eth0"], "snaplen": 20}, "capture.snaplen", "64..65535"),
        ({"ports": ["h0:h0-eth0"], "max_bytes": 100}, "capture.max_bytes", "too small"),
        ({"ports": ["h0:h0-eth0"], "max_bytes": "-1MB"}, "capture.max_bytes", "must not be negative"),
        ({"ports": ["h0:h0-eth0", "h0:h0-eth0"]}, "capture.ports", "twice"),
        ({"ports": ["h0:h0-eth0"], "filter": "tcp"}, "capture.filter", "unknown key"),
        ("h0:h0-eth0", "capture", "expected a list"),
    ],
)
def test_bad_capture_names_the_field(raw, field, words):
    with pytest.raises(SpecError) as err:
        parse_capture(raw, TOPO)
    assert err.value.field == field and words in err.value.message


def test_scenario_key():
    data = {
        "cluster": TOPO.spec.to_dict(),
        "job": {"generator": "all_to_all", "args": {"n": 2, "size": "1MB"}},
        "schedulers": ["fifo"],
        "capture": ["rail0:rail0-eth2"],
    }
    sc = Scenario.from_dict(data)
    assert sc.settings["emulate"].capture.ports == (("rail0", "rail0-eth2"),)
    data["capture"] = ["rail0:nope"]
    with pytest.raises(SpecError, match="capture\\[0\\]"):
        Scenario.from_dict(data)
    del data["capture"]
    assert "emulate" not in Scenario.from_dict(data).settings
