"""The compact engine (simulator/rules/) against its slow twin, ``simulator.simulate``
(the Dispatcher and the scheduler at every event): every item's ready, start and end times
must be equal, on random jobs and on the MoE generator's, under every scheduler with rules.
Plus what it refuses, and the schedulers' rules against their ``on_ready``."""

import math
import random

import numpy as np
import pytest

from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.results import RunResult
from railbed.scheduler import Rule, Scheduler
from railbed.spec import ClusterSpec
from schedulers import by_name, make
from schedulers.hermod import Hermod, key_number
from simulator import simulate
from simulator.rules import LOCAL, NET, TASK, compact, compact_arrays, load_items, run_compact, simulate_compact
from workloads.arrays import ids_of
from workloads.moe import moe_arrays, moe_training

RULED = ["megatron", "lina", "hermod", "hermod-inter", "hermod-literal", "dp-first", "pp-first", "ep-first", "fifo"]


def same_times(job, make, spec, policy="dscp-priority"):
    """Run both engines; every item's (ready, start, end) equal to 1e-12 relative."""
    slow = simulate(job, make(), spec, policy=policy)
    fast = simulate_compact(job, make(), spec, policy=policy)
    times = fast.times()
    assert set(times) == set(slow.items)
    for i, rec in slow.items.items():
        got = times[i]
        for want, have in zip((rec.ready, rec.start, rec.end), got):
            assert have == pytest.approx(want, rel=1e-12, abs=1e-15), (i, (rec.ready, rec.start, rec.end), got)
    assert fast.makespan == pytest.approx(slow.makespan, rel=1e-12)
    as_run = fast.to_run_result(job, slow.scheduler)
    fields = ("kind", "server", "device", "dst_server", "src_nic", "dst_nic", "size", "received", "dscp", "rate")
    fields += ("parent", "children")
    for i, rec in slow.items.items():
        mine = as_run.items[i]
        assert [getattr(mine, f) for f in fields + ("spine", "attrs")] == [
            getattr(rec, f) for f in fields + ("spine", "attrs")
        ], i
    assert as_run.iterations == pytest.approx(slow.iterations, rel=1e-12)
    assert {k: v["bytes"] for k, v in as_run.links.items()} == {k: v["bytes"] for k, v in slow.links.items()}
    assert sorted(as_run.finish_order()) == sorted(slow.finish_order())
    return slow, fast


def random_moe_job(rng: random.Random) -> tuple[Job, ClusterSpec]:
    """A small MoE job with the flows of every kind, on servers of 4 GPUs and 1-4 NICs."""
    nics = rng.choice([1, 2, 4])
    tp = rng.choice([1, 2])
    dp = rng.choice([2, 4])
    ep = rng.choice([e for e in (2, 4) if (dp * tp) % e == 0])
    job = moe_training(
        dp=dp, tp=tp, pp=rng.choice([1, 2]), ep=ep, experts=4, layers=2, hidden=256, ffn=512, seq=256,
        microbatches=rng.choice([2, 4]), schedule=rng.choice(["gpipe", "1f1b"]), zero2=rng.random() < 0.5,
        dp_algo=rng.choice(["ring", "tree"]), seed=rng.randrange(100), gpus_per_server=4, nics_per_server=nics,
        layout=rng.choice(["dp-outer", "megatron"]), skew=rng.choice([0.3, 3.0]),
    )  # fmt: skip
    servers = max(loc.server for loc in (e.pin for e in job.endpoints.values())) + 1
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": servers, "gpus": 4, "nics": nics, "nic_rate": rng.choice(["10Gbit", "100Gbit"])}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": "50Gbit",
                       "latency": rng.choice(["0us", "1us"])},
        }
    )  # fmt: skip
    return job, spec


@pytest.mark.parametrize("seed", range(12))
def test_moe_jobs_end_every_item_at_the_same_time_on_both_engines(seed):
    rng = random.Random(seed)
    job, spec = random_moe_job(rng)
    name = RULED[seed % len(RULED)]
    policy = rng.choice(["dscp-priority", "fifo"])
    same_times(job, lambda: by_name(name), spec, policy)


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("name", ["hermod", "hermod-intra"])
def test_hermod_splits_ep_coflows_between_servers_the_same_on_both_engines(seed, name):
    """Alg. 3 (§5.3.2) in the compact engine: EP coflows between servers are gated
    (``Rule.gate``), split before the run by ``Hermod.gate_split``; every item, every
    sub-flow and every split original ends at the same time as under ``simulate``."""
    rng = random.Random(100 + seed)
    job, spec = random_moe_job(rng)
    probe = by_name(name)
    probe.place(job.public(), spec)
    slow, fast = same_times(job, lambda: by_name(name), spec, rng.choice(["dscp-priority", "fifo"]))
    subs = [r for r in slow.items.values() if r.parent is not None]
    assert bool(subs) == bool(probe.matched)
    assert sum(len(slow.items[i].children or ()) for i in probe.matched) == len(subs)


class _SplitsOneByOne(Hermod):
    """Hermod without the array hook: its gates split by ``gate_split`` one by one."""

    def gate_split_arrays(self, gates, placement, cluster):
        return None


@pytest.mark.parametrize("seed", [905, 910, 915, 924, 930, 940])  # jobs with 16-128 gates
def test_gates_split_in_batches_make_the_same_compact_job(seed, monkeypatch):
    """``_add_gates`` splits and checks the gates in batches of ``GATE_CHUNK`` flows: batches of
    one flow (a gate each) or a few give, array for array, the CompactJob of one batch, with the
    array hook and with ``gate_split`` per gate, and the same run."""
    import simulator.rules.gates as sc

    job, spec = random_moe_job(random.Random(seed))
    make = [lambda: by_name("hermod"), _SplitsOneByOne][seed % 2]
    whole = compact(job, make(), spec)
    assert len(whole.gate_size) >= 16
    for chunk in (1, 3):
        monkeypatch.setattr(sc, "GATE_CHUNK", chunk)
        part = compact(job, make(), spec)
        same_compact_job(whole, part)
        for f in ("ready", "start", "end", "link_bits"):
            assert np.array_equal(getattr(run_compact(whole), f), getattr(run_compact(part), f)), f


@pytest.mark.parametrize("seed", range(8))
def test_hermods_options_give_the_same_times_on_both_engines(seed):
    """``match: gpu`` (Alg. 3 over the GPUs, the thesis's matrix), ``backward: reverse`` and
    ``subphases: flat`` (probes) on random MoE jobs: every item ends at the same time under both
    engines."""
    rng = random.Random(300 + seed)
    job, spec = random_moe_job(rng)
    args = [{"match": "gpu"}, {"backward": "reverse"}, {"backward": "reverse", "intra": False}, {"subphases": "flat"}]
    args = args[seed % 4]
    same_times(job, lambda: Hermod(**args), spec, rng.choice(["dscp-priority", "fifo"]))


@pytest.mark.parametrize("seed", range(8))
def test_the_kernels_work_lists_grow_without_changing_a_time(seed):
    """The kernel's work lists (timers, held, ready, started) start at one entry and double when
    full: every item's times, the link totals and the contention equal those of a run whose
    lists never grow (MoE jobs, Hermod's gated splits among them)."""
    rng = random.Random(700 + seed)
    job, spec = random_moe_job(rng)
    cj = compact(job, by_name(["hermod", "megatron", "lina", "hermod-intra"][seed % 4]), spec)
    big, small = run_compact(cj, analysis=True, work=10**6), run_compact(cj, analysis=True, work=1)
    for f in ("ready", "start", "end", "link_bits", "link_peak"):
        assert np.array_equal(getattr(big, f), getattr(small, f)), f
    assert (big.events, big.steps) == (small.events, small.steps) and big.events > 1
    assert big.analysis["contention"] == small.analysis["contention"]


@pytest.mark.parametrize("name", ["fifo", "megatron"])
def test_more_flows_than_the_kernels_first_slots(name):
    """2,500 flows at once, more than the 1,024 network slots the kernel starts with, and chains
    behind them, so the slots (twice) and the finish heap grow while flows join and end (the kernel
    returns to ``run_kernel`` for each, simulator.rules.kernel): every time equals the Dispatcher's.
    (Not ``hermod``: its splits make this job ill-conditioned, simulator/rules/network.py.)"""
    rng = random.Random(11)
    spec = ClusterSpec.rail_optimized(4, 4, spines=2, nic_rate=1e10, uplink_rate=2e10)
    job = Job("wide")
    for s in range(4):
        for g in range(4):
            job.endpoint(f"e{s}{g}", Location(s, f"gpu{g}", g))
    eps = list(job.endpoints)
    first = []
    for i in range(2500):
        src, dst = rng.sample(eps, 2)
        first.append(job.flow(f"f{i}", src, dst, rng.randint(1 << 10, 1 << 16), coflow=f"c{i % 3}",
                              coflow_type=rng.choice(["DP", "EP"]), microbatch=i % 4, layer=0))  # fmt: skip
    for i in range(300):
        src, dst = rng.sample(eps, 2)
        job.flow(f"g{i}", src, dst, 1 << 12, deps=[first[rng.randrange(2500)]], coflow="late", coflow_type="PP",
                 microbatch=0, layer=1)  # fmt: skip
    slow, _ = same_times(job.validate(), lambda: by_name(name), spec)
    ends = sorted(rec.end for rec in slow.items.values() if rec.end > 0)  # (same-server flows end at once)
    assert sum(rec.start < ends[0] < rec.end for rec in slow.items.values()) > 2048  # in the network at once


@pytest.mark.parametrize("name", ["megatron", "lina", "hermod"])
def test_the_scenario_layout_agrees_with_ep_across_servers(name):
    """The full scenarios' layout at small scale: TP 8, EP 8 over DP 8 with Megatron's expert
    tensor parallelism (ETP = TP), so every EP group spans 8 servers; both engines agree, and
    Hermod splits the EP coflows (Alg. 3) and holds flows at the hosts."""
    job = moe_training(
        model="mixtral-8x22b", dp=8, pp=2, layers=2, microbatches=2, hidden=256, ffn=512, seq=256,
        zero2=True, nics_per_server=8,
    )  # fmt: skip
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": 16, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 4, "spines": 2, "uplink_rate": "400Gbit",
                       "latency": "1us"},
        }
    )  # fmt: skip
    slow, fast = same_times(job, lambda: by_name(name), spec)
    kinds = fast.job.kind
    assert (kinds == LOCAL).sum() == 0 and (kinds == NET).sum() > 0 and (kinds == TASK).sum() > 0  # all cross
    ep_net = [r for r in slow.items.values() if r.kind == "flow" and r.attrs.get("coflow_type") == "EP"
              and r.server != r.dst_server and r.parent is None]  # fmt: skip
    assert ep_net
    flows = kinds != TASK
    waited = int((fast.start[flows] > fast.ready[flows]).sum())
    assert (waited > 0) == (name != "megatron")  # Hermod's hosts and Lina's DP behind backward EP
    assert bool([r for r in slow.items.values() if r.parent]) == (name == "hermod")


def random_job(rng: random.Random) -> tuple[Job, ClusterSpec]:
    """Tasks and flows with random deps and attributes, some same-server, devices of capacity 1-2."""
    spec = ClusterSpec.rail_optimized(3, 2, spines=2, nic_rate=rng.choice([1e9, 1e10]), uplink_rate=5e9)
    job = Job("random", default_capacity=rng.choice([1, 2]))
    for s in range(3):
        for g in range(2):
            job.endpoint(f"e{s}{g}", Location(s, f"gpu{g}", g))
    eps = list(job.endpoints)
    ids: list[str] = []
    for i in range(rng.randint(5, 50)):
        deps = rng.sample(ids, min(len(ids), rng.randint(0, 2)))
        if rng.random() < 0.3:
            ids.append(job.task(f"t{i}", rng.choice(eps), rng.choice([0.0, 1e-3, rng.uniform(0, 5e-3)]), deps=deps))
        else:
            src, dst = rng.sample(eps, 2)
            size = rng.choice([0, 1, rng.randint(1, 1 << 22), 4 << 20])
            ctype = rng.choice(["DP", "PP", "EP"])
            tags = {"pass": rng.choice(["F", "B"])}
            if ctype == "DP":
                tags["dp_phase"] = rng.choice(["rs", "ag", "ar"])
            ids.append(
                job.flow(
                    f"f{i}",
                    src,
                    dst,
                    size,
                    deps=deps,
                    coflow=f"c{i % 4}",
                    coflow_type=ctype,
                    microbatch=rng.randrange(4),
                    layer=rng.randrange(4),
                    tags=tags,
                )  # fmt: skip
            )
    return job.validate(), spec


@pytest.mark.parametrize("seed", range(30))
def test_random_jobs_end_every_item_at_the_same_time_on_both_engines(seed):
    rng = random.Random(500 + seed)
    job, spec = random_job(rng)
    name = RULED[seed % len(RULED)]
    # random EP flows are not all-to-alls Alg. 3 can split: hermod's matching off (as for "hermod")
    literal = dict(literal=True, host_wait="nic")
    make = {"hermod": lambda: Hermod(intra=False), "hermod-literal": lambda: Hermod(intra=False, **literal)}.get(
        name, lambda: by_name(name)
    )
    same_times(job, make, spec, rng.choice(["dscp-priority", "fifo"]))


def test_hermod_host_wait_holds_in_the_compact_engine_too():
    """Flows on one NIC. hermod-literal (``host_wait: nic``): DP (MID 3) ready before PP of
    microbatch 0 waits until PP is done. hermod (``host_wait: queue``): DP and PP are in different
    switch queues, so DP starts at once (PP preempts it in the network); two PP flows of
    microbatches 7 and 6 share queue 1, and the later one waits. Megatron shares."""
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 1, "nic_rate": 8e9}], "fabric": {"type": "single_switch"}}
    )
    job = Job("wait")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("dp", "a", "b", 10**7, coflow_type="DP", microbatch=3, layer=0, tags={"dp_phase": "rs"})
    job.flow("pp", "a", "b", 10**7, coflow_type="PP", microbatch=0, layer=0)
    job.flow("pp7", "a", "b", 10**7, coflow_type="PP", microbatch=7, layer=0)
    job.flow("pp6", "a", "b", 10**7, coflow_type="PP", microbatch=6, layer=0)
    _, fast = same_times(job, lambda: by_name("hermod-literal"), spec)
    t = fast.times()
    assert t["dp"][1] == pytest.approx(t["pp"][2])  # after PP of microbatch 0 (MID 0 < 3 < 6)
    _, fast = same_times(job, lambda: by_name("hermod"), spec)
    t = fast.times()
    assert t["dp"][1] == 0.0 and t["pp"][1] == 0.0 and t["pp6"][1] == 0.0
    assert t["pp7"][1] == pytest.approx(t["pp6"][2])  # same queue: the host keeps MID order
    _, fair = same_times(job, lambda: by_name("megatron"), spec)
    assert fair.times()["dp"][1] == 0.0


def test_hermod_rule_matches_its_decisions():
    job, spec = random_job(random.Random(3))
    h = Hermod()
    placement = h.place(job.public(), spec)
    assert h.matched  # EP flows between servers: gated by coflow, Alg. 3 splits them
    for f in job.flows:
        rule = h.rule(f, placement, spec)
        if f.id in h.matched:
            assert rule.gate == f.coflow and rule.key == key_number(h.key(f)) and rule.bar == 0
        else:
            assert rule.dscp == h.dscp(f) and rule.key == rule.bar == key_number(h.key(f)) and rule.queued
    assert key_number((1, 0, 0)) > key_number((0, 1, 5)) > key_number((0, 0, 7))
    assert key_number((1, 0, 0, 0)) > key_number((0, 9, 1, 3)) > key_number((0, 9, 0, 30000))
    with pytest.raises(ValueError):
        key_number((0, 0, 1 << 20))


def test_a_scheduler_with_its_own_on_ready_and_no_rule_is_refused():
    class Custom(Scheduler):
        name = "custom"

        def on_ready(self, item, view):
            return super().on_ready(item, view)

    job, spec = random_job(random.Random(1))
    assert Scheduler().rule(job.flows[0], None, spec) == Rule()
    with pytest.raises(SpecError, match="no rule"):
        compact(job, Custom(), spec)


@pytest.mark.parametrize("kind", [{"intra_host": "dgx1-v100"}, {"datapath": {"preset": "bf-3"}}])
def test_hardware_models_are_refused(kind):
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 8, "nic_rate": 1e9, **kind}], "fabric": {"type": "single_switch"}}
    )
    job = Job("x")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.task("t", "a", 1e-3)
    with pytest.raises(SpecError, match=f"hardware model \\({next(iter(kind))}\\)"):
        compact(job, by_name("megatron"), spec)


def test_empty_and_task_only_jobs():
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 1, "gpus": 1, "nic_rate": 1e9}], "fabric": {"type": "single_switch"}}
    )
    job = Job("tasks")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.task("t0", "a", 1e-3)
    job.task("t1", "a", 2e-3)  # queues behind t0 on the device
    res = run_compact(compact(job, by_name("megatron"), spec))
    assert res.times()["t1"] == (0.0, 1e-3, pytest.approx(3e-3))
    assert math.isclose(res.makespan, 3e-3)


def test_the_fluid_rules_backend_gives_the_fluid_backends_result():
    """``railbed simulate --backend fluid-rules`` (the compact engine behind railbed.backend) on
    Hermod's reduced Mixtral-8x22B scenario file, a smaller job: the same records and iterations
    as ``fluid``."""
    from pathlib import Path

    from railbed.backend import backend
    from scenarios.runner import Scenario

    sc = Scenario.load(Path(__file__).resolve().parents[1] / "scenarios/hermod/sim-mixtral-8x22b-100g.yaml")
    job = moe_training(model="mixtral-8x22b", dp=2, layers=8, microbatches=2, zero2=True, nics_per_server=8)
    for spec in sc.schedulers:
        slow = backend("fluid").run(job, make(spec), sc.cluster, sc.options())
        fast = backend("fluid-rules").run(job, make(spec), sc.cluster, sc.options())
        assert fast.scheduler == slow.scheduler and fast.cluster == slow.cluster
        assert fast.iterations == pytest.approx(slow.iterations, rel=1e-12)
        assert {i: r.end for i, r in fast.items.items()} == pytest.approx({i: r.end for i, r in slow.items.items()})


# ------------------------------------------------ the job as arrays (workloads.arrays, moe_arrays)

ARRAY_FIELDS = (
    "kind", "device", "duration", "route", "bits", "prio", "cap", "key", "bar", "queued", "nic", "dscp", "size",
    "missing", "dep_ptr", "dep_idx", "device_cap", "route_links", "route_hops", "route_latency", "link_cap", "spine",
    "iteration", "gate", "gate_size", "gate_sub", "parent", "children",
)  # fmt: skip


def same_compact_job(a, b):
    assert list(b.ids) == list(a.ids)
    for f in ARRAY_FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert (a.nics, a.link_names, a.placement.locations) == (b.nics, b.link_names, b.placement.locations)


@pytest.mark.parametrize("seed", range(8))
def test_moe_arrays_compact_to_the_same_arrays_as_the_job(seed):
    """``moe_arrays`` (moe_training's code filling an ArrayJob) and ``compact_arrays`` give, item
    for item, the CompactJob that ``compact(moe_training(...))`` gives, under every ruled scheduler."""
    rng = random.Random(seed)
    nics = rng.choice([1, 2, 4])
    kw = dict(
        dp=rng.choice([2, 4]), tp=rng.choice([1, 2]), pp=rng.choice([1, 2]), experts=4, layers=2, hidden=256,
        ffn=512, seq=256, microbatches=rng.choice([2, 4]), schedule=rng.choice(["gpipe", "1f1b"]),
        zero2=rng.random() < 0.5, dp_algo=rng.choice(["ring", "tree"]), seed=rng.randrange(100), gpus_per_server=4,
        nics_per_server=nics, layout=rng.choice(["dp-outer", "megatron"]), skew=rng.choice([0.3, 3.0]),
        expert_grid=rng.choice(["megatron", "strided"]),
    )  # fmt: skip
    kw["ep"] = rng.choice([e for e in (2, 4) if (kw["dp"] * kw["tp"]) % e == 0])
    job = moe_training(**kw)
    aj = moe_arrays(**kw)
    assert aj.items == len(job.items) and list(aj.ids) == list(job.items)
    servers = max(e.pin.server for e in job.endpoints.values()) + 1
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": servers, "gpus": 4, "nics": nics, "nic_rate": "100Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": "50Gbit",
                       "latency": "1us"},
        }
    )  # fmt: skip
    for name in RULED + ["hermod-intra"]:  # hermod: gated EP coflows between servers, when EP crosses them
        same_compact_job(compact(job, by_name(name), spec), compact_arrays(aj, by_name(name), spec))


def test_flow_batch_makes_the_flows_flow_makes_one_by_one():
    """``flow_batch`` (the generators' bulk form) equals ``flow`` called per flow, on a Job and on
    an ArrayJob: shared and per-flow tags (``each``), a class first met inside the batch, a placeholder."""
    from workloads.arrays import ArrayJob

    def fill(job, batch):
        for e, s in (("a", 0), ("b", 0), ("c", 1)):
            job.endpoint(e, Location(s, "gpu0", 0))
        first = job.forward("f.1") if hasattr(job, "forward") else "f.1"
        ids, src, dst, sizes = ["f.0", "f.1", "f.2", "f.3"], ["a", "a", "b", "a"], ["b", "c", "c", "c"], [1, 2, 3, 4]
        deps = [[first], [], [], []]
        tags = [{"pass": "F", "ep": [0, 1]}, {"pass": "F", "ep": [0, 2]}, {"pass": "F", "ep": [1, 2]}]
        attrs = dict(coflow="c0", coflow_type="EP", iteration=1, layer=2)
        f0 = "f.0" if isinstance(job, Job) else 0  # a handle: the id in a Job, the index in an ArrayJob
        if batch:
            job.flow_batch(ids[:2] + ids[3:], src[:2] + src[3:], dst[:2] + dst[3:], sizes[:2] + sizes[3:],
                           deps[:2] + deps[3:], reveal="on_ready", tags={"pass": "F"},
                           each={"ep": [t["ep"] for t in tags]}, **attrs)  # fmt: skip
            job.flow_batch(ids[2:3], src[2:3], dst[2:3], sizes[2:3], deps[2:3], reveal="on_ready", tags={"pass": "B"},
                           each={"bucket": [5]}, **attrs)  # fmt: skip
            job.flow_batch(["g.0", "g.1"], ["c", "b"], ["a", "a"], 7, [[f0], []], tags={"dp_phase": "rs"},
                           coflow_type="DP")  # fmt: skip
        else:
            for k in (0, 1, 3):
                job.flow(ids[k], src[k], dst[k], sizes[k], deps[k], reveal="on_ready", tags=tags[min(k, 2)], **attrs)
            job.flow("f.2", "b", "c", 3, [], reveal="on_ready", tags={"pass": "B", "bucket": 5}, **attrs)
            job.flow("g.0", "c", "a", 7, [f0], tags={"dp_phase": "rs"}, coflow_type="DP")
            job.flow("g.1", "b", "a", 7, [], tags={"dp_phase": "rs"}, coflow_type="DP")
        return job

    one, many = fill(Job("j"), False), fill(Job("j"), True)
    assert list(one.items.values()) == list(many.items.values())
    a, b = fill(ArrayJob("j"), False).finish(), fill(ArrayJob("j"), True).finish()
    assert list(a.ids) == list(b.ids) and a.reps == b.reps and a.coflow_names == b.coflow_names
    for col in ("kind", "a", "b", "value", "rclass", "crc", "dep_count", "deps", "iteration", "coflow"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert list(a.rclass[:4]) == [0, 1, 1, 2] and a.deps[0] == 1  # EP flows share a class; f.1 resolved


def test_moe_arrays_at_the_scenario_layout_and_interleaved():
    kw = dict(model="mixtral-8x22b", dp=8, pp=2, layers=4, microbatches=4, hidden=256, ffn=512, seq=256, zero2=True,
              nics_per_server=8, schedule="interleaved", chunks=2)  # fmt: skip
    job, aj = moe_training(**kw), moe_arrays(**kw)  # EP 8 over DP 8 at ETP = TP 8: EP across 8 servers
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": 16, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": "400Gbit",
                       "latency": "1us"},
        }
    )  # fmt: skip
    for name in ("megatron", "lina", "hermod"):
        same_compact_job(compact(job, by_name(name), spec), compact_arrays(aj, by_name(name), spec))
    with pytest.raises(SpecError, match="no such argument"):
        moe_arrays(gpus=3)


def test_ids_extended_by_prefix_and_suffix_are_the_written_out_ids():
    """Sub-flow ids kept as (original, suffix) (``Ids.extended``) read, iterate, compare and write
    out (``flat``) as the ids themselves; a second extension reuses the suffix table."""
    base = ids_of(["a", "bb", "", "ccc/d"])
    ext = base.extended(np.array([1, -1, 3, 0]), np.array([0, 1, 0, 2]), [b".h0", b"x", b".h12"])
    want = ["a", "bb", "", "ccc/d", "bb.h0", "x", "ccc/d.h0", "a.h12"]
    assert list(ext) == want and [ext[k] for k in range(-8, 8)] == want + want and ext[4:6] == want[4:6]
    assert ext == want and ext == ids_of(want) and ids_of(want) == ext and ext.flat() == ids_of(want)
    assert ext.flat().blob == ids_of(want).blob and np.array_equal(ext.flat().offsets, ids_of(want).offsets)
    two = ext.extended(np.array([2, 1]), np.array([1, 0]), [b".h12", b".h0"])
    assert list(two) == want + [".h0", "bb.h12"] and len(two.tail[2]) == 3
    with pytest.raises(ValueError):
        base.extended(np.array([4]), np.array([0]), [b"y"])
    with pytest.raises(IndexError):
        ext[8]


@pytest.mark.parametrize("seed", range(40))
def test_ids_flat_numba_kernel_agrees_with_the_ids_read_one_by_one(seed):
    """``Ids.flat`` (the numba ``_fill_ids``) against its slow twin, ``ids_of`` of the ids read one
    at a time in Python: random UTF-8 ids (empty ones, multi-byte characters), one to three
    extensions with shared and new suffixes, prefixes -1 or any id in the blob."""
    rng = np.random.default_rng(seed)
    alphabet = list("ab/._0") + ["é", "→", "𝄞"]
    words = ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(rng.integers(1, 60))]
    ids = ids_of(words)
    for _ in range(rng.integers(1, 4)):
        table = [f".h{rng.integers(0, 40)}{rng.choice(alphabet)}".encode() for _ in range(rng.integers(1, 6))]
        n = int(rng.integers(0, 200))
        ids = ids.extended(rng.integers(-1, ids.base, size=n), rng.integers(0, len(table), size=n), table)
    slow = ids_of(list(ids))
    fast = ids.flat()
    assert bytes(fast.blob) == bytes(slow.blob)
    assert np.array_equal(fast.offsets, slow.offsets)
    assert list(fast) == list(ids)


def test_the_compact_results_format_round_trips_and_summarises_like_the_records(tmp_path):
    """``save_items``/``load_items`` (arrays, no ItemRecords) keep every item's times; the
    record-less ``summary_result`` has the makespan, iterations and links of ``to_run_result``."""
    job, spec = random_moe_job(random.Random(7))
    job2 = moe_training(dp=2, pp=2, layers=2, microbatches=2, hidden=256, ffn=512, seq=256, iterations=2,
                        gpus_per_server=4, nics_per_server=2)  # fmt: skip
    for j in (job, job2):
        res = simulate_compact(j, by_name("hermod"), spec)
        full = res.to_run_result(j, "hermod")
        res.save_items(tmp_path / "items.npz")
        got = load_items(tmp_path / "items.npz")
        assert list(got["ids"]) == list(res.job.ids)
        for k, i in enumerate(res.job.ids):
            rec = full.items[i]
            assert (got["ready"][k], got["start"][k], got["end"][k]) == (rec.ready, rec.start, rec.end)
            assert (got["parent"][k] >= 0) == (rec.parent is not None)
        short = res.summary_result("hermod", spec.name)
        assert short.items == {} and short.makespan == full.makespan and short.links == full.links
        assert short.iterations == pytest.approx(full.iterations, rel=1e-12)
        assert len(full.iterations) == (2 if j is job2 else 1)


def test_railbed_simulate_builds_a_job_over_the_item_bound_as_arrays(tmp_path, monkeypatch):
    """A generated job over ``workloads.MAX_ITEMS`` (here lowered to 1000) is refused as a Job,
    and under ``--backend fluid-rules`` built as arrays per scheduler: result.json without
    records, items.npz with every item, the makespan of the compact engine on the Job."""
    import workloads
    from scenarios.runner import Scenario, simulate_scenario

    args = dict(model="mixtral-8x22b", dp=2, layers=8, microbatches=2, zero2=True, nics_per_server=8)
    data = {
        "name": "big",
        "cluster": {
            "servers": [{"count": 16, "gpus": 8, "nics": 8, "nic_rate": "100Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 8, "spines": 2, "uplink_rate": "400Gbit"},
        },
        "job": {"generator": "moe_training", "args": args},
        "schedulers": ["megatron", "hermod"],
    }
    job = moe_training(**args)
    monkeypatch.setattr(workloads, "MAX_ITEMS", 1000)
    with pytest.raises(SpecError, match="backend fluid-rules"):
        Scenario.from_dict(data)
    sc = Scenario.from_dict(data, arrays=True)
    assert sc.job is None and sc.arrays == ("moe_training", args)
    with pytest.raises(SpecError, match="backend fluid-rules"):
        simulate_scenario(sc, tmp_path / "numba", echo=lambda _: None)
    results = simulate_scenario(sc, tmp_path / "out", echo=lambda _: None, backend="fluid-rules")
    for res, name in zip(results, ["megatron", "hermod"]):
        want = simulate_compact(job, by_name(name), sc.cluster)
        assert res.items == {} and res.makespan == want.makespan
        saved = RunResult.load(tmp_path / "out" / name / "result.json")
        assert saved.makespan == want.makespan and saved.iterations == pytest.approx({0: want.makespan})
        items = load_items(tmp_path / "out" / name / "items.npz")
        assert list(items["ids"]) == list(job.items) and np.array_equal(items["end"], want.end)
    assert "in notes" in (tmp_path / "out" / "comparison.txt").read_text()  # no records, no FCTs of 0 s


# ------------------------------------ gated splits in array form (Scheduler.gate_split_arrays)


def objects_only(name: str):
    """The scheduler ``name`` without its array form: the compact engine takes its ``gate_split``
    (a :class:`Split` of :class:`SubFlow` s) and checks and converts it sub-flow by sub-flow."""
    base = type(by_name(name))

    class ObjectsOnly(base):
        def gate_split_arrays(self, gates, placement, cluster):
            return None

    return ObjectsOnly()


def with_spines(spec: ClusterSpec, spines: int) -> ClusterSpec:
    d = spec.to_dict()
    d["fabric"]["spines"] = spines
    return ClusterSpec.from_dict(d)


def gated_moe_job(rng: random.Random) -> tuple[Job, ClusterSpec]:
    """The first of ``random_moe_job``'s jobs with EP coflows between servers (Hermod gates them)."""
    while True:
        job, spec = random_moe_job(rng)
        probe = Hermod()
        probe.place(job.public(), spec)
        if probe.matched:
            return job, spec


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("name", ["hermod", "hermod-literal"])
def test_the_array_split_is_the_object_split(seed, name):
    """Alg. 3's split as arrays (``gate_split_arrays``, appended with numpy) and as the Split that
    ``gate_split`` and ``on_ready`` return (checked and appended one sub-flow at a time): the same
    CompactJob, and per sub-flow of the Split the same id, original, bytes, DSCP, dependencies
    and ECMP spine (CRC-32 of its id; 7 spines so that more than its last bit counts)."""
    job, spec = gated_moe_job(random.Random(900 + seed))
    spec = with_spines(spec, 7)
    fast, slow = compact(job, by_name(name), spec), compact(job, objects_only(name), spec)
    same_compact_job(fast, slow)
    sched = by_name(name)
    placement = sched.place(job.public(), spec)
    index = {i: k for k, i in enumerate(fast.ids)}
    deps_of: dict[int, list[int]] = {}
    for k in range(fast.items):
        for x in fast.dep_idx[fast.dep_ptr[k] : fast.dep_ptr[k + 1]]:
            deps_of.setdefault(int(x), []).append(k)
    from railbed.topology import Topology

    topo, subs = Topology(spec), 0
    for ids in sched.members.values():
        flows = [job.items[i] for i in ids]
        arrays = sched.gate_split_arrays([flows], placement, spec)
        split = sched.gate_split(flows, placement, spec)
        assert arrays.split(flows) == split
        for orig, parts in split.parts.items():
            assert fast.children[index[orig]] == len(parts) > 0
            for sub in parts:
                k = index[sub.id]
                assert k >= len(job.items) and fast.ids[fast.parent[k]] == orig
                assert (int(fast.size[k]), int(fast.dscp[k]), math.isinf(fast.cap[k])) == (sub.size, sub.dscp, True)
                assert sorted(deps_of.get(k, [])) == sorted(index[d] for d in sub.deps)
                a, b = placement[job.items[orig].src], placement[job.items[orig].dst]
                if fast.kind[k] == NET:
                    want = topo.ecmp_spine((a.server, a.nic), (b.server, b.nic), sub.id)
                    assert fast.spine[k] == (-1 if want is None else want), sub.id
                subs += 1
    assert subs == fast.items - len(job.items) > 0


class BrokenArrays(Hermod):
    """Hermod whose arrays break one rule of a Split (``how``), to see the engine refuse them."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def gate_split_arrays(self, gates, placement, cluster):
        from dataclasses import replace

        a = super().gate_split_arrays(gates, placement, cluster)
        if self.how == "bytes":
            size = a.size.copy()
            size[0] += 1
            return replace(a, size=size)
        if self.how == "cycle":  # the first sub-flow waits for itself
            dep = np.concatenate([[0], a.dep])
            ptr = np.concatenate([[0], a.dep_ptr[1:] + 1])
            return replace(a, dep=dep, dep_ptr=ptr)
        if self.how == "ids":  # every sub-flow named as its original
            return replace(a, suffixes=("",) * len(a.suffixes))
        if self.how == "unsplit":  # the last original gets none
            keep = a.flow != a.flow[-1]
            return replace(a, flow=a.flow[keep], size=a.size[keep], suffix=a.suffix[keep], dscp=a.dscp[keep],
                           dep_ptr=np.zeros(int(keep.sum()) + 1, np.int64), dep=a.dep[:0])  # fmt: skip
        raise AssertionError(self.how)


@pytest.mark.parametrize("how, match", [("bytes", "leave .* bytes"), ("cycle", "cycle"), ("ids", "not new"),
                                        ("unsplit", "gets no sub-flows")])  # fmt: skip
def test_the_engine_checks_split_arrays_as_the_dispatcher_checks_a_split(how, match):
    """Bytes not conserved, a cycle, an id used twice, an original without sub-flows: refused
    with the Dispatcher's error (SchedulerError), from the arrays checked with numpy."""
    from railbed.dispatch import SchedulerError

    job, spec = gated_moe_job(random.Random(100))
    with pytest.raises(SchedulerError, match=match):
        compact(job, BrokenArrays(how), spec)


def test_acyclic_kernel_agrees_with_its_twin_on_random_graphs():
    """The gated splits' cycle check (numba Kahn's order) against the obvious twin: -1 on every
    DAG, the same first sub-flow left on graphs with a cycle."""
    import random

    from simulator.rules.gates import _acyclic, acyclic_reference

    rng, cyclic = random.Random(7), 0
    for _ in range(300):
        m = rng.randint(1, 12)
        edges = {(rng.randrange(m), rng.randrange(m)) for _ in range(rng.randint(0, 2 * m))}
        if rng.random() < 0.5:  # a DAG: every edge from a smaller to a larger index
            edges = {(min(a, b), max(a, b)) for a, b in edges if a != b}
        edges = sorted(edges)
        ndeps = np.bincount(np.array([b for _, b in edges], np.int64), minlength=m).astype(np.int64)
        order = sorted(edges)  # by dependency: the CSR of each sub-flow's dependents
        ptr = np.zeros(m + 1, np.int64)
        np.cumsum(np.bincount(np.array([a for a, _ in order], np.int64), minlength=m), out=ptr[1:])
        dependents = np.array([b for _, b in order], np.int64)
        want = acyclic_reference(ndeps, ptr, dependents)
        assert _acyclic(ndeps, ptr, dependents) == want, edges
        cyclic += want >= 0
    assert 20 < cyclic < 280  # both kinds met
