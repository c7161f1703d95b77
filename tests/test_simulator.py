"""The flow-level simulator: hand-computed cases, numba vs reference, properties of its rates."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railbed.job import Job, Leg, Location, PathOption
from railbed.scheduler import Change, Split, SubFlow
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import wire_bytes
from schedulers import Decision, Scheduler, by_name
from schedulers.example import SmallFirst
from simulator import Simulation, simulate
from simulator.fabric import Fabric
from simulator.fluid.network import NumbaNetwork, ReferenceNetwork, peak_utilisation
from tests.test_maxmin import loads, random_instance
from workloads.llm import hybrid_parallel

GBIT = 1e9
S = 1448 * 1000  # payload of exactly 1000 full segments
T = wire_bytes(S) * 8 / GBIT  # its time alone on a 1 Gbit/s link: 1000 frames of 1514 bytes


def star(rates=(1e9, 1e9, 1e9, 1e9), latency=0.0) -> ClusterSpec:
    """One switch, one NIC per server, NIC rates as given."""
    return ClusterSpec.from_dict(
        {
            "name": "star",
            "servers": [{"count": 1, "gpus": 1, "nic_rate": r} for r in rates],
            "fabric": {"type": "single_switch", "latency": latency},
        }
    )


def flows_job(*flows) -> Job:
    """Servers as endpoints s0..s3; flows (id, src, dst, size, tags)."""
    job = Job("hand")
    for s in range(4):
        job.endpoint(f"s{s}", Location(s, "gpu0", 0))
    for fid, src, dst, size, *tags in flows:
        job.flow(fid, f"s{src}", f"s{dst}", size, tags=tags[0] if tags else {})
    return job


class Capped(Scheduler):
    """Caps the flows in ``caps`` (bit/s) and gives them DSCP 0."""

    name = "capped"

    def __init__(self, caps):
        self.caps = caps

    def on_ready(self, item, view):
        return Decision(rate=self.caps.get(item.id))


def ends(result):
    return {i: r.end for i, r in result.items.items()}


# ------------------------------------------------------------------ hand cases
def test_one_flow_takes_its_frames_over_the_link_rate():
    res = simulate(flows_job(("a", 0, 1, S)), by_name("fifo"), star())
    assert res.items["a"].end == pytest.approx(1000 * 1514 * 8 / 1e9, rel=1e-12)
    assert res.makespan == pytest.approx(T, rel=1e-12)
    assert res.links["h0:h0-eth0"]["bytes"] == wire_bytes(S) == res.links["sw0:sw0-eth1"]["bytes"]


def test_two_flows_into_one_port_share_it():
    res = simulate(flows_job(("a", 0, 1, S), ("b", 2, 1, 2 * S)), by_name("fifo"), star())
    # both at R/2 until a ends at 2T; b has S left, alone: T more
    assert ends(res) == pytest.approx({"a": 2 * T, "b": 3 * T}, rel=1e-12)
    assert res.links["sw0:sw0-eth1"]["peak_util"] == pytest.approx(1.0, rel=1e-12)


def test_a_capped_flow_frees_bandwidth_for_the_others():
    job = flows_job(("a", 0, 1, S), ("b", 2, 1, S), ("c", 3, 1, S))
    res = simulate(job, Capped({"a": 0.1 * GBIT}), star())
    # b and c get (R - 0.1 R) / 2 = 0.45 R each, not R / 3
    assert res.items["b"].end == pytest.approx(T / 0.45, rel=1e-12)
    assert res.items["c"].end == pytest.approx(T / 0.45, rel=1e-12)
    assert res.items["a"].end == pytest.approx(T / 0.1, rel=1e-12)  # the cap holds when alone


def test_a_higher_class_takes_the_link_first():
    job = flows_job(("low", 0, 1, S, {"dscp": 0}), ("high", 2, 1, S, {"dscp": 46}))
    res = simulate(job, by_name("tag-priority"), star())
    assert ends(res) == pytest.approx({"high": T, "low": 2 * T}, rel=1e-12)
    # the fifo policy has one class: they share
    res = simulate(job, by_name("tag-priority"), star(), policy="fifo")
    assert ends(res) == pytest.approx({"high": 2 * T, "low": 2 * T}, rel=1e-12)


def test_a_lower_class_uses_what_a_bottlenecked_higher_class_leaves():
    # high: h0 -> h1 whose port is 0.25 Gbit/s; low: h0 -> h2, 1 Gbit/s. On h0's NIC
    # high takes 0.25 R (its bottleneck is downstream), low gets the other 0.75 R.
    job = flows_job(("high", 0, 1, S, {"dscp": 46}), ("low", 0, 2, S, {"dscp": 0}))
    res = simulate(job, by_name("tag-priority"), star((1e9, 0.25e9, 1e9, 1e9)))
    assert res.items["high"].end == pytest.approx(T / 0.25, rel=1e-12)
    assert res.items["low"].end == pytest.approx(T / 0.75, rel=1e-12)


def test_a_flow_is_limited_by_its_slowest_hop():
    res = simulate(flows_job(("a", 0, 1, S)), by_name("fifo"), star((1e9, 0.25e9, 1e9, 1e9)))
    assert res.items["a"].end == pytest.approx(T / 0.25, rel=1e-12)
    assert res.links["h0:h0-eth0"]["mean_util"] == pytest.approx(0.25, rel=1e-12)


def test_link_latency_delays_every_flow_by_its_links():
    res = simulate(flows_job(("a", 0, 1, S)), by_name("fifo"), star(latency=1e-3))
    assert res.items["a"].end == pytest.approx(2e-3 + T, rel=1e-12)


def test_zero_byte_flows_and_tasks_chain():
    job = flows_job(("z", 0, 1, 0))
    job.task("t", "s1", 0.5, deps=["z"])
    job.flow("a", "s1", "s2", S, deps=["t"])
    res = simulate(job, by_name("fifo"), star())
    assert ends(res) == pytest.approx({"z": 0.0, "t": 0.5, "a": 0.5 + T}, rel=1e-12)


def test_a_rate_change_mid_flow_changes_its_finish():
    class Halve(Scheduler):
        name = "halve"

        def on_ready(self, item, view):
            return Decision(rate=GBIT if item.id == "a" else None)

        def on_flows_changed(self, view):
            # when b has started (and is active), a drops to a quarter
            return {"a": 0.25 * GBIT} if "b" in view.active and "a" in view.active else {}

    job = flows_job(("a", 0, 1, 2 * S))
    job.task("t", "s2", T)  # b starts after T, when a has S left
    job.flow("b", "s2", "s3", S, deps=["t"])
    res = simulate(job, Halve(), star())
    assert res.items["a"].end == pytest.approx(T + T / 0.25, rel=1e-12)
    assert res.items["b"].end == pytest.approx(2 * T, rel=1e-12)


def test_intra_host_legs_and_device_capacity_come_from_the_dispatcher():
    spec = ClusterSpec.from_dict(
        {
            "name": "dgx",
            "servers": [{"count": 2, "gpus": 8, "nics": 1, "nic_rate": "1Gbit", "intra_host": "dgx1-v100"}],
            "fabric": {"type": "single_switch"},
        }
    )
    job = Job("legs", capacity={"gpu0": 1})
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.task("t1", "a", 1.0)
    job.task("t2", "a", 1.0)  # one slot: t2 runs after t1
    job.flow("f", "a", "b", S, deps=["t2"], options=[PathOption("cpu", src_leg=Leg("gpu0", "nic0", duration=0.25))])
    res = simulate(job, by_name("fifo"), spec)
    assert res.items["t2"].start == pytest.approx(1.0)
    assert res.items["f"].end == pytest.approx(2.0 + 0.25 + T, rel=1e-12)


def test_cross_rail_flows_cross_the_ecmp_spine_of_both_backends():
    spec = ClusterSpec.load("examples/rail-4x4.yaml")
    topo = Topology(spec)
    job = Job("x")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu1", 1))
    job.flow("f", "a", "b", S)
    res = simulate(job, by_name("fifo"), spec)
    spine = topo.ecmp_spine((0, 0), (1, 1), "f")
    assert spine in (0, 1)
    used = {name for name in res.links if name.startswith("spine")}
    assert used == {f"spine{spine}:spine{spine}-eth1"}
    assert res.items["f"].end == pytest.approx(wire_bytes(S) * 8 / 100e9, rel=1e-12)


def random_job(rng: random.Random) -> tuple[Job, ClusterSpec]:
    spec = ClusterSpec.rail_optimized(4, 4, spines=2, nic_rate=rng.choice([1e9, 1e10]), uplink_rate=5e9)
    job = Job("random")
    for s in range(4):
        for g in range(4):
            job.endpoint(f"e{s}{g}", Location(s, f"gpu{g}", g))
    eps = list(job.endpoints)
    ids: list[str] = []
    for i in range(rng.randint(5, 40)):
        deps = rng.sample(ids, min(len(ids), rng.randint(0, 2)))
        if rng.random() < 0.3:
            job.task(f"t{i}", rng.choice(eps), rng.choice([0.0, rng.uniform(0, 5e-3)]), deps=deps)
        else:
            src, dst = rng.sample(eps, 2)
            size = rng.choice([0, 1, rng.randint(1, 1 << 22), 4 << 20])
            job.flow(f"f{i}", src, dst, size, deps=deps, tags={"dscp": rng.choice([0, 0, 46, 10])})
        ids.append(f"{'t' if f't{i}' in job.items else 'f'}{i}")
    return job, spec


@pytest.mark.parametrize("seed", range(25))
def test_numba_and_reference_runs_end_every_item_at_the_same_time(seed):
    rng = random.Random(1000 + seed)
    job, spec = random_job(rng)
    choice = rng.choice(["fifo", "tag-priority", "small-first", "small-first-chunks"])
    policy = rng.choice(["fifo", "dscp-priority"])

    def sched():  # chunks: splits, wake-ups, progress reads and re-marks (interface v2) on both engines
        return SmallFirst(limit=2, chunk=1 << 20) if choice == "small-first-chunks" else by_name(choice)

    fast = simulate(job, sched(), spec, policy=policy, network=NumbaNetwork)
    slow = simulate(job, sched(), spec, policy=policy, network=ReferenceNetwork)
    assert ends(fast) == pytest.approx(ends(slow), rel=1e-9, abs=1e-15)
    for name, stats in slow.links.items():
        assert fast.links[name]["bytes"] == stats["bytes"]


def test_a_training_job_is_the_same_on_both_engines():
    job = hybrid_parallel(dp=4, pp=4, microbatches=2, iterations=1, layout="rail", gpus_per_server=4)
    spec = ClusterSpec.load("examples/rail-4x4.yaml")
    fast = simulate(job, by_name("fifo"), spec, network=NumbaNetwork)
    slow = simulate(job, by_name("fifo"), spec, network=ReferenceNetwork)
    assert fast.makespan == pytest.approx(slow.makespan, rel=1e-9)
    assert ends(fast) == pytest.approx(ends(slow), rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.floats(0, 1e12) | st.sampled_from([0.0, 1e9, 1e9 * (1 + 2**-52)]), max_size=6), min_size=1),
    st.lists(st.floats(1e-3, 1e12) | st.sampled_from([1e9, 3e9, 0.0]), min_size=1),
)
def test_peak_utilisation_of_the_highest_load_is_the_highest_utilisation(loads, capacity):
    """The network keeps each link's highest load and divides once; the utilisation of every
    load, the largest kept (what it did before), is the same number to the bit."""
    nlinks = len(capacity)
    peak_load, peak = np.zeros(nlinks), np.zeros(nlinks)
    for k, series in enumerate(loads):
        for x in series:
            lk = k % nlinks
            peak_load[lk] = max(peak_load[lk], x)
            with np.errstate(invalid="ignore", divide="ignore"):
                u = np.float64(x) / np.float64(capacity[lk])
            if u > peak[lk]:
                peak[lk] = u
    assert list(peak_utilisation(peak_load, np.array(capacity))) == list(peak)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([NumbaNetwork, ReferenceNetwork]))
def test_over_a_run_links_stay_within_capacity_and_stay_full_while_needed(seed, engine):
    """Flows arrive at random times; after every event the network's rates obey both properties."""
    rng = random.Random(seed)
    capacity, paths, prio, cap = random_instance(rng, rng.randint(1, 8), rng.randint(1, 15))
    net = engine(capacity)
    arrivals = sorted((rng.uniform(0, 1e-2), f) for f in range(len(paths)))
    now, live, checked = 0.0, {}, 0
    while arrivals or live:
        now, done = net.advance(now, arrivals[0][0] if arrivals else math.inf)
        for s in done:
            del live[s]
        while arrivals and arrivals[0][0] <= now:
            _, f = arrivals.pop(0)
            live[net.add(tuple(paths[f]), prio[f], cap[f], rng.uniform(1e3, 1e7))] = f
        net.advance(now, now)  # rates of exactly the live flows, no time passes
        rates = net.rates_of_active()
        assert set(rates) == set(live)
        load = loads(capacity, [paths[f] for f in live.values()], [rates[s] for s in live])
        assert all(x <= c * (1 + 1e-9) for x, c in zip(load, capacity))
        for s, f in live.items():
            if rates[s] < cap[f] * (1 - 1e-9):
                assert any(load[lk] >= capacity[lk] * (1 - 1e-9) for lk in paths[f]), f"flow {f} could go faster"
        checked += bool(live)
    assert checked > 0
    assert sum(net.link_bits) > 0


def test_fabric_routes_are_the_topologys_paths():
    spec = ClusterSpec.load("examples/rail-4x4.yaml")
    topo = Topology(spec)
    fab = Fabric(topo)
    route = fab.route((0, 0), (1, 2), 1)
    assert [fab.names[i] for i in route.links] == [f"{h.node}:{h.ifname}" for h in topo.path((0, 0), (1, 2), 1)]
    assert len(route.links) == 4


def test_a_long_run_reports_progress():
    job = hybrid_parallel(dp=4, pp=4, microbatches=2, iterations=1, layout="rail", gpus_per_server=4)
    lines = []
    sim = Simulation(job, by_name("fifo"), ClusterSpec.load("examples/rail-4x4.yaml"), progress=lines.append)
    sim.progress_every = 0.0  # every step
    res = sim.run()
    assert len(lines) == sim.steps and "flows active" in lines[-1] and "done" in lines[-1]
    assert f"{sim.events} events in {sim.steps} steps" in " ".join(res.notes)


def test_the_numba_network_grows_its_slot_arrays():
    capacity = [1e9, 2e9, 5e8]
    fast, slow = NumbaNetwork(capacity, slots=2), ReferenceNetwork(capacity)
    for net in (fast, slow):
        for f in range(9):
            net.add((f % 3, (f + 1) % 3), f % 2, None if f % 4 else 3e8, 1e6 * (f + 1))
    now_f = now_s = 0.0
    ends_f, ends_s = {}, {}
    while fast.active or slow.active:
        now_f, done_f = fast.advance(now_f, math.inf)
        now_s, done_s = slow.advance(now_s, math.inf)
        ends_f.update(dict.fromkeys(done_f, now_f))
        ends_s.update(dict.fromkeys(done_s, now_s))
    assert len(fast.rem) >= 9
    assert sorted(ends_f.values()) == pytest.approx(sorted(ends_s.values()), rel=1e-9)


class Chaos(Scheduler):
    """Every v2 hook at random (seeded): splits flows into chunks with their own DSCP, wakes at random
    times, re-marks and re-caps active flows there, reads their progress. Both engines must agree."""

    name = "chaos"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.read = 0

    def on_ready(self, item, view):
        view.wake_at(view.now + self.rng.uniform(0, 2e-3))
        if item.kind == "flow" and item.size and self.rng.random() < 0.5:
            n = self.rng.randint(1, 3)
            cut = [item.size * k // n for k in range(n + 1)]
            ids = [f"{item.id}.{k}" for k in range(n)]
            dscp = [self.rng.choice([0, 10, 46]) for _ in range(n)]
            return Split(
                {
                    item.id: [
                        SubFlow(ids[k], cut[k + 1] - cut[k], deps=tuple(ids[:k][-1:]), dscp=dscp[k]) for k in range(n)
                    ]
                }
            )
        return Decision(dscp=self.rng.choice([0, 10, 46]))

    def on_flows_changed(self, view):
        out = {}
        for fid, f in sorted(view.active.items()):
            self.read += f.delivered >= 0
            r = self.rng.random()
            if r < 0.2:
                out[fid] = Change(dscp=self.rng.choice([0, 10, 46, 56]))
            elif r < 0.3:
                out[fid] = self.rng.choice([None, 1e9])
        return out


@pytest.mark.parametrize("seed", range(12))
def test_interface_v2_runs_agree_on_both_engines(seed):
    job, spec = random_job(random.Random(2000 + seed))
    policy = "dscp-priority" if seed % 3 else "fifo"
    fast = simulate(job, Chaos(seed), spec, policy=policy, network=NumbaNetwork)
    slow = simulate(job, Chaos(seed), spec, policy=policy, network=ReferenceNetwork)
    assert ends(fast) == pytest.approx(ends(slow), rel=1e-9, abs=1e-15)
    assert any(r.children for r in fast.items.values()) or not job.flows
    for name, stats in slow.links.items():
        assert fast.links[name]["bytes"] == stats["bytes"]
