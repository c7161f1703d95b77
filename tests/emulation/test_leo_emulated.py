"""LEO's request streams on the emulator: every request accounted for (each message sent, answered
once, its bytes equal), on persistent connections with framing (one per server pair and class),
one path per request, the datapath legs timed by the servers' own models; a message cut short
fails the run. k = 1000, 20 YCSB-C GETs at 100 krps model (100 real requests per second)."""

from pathlib import Path

import pytest

from emulator.runtime import Faults, run
from emulator.testbed import Testbed
from railbed.errors import RunFailed
from railbed.metrics import request_latencies
from railbed.spec import ClusterSpec
from schedulers import by_name
from simulator import simulate
from workloads.requests import requests

CLUSTER = Path(__file__).resolve().parents[2] / "scenarios" / "leo" / "cluster-f-nic-off-path.yaml"
N = 20


def test_every_request_is_sent_answered_and_complete():
    spec = ClusterSpec.load(CLUSTER)
    job = requests("kvs-c", load=1e5, requests=N, seed=4)
    with Testbed(spec, scale=1000) as tb:
        res = run(job, by_name("leo"), tb, timeout=60)
    flows = [r for r in res.items.values() if r.kind == "flow"]
    assert len(flows) == 4 * N  # two round trips, each a message out and one back
    assert all(r.end is not None and r.received == r.size for r in flows)  # nothing lost, nothing extra
    assert all(r.intra and r.intra > 0 for r in flows)  # every leg went through its server's datapath model
    for i in range(N):
        assert len({res.items[f"q{i}.{k}{d}"].option for k in (0, 1) for d in "ob"}) == 1
    assert len(request_latencies(res)) == N  # each request answered once
    assert "request messages on 2 persistent connections" in " ".join(res.notes)  # one each way, reused
    assert any(n.startswith("capacity (the datapath binds)") for n in res.notes)  # notes() on the emulator
    sim = simulate(job, by_name("leo"), spec)
    # LEO decides from completions (k_hat) and requests in progress, which the emulator's timing
    # moves by microseconds; with the thesis's capacities two paths are near ties, so a request may
    # go the other way (measured: 19 of 20 agree, for leo and leo-literal alike). Most must agree.
    same = sum(sim.items[f"q{i}.0o"].option == res.items[f"q{i}.0o"].option for i in range(N))
    assert same >= 0.8 * N, same


def test_a_message_cut_short_fails_the_run():
    spec = ClusterSpec.load(CLUSTER)
    job = requests("kvs-c", load=1e5, requests=6, seed=4)
    with Testbed(spec, scale=1000) as tb, pytest.raises(RunFailed, match=r"q3\.1b .*got 60 bytes of 64"):
        run(job, by_name("leo"), tb, timeout=60, faults=Faults(truncate={"q3.1b": 4}))
