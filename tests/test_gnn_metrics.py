"""The metrics issue 29's rows read, by hand: a server's summed fetch time, remote bytes, and the
alpha-beta model's error (eq. 5 of AdaGL)."""

import math

import pytest

from railbed.metrics import alpha_beta_error, flow_bytes, metric, receiver_comm, remote_bytes
from railbed.results import ItemRecord, RunResult

ALPHA, BETA = 0.002, 1e-9


def _run(coflows):
    """coflows: (id, dst server, [(src server, bytes)], ready); each ends at ready + alpha r + beta n."""
    r = RunResult("simulator", "j", "fifo", "c")
    for cid, dst, flows, ready in coflows:
        n = sum(b for _, b in flows)
        end = ready + ALPHA * len(flows) + BETA * n
        for k, (src, b) in enumerate(flows):
            r.items[f"{cid}.{k}"] = ItemRecord(f"{cid}.{k}", "flow", ready, ready, end, server=src, dst_server=dst,
                                               size=b, attrs={"coflow": cid})  # fmt: skip
    return r


def test_receiver_comm_sums_single_destination_coflows():
    run = _run([("a", 0, [(1, 10**6), (2, 10**6)], 0.0), ("b", 0, [(1, 10**6)], 1.0), ("c", 1, [(0, 5 * 10**6)], 0.0)])
    got = receiver_comm(run)
    assert got[0] == pytest.approx(2 * ALPHA + 2e6 * BETA + ALPHA + 1e6 * BETA)
    assert got[1] == pytest.approx(ALPHA + 5e6 * BETA)
    assert metric(run, "receiver_comm_max") == max(got.values())
    run.items["x"] = ItemRecord("x", "flow", 0, 0, 9, server=0, dst_server=0, size=7, attrs={"coflow": "x"})
    assert remote_bytes(run) == 2e6 + 1e6 + 5e6  # the same-server flow does not count
    assert flow_bytes(run) == metric(run, "bytes") == 2e6 + 1e6 + 5e6 + 7


def test_alpha_beta_error_is_zero_on_alpha_beta_data_and_not_otherwise():
    rows = [(f"c{k}", k % 3, [(s, (k + 1) * 10**6 * (s + 1)) for s in range(3) if s != k % 3][: 1 + k % 2], k * 0.1)
            for k in range(12)]  # fmt: skip
    run = _run(rows)
    assert alpha_beta_error(run) == pytest.approx(0.0, abs=1e-9)
    late = run.items["c0.0"]
    run.items["c0.0"] = ItemRecord(late.id, "flow", late.ready, late.start, late.end + 0.05, server=late.server,
                                   dst_server=late.dst_server, size=late.size, attrs=late.attrs)  # fmt: skip
    assert alpha_beta_error(run) > 0.01
    assert math.isnan(alpha_beta_error(_run([("a", 0, [(1, 5)], 0.0)])))


def test_nodes_per_second_counts_trained_tags_over_the_makespan():
    r = RunResult("simulator", "j", "fifo", "c", makespan=2.0)
    r.items["a"] = ItemRecord("a", "task", 0, 0, 1, attrs={"tags": {"trained": 300}})
    r.items["b"] = ItemRecord("b", "task", 0, 1, 2, attrs={"tags": {"trained": 100}})
    r.items["c"] = ItemRecord("c", "task", 0, 0, 2)
    assert metric(r, "nodes_per_second") == pytest.approx(200.0)


def test_compute_max_and_the_epoch_tags_by_hand():
    r = RunResult("simulator", "j", "fifo", "c", makespan=4.0)
    r.items["a"] = ItemRecord("a", "task", 0, 0, 1, server=0, attrs={"tags": {"trained": 3}})
    r.items["b"] = ItemRecord("b", "task", 1, 1, 2.5, server=0, attrs={"tags": {"trained": 3}})
    r.items["c"] = ItemRecord("c", "task", 0, 0, 2, server=1, attrs={"tags": {"trained": 3}})
    r.items["d"] = ItemRecord("d", "task", 0, 0, 4, server=1)  # trains nothing: not counted
    assert metric(r, "compute_max") == pytest.approx(2.5)
    assert math.isnan(metric(r, "edge_cut"))
    r.items["f"] = ItemRecord("f", "flow", 0, 0, 1, attrs={"tags": {"epoch": {"edge_cut": 0.25, "imbalance": 0.5}}})
    assert metric(r, "edge_cut") == 0.25 and metric(r, "imbalance") == 0.5


def test_an_epoch_run_carries_its_partitions_cut_and_imbalance():
    from railbed.backend import RunOptions, backend
    from railbed.spec import ClusterSpec
    from schedulers import by_name
    from workloads.gnn_epoch import gnn_epoch

    cluster = ClusterSpec.from_dict({"name": "c", "servers": [{"count": 4, "gpus": 1, "nics": 1, "nic_rate": "10Gbit"}],
                                     "fabric": {"type": "single_switch"}})  # fmt: skip
    got = {}
    for name in ("hash", "metis"):
        job = gnn_epoch(dataset="ogbn-arxiv", servers=4, capacity=[1, 1, 2, 2], scale=0.02, batch=200, partitioner=name)
        got[name] = backend("fluid").run(job, by_name("fifo"), cluster, RunOptions(analysis=False))
    assert metric(got["metis"], "edge_cut") < 0.5 * metric(got["hash"], "edge_cut")
    assert metric(got["hash"], "imbalance") < 0.05 < metric(got["metis"], "imbalance")  # METIS ignores P_i
    assert 0 < metric(got["metis"], "compute_max") < got["metis"].makespan
