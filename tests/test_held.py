"""Held items woken by the events that can change their answer (``hold(...)``, issue 42):
a scheduler that names its events gets the run it would get by holding with ``HOLD``
(offered after every event), with fewer offers; each kind of event wakes its items."""

import random

import pytest

from railbed.dispatch import Dispatcher, SchedulerError, StartWait
from railbed.job import Job, Location, Task
from railbed.scheduler import HOLD, Decision, OnDone, OnFewer, OnNic, OnSlot, OnTime, Scheduler, Split, SubFlow, hold
from railbed.spec import ClusterSpec
from schedulers.example import SmallFirst
from simulator import simulate
from simulator.fluid.network import NumbaNetwork, ReferenceNetwork
from workloads.synthetic import all_to_all

SPEC = ClusterSpec.load("examples/rail-4x4.yaml")


class NicLimit(Scheduler):
    """At most ``limit`` flows sending from a NIC; the rest held (named: until that NIC changes)."""

    name = "nic-limit"

    def __init__(self, limit: int, named: bool | str) -> None:
        self.limit, self.named, self.offers = limit, named, 0

    def on_ready(self, item, view):
        self.offers += 1
        if item.kind != "flow":
            return Decision()
        src = view.location(item.src)
        if view.sending.get((src.server, src.nic), 0) < self.limit:
            return Decision(dscp=8 * (hash(item.id) % 3))
        if self.named == "fewer":  # one at a time, in ready order
            return hold(OnFewer(src.server, src.nic, self.limit))
        return hold(OnNic(src.server, src.nic)) if self.named else HOLD


def times(result):
    return {i: (r.ready, r.start, r.end) for i, r in result.items.items()}


def random_job(rng: random.Random) -> Job:
    job = Job("held")
    for e in range(12):
        job.endpoint(f"e{e}")
    ids: list[str] = []
    for k in range(rng.randint(20, 60)):
        deps = rng.sample(ids, min(len(ids), rng.randint(0, 2)))
        if rng.random() < 0.2:
            ids.append(job.task(f"t{k}", f"e{rng.randrange(12)}", rng.choice([0.0, 1e-4, 3e-3]), deps))
        else:
            src, dst = rng.sample(range(12), 2)
            ids.append(job.flow(f"f{k}", f"e{src}", f"e{dst}", rng.choice([1000, 1 << 20, 4 << 20]), deps))
    return job.validate()


@pytest.mark.parametrize("seed", range(12))
def test_a_named_hold_gives_the_run_of_a_plain_hold_with_fewer_offers(seed):
    rng = random.Random(seed)
    job, limit = random_job(rng), rng.choice([1, 2])
    network = rng.choice([NumbaNetwork, ReferenceNetwork])
    plain, named = NicLimit(limit, False), NicLimit(limit, True)
    a = simulate(job, plain, SPEC, network=network)
    b = simulate(job, named, SPEC, network=network)
    assert times(a) == times(b)  # equal to the bit: the same offers that matter, in the same order
    assert named.offers <= plain.offers


@pytest.mark.parametrize("seed", range(12))
def test_a_hold_until_fewer_flows_gives_the_run_of_a_plain_hold_waking_one_at_a_time(seed):
    """``OnFewer``: the items waiting at a NIC are woken one at a time in ready order (the next
    if the count is still under the limit after the last one's offer): the run of ``HOLD`` to
    the bit, with no more offers than ``OnNic``'s wake-them-all."""
    rng = random.Random(f"fewer/{seed}")
    job, limit = random_job(rng), rng.choice([1, 2, 3])
    network = rng.choice([NumbaNetwork, ReferenceNetwork])
    plain, nic, fewer = NicLimit(limit, False), NicLimit(limit, True), NicLimit(limit, "fewer")
    a = simulate(job, plain, SPEC, network=network)
    b = simulate(job, nic, SPEC, network=network)
    c = simulate(job, fewer, SPEC, network=network)
    assert times(c) == times(a) == times(b)
    assert fewer.offers <= nic.offers <= plain.offers


def test_fewer_wakes_one_waiter_per_freed_slot():
    """An all-to-all under a limit of 1 per NIC: each flow's end wakes one waiter there, so a
    held flow is offered about twice (when ready, when woken), not once per flow ending at its NIC."""
    job = all_to_all(n=8, size=1 << 20)
    flows = sum(1 for it in job.items.values() if it.kind == "flow")
    nic, fewer = NicLimit(1, True), NicLimit(1, "fewer")
    assert times(simulate(job, fewer, SPEC)) == times(simulate(job, nic, SPEC))
    assert fewer.offers <= 2 * flows + 8 < nic.offers


def test_the_example_offers_only_the_flows_its_nic_can_release():
    job = all_to_all(n=8, size=1 << 20)
    sf = SmallFirst(limit=2)
    calls = {"n": 0}
    original = sf.on_ready

    def counted(item, view):
        calls["n"] += 1
        return original(item, view)

    sf.on_ready = counted
    res = simulate(job, sf, SPEC)
    assert all(r.end is not None for r in res.items.values())
    flows = sum(1 for it in job.items.values() if it.kind == "flow")
    # every held flow is offered again only when a flow from its NIC starts or ends: 8 endpoints on 8
    # NICs, 7 flows each, at most 5 held per NIC; a plain HOLD took every held flow at every event
    assert calls["n"] < 8 + flows * 6


class Until(Scheduler):
    """Holds flow ``f`` with ``hold(*events)`` while ``blocked()``; records when it was offered."""

    name = "until"

    def __init__(self, events, blocked) -> None:
        self.events, self.blocked, self.offered = events, blocked, []

    def on_ready(self, item, view):
        if item.id != "f":
            return Decision()
        self.offered.append(view.now)
        return hold(*self.events) if self.blocked(view) else Decision()


def two_servers() -> Job:
    job = Job("until")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.endpoint("c", Location(2, "gpu0", 0))
    return job


def test_ondone_wakes_only_when_that_item_ends():
    job = two_servers()
    job.task("long", "c", 5e-3)
    job.task("short", "c", 1e-3)  # one slot: queued behind "long"? no: gpu0 runs one task at a time
    job.flow("other", "c", "b", 1 << 20)
    job.flow("f", "a", "b", 1000)
    sched = Until([OnDone("long")], lambda v: "long" not in v.done)
    res = simulate(job, sched, SPEC)
    assert sched.offered == [0.0, pytest.approx(5e-3)]  # not at "other"'s end, nor "short"'s
    assert res.items["f"].start == pytest.approx(5e-3)


def test_ontime_wakes_at_its_time_and_not_before():
    job = two_servers()
    job.flow("other", "c", "b", 1 << 20)  # its end is an event: not one "f" waits for
    job.flow("f", "a", "b", 1000)
    sched = Until([OnTime(2e-3)], lambda v: v.now < 2e-3)
    res = simulate(job, sched, SPEC)
    assert sched.offered == [0.0, 2e-3]
    assert res.items["f"].start == 2e-3


def test_onslot_wakes_when_a_task_starts_or_ends_on_the_device():
    job = two_servers()
    job.task("busy", "c", 3e-3)
    job.flow("f", "a", "b", 1000)
    job.flow("other", "b", "a", 1000)  # the first settling after the task started: "f" offered there
    sched = Until([OnSlot(2, "gpu0")], lambda v: "busy" not in v.done)
    res = simulate(job, sched, SPEC)
    other = res.items["other"].end
    assert 0 < other < 3e-3 and sched.offered == [0.0, other, pytest.approx(3e-3)]  # woken by its start, its end
    assert res.items["f"].start == pytest.approx(3e-3)


def test_an_event_earlier_in_a_round_wakes_a_later_item_in_that_round():
    """``g`` waits for a flow sending from ``a``'s NIC; ``h``, before it in ready order, starts one
    in the round after ``blocker`` ends: ``g`` is offered in that round, as a re-offer would."""
    job = two_servers()
    job.flow("blocker", "c", "b", 1 << 20)
    job.flow("h", "a", "b", 1 << 20)
    job.flow("g", "a", "c", 1000)

    class Sched(Scheduler):
        name = "round"

        def on_ready(self, item, view):
            if item.id == "h" and "blocker" not in view.done:
                return HOLD
            if item.id == "g" and not view.sending.get((0, 0)):
                return hold(OnNic(0, 0))
            return Decision()

    res = simulate(job, Sched(), SPEC)
    assert res.items["h"].start == res.items["blocker"].end == res.items["g"].start
    assert res.items["g"].end < res.items["h"].end  # not offered again only at h's end


def test_a_split_may_take_an_item_that_waits():
    job = two_servers()
    job.flow("x", "a", "b", 1000)
    job.flow("y", "a", "b", 1000)

    class Sched(Scheduler):
        name = "split-waiting"

        def on_ready(self, item, view):
            if item.id == "x":
                return hold(OnTime(1.0))
            return Split({"x": [SubFlow("x1", 1000)], "y": [SubFlow("y1", 1000)]})

    d = Dispatcher(job, Sched(), SPEC)
    actions = d.begin(0.0)
    assert sorted(a.id for a in actions if not isinstance(a, StartWait)) == ["x1", "y1"]
    assert d.view.held == [] and not d._held.waiting and all(not v for v in d._held.waiters.values())


@pytest.mark.parametrize("until", [(OnTime(float("inf")),), (OnTime(float("nan")),)])
def test_a_wait_for_no_finite_time_is_refused(until):
    job = two_servers()
    job.flow("f", "a", "b", 1000)
    with pytest.raises(SchedulerError, match="finite time"):
        Dispatcher(job, Until(until, lambda v: True), SPEC).begin(0.0)


def test_hold_refuses_what_is_not_an_event():
    with pytest.raises(TypeError):
        hold("nic0")
    assert hold() is HOLD and hold(OnDone("a")).until == (OnDone("a"),) and not hold(OnDone("a")).start


def test_tasks_are_offered_too():
    job = two_servers()
    job.flow("first", "a", "b", 1 << 20)
    job.task("t", "a", 1e-3)

    class Sched(Scheduler):
        name = "task-wait"

        def on_ready(self, item, view):
            if isinstance(item, Task) and "first" not in view.done:
                return hold(OnDone("first"))
            return Decision()

    res = simulate(job, Sched(), SPEC)
    assert res.items["t"].start == res.items["first"].end


class WatchesHeld(NicLimit):
    """NicLimit recording, at every offer, the held list it sees (the object, kept alive, and a copy)
    and the item offered."""

    def __init__(self) -> None:
        super().__init__(1, False)
        self.seen: list[tuple[list[str], list[str], str]] = []

    def on_ready(self, item, view):
        self.seen.append((view.held, list(view.held), item.id))
        return super().on_ready(item, view)


def test_the_held_list_is_made_again_only_when_items_join_or_leave():
    """``view.held`` is the same list object while the same items are held and a new one when they
    change (the RuleBook reads a new list as a new offer round): it was copied at every settling and
    offer round, which a scheduler holding thousands of flows paid at every event (issue 42). The
    list is never stale: the item offered is in it, new ones included."""
    sched = WatchesHeld()
    res = simulate(all_to_all(n=8, size=1 << 20, iterations=1), sched, SPEC)
    assert res.makespan > 0 and len(sched.seen) > 50
    assert all(i in held for held, _, i in sched.seen)
    pairs = list(zip(sched.seen, sched.seen[1:]))
    assert all(items_a == items_b for (a, items_a, _), (b, items_b, _) in pairs if a is b)  # never changed
    assert all(items_a != items_b for (a, items_a, _), (b, items_b, _) in pairs if a is not b)  # a new one: new items
