"""LEO's hardware in a run: datapath from the cluster file, one stateful model per server,
legs queue across requests (eqs. 6.1/6.2), jitter at the requester's NIC from a seed."""

import pytest

from hwmodels.leo import datapath_spec
from hwmodels.plugin import DatapathHost
from railbed.errors import SpecError
from railbed.hosts import HostLeg
from railbed.job import Job, Leg, Location, PathOption
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from simulator import simulate


def cluster(servers=2, jitter=None, seed=0, **dp):
    group = {"preset": "f-nic", "compute": {"f": {"acc": "2us", "cpu": "1us"}}, **dp}
    if jitter:
        group.update(jitter=jitter, seed=seed)
    return ClusterSpec.from_dict(
        {
            "servers": [{"count": servers, "gpus": 0, "nic_rate": "100Gbit", "datapath": group}],
            "fabric": {"type": "single_switch"},
        }
    )


def acc_option(work="f"):
    return PathOption("acc-acc", Leg("acc", "nic", work=work), Leg("nic", "acc", work=work))


def request_job(pairs, n, size=64, work="f"):
    """``n`` requests at t = 0 over each (src server, dst server) pair, all on the acc-acc path."""
    job = Job("reqs")
    for a, b in pairs:
        job.endpoint(f"c{a}", pin=Location(a, "cpu"))
        job.endpoint(f"s{b}", pin=Location(b, "cpu"))
        for i in range(n):
            job.flow(f"r{a}{b}x{i}", f"c{a}", f"s{b}", size, options=[acc_option(work)])
    return job


def test_concurrent_legs_wait_in_the_servers_queues():
    c = cluster(acc_cores=1)
    res = simulate(request_job([(0, 1)], 3), Scheduler(), c)
    recs = [res.items[f"r01x{i}"] for i in range(3)]
    # the same legs fed by hand to a fresh model of each server, at the times the run started them
    src, dst = DatapathHost(c.servers[0].host_spec("datapath")), DatapathHost(c.servers[1].host_spec("datapath"))
    src_t = [src.leg(HostLeg("acc", "nic", 64, 0.0, "f")).duration for _ in recs]
    assert src_t[1] > src_t[0] and src_t[2] > src_t[1]  # the 2nd and 3rd wait for the accelerator
    net_end = {r.id: r.end for r in recs}  # each flow's end = its dst leg's end
    for r, t in zip(recs, src_t):
        assert r.intra > t  # src leg plus a dst leg
    order = sorted(recs, key=lambda r: r.end)
    dst_t = []
    for r, t in zip(recs, src_t):
        arrive = r.end - (r.intra - t)  # when its dst leg started
        dst_t.append((arrive, r.intra - t))
    dst_t.sort()
    for arrive, got in dst_t:
        assert got == pytest.approx(dst.leg(HostLeg("nic", "acc", 64, arrive, "f")).duration, rel=1e-9, abs=1e-15)
    assert order[-1].end == max(net_end.values())


def test_servers_of_one_preset_keep_their_own_queues():
    c = cluster(servers=4, acc_cores=1)
    alone = simulate(request_job([(0, 1)], 1), Scheduler(), c).items["r01x0"]
    both = simulate(request_job([(0, 1), (2, 3)], 1), Scheduler(), c)
    assert both.items["r01x0"].intra == pytest.approx(alone.intra, abs=0)
    assert both.items["r23x0"].intra == pytest.approx(alone.intra, abs=0)
    again = simulate(request_job([(0, 1)], 2), Scheduler(), c)  # the same server twice: the second waits
    assert again.items["r01x1"].intra > alone.intra


def test_jitter_is_drawn_from_its_seed_within_its_range():
    job = request_job([(0, 1)], 20)
    runs = [simulate(job, Scheduler(), cluster(jitter=["3us", "9us"], seed=s)) for s in (7, 7, 8)]
    draws = [[r.items[f"r01x{i}"].jitter for i in range(20)] for r in runs]
    assert draws[0] == draws[1]  # reproducible
    assert draws[0] != draws[2]  # and the seed matters
    assert all(6e-6 <= d <= 18e-6 for d in draws[0])  # both ends' NICs have the 3-9 us range
    plain = simulate(job, Scheduler(), cluster())
    assert all(plain.items[f"r01x{i}"].jitter is None for i in range(20))
    one = request_job([(0, 1)], 1)  # alone, the jitter adds to the flow's time
    late, calm = simulate(one, Scheduler(), cluster(jitter=["3us", "9us"])), simulate(one, Scheduler(), cluster())
    assert late.items["r01x0"].end == pytest.approx(calm.items["r01x0"].end + late.items["r01x0"].jitter, rel=1e-12)
    assert late.items["r01x0"].intra == calm.items["r01x0"].intra  # jitter is not intra-host time


def test_a_function_the_datapath_does_not_time_names_the_field():
    with pytest.raises(SpecError, match=r"items\.r01x0\.options\.acc-acc\.src_leg\.work"):
        simulate(request_job([(0, 1)], 1, work="nope"), Scheduler(), cluster())


def test_the_cluster_file_names_missing_and_unknown_datapath_fields():
    def load(dp):
        return ClusterSpec.from_dict(
            {"servers": [{"nic_rate": "100Gbit", "datapath": dp}], "fabric": {"type": "single_switch"}}
        )

    with pytest.raises(SpecError, match=r"servers\[0\]\.datapath\.preset: missing"):
        load({"model": "direct"})
    with pytest.raises(SpecError, match=r"servers\[0\]\.datapath\.preset: unknown datapath preset 'dpu'"):
        load({"preset": "dpu"})
    with pytest.raises(SpecError, match=r"servers\[0\]\.datapath\.compute\.f\.acc"):
        load({"preset": "bf-3", "compute": {"f": {"acc": "fast"}}})
    c = load({"preset": "bf-3", "cpu_cores": 4, "compute": {"f": {"acc": "5GB/s"}}})
    assert c.servers[0].host_spec("datapath") == datapath_spec("bf-3", cpu_cores=4, rate={"f": {"acc": 40e9}})
    assert ClusterSpec.from_dict(c.to_dict()) == c
