"""The fast path against the definition, on random jobs under every scheduler (issue 23).

The Dispatcher defines what a run means; ``fluid-reference`` drives it over the plain-Python
network (:class:`simulator.fluid.network.ReferenceNetwork`, :func:`railbed.maxmin.maxmin_reference`).
``fluid-rules`` (:mod:`simulator.rules`) re-implements that meaning in one numba kernel over
the schedulers' rules. Here a seeded generator makes random jobs (DAGs of tasks and flows,
random sizes including 0, dependencies, device capacities, pinned and placed endpoints,
same-server flows, coflow types, microbatches, layers, DP phases, tree and metadata tags, EP
all-to-alls with one flow per pair, sizes revealed up front, on ready or never) on random small
clusters of every fabric (one switch, leaf-spine, rail-optimized; mixed NIC counts and rates,
latency or none) and runs each under every registered scheduler the fast path supports, on
both backends: every item's ready, start and end (tasks, flows, sub-flows) and the makespan
must agree to ``REL`` relative. Where the reference fails (a scheduler's own error, a stall),
the fast path must fail too, with an error of the run's kinds, never return a result.

Every registered scheduler the fast path does not support must be refused before anything
runs by a one-line :class:`SpecError` naming ``scheduler``; so must job features it does not
model (path options, hardware models). The regression tests at the end are the minimal
cases of the disagreements this test found (see each docstring).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from railbed.backend import RunOptions, backend
from railbed.dispatch import RunStalled, SchedulerError
from railbed.errors import SpecError
from railbed.job import Flow, Job, Leg, Location, PathOption
from railbed.rulebook import RuleBook, as_offered, decides_by_rule
from railbed.scheduler import HOLD, ActiveFlow, Change, Decision, OnDone, OnReady, RunView, hold
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers import REGISTRY, by_name
from schedulers.hermod import Hermod
from workloads import generate

REL = 1e-9  # relative agreement of every time (both use max-min with ties at 1 + 1e-12)
ABS = 1e-15  # s, for times at 0
RATES = [1e9, 2.5e9, 1e10]
JOBS_PER_SCHEDULER = 22  # x (10 schedulers + 3 Hermod variants) = 286 random jobs
RUN_ERRORS = (SchedulerError, RunStalled, SpecError)  # how a run may fail: the scheduler's fault, a stall, input


# ------------------------------------------------------------------ the generator
def random_cluster(rng: random.Random) -> ClusterSpec:
    """2-5 servers of 1-4 GPUs in groups of their own NIC rate (and NIC count, but on rails)."""
    kind = rng.choice(["single_switch", "leaf_spine", "rail_optimized"])
    gpus, rails = rng.randint(1, 4), rng.randint(1, 3)
    groups, left = [], rng.randint(2, 5)
    while left:
        count = rng.randint(1, left)
        nics = rails if kind == "rail_optimized" else rng.randint(1, 3)
        groups.append({"count": count, "gpus": gpus, "nics": nics, "nic_rate": rng.choice(RATES)})
        left -= count
    fabric = {"type": kind, "latency": rng.choice([0, 0, 1e-6, 5e-6])}
    if kind == "leaf_spine":
        fabric.update(servers_per_leaf=rng.randint(1, 3), spines=rng.randint(1, 3), uplink_rate=rng.choice(RATES))
    elif kind == "rail_optimized":
        fabric.update(spines=rng.randint(1, 2), uplink_rate=rng.choice(RATES))
    return ClusterSpec.from_dict({"servers": groups, "fabric": fabric})


def _attrs(rng: random.Random, ctype: str | None) -> dict:
    """What the schedulers read: coflow type, microbatch, layer, pass, DP phase, tree."""
    tags: dict = {"pass": rng.choice(["F", "B"])}
    if ctype == "DP":
        tags["dp_phase"] = rng.choice(["rs", "ag", "ar"])
        if rng.random() < 0.2:
            tags["tree"] = 1  # Hermod: half the source NIC's rate
    return dict(coflow_type=ctype, microbatch=rng.choice([None, 0, 1, 2, 3]), layer=rng.choice([None, 0, 1, 2]),
                tags=tags)  # fmt: skip


def _reveal(rng: random.Random, hidden: float) -> str:
    r = rng.random()
    return "hidden" if r < hidden else "on_ready" if r < 0.2 else "upfront"


def random_job(rng: random.Random, spec: ClusterSpec, items: int | None = None) -> Job:
    """4-50 items: tasks (some 0 s) on pinned or placed endpoints' devices (a GPU or the CPU,
    capacities 1-3), single flows of every type (sizes 0, 1 B, a frame, random, 1 MiB), and EP
    all-to-alls (one flow per ordered pair of 2-4 endpoints, equal or random sizes, one
    coflow, the same dependencies)."""
    job = Job("diff", capacity=rng.choice([{}, {"cpu": 2}, {"gpu0": 3}]), default_capacity=rng.choice([1, 1, 2]))
    for e in range(rng.randint(2, 8)):
        pin = None
        if rng.random() < 0.6:
            s = rng.randrange(len(spec.servers))
            g = rng.randrange(spec.servers[s].gpus)
            pin = Location(s, rng.choice([f"gpu{g}", f"gpu{g}", "cpu"]), rng.randrange(spec.servers[s].nics))
        job.endpoint(f"e{e}", pin=pin)
    eps = list(job.endpoints)
    ids: list[str] = []
    n = items or rng.randint(4, 50)
    i = 0
    while len(ids) < n:
        i += 1
        deps = rng.sample(ids, min(len(ids), rng.choice([0, 0, 1, 1, 2, 3])))
        r = rng.random()
        if r < 0.25:
            ids.append(job.task(f"t{i}", rng.choice(eps), rng.choice([0.0, 1e-4, 1e-3, rng.uniform(0, 3e-3)]), deps))
        elif r < 0.4:
            group = rng.sample(eps, rng.randint(2, min(4, len(eps))))
            attrs, reveal, size = _attrs(rng, "EP"), _reveal(rng, 0.03), rng.choice([None, rng.randint(1, 1 << 21)])
            for s in group:
                for d in group:
                    if s != d:
                        nbytes = size or rng.randint(1, 1 << 21)
                        ids.append(job.flow(f"a{i}.{s}.{d}", s, d, nbytes, deps, reveal, coflow=f"ep{i}", **attrs))
        else:
            src, dst = rng.sample(eps, 2)
            ctype = rng.choice(["DP", "PP", "EP", "TP", None])
            attrs = _attrs(rng, ctype)
            if ctype == "EP" and rng.random() < 0.3:
                attrs["tags"]["metadata"] = True
            coflow = f"c{rng.randrange(4)}" if ctype != "EP" and rng.random() < 0.5 else None
            size = rng.choice([0, 1, 1500, rng.randint(1, 1 << 21), 1 << 20, 1 << 20])
            ids.append(job.flow(f"f{i}", src, dst, size, deps, _reveal(rng, 0.1), coflow=coflow, **attrs))
    return job.validate()


# ------------------------------------------------------------------ the comparison
def run_both(job: Job, make, spec: ClusterSpec, policy: str):
    """(reference result or its error, fast result or its error)."""
    out = []
    for name in ("fluid-reference", "fluid-rules"):
        try:
            out.append(backend(name).run(job, make(), spec, RunOptions(policy=policy, analysis=False)))
        except RUN_ERRORS as exc:
            out.append(exc)
    return out


def assert_agree(job: Job, make, spec: ClusterSpec, policy: str = "dscp-priority") -> str:
    """The fast path's items (sub-flows too) end as the reference's, or both fail. Returns
    ``"ran"`` or the reference's error type."""
    slow, fast = run_both(job, make, spec, policy)
    if isinstance(slow, Exception):
        assert isinstance(fast, Exception), f"the reference fails ({slow!r}); the fast path returned a result"
        assert "\n" not in str(fast)
        return type(slow).__name__
    assert not isinstance(fast, Exception), f"the fast path fails ({fast!r}); the reference ran"
    assert set(fast.items) == set(slow.items)
    for i, rec in slow.items.items():
        mine = fast.items[i]
        for what in ("ready", "start", "end"):
            want, got = getattr(rec, what), getattr(mine, what)
            assert got == pytest.approx(want, rel=REL, abs=ABS), (i, what, want, got)
        assert (mine.dscp, mine.rate, mine.parent, mine.children) == (rec.dscp, rec.rate, rec.parent, rec.children), i
    assert fast.makespan == pytest.approx(slow.makespan, rel=REL, abs=ABS)
    return "ran"


def _probe_job() -> tuple[Job, ClusterSpec]:
    rng = random.Random(0)
    spec = random_cluster(rng)
    return random_job(rng, spec, 12), spec


def _supported() -> tuple[list[str], dict[str, Exception]]:
    """Registered schedulers the fast path runs, and what each other one raised (checked below)."""
    from simulator.rules import compact

    job, spec = _probe_job()
    runs, refused = [], {}
    for name in REGISTRY:
        try:
            compact(job, by_name(name), spec)
            runs.append(name)
        except Exception as exc:  # noqa: BLE001 - anything but a clear SpecError fails the refusal test
            refused[name] = exc
    return runs, refused


SUPPORTED, REFUSED = _supported()
MAKERS = {name: (lambda name=name: by_name(name)) for name in SUPPORTED}
MAKERS["hermod(host_wait=nic)"] = lambda: Hermod(host_wait="nic")
MAKERS["hermod(host_wait=off)"] = lambda: Hermod(host_wait="off")
MAKERS["hermod(interleaved=True)"] = lambda: Hermod(interleaved=True)


def test_the_fast_path_supports_the_ruled_schedulers():
    """So a refactoring that silently refused them all would not make the test below vacuous."""
    for name in ("fifo", "megatron", "lina", "hermod", "hermod-inter", "hermod-intra", "dp-first", "ep-first"):
        assert name in SUPPORTED
    assert len(MAKERS) * JOBS_PER_SCHEDULER >= 200


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_random_jobs_agree_with_the_reference(name):
    """``JOBS_PER_SCHEDULER`` random jobs per scheduler: the fast path's times are the reference's."""
    outcomes: dict[str, int] = {}
    for k in range(JOBS_PER_SCHEDULER):
        rng = random.Random(f"{name}/{k}")
        spec = random_cluster(rng)
        job = random_job(rng, spec)
        got = assert_agree(job, MAKERS[name], spec, rng.choice(["dscp-priority", "fifo"]))
        outcomes[got] = outcomes.get(got, 0) + 1
    assert outcomes.get("ran", 0) >= JOBS_PER_SCHEDULER * 3 // 4, outcomes  # mostly runs, not errors that agree


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_every_other_scheduler_is_refused_with_a_one_line_error_naming_the_scheduler(name):
    """Before ``place`` (DGTP's would search, or fail on a job it was not made for): a
    scheduler that decides in hooks the engine never calls, or has no rule."""
    exc = REFUSED[name]
    assert isinstance(exc, SpecError), repr(exc)
    assert exc.field == "scheduler" and "\n" not in str(exc) and name in str(exc)
    assert "fluid backend" in str(exc)
    job, spec = _probe_job()
    with pytest.raises(SpecError, match="fluid backend"):
        backend("fluid-rules").run(job, by_name(name), spec, RunOptions(analysis=False))


ROOT = Path(__file__).resolve().parents[1]


def _home_jobs(k: int) -> list[tuple[Job, ClusterSpec]]:
    """Small jobs of the papers' workloads on their clusters, for schedulers whose ``check``
    refuses the random jobs: GNN training on DGTP's testbed (stores, samplers, workers),
    LEO's KVS requests on its datapath hosts (path options), DGCL's full-graph GNN on a DGX-1
    (graphAllgathers, an intra-host preset)."""
    gnn = {"scale": 0.005, "batch": 40, "iterations": 2, "profile": 3, "dataset": "products", "seed": k}
    dgx1 = {"servers": [{"count": 1, "gpus": 8, "nics": 1, "nic_rate": "50Gbit", "intra_host": "dgx1-v100"}],
            "fabric": {"type": "single_switch"}}  # fmt: skip
    full = {"dataset": "web-google", "gpus": 8, "max_edges": 5000, "compute": 1e-3, "sockets": 2, "seed": k}
    return [
        (generate("gnn_training", gnn), ClusterSpec.load(ROOT / "examples" / "dgtp-testbed.yaml")),
        (generate("requests", {"preset": "kvs-c", "requests": 100, "load": 3e7, "seed": k}),
         ClusterSpec.load(ROOT / "scenarios" / "leo" / "cluster-f-nic-off-path.yaml")),
        (generate("gnn_fullgraph", full), ClusterSpec.from_dict(dgx1)),
    ]  # fmt: skip


def _accepted(name: str, k: int) -> tuple[Job, ClusterSpec]:
    """A random job if the scheduler's ``check`` takes it, else the first home job it takes."""
    rng = random.Random(f"fluid/{name}/{k}")
    spec = random_cluster(rng)
    candidates = [(random_job(rng, spec), spec)]
    for job, spec in candidates + _home_jobs(k % 2):
        try:
            by_name(name).check(job.public(), spec)
            return job, spec
        except SpecError:
            continue
    raise AssertionError(f"{name} accepts none of the test's jobs")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_scheduler_runs_the_same_on_fluid_as_on_fluid_reference(name):
    """The other fast path, ``fluid`` (the same Dispatcher, max-min in numba), under every
    registered scheduler (every hook: splits, re-rating, wake-ups, path choices, host
    models): 3 jobs its ``check`` accepts agree with the reference, or fail alike."""
    for k in range(3):
        job, spec = _accepted(name, k)
        slow, fast = [], []
        for b, out in (("fluid-reference", slow), ("fluid", fast)):
            try:
                out.append(backend(b).run(job, by_name(name), spec, RunOptions(analysis=False)))
            except RUN_ERRORS as exc:
                out.append(exc)
        slow, fast = slow[0], fast[0]
        if isinstance(slow, Exception):
            assert type(fast) is type(slow) and str(fast) == str(slow)
            continue
        assert set(fast.items) == set(slow.items)
        for i, rec in slow.items.items():
            got = (fast.items[i].ready, fast.items[i].start, fast.items[i].end)
            assert got == pytest.approx((rec.ready, rec.start, rec.end), rel=REL, abs=ABS), i
        assert fast.makespan == pytest.approx(slow.makespan, rel=REL, abs=ABS)


def test_job_features_the_fast_path_does_not_model_are_refused():
    job, spec = _probe_job()
    flow = job.flows[0]
    opts = Job("opts")
    for e in job.endpoints.values():
        opts.endpoint(e.name, e.pin)
    opts.flow("x", flow.src, flow.dst, 1000, options=[PathOption("a", src_leg=Leg("gpu0", "nic0", duration=1e-6))])
    with pytest.raises(SpecError) as err:
        backend("fluid-rules").run(opts, by_name("megatron"), spec, RunOptions(analysis=False))
    assert err.value.field == "items.x.options"
    hosts = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 8, "nic_rate": 1e9, "intra_host": "dgx1-v100"}],
         "fabric": {"type": "single_switch"}}
    )  # fmt: skip
    with pytest.raises(SpecError) as err:
        backend("fluid-rules").run(random_job(random.Random(1), hosts, 6), by_name("megatron"), hosts, RunOptions())
    assert err.value.field == "servers" and "hardware model" in str(err.value)


# ------------------------------------------------------------------ rules against on_ready, state by state
def _as_seen(flow):
    """A flow as ``on_ready`` sees it once ready (the compact engine hands ``rule`` the same)."""
    return replace(flow, size=None) if flow.reveal == "hidden" else flow


def _random_state(rng: random.Random, job: Job, spec: ClusterSpec, placement, subs: dict, rules: dict,
                  gates: list) -> RunView:  # fmt: skip
    """A view the Dispatcher could show: some network flows (not gated: those never start
    themselves) and gated flows' sub-flows active with their DSCPs, some tasks and flows held
    (in any order; often every flow of a gate), the held ones' ``on_ready`` sizes revealed."""
    view = RunView(job.public(), spec, Topology(spec), placement, now=rng.uniform(0, 1e-2))
    net = [(f, rules[f.id].dscp) for f in job.flows
           if placement[f.src].server != placement[f.dst].server and rules[f.id].gate is None]  # fmt: skip
    for f, dscp in rng.sample(net + list(subs.values()), rng.randint(0, min(6, len(net) + len(subs)))):
        src, dst = placement[f.src], placement[f.dst]
        view.active[f.id] = ActiveFlow(f, src, dst, dscp, None, 0.0)
    idle = [i for i in job.items if i not in view.active]
    view.held = rng.sample(idle, rng.randint(1, min(10, len(idle))))
    if gates and rng.random() < 0.5:
        whole = rng.choice(gates)
        view.held += [i for i in whole if i not in view.held]
        rng.shuffle(view.held)
    for i in view.held:
        if isinstance(job.items[i], Flow) and job.items[i].reveal == "on_ready":
            view.job.items[i] = job.items[i]
    return view


def _expected(item, view: RunView, rules: dict, split_of: dict, members: dict, by_class: bool):
    """What ``rule`` and ``gate_split`` say ``on_ready`` answers for ``item`` in ``view`` (with
    the scheduler's ``hold_by_class``, a hold counts only flows of the same ``dscp >> 3``)."""
    if not isinstance(item, Flow):
        return Decision()
    rule = rules[item.id]
    if rule.gate is not None:
        return split_of[rule.gate] if set(members[rule.gate]) <= set(view.held) else HOLD

    def slot(loc, dscp):
        return (loc.server, loc.nic, dscp >> 3 if by_class else 0)

    mine = slot(view.placement[item.src], rule.dscp)
    if any(slot(a.src, a.dscp) == mine and rules[a.flow.parent or fid].key < rule.bar
           for fid, a in view.active.items()):  # fmt: skip
        return HOLD
    if rule.queued:
        for h in view.held:
            other = rules.get(h)
            if other is None or not other.queued or other.key >= rule.bar:
                continue
            if slot(view.placement[view.job.items[h].src], other.dscp) == mine:
                return HOLD
    return Decision(dscp=rule.dscp, rate=rule.rate)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_rule_and_gate_split_say_what_on_ready_answers_in_random_states(name):
    """The fast path's decisions come from ``rule`` and ``gate_split``; the Dispatcher's from
    ``on_ready``, or, for a scheduler that writes rules and no ``on_ready``, from the rules'
    reading (:class:`railbed.rulebook.RuleBook`): on random views (active flows, held items,
    revealed sizes) of random jobs, the ``Rule``'s meaning as this test states it (held while
    a flow active on the source NIC, or a held queued one there, has ``key < bar``; a gate held
    until whole, then ``gate_split``) is that answer for every held item, offered in the held
    order of one round."""
    checked = 0
    for k in range(12):
        rng = random.Random(f"states/{name}/{k}")
        spec = random_cluster(rng)
        job = random_job(rng, spec)
        sched = MAKERS[name]()
        placement = sched.place(job.public(), spec)
        rules = {f.id: sched.rule(_as_seen(f), placement, spec) for f in job.flows}
        members: dict[str, list[str]] = {}
        for f in job.flows:
            if rules[f.id].gate is not None:
                members.setdefault(rules[f.id].gate, []).append(f.id)
        split_of, subs = {}, {}
        for gate, ids in members.items():
            try:
                split_of[gate] = sched.gate_split([_as_seen(job.items[i]) for i in ids], placement, spec)
            except Exception as exc:  # noqa: BLE001 - on_ready must then fail the same way
                split_of[gate] = exc
                continue
            for orig, parts in split_of[gate].parts.items():
                for p in parts:
                    subs[p.id] = (replace(job.items[orig], id=p.id, size=p.size, deps=(), parent=orig), p.dscp)
        for _ in range(6):
            view = _random_state(rng, job, spec, placement, subs, rules, list(members.values()))
            if decides_by_rule(sched):  # the Dispatcher's reading, made as the Dispatcher makes it
                decide = RuleBook(sched, map(as_offered, job.flows), placement, spec).decide
            else:
                decide = sched.on_ready
            for i in list(view.held):
                want = _expected(view.job.items[i], view, rules, split_of, members, sched.hold_by_class)
                if isinstance(want, Exception):
                    with pytest.raises(type(want)):
                        decide(view.job.items[i], view)
                    continue
                got = decide(view.job.items[i], view)
                if isinstance(got, Decision) and not got.start:  # a hold; what wakes it: the run tests
                    got = HOLD
                assert got == want, (name, k, i)
                checked += 1
    assert checked >= 200


# ------------------------------------------------------------------ the network-free run: one event order
@pytest.mark.parametrize("name", ["megatron", "lina", "hermod", "hermod(host_wait=nic)", "dp-first"])
def test_the_network_free_runs_keep_the_simulators_event_order_on_random_jobs(name):
    """Without communication time the event order is written twice more: the Dispatcher's
    network-free run (:func:`railbed.analysis.network_free_makespan`: flows end in the step
    they start, in the order they started, before any timer) and the compact kernel's zero-bit
    run (:func:`simulator.rules.network_free_run`). On random jobs under the ruled
    schedulers (whose holds resolve in an instant there) both give the same makespan, or both
    fail."""
    from railbed.analysis import network_free_makespan
    from railbed.dispatch import Dispatcher
    from simulator.rules import compact, network_free_run

    ran = 0
    for k in range(10):
        rng = random.Random(f"free/{name}/{k}")
        spec = random_cluster(rng)
        job = random_job(rng, spec)
        try:
            d = Dispatcher(job, MAKERS[name](), spec, snapshot=True)
            want = network_free_makespan(job, d.placed_scheduler, spec, d.placement)
        except RUN_ERRORS + (RuntimeError,):
            with pytest.raises(RUN_ERRORS + (RuntimeError,)):
                network_free_run(compact(job, MAKERS[name](), spec))
            continue
        got = network_free_run(compact(job, MAKERS[name](), spec)).makespan
        assert got == pytest.approx(want, rel=REL, abs=ABS), (name, k)
        ran += 1
    assert ran >= 7


class InstantNetwork:
    """The network of the network-free run (:func:`railbed.analysis.network_free_makespan`'s
    definition) behind the simulator's interface: a flow carries its bits in no time, so every
    flow that joined ends at the next advance, at ``now``, in the order they joined."""

    def __init__(self, capacity, meter: bool = False) -> None:
        self.link_bits = [0.0] * len(capacity)
        self.link_peak = [0.0] * len(capacity)
        self.meter = None
        self._joined: list[int] = []
        self._next = 0

    @property
    def active(self) -> int:
        return len(self._joined)

    def add(self, links, prio: int, cap, bits: float, ftype: int = 0) -> int:
        self._joined.append(self._next)
        self._next += 1
        return self._next - 1

    def set_cap(self, slot: int, cap) -> None:
        pass  # a cap slows nothing that takes no time

    def set_class(self, slot: int, prio: int) -> None:
        pass

    def progress(self, slot: int) -> tuple[float, float]:
        return 0.0, math.inf

    def advance(self, now: float, t_limit: float) -> tuple[float, list[int]]:
        if not self._joined:
            return t_limit, []
        done, self._joined = self._joined, []
        return now, done


@pytest.mark.parametrize("name", ["megatron", "lina", "hermod", "dp-first", "fifo"])
def test_the_network_free_run_is_the_simulators_event_loop_over_an_instant_network(name):
    """The network-free run restates the simulator's event order (:mod:`simulator.fluid.run`): flows
    end before timers, in the order they started, timers in (time, order set). The simulator's
    own loop over :class:`InstantNetwork` (zero latency, no host models: nothing else takes
    time) must give the same makespan on random jobs, bit for bit."""
    from railbed.analysis import network_free_makespan
    from railbed.dispatch import Dispatcher
    from simulator import Simulation

    ran = 0
    for k in range(10):
        rng = random.Random(f"instant/{name}/{k}")
        spec = random_cluster(rng)
        spec = replace(spec, fabric=replace(spec.fabric, latency=0.0))
        job = random_job(rng, spec)
        try:
            d = Dispatcher(job, MAKERS[name](), spec, snapshot=True)
            want = network_free_makespan(job, d.placed_scheduler, spec, d.placement)
        except RUN_ERRORS + (RuntimeError,):
            with pytest.raises(RUN_ERRORS + (RuntimeError,)):
                Simulation(job, MAKERS[name](), spec, network=InstantNetwork).run()
            continue
        assert Simulation(job, MAKERS[name](), spec, network=InstantNetwork).run().makespan == want, (name, k)
        ran += 1
    assert ran >= 7


# ------------------------------------------------------------------ regressions (what this test found)
def _two_servers() -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": 2, "gpus": 1, "nic_rate": 1e9}], "fabric": {"type": "single_switch"}}
    )


def test_regression_hidden_sizes_stay_hidden_from_rule_and_gate_split():
    """Found: an EP all-to-all between servers with ``reveal="hidden"`` sizes. Hermod's
    ``on_ready`` sees ``size=None`` (the Dispatcher's view) and its Alg. 3 split fails; the fast
    path handed ``rule`` and ``gate_split`` the job's true sizes, so it split the coflow and
    returned a run the definition does not have. Now both get the flow as ``on_ready`` sees it."""
    job = Job("hidden")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("ab", "a", "b", 1 << 20, reveal="hidden", coflow="ep", coflow_type="EP")
    job.flow("ba", "b", "a", 1 << 20, reveal="hidden", coflow="ep", coflow_type="EP")
    assert assert_agree(job, Hermod, _two_servers()) == "SchedulerError"
    seen = []

    class Probe(Hermod):
        def rule(self, flow, placement, cluster):
            seen.append(flow.size)
            return super().rule(flow, placement, cluster)

    job2 = Job("hidden2")
    job2.endpoint("a", Location(0, "gpu0", 0))
    job2.endpoint("b", Location(1, "gpu0", 0))
    job2.flow("x", "a", "b", 1000, reveal="hidden", coflow_type="PP")
    job2.flow("y", "a", "b", 1000, reveal="on_ready", coflow_type="PP")
    assert assert_agree(job2, Probe, _two_servers()) == "ran"
    assert seen[-2:] == [None, 1000]  # on_ready would see x's size never, y's once ready


def test_regression_a_ruled_scheduler_deciding_in_another_hook_is_refused():
    """Found by reading what the fast path claims to refuse: a scheduler that inherits a
    ``rule`` but re-rates flows in ``on_flows_changed`` (or keeps state in ``on_done``, picks
    paths in ``choose_path``) ran on the fast path without those hooks: a silent difference.
    Now refused before ``place``."""

    class CappedHermod(Hermod):
        name = "capped-hermod"

        def on_flows_changed(self, view):
            return {fid: Change(rate=1e8) for fid in view.active}

    job = Job("capped")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("ab", "a", "b", 10**6, coflow_type="PP")
    slow, fast = run_both(job, CappedHermod, _two_servers(), "dscp-priority")
    assert slow.makespan > 0.05  # capped at 100 Mbit/s: the hook matters
    assert isinstance(fast, SpecError) and fast.field == "scheduler" and "on_flows_changed" in str(fast)


def test_regression_a_stall_is_the_dispatchers_run_stalled():
    """Found: an EP coflow whose flow waits for another of the same coflow can never be whole;
    the reference raises ``RunStalled``, the fast path raised a bare ``RuntimeError``."""
    job = Job("stall")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("ab", "a", "b", 1000, coflow="ep", coflow_type="EP")
    job.flow("ba", "b", "a", 1000, deps=["ab"], coflow="ep", coflow_type="EP")
    slow, fast = run_both(job, Hermod, _two_servers(), "dscp-priority")
    assert isinstance(slow, RunStalled) and isinstance(fast, RunStalled)


def test_regression_a_gate_completes_on_its_own_flows_held_not_on_others_naming_it():
    """The RuleBook counts a gate's held flows once per offer round (it looked each member up
    per offer before: 27 % of a 128-GPU Table 5.2 run). Only the flows that named the gate when
    the run began count: a sub-flow whose rule names it too does not complete it, and a flow
    naming a gate no flow named then is refused, not held for ever."""
    from types import SimpleNamespace

    from railbed.scheduler import Rule, Scheduler

    class Gated(Scheduler):
        name = "gated"

        def rule(self, flow, placement, cluster):
            return Rule(gate="g" if flow.id != "other" else "late")

        def gate_split(self, flows, placement, cluster):
            return "split of " + ",".join(f.id for f in flows)

    job = Job("gates")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    for name in ("x", "y"):
        job.flow(name, "a", "b", 1000)
    sub = replace(job.items["x"], id="x/1", parent="x")
    other = replace(job.items["x"], id="other")
    items = {**job.items, "x/1": sub, "other": other}
    book = RuleBook(Gated(), map(as_offered, job.flows), {"a": job.endpoints["a"].pin}, _two_servers())

    def offer(item, held):
        view = SimpleNamespace(held=list(held), job=SimpleNamespace(items=items), placement={}, active={})
        return book.decide(items[item], view)

    assert offer("x", ["x", "x/1"]) == hold(OnReady("y"))  # y is not held: x's sub-flow does not stand in
    assert offer("x", ["x", "y"]) == "split of x,y"
    with pytest.raises(SchedulerError, match="names gate 'late'"):
        offer("other", ["other"])


@pytest.mark.parametrize("name", ["hermod", "hermod(host_wait=nic)", "hermod-inter", "lina"])
def test_rule_holds_parked_until_their_events_give_the_run_of_plain_holds(name, monkeypatch):
    """The RuleBook parks a held flow until what can change its answer happens (a flow starting
    or ending on its source NIC; for a gate's flows, the gate's missing flow becoming ready, or
    the gate's lead leaving): the Dispatcher's run equals, to the bit, the run in which every
    hold is offered again at every settling, with fewer offers."""
    import railbed.rulebook as rulebook

    offers = {"n": 0}
    decide = RuleBook.decide

    def counted(self, item, view):
        offers["n"] += 1
        return decide(self, item, view)

    monkeypatch.setattr(RuleBook, "decide", counted)
    fewer = 0
    for k in range(8):
        rng = random.Random(f"parked/{name}/{k}")
        spec = random_cluster(rng)
        job = random_job(rng, spec)
        runs = []
        for plain in (False, True):
            with monkeypatch.context() as m:
                if plain:
                    m.setattr(rulebook, "hold", lambda *_events: HOLD)
                offers["n"] = 0
                try:
                    result = backend("fluid-reference").run(job, MAKERS[name](), spec, RunOptions(analysis=False))
                except RUN_ERRORS as exc:
                    result = exc
                runs.append((result, offers["n"]))
        (parked, n_parked), (held, n_held) = runs
        if isinstance(held, Exception):
            assert type(parked) is type(held)
            continue
        assert {i: (r.ready, r.start, r.end, r.dscp) for i, r in parked.items.items()} == {
            i: (r.ready, r.start, r.end, r.dscp) for i, r in held.items.items()
        }, (name, k)
        assert n_parked <= n_held
        fewer += n_parked < n_held
    assert fewer >= 1  # the jobs hold something: the test is not vacuous


def test_a_gates_lead_waits_for_a_missing_flow_and_the_others_for_the_lead():
    """The gate's first flow offered (the lowest in ready order, which splits the gate in the
    round it is whole) waits for the gate's last flow in job order not held; the others wait
    for the lead (the split takes them); a lead that left them held is replaced."""
    from types import SimpleNamespace

    from railbed.scheduler import Rule, Scheduler

    class Gated(Scheduler):
        name = "gated"

        def rule(self, flow, placement, cluster):
            return Rule(gate="g")

        def gate_split(self, flows, placement, cluster):
            return "split of " + ",".join(f.id for f in flows)

    job = Job("gates")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    for name in ("x", "y", "z"):
        job.flow(name, "a", "b", 1000)
    book = RuleBook(Gated(), map(as_offered, job.flows), {"a": job.endpoints["a"].pin}, _two_servers())

    def offer(item, held):
        view = SimpleNamespace(held=list(held), job=job, placement={}, active={})
        return book.decide(job.items[item], view)

    assert offer("y", ["y"]) == hold(OnReady("z"))  # y is the lead: z is the last not held
    assert offer("x", ["y", "x"]) == hold(OnDone("y"))  # x waits for the lead
    assert offer("y", ["y", "x"]) == hold(OnReady("z"))
    assert offer("x", ["x"]) == hold(OnReady("z"))  # the lead left x held: x leads now
    assert offer("x", ["x", "y", "z"]) == "split of x,y,z"
