"""Scheduler interface v2 on the dispatcher and the simulator (the emulator's side is
tests/emulation/test_interface_emulated.py): arguments and labels, roles and resource
checks, flow progress, completion feedback, wake-ups, sub-flows and re-marking.

Cluster: 4 servers with one 8 Gbit/s NIC on one switch and no latency, so a
flow of ``S`` payload bytes alone takes ``T = 8 * wire_bytes(S) / 8e9``."""

import pytest

from railbed.dispatch import Dispatcher, RunStalled, SchedulerError, SetDscp, StartFlow, check_placement
from railbed.errors import SpecError
from railbed.job import Job, Location, Placement
from railbed.scheduler import HOLD, Change, Decision, Scheduler, Split, SubFlow
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import SchedulerSpec, make, scheduler_spec
from simulator import simulate
from simulator.fluid.network import NumbaNetwork, ReferenceNetwork

RATE = 8e9
SPEC = ClusterSpec.from_dict(
    {
        "servers": [{"count": 4, "gpus": 2, "nic_rate": RATE, "resources": {"cpu": 8, "mem": 48}}],
        "fabric": {"type": "single_switch"},
    }
)
S = 10_000_000
T = 8 * wire_bytes(S) / RATE


def pinned_job(n: int = 4) -> Job:
    job = Job("v2")
    for s in range(n):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    return job


# ------------------------------------------------------------ arguments


def test_scheduler_args_and_label_name_the_run():
    spec = scheduler_spec({"name": "small-first", "args": {"limit": 2}, "label": "sf2"}, "schedulers[1]")
    sched = make(spec, "schedulers[1]")
    assert sched.limit == 2 and sched.label == "sf2"
    job = pinned_job(2)
    job.flow("f", "w0", "w1", S)
    assert simulate(job, sched, SPEC).scheduler == "sf2"
    assert simulate(job, make(SchedulerSpec("small-first")), SPEC).scheduler == "small-first"


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"name": "small-first", "args": {"lim": 2}}, "schedulers[0].args.lim"),
        ({"name": "small-first", "args": {"limit": "2"}}, "schedulers[0].args.limit"),
        ({"name": "small-first", "args": {"limit": True}}, "schedulers[0].args.limit"),
        ({"name": "small-first", "args": {"limit": 0}}, "schedulers[0].args.limit"),  # the constructor's check
        ({"name": "small-first", "args": [1, 2]}, "schedulers[0].args"),
        ({"name": "small-first", "label": ""}, "schedulers[0].label"),
        ({"name": "magic"}, "schedulers[0]"),
        ({"nam": "fifo"}, "schedulers[0].nam"),
        (7, "schedulers[0]"),
    ],
)
def test_bad_scheduler_entries_name_the_field(entry, field):
    with pytest.raises(SpecError) as err:
        make(scheduler_spec(entry, "schedulers[0]"), "schedulers[0]")
    assert err.value.field == field


def test_scenario_labels_must_be_unique():
    from scenarios.runner import Scenario

    doc = {
        "cluster": SPEC.to_dict(),
        "job": {"generator": "all_to_all", "args": {"n": 2, "size": "1MB"}},
        "schedulers": ["fifo", {"name": "small-first", "label": "fifo"}],
    }
    with pytest.raises(SpecError) as err:
        Scenario.from_dict(doc)
    assert err.value.field == "schedulers[1]"
    doc["schedulers"][1]["label"] = "sf"
    assert [s.run_label for s in Scenario.from_dict(doc).schedulers] == ["fifo", "sf"]


# ------------------------------------------------------------ placement


def test_a_device_the_server_lacks_is_refused():
    job = Job()
    job.endpoint("a")
    job.endpoint("b", Location(1, "gpu0", 0))
    with pytest.raises(SchedulerError, match="device 'gpu7' does not exist on server 0"):
        check_placement(job, SPEC, Placement({"a": Location(0, "gpu7", 0), "b": Location(1, "gpu0", 0)}))
    check_placement(job, SPEC, Placement({"a": Location(0, "cpu", 0), "b": Location(1, "gpu0", 0)}))
    pinned = Job()
    pinned.endpoint("p", Location(0, "gpu2", 0))
    with pytest.raises(SpecError) as err:  # the job's own pin: bad input
        check_placement(pinned, SPEC, Placement({"p": Location(0, "gpu2", 0)}))
    assert err.value.field == "endpoints.p.pin"


def test_summed_demands_over_a_server_resources_name_endpoint_resource_and_amounts():
    job = Job()
    for i in range(3):
        job.endpoint(f"s{i}", role="sampler", demands={"cpu": 3, "mem": 7})
    assert job.endpoints_with("sampler") == ["s0", "s1", "s2"]
    two = {f"s{i}": Location(0, "cpu", 0) for i in range(2)}
    check_placement(job, SPEC, Placement({**two, "s2": Location(1, "cpu", 0)}))  # 6 of 8 cores
    with pytest.raises(SchedulerError) as err:
        check_placement(job, SPEC, Placement({**two, "s2": Location(0, "cpu", 0)}))
    assert "'s2'" in str(err.value) and "cpu on server" in str(err.value) and "9 used, 8 available" in str(err.value)


def test_gpu_demand_defaults_to_the_server_gpu_count():
    job = Job()
    for i in range(3):
        job.endpoint(f"w{i}", role="worker", demands={"gpu": 1})
    with pytest.raises(SchedulerError, match="gpu on server .*: 3 used, 2 available"):
        check_placement(job, SPEC, Placement({f"w{i}": Location(0, f"gpu{i % 2}", 0) for i in range(3)}))


def test_roles_and_demands_survive_json(tmp_path):
    job = Job()
    job.endpoint("ps", role="ps", demands={"cpu": 1, "mem": 5})
    job.save(tmp_path / "j.json")
    again = Job.load(tmp_path / "j.json")
    assert again.endpoints["ps"].role == "ps" and dict(again.endpoints["ps"].demands) == {"cpu": 1, "mem": 5}
    job.endpoint("bad", demands={"cpu": -1})
    with pytest.raises(SpecError) as err:
        job.validate()
    assert err.value.field == "endpoints.bad.demands.cpu"


# ------------------------------------------------------------- progress


class Watcher(Scheduler):
    """Wakes at the given times and writes down what the view says of every active flow."""

    name = "watcher"

    def __init__(self, times=(), remark=None):
        self.times, self.remark = list(times), remark
        self.seen: list[tuple[float, str, int, int | None, float, float]] = []
        self.done: list[tuple[str, float]] = []

    def on_ready(self, item, view):
        for t in self.times:
            view.wake_at(t)
        self.times = []
        return Decision(dscp=int(item.tags.get("dscp", 0)) if hasattr(item, "tags") else 0)

    def on_flows_changed(self, view):
        for fid, f in sorted(view.active.items()):
            self.seen.append((view.now, fid, f.delivered, f.remaining, f.current_rate, f.as_of))
        if self.remark and view.now >= self.remark[0] and self.remark[1] in view.active:
            fid = self.remark[1]
            self.remark = None
            return {fid: Change(dscp=56)}
        return {}

    def on_done(self, item, record, view):
        assert item.id in view.records and view.records[item.id] is record and record.end == view.now
        # records of finished items only, read through to the run's records
        assert set(view.records) == view.done and len(view.records) == len(view.done)
        assert all(r.end is not None for r in view.records.values())
        self.done.append((item.id, record.end))


@pytest.mark.parametrize("network", [NumbaNetwork, ReferenceNetwork])
def test_progress_is_exact_on_the_simulator(network):
    job = pinned_job()
    job.flow("a", "w0", "w2", S)
    job.flow("b", "w1", "w2", S, reveal="hidden")
    w = Watcher(times=[T / 2])
    res = simulate(job, w, SPEC, network=network)
    at_half = {fid: rest for t, fid, *rest in w.seen if t == pytest.approx(T / 2)}
    # two flows into one port: each at half the rate, a quarter of its bytes delivered at T/2
    for fid in ("a", "b"):
        delivered, remaining, rate, as_of = at_half[fid]
        assert delivered == pytest.approx(S / 4, rel=1e-6) and rate == pytest.approx(RATE / 2)
        assert as_of == pytest.approx(T / 2)
    assert at_half["a"][1] == S - at_half["a"][0] and at_half["b"][1] is None  # hidden: no remaining
    assert res.makespan == pytest.approx(2 * T)


def test_completion_feedback_comes_in_end_order_with_records():
    job = pinned_job()
    job.task("t", "w0", 0.5 * T)
    job.flow("small", "w1", "w2", S // 2)
    job.flow("big", "w1", "w3", S, deps=["t"])
    w = Watcher()
    res = simulate(job, w, SPEC)
    assert [i for i, _ in w.done] == res.finish_order()
    assert [e for _, e in w.done] == sorted(e for _, e in w.done)


# ------------------------------------------------------------- wake-ups


class Later(Scheduler):
    """Holds every flow until model time ``at`` (nothing else happens before)."""

    name = "later"

    def __init__(self, at: float, wake: bool = True):
        self.at, self.wake = at, wake

    def on_ready(self, item, view):
        if view.now < self.at:
            if self.wake:
                view.wake_at(self.at)
            return HOLD
        return Decision()


@pytest.mark.parametrize("network", [NumbaNetwork, ReferenceNetwork])
def test_a_wake_up_offers_held_items_again(network):
    job = pinned_job(2)
    job.flow("f", "w0", "w1", S)
    res = simulate(job, Later(3e-3), SPEC, network=network)
    assert res.items["f"].start == pytest.approx(3e-3) and res.makespan == pytest.approx(3e-3 + T)
    with pytest.raises(RunStalled):
        simulate(job, Later(3e-3, wake=False), SPEC, network=network)


def test_wake_at_refuses_nonsense():
    job = pinned_job(2)
    d = Dispatcher(job, Scheduler(), SPEC)
    for bad in (float("nan"), float("inf"), "1ms"):
        with pytest.raises(ValueError):
            d.view.wake_at(bad)


# ------------------------------------------------------------- sub-flows


class Splitter(Scheduler):
    """Splits every flow by ``plan(flow) -> {id: [SubFlow]}``."""

    name = "splitter"

    def __init__(self, plan):
        self.plan = plan

    def on_ready(self, item, view):
        if item.kind == "flow":
            return Split(self.plan(item, view))
        return Decision()


@pytest.mark.parametrize("network", [NumbaNetwork, ReferenceNetwork])
def test_chunks_in_turn_take_the_sum_and_the_original_ends_with_the_last(network):
    job = pinned_job(2)
    job.flow("f", "w0", "w1", 3 * S, coflow="c0")
    job.task("after", "w1", 0.0, deps=["f"])

    def chunks(item, view):
        return {item.id: [SubFlow(f"f.{k}", S, deps=(f"f.{k - 1}",) if k else ()) for k in range(3)]}

    res = simulate(job, Splitter(chunks), SPEC, network=network)
    assert res.items["f"].children == ["f.0", "f.1", "f.2"] and res.items["f.1"].parent == "f"
    assert res.items["f.2"].end == pytest.approx(3 * T) and res.items["f"].end == res.items["f.2"].end
    assert res.items["f.1"].start == pytest.approx(res.items["f.0"].end)
    assert res.items["f"].received == 3 * S and res.items["f.0"].attrs["coflow"] == "c0"
    assert res.items["after"].start == pytest.approx(3 * T)


def test_a_relay_through_another_server_carries_the_bytes_twice():
    job = pinned_job(3)
    job.flow("f", "w0", "w2", S)

    def relay(item, view):
        return {"f": [SubFlow("f.hop1", S, dst="w1"), SubFlow("f.hop2", S, src="w1", deps=("f.hop1",))]}

    res = simulate(job, Splitter(relay), SPEC)
    assert res.makespan == pytest.approx(2 * T) and res.items["f"].received == S
    assert (res.items["f.hop2"].server, res.items["f.hop2"].dst_server) == (1, 2)


class SplitBoth(Scheduler):
    """Holds until flows a and b are both ready, then splits them as ``parts``."""

    name = "split-both"

    def __init__(self, parts):
        self.parts = parts

    def on_ready(self, item, view):
        return Split(self.parts) if {"a", "b"} <= set(view.held) else HOLD


def two_into_w2() -> Job:
    job = pinned_job()
    job.flow("a", "w0", "w2", S)
    job.flow("b", "w1", "w2", S)
    return job


def test_a_coflow_split_with_dependencies_across_originals():
    """Two flows into w2 in two phases: phase 1 sends a's first half, phase 2 (after it) the rest."""
    parts = {
        "a": [SubFlow("a.1", S // 2), SubFlow("a.2", S - S // 2, deps=("a.1",))],
        "b": [SubFlow("b.2", S, deps=("a.1",))],
    }
    res = simulate(two_into_w2(), SplitBoth(parts), SPEC)
    assert res.items["b.2"].start == pytest.approx(res.items["a.1"].end)
    assert res.items["a"].end == res.items["a.2"].end and res.items["b"].received == S


def test_a_sub_flow_may_wait_for_one_listed_later_in_the_split():
    """Sub-flow deps across originals in any order (Hermod's EP sub-phases need it)."""
    parts = {"b": [SubFlow("b.2", S, deps=("a.1",))], "a": [SubFlow("a.1", S)]}
    res = simulate(two_into_w2(), SplitBoth(parts), SPEC)
    assert res.items["b.2"].start == pytest.approx(res.items["a.1"].end) == pytest.approx(T)


@pytest.mark.parametrize(
    "parts, match",
    [
        ({"f": [SubFlow("x", S - 1)]}, "leave w0 with"),
        ({"f": [SubFlow("x", S, dst="w1")]}, "leave w2 with [+]0"),  # the relay keeps the bytes
        ({"f": [SubFlow("x", S, deps=("y",)), SubFlow("y", 0, src="w1", dst="w2", deps=("x",))]}, "cycle"),
        ({"f": [SubFlow("x", S, deps=("nope",))]}, "not in the split"),
        ({"f": [SubFlow("f", S)]}, "not new"),
        ({"f": [SubFlow("x", S, dscp=64)]}, "DSCP"),
        ({"g": [SubFlow("x", S)]}, "include the offered"),
    ],
)
def test_bad_splits_are_refused(parts, match):
    job = pinned_job(3)
    job.flow("f", "w0", "w2", S)
    with pytest.raises(SchedulerError, match=match):
        simulate(job, Splitter(lambda item, view: parts), SPEC)


# ------------------------------------------------------------ re-marking


@pytest.mark.parametrize("network", [NumbaNetwork, ReferenceNetwork])
def test_a_remarked_flow_moves_to_the_higher_class(network):
    """Two flows share w2's port at half rate each; at T/2 flow b becomes class 7 and takes the
    whole port: b ends at T/2 + (S - S/4) time = 5T/4; a has its last 3/4 minus what it sent
    meanwhile... a: S/4 by T/2, nothing until 5T/4, then the rest alone: ends at 2T."""
    job = pinned_job()
    job.flow("a", "w0", "w2", S)
    job.flow("b", "w1", "w2", S)
    w = Watcher(times=[T / 2], remark=(T / 2, "b"))
    res = simulate(job, w, SPEC, policy="dscp-priority", network=network)
    assert res.items["b"].end == pytest.approx(1.25 * T) and res.items["a"].end == pytest.approx(2 * T)
    assert res.items["b"].remarked and res.items["b"].dscp == 0
    fifo = simulate(job, Watcher(times=[T / 2], remark=(T / 2, "b")), SPEC, policy="fifo", network=network)
    assert fifo.items["b"].end == pytest.approx(2 * T)  # one class under fifo: re-marking changes nothing


def test_remark_action_and_bad_dscp():
    job = pinned_job()
    job.flow("a", "w0", "w2", S)

    class Bad(Scheduler):
        name = "bad"

        def on_flows_changed(self, view):
            return {"a": Change(dscp=99)}

    with pytest.raises(SchedulerError, match="DSCP 99"):
        Dispatcher(job, Bad(), SPEC).begin()

    class Good(Scheduler):
        name = "good"

        def on_flows_changed(self, view):
            return {"a": Change(dscp=46)} if view.active["a"].dscp != 46 else {}

    actions = Dispatcher(job, Good(), SPEC).begin()
    assert isinstance(actions[0], StartFlow) and SetDscp("a", 46) in actions


def test_a_wake_up_reported_a_hair_early_still_happens_at_its_time():
    """Real clocks round: (t0 + k t - t0) / k can be a little below t. The scheduler must see t."""
    job = pinned_job(2)
    job.flow("f", "w0", "w1", S)
    d = Dispatcher(job, Later(1e-3), SPEC)
    (wake,) = d.begin(0.0)
    assert wake.key.startswith("/wake/") and wake.seconds == pytest.approx(1e-3)
    actions = d.wait_done(wake.key, 1e-3 * (1 - 1e-15))
    assert d.view.now == 1e-3 and [a.id for a in actions if isinstance(a, StartFlow)] == ["f"]


def test_a_split_cannot_take_a_flow_started_earlier_in_the_same_round():
    job = pinned_job(3)
    job.flow("a", "w0", "w2", S)
    job.flow("b", "w1", "w2", S)

    class Greedy(Scheduler):
        name = "greedy"

        def on_ready(self, item, view):
            if item.id == "a":
                return Decision()
            return Split({"b": [SubFlow("b.1", S)], "a": [SubFlow("a.1", S)]})

    with pytest.raises(SchedulerError, match="'a' is not a ready, held flow"):
        simulate(job, Greedy(), SPEC)
    with pytest.raises(SchedulerError, match="no sub-flows"):
        simulate(job, Splitter(lambda item, view: {item.id: []}), SPEC)


def test_done_records_iterate_in_the_runs_record_order():
    """A scheduler that walks view.records sees the same order in every process (not hash order)."""
    from railbed.results import ItemRecord
    from railbed.scheduler import DoneRecords

    ids = [f"item{k * 7919 % 101}" for k in range(60)]
    records = {i: ItemRecord(i, "flow") for i in ids}
    done = set(ids[::2])
    view = DoneRecords(records, done)
    assert list(view) == ids[::2] and [r.id for r in view.values()] == ids[::2]
    assert "item0" in view and ids[1] not in view and len(view) == 30


# ------------------------------------------------------------------ a flow pinned to a spine
LEAF_SPINE = ClusterSpec.from_dict(
    {
        "servers": [{"count": 4, "gpus": 2, "nic_rate": RATE}],
        "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": RATE},
    }
)


class Spines(Scheduler):
    """Pins flow ``x`` to spine ``sx`` and ``y`` to ``sy`` (``None``: ECMP's), recording the NICs."""

    name = "spines"

    def __init__(self, sx, sy):
        self.pick, self.seen = {"x": sx, "y": sy}, []

    def choose_spine(self, flow, src, dst, view):
        self.seen.append((flow.id, src.server, src.nic, dst.server, dst.nic))
        return self.pick[flow.id]


@pytest.mark.parametrize("network", [NumbaNetwork, ReferenceNetwork])
def test_choose_spine_pins_a_flow_between_leaves_to_a_spine(network):
    """Servers 0-1 on leaf 0, 2-3 on leaf 1, two spines, every link 8 Gbit/s: x (0 -> 2) and y
    (1 -> 3) each alone take T. Pinned to one spine they share leaf 0's uplink to it and end at
    2T; pinned apart, each at T."""
    job = Job("two-across")
    for i, s in enumerate((0, 1, 2, 3)):
        job.endpoint(f"e{i}", Location(s, "gpu0", 0))
    job.flow("x", "e0", "e2", S)
    job.flow("y", "e1", "e3", S)
    for (sx, sy), end in (((0, 0), 2 * T), ((1, 1), 2 * T), ((0, 1), T), ((1, 0), T)):
        sched = Spines(sx, sy)
        res = simulate(job, sched, LEAF_SPINE, network=network)
        assert (res.items["x"].spine, res.items["y"].spine) == (sx, sy)
        assert res.items["x"].end == pytest.approx(end, rel=1e-9) and res.items["y"].end == pytest.approx(end, rel=1e-9)
        assert sorted(sched.seen) == [("x", 0, 0, 2, 0), ("y", 1, 0, 3, 0)]
    with pytest.raises(SchedulerError, match=r"choose_spine\(x\) returned 2"):
        simulate(job, Spines(2, 0), LEAF_SPINE, network=network)


def test_choose_spine_is_not_asked_for_a_flow_inside_a_leaf():
    job = Job("same-leaf")
    job.endpoint("e0", Location(0, "gpu0", 0))
    job.endpoint("e1", Location(1, "gpu0", 0))
    job.flow("x", "e0", "e1", S)
    sched = Spines(1, 1)
    res = simulate(job, sched, LEAF_SPINE)
    assert sched.seen == [] and res.items["x"].spine is None
