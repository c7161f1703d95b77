"""LEO's request streams on the emulator: every request accounted for (each message sent, answered,
its bytes equal), one path per request, the datapath legs timed by the servers' own models.

The emulator carries each message as its own TCP connection (persistent connections with framing
in the agents are not built yet), so this runs a short KVS stream at a low real rate: k = 1000,
20 YCSB-C GETs at 100 krps model (100 real requests per second)."""

from pathlib import Path

from emulator.runtime import run
from emulator.testbed import Testbed
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
    sim = simulate(job, by_name("leo"), spec)
    assert [sim.items[f"q{i}.0o"].option for i in range(N)] == [res.items[f"q{i}.0o"].option for i in range(N)]
