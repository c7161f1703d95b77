"""ClusterSpec validation: every error names its field; good specs load."""

from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.spec import ClusterSpec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def rail(**fabric):
    return {"servers": [{"count": 2, "nics": 4, "nic_rate": "100Gbit"}], "fabric": {"type": "rail_optimized", **fabric}}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_load(path):
    spec = ClusterSpec.load(path)
    assert spec.servers and spec.summary().startswith("cluster ")


def test_rail_defaults_rails_to_nics():
    spec = ClusterSpec.from_dict(rail(spines=2))
    assert spec.fabric.rails == 4 and spec.fabric.spines == 2
    assert spec.servers[0].nic_rates == (100e9,) * 4
    assert spec.fabric.uplink_rate == 100e9


def test_heterogeneous_dgtp_testbed():
    spec = ClusterSpec.load(EXAMPLES / "dgtp-testbed.yaml")
    rates = [s.nic_rates[0] for s in spec.servers]
    assert rates == [50e9, 50e9, 10e9, 10e9]
    assert spec.servers[0].resources["cpu"] > 0


def test_roundtrip_to_dict():
    spec = ClusterSpec.load(EXAMPLES / "dgtp-testbed.yaml")
    again = ClusterSpec.from_dict(spec.to_dict())
    assert again.servers == spec.servers and again.fabric == spec.fabric


@pytest.mark.parametrize(
    "doc, field",
    [
        ({"servers": [{"nic_rate": "-5Gbit"}], "fabric": {"type": "single_switch"}}, "servers[0].nic_rate"),
        ({"servers": [{"nic_rate": 0}], "fabric": {"type": "single_switch"}}, "servers[0].nic_rate"),
        ({"servers": [{"nic_rate": "fast"}], "fabric": {"type": "single_switch"}}, "servers[0].nic_rate"),
        ({"servers": [{"nic_rate": 1e9}], "fabric": {"type": "torus"}}, "fabric.type"),
        ({"servers": [{"nic_rate": 1e9, "colour": "red"}], "fabric": {"type": "single_switch"}}, "servers[0].colour"),
        ({"servers": [{"nic_rate": 1e9}], "fabric": {"type": "single_switch"}, "extra": 1}, "extra"),
        ({"servers": [{"nic_rate": 1e9}], "fabric": {"type": "single_switch", "spines": 2}}, "fabric.spines"),
        ({"servers": [{"nic_rate": 1e9}], "fabric": {"type": "leaf_spine", "spines": 0}}, "fabric.spines"),
        (rail(rails=8), "fabric.rails"),
        (rail(rails=2), "fabric.rails"),
        ({"servers": [{"nic_rate": 1e9, "count": 0}], "fabric": {"type": "single_switch"}}, "servers[0].count"),
        (
            {"servers": [{"nic_rate": [1e9, 2e9], "nics": 3}], "fabric": {"type": "single_switch"}},
            "servers[0].nic_rate",
        ),
        (
            {"servers": [{"nic_rate": 1e9, "resources": {"cpu": -1}}], "fabric": {"type": "single_switch"}},
            "servers[0].resources.cpu",
        ),
        ({"servers": [], "fabric": {"type": "single_switch"}}, "servers"),
        (
            {"servers": [{"nic_rate": 1e9, "intra_host": "dgx-9"}], "fabric": {"type": "single_switch"}},
            "servers[0].intra_host",
        ),
        ({"fabric": {"type": "single_switch"}}, "servers"),
        ({"servers": [{"nic_rate": 1e9}], "fabric": {"type": "single_switch", "latency": "-1us"}}, "fabric.latency"),
    ],
)
def test_errors_name_the_field(doc, field):
    with pytest.raises(SpecError) as err:
        ClusterSpec.from_dict(doc)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_malformed_yaml_names_file_and_line():
    with pytest.raises(SpecError) as err:
        ClusterSpec.from_yaml("servers: [\n  {nic_rate: 1e9\nfabric: x", source="bad.yaml")
    assert err.value.field == "bad.yaml" and "line" in str(err.value)


def test_missing_file():
    with pytest.raises(SpecError) as err:
        ClusterSpec.load("/nonexistent/cluster.yaml")
    assert "cannot read" in str(err.value)
