"""LEO datapath models and queue recurrences (6.1)/(6.2): hand cases, growth, kernel == reference."""

import numpy as np
import pytest

from hwmodels.graph import GB
from hwmodels.leo import (
    PATH_NAMES,
    RequestStream,
    datapath_model,
    datapath_spec,
    host_datapath,
    queue_jct,
    queue_jct_reference,
)
from hwmodels.plugin import DatapathHost, GraphHostModel, host_model
from railbed.hosts import HostLeg


def stream(model, arrivals, paths, size=0.0, acc=0.0, cpu=0.0, types=None):
    e = len(model.elements)
    compute = np.zeros((1, e))
    for host in ("req", "resp"):
        compute[0, model.index(f"{host}.acc")] = acc
        compute[0, model.index(f"{host}.cpu")] = cpu
    n = len(arrivals)
    return RequestStream(
        np.array(arrivals, dtype=float),
        np.zeros(n, dtype=int) if types is None else types,
        np.array([PATH_NAMES.index(p) for p in paths]),
        np.array([size]),
        compute,
    )


@pytest.mark.parametrize("kind", ["direct", "on-path", "off-path"])
def test_models_have_four_paths_ending_at_the_right_devices(kind):
    m = datapath_model(kind)
    for name in PATH_NAMES:
        src, dst = name.split("-")
        els = m.path_elements(name)
        assert els[0].name == f"req.{src}" and els[-1].name == f"resp.{dst}"
        assert all(e.kind == "link" for e in els[1:-1])
    if kind == "on-path":  # the CPU reaches the NIC through the accelerator
        assert [e.name for e in m.path_elements("cpu-cpu")][1:3] == ["req.cpu-acc", "req.acc-nic"]


def test_hand_computed_compute_queue():
    # Requests every 1 s, each needing 2 s on the responder's accelerator (capacity 1):
    # waits 0, 1, 2, 3 (the queue grows by 2 - 1 per step); JCT = wait + 2 + base link times.
    m = datapath_model("off-path")
    base = sum(e.traverse for e in m.path_elements("cpu-acc") if e.kind == "link")
    jct, wait = queue_jct(m, stream(m, [0.0, 1.0, 2.0, 3.0], ["cpu-acc"] * 4, acc=2.0))
    assert wait.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert jct.tolist() == pytest.approx([2.0 + base, 3.0 + base, 4.0 + base, 5.0 + base], abs=0)
    # the same with capacity 2: the queue never forms
    m2 = datapath_model("off-path", acc_capacity=2)
    _, wait2 = queue_jct(m2, stream(m2, [0.0, 1.0, 2.0, 3.0], ["cpu-acc"] * 4, acc=2.0))
    assert wait2.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_hand_computed_link_queue_and_drain():
    # PCIe at 1 Gbit/s and a size whose transfer time is 2**-10 s per link, exact in binary
    m = datapath_model("direct", pcie_gbps=1.0 / 8)  # 1e9 bit/s -> 1 byte = 8 ns
    arr = [0.0, 0.0, 0.0, 1.0]
    size = 125e6 / 1024  # bytes: 1/1024 s = 0.9765625 ms per PCIe link
    jct, wait = queue_jct(m, stream(m, arr, ["cpu-cpu"] * 4, size=size))
    ref_j, ref_w = queue_jct_reference(m, stream(m, arr, ["cpu-cpu"] * 4, size=size))
    work = 8 * size / 1e9
    links = 4  # req cpu-sw, sw-nic, resp sw-nic, cpu-sw
    assert wait.tolist() == [0.0, links * work, 2 * links * work, 0.0]  # drained after 1 s
    assert wait.tolist() == ref_w.tolist() and jct.tolist() == ref_j.tolist()


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("kind", ["direct", "on-path", "off-path"])
def test_kernel_matches_reference(seed, kind):
    rng = np.random.default_rng(seed)
    m = datapath_model(kind, cpu_capacity=int(rng.integers(1, 4)), acc_capacity=int(rng.integers(1, 4)))
    n, e = 300, len(m.elements)
    compute = rng.uniform(0, 3e-6, (3, e)) * (rng.random((3, e)) < 0.5)
    st = RequestStream(
        np.cumsum(rng.exponential(1e-6, n) * (rng.random(n) < 0.8)),
        rng.integers(0, 3, n),
        rng.integers(0, 4, n),
        rng.uniform(0, 8192, 3),
        compute,
    )
    fast = queue_jct(m, st)
    slow = queue_jct_reference(m, st)
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-9, atol=1e-15)


def test_overloaded_path_jct_rises():
    m = datapath_model("on-path")
    n = 200
    jct, _ = queue_jct(m, stream(m, np.arange(n) * 1e-6, ["acc-acc"] * n, acc=1.5e-6))
    assert np.all(np.diff(jct) > 0)
    light, _ = queue_jct(m, stream(m, np.arange(n) * 1e-6, ["acc-acc"] * n, acc=0.5e-6))
    assert np.ptp(light) == pytest.approx(0.0, abs=1e-15)


def test_plugin_contract():
    m = host_model("dgx1-v100")
    assert isinstance(m, GraphHostModel)
    t = m.leg(HostLeg("gpu0", "nic0", 64e6))
    assert t.inject_rate == pytest.approx(11.13 * GB)  # PCIe to the NIC's switch
    assert t.duration == pytest.approx(64e6 * 8 / (11.13 * GB), rel=1e-3)
    a, b = m.legs([HostLeg("gpu0", "gpu5", 1e6), HostLeg("gpu1", "gpu4", 1e6)])
    alone = m.leg(HostLeg("gpu0", "gpu5", 1e6)).duration
    latency = 5e-6  # five hops of 1 us, added once
    assert a.duration - latency == pytest.approx(2 * (alone - latency), rel=1e-6)  # they share QPI
    assert a.inject_rate == float("inf")
    d = DatapathHost(datapath_spec("f-nic", model="direct", acc_cores=1, compute={"f": {"acc": 2e-6}}))
    first, second = d.legs([HostLeg("acc", "nic", 4096, work="f"), HostLeg("acc", "nic", 4096, work="f")])
    assert second.duration > first.duration  # the second waits behind the first


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["direct", "on-path", "off-path"])
def test_stateful_host_legs_match_the_recurrences(seed, kind):
    """A run's per-server model (legs one at a time, numba step) == (6.1)/(6.2) applied literally
    to the same host and the same legs (queue_jct_reference), and == the batch kernel."""
    rng = np.random.default_rng(seed)
    cpu, acc = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    spec = datapath_spec("f-nic", model=kind, cpu_cores=cpu, acc_cores=acc, compute={"f": {"cpu": 2e-6, "acc": 1e-6}})
    host = DatapathHost(spec)
    n = 300
    start = np.cumsum(rng.exponential(0.7e-6, n) * (rng.random(n) < 0.8))
    legs = []
    for t in range(n):
        dev = ("cpu", "acc")[int(rng.integers(0, 2))]
        ends = (dev, "nic") if rng.random() < 0.5 else ("nic", dev)
        work = "f" if rng.random() < 0.6 else None
        legs.append(HostLeg(*ends, float(rng.uniform(0, 8192)), float(start[t]), work))
    got = np.array([host.leg(lg).duration for lg in legs])
    model = host_datapath(kind, cpu, acc, spec.pcie_gbps, spec.axi_gbps)
    names = list(model.paths)
    compute = np.zeros((n, len(model.elements)))
    paths = []
    for t, lg in enumerate(legs):
        dev = lg.src if lg.dst == "nic" else lg.dst
        name = f"{lg.src}>{lg.dst}"
        if lg.work:
            compute[t, model.index(dev)] = spec.compute["f"][dev]
        else:
            name += "/dma"
        paths.append(names.index(name))
    st = RequestStream(start, np.arange(n), np.array(paths), np.array([lg.nbytes for lg in legs]), compute)
    ref, _ = queue_jct_reference(model, st, names)
    fast, _ = queue_jct(model, st, names)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(got, fast, rtol=0, atol=0)
    assert np.any(got > np.array([host.cost(lg)[0] for lg in legs]) + 1e-12)  # some legs did queue


def test_stateful_host_refuses_time_going_back_and_other_legs():
    host = DatapathHost(datapath_spec("bf-3"))
    host.leg(HostLeg("cpu", "nic", 64, 1e-3))
    with pytest.raises(ValueError, match="before the last"):
        host.leg(HostLeg("cpu", "nic", 64, 0.5e-3))
    with pytest.raises(ValueError, match="between nic and cpu or acc"):
        host.leg(HostLeg("cpu", "acc", 64, 2e-3))


def test_presets_carry_the_calibration():
    f = datapath_spec("f-nic")
    assert f.cpu_cores / f.compute["kvs"]["cpu"] == pytest.approx(5e6 / 1.5)  # DrTM-KV's knee, ~1.5x below 5 Mrps
    assert f.acc_cores / f.compute["kvs"]["acc"] == pytest.approx(5e6)  # the single-path knee, Fig. 6.10a
    one = datapath_spec("f-nic", acc_cores=1, cpu_cores=2)  # a device capacity: fewer cores, shorter calls
    assert one.compute["kvs"] == {"cpu": pytest.approx(2 / (5e6 / 1.5)), "acc": pytest.approx(1 / 5e6)}
    assert datapath_spec("f-nic", compute={"kvs": {"acc": 3e-6}}).compute["kvs"]["acc"] == 3e-6  # overrides win
    b = datapath_spec("bf-3")
    assert 4 * b.compute["compress"]["cpu"] == pytest.approx(0.89e-3)
    assert 4 * b.compute["compress"]["acc"] == pytest.approx(2.18e-3)
    assert (b.pcie_gbps, b.nic_gbit, datapath_spec("g+f-nic").model) == (25.6, 200.0, "direct")
    assert b.work_time("reduce", "cpu", 5e9) == pytest.approx(1.0)  # 5 GB at 5 GB/s
