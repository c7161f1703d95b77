"""Topology: addresses, links and paths of each fabric (pure)."""

import pytest

from railbed.spec import ClusterSpec
from railbed.topology import Topology


def test_rail_optimized_structure_and_paths():
    topo = Topology(ClusterSpec.rail_optimized(servers=4, rails=4, spines=2))
    assert topo.switches == ["rail0", "rail1", "rail2", "rail3"]
    assert len(topo.links) == 16 + 4 * 2
    topo.check_addresses()
    # NIC i of every server is on rail i
    for s in range(4):
        for i in range(4):
            assert topo.nics[s][i].leaf == i
    same = topo.path((0, 2), (3, 2))
    assert [h.node for h in same] == ["h0", "rail2"]
    cross = topo.path((0, 1), (3, 2), spine=1)
    assert [h.node for h in cross] == ["h0", "rail1", "spine1", "rail2"]
    assert cross[1].ifname == "rail1-sp1" and cross[2].ifname == "spine1-eth2"


def test_leaf_spine_and_single_switch():
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": 6, "nic_rate": 1e9}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 4, "spines": 3},
        }
    )
    topo = Topology(spec)
    assert topo.switches == ["leaf0", "leaf1"] and len(topo.spines) == 3
    assert len(topo.path((0, 0), (3, 0))) == 2
    assert len(topo.path((0, 0), (5, 0))) == 4
    single = Topology(
        ClusterSpec.from_dict({"servers": [{"count": 3, "nic_rate": 1e9}], "fabric": {"type": "single_switch"}})
    )
    assert single.spines == [] and len(single.links) == 3


def test_rail_without_spines_cannot_route_across_rails():
    topo = Topology(ClusterSpec.rail_optimized(servers=2, rails=2, spines=0))
    with pytest.raises(ValueError):
        topo.path((0, 0), (1, 1))


def test_interface_names_fit_linux_limit():
    topo = Topology(ClusterSpec.rail_optimized(servers=128, rails=8, spines=4))
    assert max(len(p.ifname) for p in topo.ports.values()) <= 15
    topo.check_addresses()
