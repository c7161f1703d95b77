"""Release times (issue 44 item 4): an item's ``at`` honoured by every backend and understood
by the analysis; the job JSON round-trips it; bad values name the field."""

import random
from dataclasses import replace

import pytest

from railbed.analysis import RELEASE, critical_path, network_free_makespan, timeline_of
from railbed.backend import RunOptions, backend
from railbed.dispatch import Dispatcher
from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import by_name
from simulator import simulate
from simulator.packet import engine
from simulator.rules import simulate_compact
from tests.test_compact import random_job

GBIT = 1e9
SIZE = 1 << 20


def star(n=3, latency=0.0) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"name": "star", "servers": [{"count": n, "gpus": 1, "nic_rate": GBIT}],
         "fabric": {"type": "single_switch", "latency": latency}}
    )  # fmt: skip


def pinned(n=3) -> Job:
    job = Job("rel")
    for s in range(n):
        job.endpoint(f"s{s}", Location(s, "gpu0", 0))
    return job


def released_flow(at: float) -> Job:
    job = pinned()
    job.flow("f", "s0", "s1", SIZE, at=at)
    return job


@pytest.mark.parametrize("name", ["fluid", "fluid-reference", "fluid-rules"])
def test_a_flow_released_at_t_runs_from_t_for_its_bytes_over_the_rate(name):
    t = 0.003
    res = backend(name).run(released_flow(t), by_name("fifo"), star(), RunOptions())
    rec = res.items["f"]
    assert rec.ready == rec.start == t
    assert rec.end == pytest.approx(t + 8 * wire_bytes(SIZE) / GBIT, rel=1e-12)
    assert res.makespan == rec.end


@pytest.mark.packet
@pytest.mark.skipif(not engine.available(), reason="the ns3 package is not installed (railbed[packet])")
def test_a_flow_released_at_t_starts_at_t_on_the_packet_backend():
    t = 0.003
    options = RunOptions(analysis=False)
    alone = backend("packet").run(released_flow(0.0), by_name("fifo"), star(latency=5e-6), options).items["f"]
    rec = backend("packet").run(released_flow(t), by_name("fifo"), star(latency=5e-6), options).items["f"]
    assert rec.ready == pytest.approx(t, abs=1e-9) and rec.start == pytest.approx(t, abs=1e-9)
    assert rec.end - rec.start == pytest.approx(alone.end - alone.start, rel=1e-3)


def test_ready_is_the_later_of_the_dependencies_and_the_release():
    job = pinned()
    job.task("a", "s0", 0.002)
    job.flow("early", "s0", "s1", SIZE, deps=["a"], at=0.001)  # deps done at 2 ms: ready then
    job.flow("late", "s0", "s2", SIZE, deps=["a"], at=0.005)  # released at 5 ms
    for name in ("fluid", "fluid-rules"):
        res = backend(name).run(job, by_name("fifo"), star(), RunOptions())
        assert res.items["early"].ready == 0.002
        assert res.items["late"].ready == 0.005 == res.items["late"].start


def test_a_release_waits_as_a_release_not_as_a_hold_or_a_stall():
    """A scheduler that holds nothing and an item released later: the run neither stalls nor
    offers the item before its time."""
    offered = []

    class Spy(type(by_name("fifo"))):
        def on_ready(self, item, view):
            offered.append((item.id, view.now))
            return super().on_ready(item, view)

    job = pinned()
    job.task("t", "s0", 0.001, at=0.004)
    res = backend("fluid").run(job, Spy(), star(), RunOptions(analysis=False))
    assert offered == [("t", 0.004)] and res.items["t"].end == pytest.approx(0.005)


def test_network_free_bound_of_releases_only_is_the_last_release_plus_its_work():
    job = pinned()
    job.task("x", "s0", 0.001, at=0.002)
    job.task("y", "s1", 0.003, at=0.004)  # ends at 7 ms: the bound
    job.flow("z", "s0", "s2", SIZE, at=0.006)  # communication takes 0 s without a network
    cluster = star()
    fifo = by_name("fifo")
    disp = Dispatcher(job, fifo, cluster)
    assert network_free_makespan(job, fifo, cluster, disp.placement) == pytest.approx(0.007)
    for name in ("fluid", "fluid-rules"):
        res = backend(name).run(job, by_name("fifo"), cluster, RunOptions(analysis=True))
        a = res.analysis
        assert a["network_free_makespan"] == pytest.approx(0.007, rel=1e-12)
        assert a["critical_path"]["time"][RELEASE] == pytest.approx(0.006)  # z's release, then z
        assert a["critical_path"]["time"]["compute"] == 0.0
        assert a["critical_path"]["items"] == ["z"]


def test_the_critical_path_ends_at_a_release_instead_of_calling_it_idle_or_compute():
    job = pinned()
    job.task("a", "s0", 0.001)
    job.task("b", "s0", 0.002, deps=["a"], at=0.004)  # released 3 ms after a ended
    res = backend("fluid").run(job, by_name("fifo"), star(), RunOptions(analysis=True))
    cp = res.analysis["critical_path"]
    assert cp["items"] == ["b"] and cp["time"][RELEASE] == pytest.approx(0.004)
    assert cp["time"]["compute"] == pytest.approx(0.002) and cp["time"]["idle"] == 0.0
    disp = Dispatcher(job, by_name("fifo"), star())
    tl = timeline_of(res.items, disp.items, disp.topology)
    assert tl.release is not None and critical_path(tl)["time"][RELEASE] == cp["time"][RELEASE]


@pytest.mark.parametrize("scheduler", ["fifo", "megatron", "lina"])
def test_compact_engine_equals_the_dispatcher_with_releases_on_random_jobs(scheduler):
    """The kernel's release timers against the Dispatcher's release waits, item for item."""
    for seed in range(10):
        rng = random.Random(900 + seed)
        base, cluster = random_job(rng)
        job = Job(base.name, base.capacity, base.default_capacity)
        job.endpoints = dict(base.endpoints)
        for it in base.items.values():
            at = rng.choice([None, 0.0, rng.uniform(0, 2e-3), rng.choice([1e-3, 2e-3])])
            job._add(replace(it, at=at))
        ref = simulate(job, by_name(scheduler), cluster)
        got = simulate_compact(job, by_name(scheduler), cluster)
        times = got.times()
        for i, rec in ref.items.items():
            assert times[i] == pytest.approx((rec.ready, rec.start, rec.end), rel=1e-12, abs=1e-15), (seed, i)
            if i in job.items:  # not a sub-flow
                assert rec.ready >= (job.items[i].at or 0.0)


def test_job_json_round_trips_release_times_and_a_job_level_offset():
    job = released_flow(0.0025)
    job.task("t", "s0", 0.001)
    job.flow("g", "s1", "s2", SIZE, job="x")  # the job an item belongs to round-trips too
    again = Job.from_dict(job.to_dict())
    assert again.items["f"].at == 0.0025 and again.items["t"].at is None
    assert again.items["g"].job == "x" and again.items["f"].job is None
    doc = job.to_dict()
    doc["at"] = "1ms"  # a job-level offset for the whole job
    shifted = Job.from_dict(doc)
    assert shifted.items["f"].at == pytest.approx(0.0035) and shifted.items["t"].at == pytest.approx(0.001)


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [("item", -1, "items[0].at"), ("item", "soon", "items[0].at"), ("job", "-2ms", "at")],
)
def test_bad_release_times_name_the_field(where, value, field):
    doc = released_flow(0.0).to_dict()
    if where == "item":
        doc["items"][0]["at"] = value
    else:
        doc["at"] = value
    with pytest.raises(SpecError) as err:
        Job.from_dict(doc)
    assert err.value.field == field


def test_validate_refuses_a_release_made_in_python():
    job = pinned()
    job.task("t", "s0", 0.001, at=float("inf"))
    with pytest.raises(SpecError) as err:
        job.validate()
    assert err.value.field == "items.t.at"
