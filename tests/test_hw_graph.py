"""Intra-host presets and routing."""

import itertools

import pytest

from hwmodels.graph import GB, from_dict, load_preset, presets
from railbed.errors import SpecError


def test_all_presets_load():
    assert set(presets()) >= {"dgx1-v100", "pcie8", "dgx-a100", "dgx-h100"}
    for name in presets():
        g = load_preset(name)
        assert len(g.gpus) == 8


def test_dgx1_six_nvlinks_and_two_hops():
    g = load_preset("dgx1-v100")
    assert all(g.nvlinks(x) == 6 for x in g.gpus)
    nv = {(lk.a, lk.b) for lk in g.links if lk.kind == "nvlink"}
    nv |= {(b, a) for a, b in nv}
    for a, b in itertools.permutations(g.gpus, 2):
        assert (a, b) in nv or any((a, c) in nv and (c, b) in nv for c in g.gpus), (a, b)
    # DGCL Table 1 speeds
    assert g.path_bandwidth("gpu0", "gpu3") == pytest.approx(48.35 * GB)  # NV2
    assert g.path_bandwidth("gpu0", "gpu1") == pytest.approx(24.22 * GB)  # NV1
    assert g.path_bandwidth("gpu0", "gpu5") == pytest.approx(9.56 * GB)  # PCIe-QPI-PCIe, QPI-bound


def test_p2p_route_never_relays_through_a_gpu():
    g = load_preset("dgx1-v100")
    ((path, frac),) = g.routes("gpu0", "gpu5")
    kinds = [g.links[d // 2].kind for d in path]
    assert kinds == ["pcie", "pcie", "qpi", "pcie", "pcie"] and frac == 1.0


def test_nvswitch_split_over_planes():
    g = load_preset("dgx-h100")
    routes = g.routes("gpu0", "gpu7")
    assert len(routes) == 4 and sum(f for _, f in routes) == pytest.approx(1.0)
    assert g.path_bandwidth("gpu0", "gpu7") == pytest.approx(18 * 25 * GB)
    assert all(g.nvlinks(x) == 18 for x in g.gpus)
    assert all(load_preset("dgx-a100").nvlinks(x) == 12 for x in g.gpus)


def test_loader_checks_link_counts_and_names():
    doc = {
        "name": "bad",
        "expect": {"nvlinks_per_gpu": 6},
        "nodes": {"gpu": ["g0", "g1"]},
        "links": [["g0", "g1", "nvlink", 2]],
    }
    with pytest.raises(SpecError, match="expected 6"):
        from_dict(doc)
    with pytest.raises(SpecError, match="unknown node"):
        from_dict({"name": "x", "nodes": {"gpu": ["g0"]}, "links": [["g0", "zz", "pcie"]]})
    with pytest.raises(SpecError, match="unknown node type"):
        from_dict({"name": "x", "nodes": {"tpu": ["t0"]}})
    with pytest.raises(SpecError, match="unknown preset"):
        load_preset("dgx-9000")


def test_join_puts_servers_side_by_side_through_their_nics_and_one_switch():
    from hwmodels.graph import join, load_preset

    dgx1 = load_preset("dgx1-v100")
    joined = join([dgx1, dgx1], ["nic0", "nic1"], [50e9, 25e9])
    inside = [n for n, t in dgx1.node_types.items() if t != "wire"]
    assert sorted(joined.node_types) == sorted(["switch", *(f"s{i}.{n}" for i in (0, 1) for n in inside)])
    nics = {(lk.a, lk.b, lk.bandwidth) for lk in joined.links if lk.kind == "nic"}
    assert nics == {("s0.nic0", "switch", 50e9), ("s1.nic1", "switch", 25e9)}  # the other NICs lead nowhere
    assert joined.path_bandwidth("s0.gpu0", "s1.gpu0") == 25e9  # the slower server's NIC bounds the path
    assert joined.path_bandwidth("s0.gpu0", "s0.gpu1") == dgx1.path_bandwidth("gpu0", "gpu1")  # inside: unchanged
