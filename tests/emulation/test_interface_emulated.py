"""Scheduler interface v2 on the emulator, beside the simulator: flow progress from the
agents, wake-ups, completion feedback, sub-flows (a relay and chunks) as real TCP
flows, and a live flow re-marked to a higher class.

Cluster: 4 servers with one 1 Gbit/s NIC (model) on one switch, k = 10
(100 Mbit/s real per link). The pure side of each feature is in tests/test_interface.py.
"""

import sys
from pathlib import Path

import pytest

from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.scheduler import Change, Decision, OnFewer, Scheduler, Split, SubFlow, hold
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from simulator import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from test_interface import Spines  # noqa: E402  (the fluid test's: pins x and y to the spines given)

K = 10
LINK = 1e9
SPEC = ClusterSpec.from_dict({"servers": [{"count": 4, "nic_rate": LINK}], "fabric": {"type": "single_switch"}})
S = 12_500_000
T = 8 * wire_bytes(S) / LINK  # one flow alone: 0.1 s model, 1 s real


def job4() -> Job:
    job = Job("v2")
    for s in range(4):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    return job


class Promote(Scheduler):
    """a and b share w2's port; at T/2 (a wake-up) b is re-marked to class 7 and reads progress."""

    name = "promote"

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int | None, float, float]] = {}
        self.done: list[str] = []
        self.woken = False

    def on_ready(self, item, view):
        view.wake_at(T / 2)
        return Decision(dscp=0)

    def on_flows_changed(self, view):
        if view.now < T / 2 or self.woken:
            return {}
        self.woken = True
        for fid, f in view.active.items():
            self.seen[fid] = (f.delivered, f.remaining, f.current_rate, f.as_of)
        return {"b": Change(dscp=56)} if "b" in view.active else {}

    def on_done(self, item, record, view):
        self.done.append(item.id)


def promote_job() -> Job:
    job = job4()
    job.flow("a", "w0", "w2", S)
    job.flow("b", "w1", "w2", S)
    return job


def test_progress_wake_up_feedback_and_a_remark_agree_with_the_simulator():
    emu_sched, sim_sched = Promote(), Promote()
    with Testbed(SPEC, scale=K) as tb:
        emu = run(promote_job(), emu_sched, tb, flow_progress=T / 20)
    sim = simulate(promote_job(), sim_sched, SPEC)
    # the simulator: b ends at 5T/4 once promoted, a at 2T (tests/test_interface.py computes it by hand)
    assert sim.items["b"].end == pytest.approx(1.25 * T) and sim.items["a"].end == pytest.approx(2 * T)
    # the emulator: the re-marked flow overtakes, and the times follow the simulator's
    assert emu.items["b"].remarked and emu.items["b"].end < emu.items["a"].end
    assert emu.items["b"].end == pytest.approx(1.25 * T, rel=0.15)
    assert emu.makespan == pytest.approx(2 * T, rel=0.10)
    # progress the agents reported by T/2: about a quarter of each flow, at most T/20 model s old
    for fid in ("a", "b"):
        delivered, remaining, rate, as_of = emu_sched.seen[fid]
        assert 0.1 * S < delivered < 0.45 * S and remaining == S - delivered
        assert T / 2 - 3 * T / 20 <= as_of <= T / 2 + 1e-9
        assert 0.2 * LINK < rate < 0.8 * LINK
    assert sorted(emu_sched.done) == ["a", "b"] and emu_sched.done == emu.finish_order()


class Relay(Scheduler):
    """f goes w0 -> w1 -> w3 (a relay); g goes in two chunks one after the other."""

    name = "relay"

    def on_ready(self, item, view):
        if item.id == "f":
            return Split({"f": [SubFlow("f.1", S, dst="w1"), SubFlow("f.2", S, src="w1", deps=("f.1",))]})
        half = item.size // 2
        return Split({"g": [SubFlow("g.1", half), SubFlow("g.2", item.size - half, deps=("g.1",), dscp=46)]})


def test_sub_flows_run_as_real_flows_and_carry_every_byte():
    job = job4()
    job.flow("f", "w0", "w3", S)
    job.flow("g", "w2", "w0", S + 1)
    with Testbed(SPEC, scale=K) as tb:
        emu = run(job, Relay(), tb)
    sim = simulate(job, Relay(), SPEC)
    for res in (emu, sim):
        assert res.items["f"].received == S and res.items["g"].received == S + 1
        assert res.items["f"].children == ["f.1", "f.2"] and res.items["g.2"].parent == "g"
        assert res.items["f.2"].start >= res.items["f.1"].end and res.items["g.2"].start >= res.items["g.1"].end
        assert res.items["f"].end == res.items["f.2"].end
    assert all(r.received == r.size for r in emu.items.values() if r.kind == "flow")
    assert emu.makespan == pytest.approx(sim.makespan, rel=0.10)  # 2T (the relay) on both


class CapOnChange(Scheduler):
    """Starts flows uncapped and caps them in ``on_flows_changed`` of the same batch: the cap
    reaches the agent while the flow's socket is still connecting (or not made yet)."""

    name = "cap-on-change"

    def on_flows_changed(self, view):
        return {fid: LINK / 4 for fid in view.active}


def test_a_cap_set_in_the_batch_that_starts_a_flow_holds_from_its_first_byte():
    job = job4()
    job.flow("a", "w0", "w1", S)
    job.flow("b", "w2", "w3", S, deps=["a"])  # started by a completion, not by begin()
    with Testbed(SPEC, scale=K) as tb:
        emu = run(job, CapOnChange(), tb)
    sim = simulate(job, CapOnChange(), SPEC)
    for fid in ("a", "b"):
        assert sim.items[fid].duration == pytest.approx(4 * T)
        # uncapped (the cap lost before the socket existed), a flow took about T
        assert emu.items[fid].duration == pytest.approx(4 * T, rel=0.10), emu.items[fid]


class HoldAndRelease(Scheduler):
    """One flow at the full link, capped at a millionth of it (as MRTF's floor does) at T/4 and
    given the link back at T/2: a quarter of its time held, so T + T/4 in all."""

    name = "hold-and-release"

    def on_ready(self, item, view):
        view.wake_at(T / 4)
        view.wake_at(T / 2)
        return Decision(rate=LINK)

    def on_flows_changed(self, view):
        return {fid: (1e-6 * LINK if T / 4 <= view.now < T / 2 else LINK) for fid in view.active}


def test_a_flow_capped_at_almost_nothing_resumes_when_the_cap_is_lifted():
    job = job4()
    job.flow("a", "w0", "w1", S)
    with Testbed(SPEC, scale=K) as tb:
        emu = run(job, HoldAndRelease(), tb)
    sim = simulate(job, HoldAndRelease(), SPEC)
    assert sim.items["a"].duration == pytest.approx(1.25 * T, rel=0.01)
    # paced at 100 bit/s real, the socket booked its next packet minutes ahead and stayed stuck
    # after the cap was lifted: the agent holds the flow instead (what it had queued leaks)
    assert emu.items["a"].duration == pytest.approx(1.25 * T, rel=0.10), emu.items["a"]
    assert any("holds of running flows" in n for n in emu.notes), emu.notes


@pytest.mark.parametrize(("sx", "sy", "factor"), [(0, 0, 2.0), (0, 1, 1.0)])
def test_choose_spine_pins_flows_through_the_routers(sx, sy, factor):
    """tests/test_interface.py's spine case on real routers (written for the lead, not run by its
    author): two leaves of two servers, two spines, every link 1 Gbit/s model; x (0 -> 2) and y
    (1 -> 3) pinned to one spine share leaf 0's uplink (2T each), pinned apart take T each (the
    socket mark the run-time already sets from StartFlow.spine), within the emulator's band. Sharing,
    TCP need not split the uplink evenly (one run: y in 1.70T), so the later flow is held to 2T (both
    flows' bytes crossed the one uplink) and the earlier only to no faster than alone."""
    spec = ClusterSpec.from_dict({"servers": [{"count": 4, "nic_rate": LINK}], "fabric": {
        "type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": LINK}})  # fmt: skip
    job = job4()
    job.flow("x", "w0", "w2", S)
    job.flow("y", "w1", "w3", S)
    with Testbed(spec, scale=K) as tb:
        res = run(job, Spines(sx, sy), tb)
    assert (res.items["x"].spine, res.items["y"].spine) == (sx, sy)
    took = sorted(res.items[f].end - res.items[f].start for f in ("x", "y"))
    assert took[1] == pytest.approx(factor * T, rel=0.10), took
    assert took[0] >= T * (1 - 0.10), took


class OneAtATime(Scheduler):
    """One flow sending per NIC; the others held until fewer send there (``OnFewer``)."""

    name = "one-at-a-time"

    def on_ready(self, item, view):
        src = view.location(item.src)
        if view.sending.get((src.server, src.nic), 0) >= 1:
            return hold(OnFewer(src.server, src.nic, 1))
        return Decision()


def test_items_held_until_fewer_flows_send_are_woken_one_at_a_time_as_flows_end():
    job = job4()
    for d in (1, 2, 3):
        job.flow(f"a{d}", "w0", f"w{d}", S)
    job.flow("b", "w1", "w2", S)
    with Testbed(SPEC, scale=K) as tb:
        emu = run(job, OneAtATime(), tb)
    sim = simulate(job, OneAtATime(), SPEC)
    for res in (emu, sim):
        a = sorted((res.items[f"a{d}"].start, res.items[f"a{d}"].end) for d in (1, 2, 3))
        assert all(nxt[0] >= prev[1] for prev, nxt in zip(a, a[1:]))  # w0's flows one after another
        assert res.items["b"].start == pytest.approx(0.0, abs=0.05)  # w1's own flow is not held
    assert all(r.received == r.size for r in emu.items.values() if r.kind == "flow")
    assert emu.makespan == pytest.approx(sim.makespan, rel=0.10)  # 3T on both
