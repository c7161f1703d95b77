"""The CASSINI and Crux scheduler classes and the job-priority baseline: on their pure parts with
stand-ins for the hooks' arguments, and on the simulators with the two-job mechanism."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from railbed.errors import SpecError
from railbed.scheduler import Decision
from schedulers.cassini import Cassini
from schedulers.cassini_alg import JobTraffic
from schedulers.crux import Crux, CruxProfile, assign
from schedulers.crux_alg import LinkJob

C = 100e9


@dataclass
class Item:  # an item as the core will offer it: its job's name and its iteration
    job: str
    iteration: int
    kind: str = "task"


@dataclass
class View:
    now: float = 0.0
    wakes: list = field(default_factory=list)

    def wake_at(self, t: float) -> None:
        self.wakes.append(t)


def test_cassini_shifts_the_arriving_job_against_a_running_one():
    """Two jobs each sending at the link rate for half of a 1 s iteration: the second arrival's
    plan puts it half a period after the first, whose phase is kept (it started at 0.2 s)."""
    sched = Cassini(tick=0.01)
    for name in ("a", "b"):
        sched.set_profile(JobTraffic(name, 1.0, {"up": [(0.0, 0.5, C)]}), {"up": C})
    assert sched.on_job_arrived("a", None, View(now=0.2)) == 0.0
    shift = sched.on_job_arrived("b", None, View(now=2.0))
    assert sched.last.shifts == pytest.approx({"a": 0.0, "b": 0.5}) and sched.last.score == pytest.approx(1.0)
    assert shift == pytest.approx(0.7)  # b starts at 2.7 = 0.2 + 0.5 + 2 periods
    assert "b shifted 0.7s against a" in sched.notes()[-1]
    sched.on_job_finished("a", View(now=3.0))
    assert sched.on_job_arrived("c", None, View(now=3.0)) == 0.0  # no profile: no shift
    with pytest.raises(SpecError, match="tick"):
        Cassini(tick=0)


# ------------------------------------------------------------------ on the simulators
def two_jobs(compute_a=1e-3, iterations=4):
    """The two-job mechanism (scenarios/mechanisms/two-jobs.yaml): ``periodic`` jobs of
    ``compute`` then a 1 ms flow (1,000,000 bytes on the wire at 8 Gbit/s), a on server 0 and b on
    server 1, both sending into server 2 through one switch port."""
    from railbed.jobs import JobEntry, merge, parse_placement
    from railbed.spec import ClusterSpec
    from workloads.mechanisms import periodic

    cl = ClusterSpec.from_dict({"servers": [{"count": 3, "gpus": 2, "nic_rate": "8Gbit"}],
                                "fabric": {"type": "single_switch"}})  # fmt: skip
    entries = [JobEntry(n, periodic(iterations, compute), 0.0, parse_placement({"explicit": {"g": s, "r": 2}}, "p"),
                        f"jobs[{s}]") for n, s, compute in (("a", 0, compute_a), ("b", 1, 1e-3))]  # fmt: skip
    return merge(entries, cl), cl


@pytest.mark.parametrize("name", ["fluid", "fluid-reference"])
def test_cassini_finds_the_half_period_shift_and_both_jobs_run_as_if_alone(name):
    """Hand arithmetic (scenarios/mechanisms/__init__.py, TWO_JOBS): c = p = 1 ms, a period of
    2 ms, 4 iterations: alone a job ends at 8 ms. CASSINI's plan from the jobs' profiles alone
    shifts b by half a period (1 ms): a ends at 8 ms, b at 1 + 8 = 9 ms, exactly as alone (fifo
    would give both 4 x (1 + 2) = 12 ms)."""
    from railbed.backend import RunOptions, backend
    from schedulers import by_name

    job, cl = two_jobs()
    sched = by_name("cassini")
    res = backend(name).run(job, sched, cl, RunOptions(analysis=False))
    assert sched.last.shifts == pytest.approx({"a": 0.0, "b": 1e-3}, abs=1e-12)
    assert res.items["b.c0"].start == pytest.approx(1e-3, rel=1e-12)
    assert res.items["a.f3"].end == pytest.approx(8e-3, rel=1e-9)
    assert res.items["b.f3"].end == pytest.approx(9e-3, rel=1e-9)


@pytest.mark.parametrize("name", ["fluid", "fluid-reference"])
def test_cassini_re_shifts_a_running_job_by_pausing_its_next_iteration(name):
    """Three periodic jobs into one port (8 Gbit/s; 478,154 bytes take 0.5 ms, 956,374 take 1 ms),
    4 iterations each, by hand on a 3 ms circle:
    a (2 ms compute, 1 ms send) sends at [2, 3); b (2.5 ms, 0.5 ms) arrives at 0 and CASSINI's
    two-job plan puts it at its first free shift, 0.5 ms: b sends at [0, 0.5) mod 3. c (1 ms,
    0.5 ms: period 1.5, twice on the circle) arrives at 6 ms: its two windows fit only at
    [0, 0.5) and [1.5, 2), so the three-job plan moves b to [0.5, 1) (shift 1 ms). Re-shifted, b
    is paused 0.5 ms before its next iteration (its third starts at 7 ms, not 6.5), c starts at
    6.5 ms, and nothing meets on the port: a ends at 12 ms as alone, b at 0.5 + 0.5 + 12 = 13 ms,
    c at 6.5 + 6 = 12.5 ms. Without re-shifting c's windows meet b's and a's: a and c end later."""
    from railbed.backend import RunOptions, backend
    from railbed.jobs import JobEntry, merge, parse_placement
    from railbed.spec import ClusterSpec
    from workloads.mechanisms import periodic

    cl = ClusterSpec.from_dict({"servers": [{"count": 4, "gpus": 3, "nic_rate": "8Gbit"}],
                                "fabric": {"type": "single_switch"}})  # fmt: skip
    spec = (("a", 0, 0.0, 2e-3, 956_374), ("b", 1, 0.0, 2.5e-3, 478_154), ("c", 2, 6e-3, 1e-3, 478_154))
    job = merge([JobEntry(n, periodic(4, comp, size), at, parse_placement({"explicit": {"g": s, "r": 3}}, "p"),
                          f"jobs[{s}]") for n, s, at, comp, size in spec], cl)  # fmt: skip
    ends = {}
    for reshift in (True, False):
        sched = Cassini(reshift=reshift)
        res = backend(name).run(job, sched, cl, RunOptions(analysis=False))
        ends[reshift] = {n: res.items[f"{n}.f3"].end for n in "abc"}
        if reshift:
            assert res.items["b.c2"].start == pytest.approx(7e-3, rel=1e-12)  # paused 0.5 ms
            assert any("b paused 0.0005s" in line for line in sched.notes())
    assert ends[True] == pytest.approx({"a": 12e-3, "b": 13e-3, "c": 12.5e-3}, rel=1e-9)
    assert ends[False]["a"] > 12e-3 + 1e-6 and ends[False]["c"] > 12.5e-3 + 1e-6


def test_crux_gives_the_more_gpu_intensive_job_the_higher_class():
    """a computes 2 ms per 1 MB flow, b 1 ms: intensities (Eq. 2, GPU-seconds over the longest
    per-link transfer, 956,374 bytes at 1e9 B/s) 2e-3 / 0.956374e-3 = 2.0912 and half that; they
    share the port into server 2, so Crux separates them: a in class 0 (DSCP 56), b in class 1
    (48), every flow of each job marked so, on the fluid simulator."""
    from railbed.backend import RunOptions, backend
    from schedulers import by_name
    from schedulers.crux import assign

    job, cl = two_jobs(compute_a=2e-3, iterations=2)
    sched = by_name("crux")
    res = backend("fluid").run(job, sched, cl, RunOptions(analysis=False))
    both = assign([sched.profiles["a"], sched.profiles["b"]], sched.bandwidth, 4, 10.0)
    assert both.intensity["a"] == pytest.approx(2e-3 / 0.956374e-3, rel=1e-9)
    assert both.intensity["b"] == pytest.approx(both.intensity["a"] / 2, rel=1e-9)
    assert both.level == {"a": 0, "b": 1}
    assert {res.items[f"a.f{k}"].dscp for k in range(2)} == {56}
    assert {res.items[f"b.f{k}"].dscp for k in range(2)} == {48}


def profile(name, work, link, transfer=1.0, compute=1.0):
    return CruxProfile(name, work, {link: 1e9 * transfer}, LinkJob(transfer, compute))


def test_crux_separates_contending_jobs_and_ignores_the_others():
    """A (intensity 4) and B (2) share the uplink, C (3) is alone: with two classes the DAG's
    one edge A->B is cut, A above B; A's flows get the top class selector."""
    bw = {"up": 1e9, "x": 1e9}
    a = assign([profile("A", 4, "up"), profile("B", 2, "up"), profile("C", 3, "x")], bw, levels=2, horizon=20)
    assert a.intensity == pytest.approx({"A": 4.0, "B": 2.0, "C": 3.0})
    assert a.level["A"] == 0 and a.level["B"] == 1
    assert a.dscp["A"] == 56 and a.dscp["B"] == 48
    assert a.cut == pytest.approx(4.0)


def test_crux_path_selection_puts_intensive_jobs_on_different_spines():
    bw = {"s1": 1e9, "s2": 1e9}
    paths = ((1e9, (("s1",), ("s2",))),)
    jobs = [CruxProfile(n, w, {}, LinkJob(1, 1), paths) for n, w in (("A", 5), ("B", 4))]
    a = assign(jobs, bw, levels=2, horizon=10)
    assert a.paths == {"A": [0], "B": [1]}
    assert a.cut == 0.0  # on different spines they no longer contend


@pytest.mark.parametrize("name", ["fluid", "fluid-reference"])
def test_crux_pins_each_jobs_transfers_to_the_spine_it_chose(name):
    """Two periodic jobs (1 ms compute, 1 ms flow at 8 Gbit/s, 4 iterations: 8 ms alone), a from
    server 0 to 2 and b from 1 to 3, servers 0-1 on leaf 0 and 2-3 on leaf 1, two spines, uplinks
    at 8 Gbit/s. ECMP's hash of these flow ids sends all eight over spine 1: both share leaf 0's
    uplink, every iteration takes 1 + 2 ms, 12 ms each (fifo). Crux (§4.1) gives a, first in its
    order, spine 0 and b the less loaded spine 1, and ``choose_spine`` pins their flows there:
    both run as if alone, 8 ms."""
    from railbed.backend import RunOptions, backend
    from railbed.jobs import JobEntry, merge, parse_placement
    from railbed.spec import ClusterSpec
    from schedulers.fifo import Fifo
    from workloads.mechanisms import periodic

    cl = ClusterSpec.from_dict({"servers": [{"count": 4, "gpus": 2, "nic_rate": "8Gbit"}], "fabric": {
        "type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": "8Gbit"}})  # fmt: skip
    job = merge([JobEntry(n, periodic(4), 0.0, parse_placement({"explicit": {"g": g, "r": r}}, "p"), f"jobs[{i}]")
                 for i, (n, g, r) in enumerate((("a", 0, 2), ("b", 1, 3)))], cl)  # fmt: skip
    for sched, spines, end in ((Fifo(), {"a": {1}, "b": {1}}, 12e-3), (Crux(), {"a": {0}, "b": {1}}, 8e-3)):
        res = backend(name).run(job, sched, cl, RunOptions(analysis=False))
        assert {n: {res.items[f"{n}.f{k}"].spine for k in range(4)} for n in "ab"} == spines, sched.name
        assert [res.items[f"{n}.f3"].end for n in "ab"] == pytest.approx([end, end], rel=1e-9), sched.name


def test_crux_marks_each_jobs_flows_with_its_class():
    sched = Crux(levels=2, horizon=20)
    bw = {"up": 1e9}
    sched.set_profile(profile("A", 4, "up"), bw)
    sched.set_profile(profile("B", 2, "up"), bw)
    view = View()
    sched.on_job_arrived("A", None, view)
    sched.on_job_arrived("B", None, view)
    assert sched.on_ready(Item("A", 0, "flow"), view) == Decision(dscp=56)
    assert sched.on_ready(Item("B", 0, "flow"), view) == Decision(dscp=48)
    assert sched.on_ready(Item("B", 0, "task"), view) == Decision()
    sched.on_job_finished("A", view)
    assert sched.last.level == {"B": 0}
    with pytest.raises(SpecError, match="levels"):
        Crux(levels=9)


def test_job_priority_ranks_jobs_by_arrival_onto_its_levels():
    from railbed.job import Flow
    from railbed.jobs import JobEntry, merge, parse_placement
    from railbed.spec import ClusterSpec
    from schedulers.multijob import JobPriority
    from workloads.mechanisms import periodic

    cl = ClusterSpec.rail_optimized(4, 2, spines=1, nic_rate=100e9)
    entries = [JobEntry(n, periodic(), at, parse_placement({"explicit": {"g": s, "r": s}}, "p"), f"jobs[{k}]")
               for k, (n, at, s) in enumerate((("c", 0.002, 0), ("a", 0.0, 1), ("b", 0.001, 2)))]  # fmt: skip
    job = merge(entries, cl)
    sched = JobPriority(levels=2)
    sched.place(job, cl)
    assert {j: sched.dscp(j) for j in "abc"} == {"a": 56, "b": 48, "c": 48}  # beyond two classes, one
    flow = next(it for it in job.items.values() if isinstance(it, Flow) and it.job == "a")
    assert sched.rule(flow, None, cl).dscp == 56
    full = JobPriority()
    full.place(job, cl)
    assert {j: full.dscp(j) for j in "abc"} == {"a": 56, "b": 48, "c": 40}
    with pytest.raises(SpecError, match="levels"):
        JobPriority(levels=0)


def test_job_metrics_read_the_per_job_results():
    import math

    from railbed.metrics import metric
    from railbed.results import RunResult

    per = {n: {"jct": v} for n, v in zip("abcd", (4.0, 1.0, 3.0, 2.0), strict=True)}
    r = RunResult("simulator", "jobs", "fifo", "c", jobs={"per_job": per, "cluster": {"gpu_busy_share": 0.25}})
    assert metric(r, "jct_mean") == 2.5 and metric(r, "jct_p99") == 4.0 and metric(r, "gpu_busy_share") == 0.25
    one = RunResult("simulator", "job", "fifo", "c")
    assert all(math.isnan(metric(one, m)) for m in ("jct_mean", "jct_p99", "gpu_busy_share"))
