"""The thin CASSINI and Crux scheduler classes, on their pure parts and with stand-ins for the
multi-job core's hooks (``item.job``, ``on_job_arrived``), which the core does not have yet."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from railbed.errors import SpecError
from railbed.scheduler import HOLD, Decision
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


def test_cassini_holds_the_next_iteration_by_its_shift():
    """Two jobs each sending at the link rate for half of a 1 s iteration: the second arrival's
    replan shifts one of them by half a period; its next iteration is held until then."""
    sched = Cassini(tick=0.01)
    for name in ("a", "b"):
        sched.set_profile(JobTraffic(name, 1.0, {"up": [(0.0, 0.5, C)]}), {"up": C})
    view = View(now=2.0)
    sched.on_job_arrived("a", None, view)
    assert sched.on_ready(Item("a", 0), view) == Decision()
    sched.on_ready(Item("a", 1), view)  # a is now in iteration 1
    sched.on_job_arrived("b", None, view)
    assert sched.last.shifts == pytest.approx({"a": 0.0, "b": 0.5}) and sched.last.score == pytest.approx(1.0)
    assert sched.on_ready(Item("b", 0), view) == HOLD and view.wakes == [2.5]
    assert sched.on_ready(Item("a", 2), view) == Decision()  # a's shift is 0
    assert sched.on_ready(Item("b", 0), View(now=2.5)) == Decision()
    assert "b 0.5s" in sched.notes()[-1]
    with pytest.raises(SpecError, match="tick"):
        Cassini(tick=0)


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
