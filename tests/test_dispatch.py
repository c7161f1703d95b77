"""The backend-neutral dispatcher: dependencies, device slots, hooks, legs, errors."""

import heapq

import pytest

from railbed.dispatch import Dispatcher, RunStalled, SchedulerError, SetRate, StartFlow, StartWait
from railbed.job import Job, Leg, Location, PathOption
from railbed.spec import ClusterSpec
from schedulers import HOLD, Decision, Scheduler, by_name
from workloads.llm import hybrid_parallel

SPEC = ClusterSpec.load("examples/rail-4x4.yaml")


def drive(d: Dispatcher, flow_seconds=lambda a: 1e-3) -> list:
    """A toy backend: waits take their time, a flow takes flow_seconds(action)."""
    heap: list = []
    seq = 0
    log = []

    def push(actions, now):
        nonlocal seq
        for a in actions:
            log.append((now, a))
            if isinstance(a, StartWait):
                heapq.heappush(heap, (now + a.seconds, seq, "wait", a.key))
            elif isinstance(a, StartFlow):
                heapq.heappush(heap, (now + flow_seconds(a), seq, "flow", a.id))
            seq += 1

    push(d.begin(0.0), 0.0)
    while heap:
        t, _, kind, key = heapq.heappop(heap)
        push(d.wait_done(key, t) if kind == "wait" else d.flow_done(key, t), t)
    assert d.finished
    return log


def test_every_item_starts_after_its_dependencies_end():
    job = hybrid_parallel(dp=4, pp=2, microbatches=2, iterations=2, layout="rail")
    d = Dispatcher(job, by_name("fifo"), SPEC)
    drive(d)
    res = d.result("toy")
    for item in job.items.values():
        rec = res.items[item.id]
        for dep in item.deps:
            assert rec.ready >= res.items[dep].end and rec.start >= res.items[dep].end
    assert res.makespan == max(r.end for r in res.items.values())
    assert set(res.iterations) == {0, 1} and all(v > 0 for v in res.iterations.values())


def test_device_capacity_queues_the_third_task():
    job = Job(capacity={"gpu0": 2})
    job.endpoint("a", Location(0, "gpu0", 0))
    for i in range(3):
        job.task(f"t{i}", "a", 1.0)
    d = Dispatcher(job, by_name("fifo"), SPEC)
    first = d.begin(0.0)
    assert [a.key for a in first] == ["t0", "t1"]
    assert [a.key for a in d.wait_done("t0", 1.0)] == ["t2"]
    res = (d.wait_done("t1", 1.0), d.wait_done("t2", 2.0), d.result("toy"))[-1]
    assert res.items["t2"].ready == 0.0 and res.items["t2"].start == 1.0


class HoldUntilTaskDone(Scheduler):
    name = "hold"

    def on_ready(self, item, view):
        if item.id == "f" and "t" not in view.done:
            return HOLD
        return Decision(dscp=10)


def test_held_items_are_offered_again_after_each_event():
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.task("t", "a", 5.0)
    job.flow("f", "a", "b", 100)
    d = Dispatcher(job, HoldUntilTaskDone(), SPEC)
    assert [type(a) for a in d.begin(0.0)] == [StartWait]
    assert d.view.held == ["f"]
    flow = d.wait_done("t", 5.0)
    assert isinstance(flow[0], StartFlow) and flow[0].dscp == 10


def test_a_scheduler_that_holds_forever_stalls_loudly():
    class Never(Scheduler):
        name = "never"

        def on_ready(self, item, view):
            return HOLD

    job = Job()
    job.endpoint("a")
    job.task("t", "a", 1.0)
    with pytest.raises(RunStalled, match="never holds 1"):
        Dispatcher(job, Never(), SPEC).begin(0.0)


class HalveOnSecondFlow(Scheduler):
    name = "halve"

    def on_ready(self, item, view):
        return Decision(rate=10e9 if item.id == "big" else None)

    def on_flows_changed(self, view):
        return {"big": 5e9} if "small" in view.active and "big" in view.active else {}


def test_flow_set_changes_turn_into_rate_changes():
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.task("wait", "b", 1.0)
    job.flow("big", "a", "b", 10**9)
    job.flow("small", "b", "a", 10, ["wait"])
    d = Dispatcher(job, HalveOnSecondFlow(), SPEC)
    d.begin(0.0)
    actions = d.wait_done("wait", 1.0)
    assert any(isinstance(a, StartFlow) and a.id == "small" for a in actions)
    assert SetRate("big", 5e9) in actions
    assert d.view.active["big"].rate == 5e9


def test_path_options_run_legs_and_cap_the_injection():
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 8, "nics": 4, "nic_rate": "100Gbit", "intra_host": "dgx1-v100"}],
         "fabric": {"type": "single_switch"}}
    )  # fmt: skip

    class PickSecond(Scheduler):
        name = "second"

        def choose_path(self, flow, view):
            return 1

    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    opts = [PathOption("fixed", Leg("gpu0", "nic0", 1.0)), PathOption("model", Leg("gpu0", "nic0"), extra=0.5)]
    job.flow("f", "a", "b", 10**8, options=opts)
    d = Dispatcher(job, PickSecond(), spec)
    (leg,) = d.begin(0.0)
    assert isinstance(leg, StartWait) and leg.key == "f/src" and 0 < leg.seconds < 1.0
    (net,) = d.wait_done("f/src", leg.seconds)
    # GPU0 -> NIC0 crosses one PCIe link: the model caps what the leg can inject
    assert isinstance(net, StartFlow) and net.rate == pytest.approx(11.13 * 8e9, rel=1e-6)
    (extra,) = d.flow_done("f", 1.0)
    assert extra.key == "f/dst" and extra.seconds == 0.5
    d.wait_done("f/dst", 1.5)
    assert d.finished and d.records["f"].option == "model" and d.records["f"].end == 1.5


def test_same_server_flows_use_the_host_model_or_take_zero_time():
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(0, "gpu1", 1))
    job.flow("f", "a", "b", 10**8)
    (w,) = Dispatcher(job, by_name("fifo"), SPEC).begin(0.0)
    assert w.seconds == 0.0
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 1, "gpus": 8, "nics": 4, "nic_rate": "100Gbit", "intra_host": "dgx1-v100"}],
         "fabric": {"type": "single_switch"}}
    )  # fmt: skip
    (w,) = Dispatcher(job, by_name("fifo"), spec).begin(0.0)
    # gpu0-gpu1 is one NVLink (NV1, 24.22 GB/s in DGCL Table 1)
    assert w.seconds == pytest.approx(1e8 / 24.22e9, rel=1e-3)


def test_scheduler_mistakes_are_named():
    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("f", "a", "b", 10)

    class BadDscp(Scheduler):
        name = "bad"

        def on_ready(self, item, view):
            return Decision(dscp=64)

    with pytest.raises(SchedulerError, match="DSCP 64"):
        Dispatcher(job, BadDscp(), SPEC).begin(0.0)

    class BadPlace(Scheduler):
        name = "badplace"

        def place(self, job, cluster):
            from railbed.job import Placement

            return Placement({"a": Location(0), "b": Location(9)})

    with pytest.raises(SchedulerError, match="pinned"):
        Dispatcher(job, BadPlace(), SPEC)


def test_unknown_scheduler_is_a_spec_error():
    from railbed.errors import SpecError

    with pytest.raises(SpecError) as err:
        by_name("magic", "schedulers[1]")
    assert err.value.field == "schedulers[1]" and "fifo" in str(err.value)


def test_example_scheduler_uses_every_hook_and_matches_the_architecture_doc():
    import inspect
    import re
    from pathlib import Path

    from schedulers.example import SmallFirst

    doc = (Path(__file__).resolve().parent.parent / "ARCHITECTURE.md").read_text()
    block = re.search(r"```python\n(class SmallFirst.*?)```", doc, re.S)
    assert block and block.group(1).strip() == inspect.getsource(SmallFirst).strip()
    assert len(block.group(1).strip().splitlines()) <= 75

    job = Job()
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("bulk", "a", "b", 100 << 20)
    for i in range(5):
        job.flow(f"tiny{i}", "a", "b", 1000, options=[PathOption("cpu"), PathOption("acc")])
    d = Dispatcher(job, SmallFirst(limit=4), SPEC)
    first = d.begin(0.0)
    flows = [a for a in first if isinstance(a, StartFlow)]
    assert [f.id for f in flows] == ["bulk", "tiny0", "tiny1", "tiny2"]  # the 4-flow limit holds the rest
    assert flows[0].dscp == 0 and all(f.dscp == 56 for f in flows[1:])
    assert SetRate("bulk", 50e9) in first  # urgent flows active: background capped to half the NIC
    assert d.view.held == ["tiny3", "tiny4"] and d.records["tiny0"].option == "acc"
    drive_rest = d.flow_done("tiny0", 1e-4)
    assert any(isinstance(a, StartFlow) and a.id == "tiny3" for a in drive_rest)
    bad = Job()
    bad.endpoint("a", Location(0, "gpu0", 0))
    bad.endpoint("b", Location(1, "gpu0", 0))
    bad.flow("f", "a", "b", 1000, options=[PathOption("fpga")])
    from railbed.errors import SpecError

    with pytest.raises(SpecError) as err:  # check: a path it does not know, named by its field
        SmallFirst().check(bad, SPEC)
    assert err.value.field == "items.f.options"
    SmallFirst().check(job, SPEC)
    assert d.scheduler.notes() == ["small-first: 1 flows done, at most 4 per NIC at once"]  # tiny0
