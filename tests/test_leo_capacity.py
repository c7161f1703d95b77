"""LEO as the thesis measures it: the knee finder, the compute-vs-network check, the heuristic's
variants on hand-computed cases, and a two-device toy whose best split is known by hand."""

import math
from pathlib import Path

import numpy as np
import pytest

from hwmodels.leo import rocev2_wire_bytes, tcp_wire_bytes
from railbed.errors import SpecError
from railbed.metrics import knee, request_latencies, steady_latencies
from railbed.spec import ClusterSpec
from schedulers import by_name
from schedulers.leo import PATHS, Leo, LeoLiteral, capacity_check
from schedulers.leo_alg import (
    bound_khat,
    max_rate,
    network_rate,
    path_penalty,
    saturated,
    single_path_rate,
    toll_matrix,
    update_khat_elements,
)
from simulator import simulate
from workloads import generate
from workloads.requests import requests

LEO = Path(__file__).resolve().parent.parent / "scenarios" / "leo"


# ------------------------------------------------------------------ the knee
def test_knee_is_the_last_load_within_the_multiple_of_the_lowest_loads_median():
    pts = [(1.0, 10.0), (2.0, 11.0), (3.0, 14.9), (4.0, 15.1), (5.0, 12.0)]
    assert knee(pts) == 3.0  # 14.9 <= 1.5 * 10; 4.0 is over, and 5.0 after it does not count
    assert knee(pts, 1.2) == 2.0 and knee(pts, 2.0) == 5.0
    assert knee(list(reversed(pts))) == 3.0  # order of the points does not matter
    assert knee([(1.0, 10.0), (2.0, math.nan), (3.0, 10.0)]) == 1.0  # no median (nothing done) is over
    assert knee([(7.0, 3.0)]) == 7.0 and math.isnan(knee([]))


def test_steady_latencies_leave_out_the_warm_up():
    res = simulate(requests("kvs-c", load=1e6, requests=100, arrival="constant"), by_name("acc-only"), toy())
    every, steady = request_latencies(res), steady_latencies(res)
    assert len(every) == 100 and len(steady) == 100 - 20  # arrivals at 0..99 us: the first 19.8 us are warm-up
    assert steady == every[20:]


def test_duration_gives_the_request_count():
    assert len([i for i in requests("kvs-c", load=2e6, duration=1e-3).items if i.startswith("a")]) == 2000
    job = generate("requests", {"preset": "kvs-c", "load": 3e6, "duration": "0.5ms"})
    assert sum(1 for i in job.items if i.startswith("a")) == 1500
    with pytest.raises(SpecError) as err:
        requests("kvs-c", requests=10, duration=1e-3)
    assert err.value.field == "duration"


# ---------------------------------------------------- compute against network
def test_max_rate_by_hand():
    # one type, two paths each on its own device (K = 8 servers of 2.4 us, K = 24 of 4.8 us): 3.33 + 5 M/s
    work = np.array([[[2.4e-6, 0.0], [0.0, 4.8e-6]]])
    cap = np.array([8.0, 24.0])
    rate, x = max_rate(work, cap, np.array([1.0]), np.ones((1, 2), bool))
    assert rate == pytest.approx(8 / 2.4e-6 + 5e6) and x[0] == pytest.approx([8 / 2.4e-6, 5e6])
    assert saturated(work, cap, x).tolist() == [0, 1]
    assert single_path_rate(work, cap, np.array([1.0]), [1]) == pytest.approx(5e6)
    # a link both paths cross (1 us per request, capacity 1) binds at 1 M/s whatever the split
    shared = np.concatenate([work, np.full((1, 2, 1), 1e-6)], axis=2)
    rate, x = max_rate(shared, np.array([8.0, 24.0, 1.0]), np.array([1.0]), np.ones((1, 2), bool))
    assert rate == pytest.approx(1e6) and 2 in saturated(shared, np.array([8.0, 24.0, 1.0]), x).tolist()
    # two types 3:1, the second only on path 0: 0.25 L * 2.4us <= 8 and the rest fills both devices
    two = np.array([[[2.4e-6, 0.0], [0.0, 4.8e-6]], [[2.4e-6, 0.0], [0.0, 4.8e-6]]])
    allowed = np.array([[True, True], [True, False]])
    rate, x = max_rate(two, cap, np.array([0.75, 0.25]), allowed)
    assert rate == pytest.approx(8 / 2.4e-6 + 5e6) and x[1, 1] == 0.0


def test_network_rate_and_framings():
    assert network_rate(np.array([8.0 * 148, 8.0 * 204]), np.array([100e9, 100e9])) == pytest.approx(100e9 / 1632)
    assert network_rate(np.array([0.0, 800.0]), np.array([1e9, 1e9])) == pytest.approx(1.25e6)
    assert tcp_wire_bytes(64) == 64 + 66 and tcp_wire_bytes(64 << 10) == 65536 + 46 * 66
    assert rocev2_wire_bytes(64, response=True) == 68 + 62  # LEO's 4 B header on a response (§6.4.3)
    assert rocev2_wire_bytes(64 << 10) == 65536 + 16 * 62  # 4096 B packets


def test_capacity_check_of_the_thesis_testbeds():
    kvs = ClusterSpec.load(LEO / "cluster-f-nic-off-path.yaml")
    c = capacity_check(requests("kvs-c", load=1e6, requests=50), kvs)
    assert c.single == {"cpu-only": pytest.approx(5e6 / 1.5), "acc-only": pytest.approx(5e6)}  # Fig. 6.10a's knees
    assert c.datapath == pytest.approx(5e6 / 1.5 + 5e6) and set(c.binds) == {"h1.cpu", "h1.acc"}
    # a GET's back messages (8 B index, 64 B value) are 204 B of TCP frames on the responder's 100 GbE
    assert c.network["tcp"] == pytest.approx(100e9 / (8 * 204)) and not c.network_bound
    assert c.split_room == pytest.approx(2 / 3)
    ebs = ClusterSpec.load(LEO / "cluster-f-nic-on-path.yaml")
    e = capacity_check(requests("ebs-64k", load=1e5, requests=20), ebs)
    assert e.network_bound and e.network["tcp"] == pytest.approx(100e9 / (8 * (65536 + 46 * 66)))
    assert e.split_room == pytest.approx(0.0) and "network-bound" in e.note()


# ------------------------------------------------------ the heuristic's variants
def test_parallel_divides_the_toll_by_the_servers():
    work = np.array([[4.8e-6, 0.0, 1e-8], [0.0, 2.4e-6, 1e-8]])  # (path, element): acc, cpu, a link
    cap = np.array([24.0, 8.0, 1.0])
    assert toll_matrix(work, cap, parallel=False).tolist() == work.tolist()  # the thesis: T_c
    assert toll_matrix(work, cap, parallel=True) == pytest.approx(np.array([[0.2e-6, 0, 1e-8], [0, 0.3e-6, 1e-8]]))


def test_shared_counts_a_device_once():
    # paths 0 and 1 both end on element 2 (say the responder's CPU); path 2 on element 3
    toll = np.array([[1.0, 0.0, 3.0, 0.0], [0.0, 1.0, 3.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    khat = np.zeros(4)
    update_khat_elements(khat, np.array([0, 2]), late=True)  # a late completion on path 0
    assert khat.tolist() == [1, 0, 1, 0]
    assert path_penalty(khat, toll, shared=True).tolist() == [4.0, 3.0, 0.0]  # path 1 sees element 2's queue
    per_path = np.array([1.0, 0.0, 0.0])  # the literal rule: only path 0 learnt
    assert path_penalty(per_path, toll, shared=False).tolist() == [4.0, 0.0, 0.0]
    update_khat_elements(khat, np.array([1, 2]), late=False)  # path 1 completes in its base time
    assert khat.tolist() == [1, 0, 0, 0]


def test_bound_caps_khat_by_the_requests_in_progress():
    assert bound_khat(np.array([5.0, 2.0, 0.0]), np.array([3.0, 4.0, 1.0])).tolist() == [3.0, 2.0, 0.0]


def test_literal_and_variant_schedulers_have_the_documented_switches():
    assert (LeoLiteral().bound, LeoLiteral().parallel, LeoLiteral().shared) == (False, False, False)
    assert (Leo().bound, Leo().parallel, Leo().shared) == (True, True, True)
    assert by_name("leo-literal").name == "leo-literal"


def test_variant_decisions_by_hand():
    # KVS on two F-NIC hosts; the tables are the scheduler's own, the numbers by hand
    sched = Leo()
    job = requests("kvs-c", load=1e6, requests=3)
    res = simulate(job, sched, ClusterSpec.load(LEO / "cluster-f-nic-off-path.yaml"))
    r, n = sched._types["get"], len(sched._cap) // 2
    cpu, acc = n, n + 1  # the responder's devices (each host: cpu, acc, then its links)
    assert sched._toll[r][PATHS.index("acc-acc"), acc] == pytest.approx(4.8e-6 / 24)  # T_c / K
    assert sched._toll[r][PATHS.index("cpu-cpu"), cpu] == pytest.approx(2.4e-6 / 8)
    # T: 4 legs on each host (2 messages each way), 0.5 us per AXI hop, 1 us per PCIe hop, plus the lookup
    assert sched._T[r][PATHS.index("acc-cpu")] == pytest.approx(4 * 0.5e-6 + 4 * 1e-6 + 2.4e-6)  # 8.4 us
    assert sched._T[r][PATHS.index("acc-acc")] == pytest.approx(8 * 0.5e-6 + 4.8e-6)  # 8.8 us
    assert res.items["q0.0o"].option == "acc-cpu"  # idle: the least T
    # k_hat 10 on the responder's CPU, 10 requests in flight there: acc-cpu 8.4 + 10 * 0.3 > acc-acc 8.8
    sched.khat[:], sched.busy[:] = 0, 0
    sched.khat[cpu], sched.busy[cpu] = 10, 10
    flow = job.items["q1.0o"]
    assert sched.decide(flow, None, list(PATHS)) == "acc-acc"
    sched.busy[cpu] = 1  # bound: one in flight there, k_hat counts 1: 8.4 + 0.3 < 8.8
    assert sched.decide(flow, None, list(PATHS)) == "acc-cpu"
    sched.bound = False  # unbounded: 10 again
    assert sched.decide(flow, None, list(PATHS)) == "acc-acc"


# ------------------------------------------------------------------ mechanism
def toy(cpu="2us", acc="1us"):
    """Two hosts, one CPU core (2 us a lookup) and one FPGA lane (1 us): 0.5 + 1 M lookups/s."""
    group = {"preset": "f-nic", "cpu_cores": 1, "acc_cores": 1, "compute": {"kvs": {"cpu": cpu, "acc": acc}}}
    servers = [{"count": 2, "gpus": 0, "nic_rate": "100Gbit", "datapath": group}]
    return ClusterSpec.from_dict({"servers": servers, "fabric": {"type": "single_switch"}})


def test_two_device_toy_leo_finds_the_split_known_by_hand():
    # 1.35 M GETs/s at constant gaps, 0.9 of the 1.5 M/s the two devices serve together (the LP says so):
    # a stable split sends 0.85..1 M/s to the FPGA, i.e. 63..74 % of the requests; acc-only (1 M/s) cannot.
    cluster, load = toy(), 1.35e6
    assert capacity_check(requests("kvs-c", load=load, requests=10), cluster).datapath == pytest.approx(1.5e6)
    job = requests("kvs-c", load=load, requests=3000, arrival="constant")
    res = simulate(job, by_name("leo"), cluster)
    on_acc = sum(res.items[f"q{i}.0o"].option.endswith("-acc") for i in range(3000)) / 3000
    assert 0.85 / 1.35 <= on_acc <= 1.0 / 1.35
    unloaded = np.median(steady_latencies(simulate(requests("kvs-c", load=1e4, requests=200), by_name("leo"), cluster)))
    assert np.median(steady_latencies(res)) < 1.5 * unloaded  # no queue grows
    acc = simulate(job, by_name("acc-only"), cluster)
    assert np.median(steady_latencies(acc)) > 5 * unloaded  # 0.35 M/s too many: its queue grows all run


def test_notes_carry_the_check():
    res = simulate(requests("kvs-c", load=1e6, requests=20), by_name("leo-literal"), toy())
    assert any(n.startswith("capacity (the datapath binds): best split over the datapath 1.5 M/s") for n in res.notes)
    assert any(n.startswith("leo-literal: requests per path:") for n in res.notes)
    fifo = simulate(requests("kvs-c", load=1e6, requests=5), by_name("fifo"), toy())
    assert not any(n.startswith("capacity") for n in fifo.notes)  # the default hook adds nothing


def test_curve_metrics_read_a_sweep():
    from railbed.metrics import curve_metric

    cluster = toy()
    runs = []
    for name in ("leo", "acc-only"):
        for load in (1e5, 1.2e6, 1.6e6):  # both devices serve 1.5 M/s, the FPGA alone 1 M/s
            sched = by_name(name)
            sched.label = f"{name}@{load:g}"
            runs.append(simulate(requests("kvs-c", load=load, duration=2e-3, arrival="constant"), sched, cluster))
    leo, acc = curve_metric("knee", runs, "leo", "acc-only")
    assert (leo, acc) == (1.2e6, 1e5)
    mine, ref = curve_metric("p50_at_knee", runs, "leo", "acc-only")
    assert mine == pytest.approx(ref, rel=0.05)  # at 0.1 M/s nothing queues on either
    with pytest.raises(KeyError, match="no runs greedy-intra@<load>"):
        curve_metric("knee", runs, "greedy-intra")
