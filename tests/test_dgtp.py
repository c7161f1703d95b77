"""DGTP (seed 000): the fan-out sampler against its twin, the gnn_training workload, the paper's
algorithms on hand-solved instances (OES, F_pend, IFS, ETP's acceptance), placements within
resources, and bad scheduler arguments."""

import itertools
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from railbed.dispatch import check_placement, server_resources
from railbed.errors import SpecError
from railbed.job import Job, Location, Placement
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import SchedulerSpec, make
from schedulers import dgtp_alg as alg
from schedulers.dgtp import FixedOes, distdgl_assignment, profile_job
from simulator import simulate
from workloads import generate
from workloads.gnn import graphsage_bytes
from workloads.gnn_graph import Sampler, partition_of, power_law_graph, sample_counts_reference

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ClusterSpec.load(ROOT / "examples" / "dgtp-testbed.yaml")
SMALL = {"scale": 0.005, "batch": 40, "iterations": 3, "profile": 5}


@pytest.fixture(scope="module")
def job():
    return generate("gnn_training", {**SMALL, "dataset": "products"})


# ----------------------------------------------------------- the sampler
def _csr(neigh: list[list[int]]):
    indptr = np.cumsum([0] + [len(n) for n in neigh]).astype(np.int64)
    return indptr, np.array([v for n in neigh for v in n], dtype=np.int32)


def test_sampler_agrees_with_its_twin_on_random_graphs():
    for trial in range(6):
        n, parts = 300 + 200 * trial, 1 + trial % 4
        indptr, indices = power_law_graph(n, 4 + 3 * trial, parts, seed=trial)
        part = partition_of(n, parts) if trial % 2 else np.random.default_rng(trial).integers(0, parts, n)
        sampler = Sampler(indptr, indices, part, parts)
        rng = np.random.default_rng(trial)
        for k in range(3):
            seeds = rng.integers(0, n, 1 + 20 * k)
            fanouts = [int(f) for f in rng.integers(1, 12, 1 + k)]
            got = sampler.counts(seeds, fanouts, 7 * trial + k)
            want = sample_counts_reference(indptr, indices, part, parts, seeds, fanouts, 7 * trial + k)
            assert all((a == b).all() for a, b in zip(got, want))


def test_sampler_edge_cases():
    # node 0 has no neighbours, node 1 fewer than the fan-out, seeds repeat, a self-loop
    indptr, indices = _csr([[], [0, 2], [2, 3, 4, 0], [1], [4]])
    part = partition_of(5, 2)
    for seeds, fanouts in (([0], [3]), ([1, 1, 2], [5, 1]), ([4], [2, 2]), ([3, 2], [1, 1, 1])):
        got = Sampler(indptr, indices, None, 2).counts(seeds, fanouts, 3)
        want = sample_counts_reference(indptr, indices, part, 2, seeds, fanouts, 3)
        assert all((a == b).all() for a, b in zip(got, want))
    nodes, edges, hop_nodes, hop_edges = sample_counts_reference(indptr, indices, part, 2, [1], [5], 0)
    assert edges.sum() == 2 and nodes.sum() == 3  # all of 1's neighbours, each once: {1, 0, 2}
    assert hop_nodes.tolist() == [1, 2] and hop_edges.tolist() == [2]
    chain = _csr([[1], [2], [3], []])  # 0 -> 1 -> 2 -> 3, 3 has no neighbours
    _, _, hop_nodes, hop_edges = sample_counts_reference(*chain, partition_of(4, 2), 2, [0], [2, 2, 2, 2], 0)
    assert hop_nodes.tolist() == [1, 1, 1, 1, 0] and hop_edges.tolist() == [1, 1, 1, 0]


def test_generated_graph_has_the_asked_shape():
    indptr, indices = power_law_graph(20_000, 20.0, 4, seed=1, locality=0.8)
    deg = np.diff(indptr)
    assert abs(deg.mean() - 20.0) < 1.0 and deg.max() > 10 * deg.mean()  # heavy tail
    part = partition_of(20_000, 4)
    inside = (part[np.repeat(np.arange(20_000), deg)] == part[indices]).mean()
    assert abs(inside - 0.8) < 0.02


# ----------------------------------------------------------- the workload
def test_roles_demands_and_pins(job):
    roles = [ep.role for ep in job.endpoints.values()]
    assert roles.count("store") == 4 and roles.count("worker") == 6 and roles.count("sampler") == 12
    assert roles.count("ps") == 1
    assert dict(job.endpoints["w0"].demands) == {"mem": 3, "cpu": 1, "gpu": 1}
    assert dict(job.endpoints["s0_1"].demands) == {"mem": 7, "cpu": 2}
    assert dict(job.endpoints["ps"].demands) == {"mem": 5, "cpu": 1}
    assert [job.endpoints[f"g{m}"].pin.server for m in range(4)] == [0, 1, 2, 3]


def test_dependency_rules(job):
    it = job.items
    assert set(it["i1.sample.s0_1"].deps) == {f"i1.fetch.g{m}.s0_1" for m in range(4)} | {"i0.sample.s0_1"}
    assert set(it["i1.train.w2"].deps) == {"i1.mb.s2_0", "i1.mb.s2_1", "i0.train.w2", "i0.pull.w2"}
    assert set(it["i0.train.w2"].deps) == {"i0.mb.s2_0", "i0.mb.s2_1"}
    assert set(it["i2.update"].deps) == {f"i2.push.w{w}" for w in range(6)} | {"i1.update"}
    assert set(it["i2.fetch.g3.s1_0"].deps) == {"i2.store.g3", "i1.fetch.g3.s1_0"}  # eq. (11)
    assert set(it["i1.pull.w0"].deps) == {"i1.update", "i0.pull.w0"}
    assert set(it["i1.store.g0"].deps) == {"i0.store.g0"}  # eq. (10)
    assert (it["i0.fetch.g0.s0_0"].src, it["i0.mb.s0_0"].dst, it["i0.push.w0"].dst) == ("g0", "w0", "ps")


def test_sizes_vary_are_hidden_until_ready_and_the_model_sets_the_tensors(job):
    public = job.public()
    assert public.items["i1.fetch.g0.s0_0"].size is None and public.items["i1.mb.s0_0"].size is None
    assert public.items["i1.push.w0"].size == graphsage_bytes(100, 256, 3, 47) == 4 * 206_895
    fetches = {job.items[f"i{n}.fetch.g{m}.s{w}_0"].size for n in range(3) for m in range(4) for w in range(6)}
    assert len(fetches) > 20
    mb = job.items["i1.mb.s3_1"].size
    assert mb == sum(job.items[f"i1.fetch.g{m}.s3_1"].size for m in range(4))

    class Watch(Scheduler):
        seen: dict = {}

        def place(self, job, cluster):
            self.hidden = {f.id for f in job.flows if f.size is None}
            return make(SchedulerSpec("distdgl")).place(job, cluster)

        def on_ready(self, item, view):
            self.seen[item.id] = getattr(item, "size", 0)
            return super().on_ready(item, view)

    w = Watch()
    simulate(job, w, TESTBED)
    assert w.hidden and all(w.seen[i] == job.items[i].size for i in w.hidden)


def test_profile_is_public(job):
    public = job.public()
    prof = public.items["i0.fetch.g2.s1_0"].tags["profile"]
    assert len(prof) == 5 and all(isinstance(p, int) and p > 0 for p in prof)
    assert len(public.items["i0.mb.s1_0"].tags["profile"]) == 5
    sample = profile_job(public, 2)
    assert all(f.size is not None and f.iteration < 2 for f in sample.flows)


# ----------------------------------------------------------- OES and F_pend
def test_oes_rates_by_hand():
    # B = 10, 10, 4; flows 0->1, 0->2, 1->2: out-degree of 0 is 2, in-degree of 2 is 2
    assert alg.oes_rates([(0, 1), (0, 2), (1, 2)], [10, 10, 4], [10, 10, 4]) == [5.0, 2.0, 2.0]


def _two_server_job(a: int, b: int, iterations=(0, 0)) -> Job:
    job = Job("oes")
    job.endpoint("x", Location(0, "cpu", 0))
    job.endpoint("y", Location(1, "cpu", 0))
    job.endpoint("z", Location(2, "cpu", 0))
    job.flow("f0", "x", "y", a, iteration=iterations[0], coflow_type="k")
    job.flow("f1", "x", "z" if iterations == (0, 0) else "y", b, iteration=iterations[1], coflow_type="k")
    return job


def test_oes_in_a_run_by_hand():
    """Two flows out of one 8 Gbit/s server each get 4 Gbit/s (Δ_out = 2); when the small
    one ends the big one gets all 8 Gbit/s."""
    rate = 8e9
    cl = ClusterSpec.from_dict({"servers": [{"count": 3, "nic_rate": rate}], "fabric": {"type": "single_switch"}})
    a, b = 30_000_000, 10_000_000
    job = _two_server_job(a, b)
    res = simulate(job, FixedOes(Placement({e: ep.pin for e, ep in job.endpoints.items()})), cl)
    t1 = 8 * wire_bytes(b) / (rate / 2)
    t0 = t1 + 8 * (wire_bytes(a) - wire_bytes(b)) / rate
    assert res.items["f1"].end == pytest.approx(t1, rel=1e-9)
    assert res.items["f0"].end == pytest.approx(t0, rel=1e-9)


def test_f_pend_holds_a_flow_until_its_previous_iteration_is_done():
    rate = 8e9
    cl = ClusterSpec.from_dict({"servers": [{"count": 3, "nic_rate": rate}], "fabric": {"type": "single_switch"}})
    job = _two_server_job(30_000_000, 1_000_000, iterations=(0, 1))  # both ready at 0, no job dependency
    pins = Placement({e: ep.pin for e, ep in job.endpoints.items()})
    res = simulate(job, FixedOes(pins), cl)
    assert res.items["f1"].start == pytest.approx(res.items["f0"].end)
    fair = simulate(job, Scheduler(), cl)
    assert fair.items["f1"].start == 0.0
    assert alg.pending(("x", "y", "k"), 1, lambda key, n: True) and not alg.pending(("x", "y", "k"), 0, None)
    lone = Job("lone")  # a later-iteration flow without a previous counterpart is never pending
    lone.endpoint("x", Location(0, "cpu", 0))
    lone.endpoint("y", Location(1, "cpu", 0))
    lone.flow("f", "x", "y", 1_000_000, iteration=3)
    assert simulate(lone, FixedOes(Placement({e: ep.pin for e, ep in lone.endpoints.items()})), cl).makespan > 0


# ----------------------------------------------------------- IFS
def _exhaustive_first_prefix(totals, demands, capacity, order):
    """The smallest k such that the tasks fit on machines order[:k], by brute force."""
    per_machine = {
        m: [c for c in itertools.product(*(range(t + 1) for t in totals)) if alg.fits(c, demands, capacity[m])]
        for m in order
    }
    for k in range(1, len(order) + 1):
        for combo in itertools.product(*(per_machine[m] for m in order[:k])):
            if all(sum(c[i] for c in combo) == totals[i] for i in range(len(totals))):
                return k
    return None


def test_ifs_against_exhaustive_search_on_three_machines():
    demands = [{"mem": 7, "cpu": 2}, {"mem": 3, "cpu": 1, "gpu": 1}, {"mem": 5, "cpu": 1}]
    rng = random.Random(5)
    for _ in range(40):
        capacity = [{"cpu": rng.randint(2, 9), "mem": rng.randint(8, 40), "gpu": rng.randint(0, 2)} for _ in range(3)]
        totals = (rng.randint(0, 5), rng.randint(0, 3), rng.randint(0, 1))
        order = rng.sample(range(3), 3)
        got = alg.ifs(totals, demands, capacity, order)
        k = _exhaustive_first_prefix(totals, demands, capacity, order)
        if k is None:
            assert got is None
            continue
        assert got is not None
        assert tuple(map(sum, zip(*got))) == totals
        assert all(alg.fits(got[m], demands, capacity[m]) for m in range(3))
        used = [m for m in range(3) if any(got[m])]
        assert all(order.index(m) < k for m in used)  # IFS returns the first prefix that holds everything


@pytest.mark.parametrize(
    "demand, capacity, total, bound",
    [
        ({"cpu": 2}, {"cpu": 8}, 9, 4),  # at capacity after 4: a fifth does not fit
        ({"cpu": 2}, {"cpu": 7}, 9, 3),
        ({"mem": 0.1}, {"mem": 0.3}, 9, 3),  # 0.3 // 0.1 == 2.0 in floats, yet 3 x 0.1 fits
        ({"mem": 0.7}, {"mem": 2.1}, 9, 3),
        ({"cpu": 2, "mem": 3}, {"cpu": 9, "mem": 10}, 9, 3),  # tightest resource: mem 3, not cpu 4
        ({"cpu": 2, "mem": 3}, {"cpu": 5, "mem": 10}, 9, 2),  # ... and now cpu
        ({"cpu": 2, "gpu": 1}, {"cpu": 8, "gpu": 0}, 9, 0),  # a resource the machine has none of
        ({"cpu": 2, "gpu": 0}, {"cpu": 8, "gpu": 0}, 9, 4),  # a zero demand limits nothing
        ({"cpu": 2, "disk": 5}, {"cpu": 8}, 9, 4),  # nor does a resource the machine does not list
        ({"cpu": 2}, {"cpu": 8}, 3, 3),  # capped by how many tasks there are
        ({"cpu": 1e-300}, {"cpu": 8}, 5, 5),
    ],
)
def test_per_machine_bound_is_exactly_what_fits_alone(demand, capacity, total, bound):
    assert alg._per_machine_bound(demand, capacity, total) == bound
    assert alg.fits((bound,), [demand], capacity)
    assert bound == total or not alg.fits((bound + 1,), [demand], capacity)


def test_per_machine_bound_agrees_with_fits_on_random_fractions():
    """η is the largest count of one kind that ``fits`` accepts alone: one more never fits
    (a machine at capacity takes no further task of that kind)."""
    rng = random.Random(11)
    for _ in range(3000):
        demand = {r: rng.choice([0, 0.1, 0.2, 0.3, 0.7, 1, 1.5, 2]) for r in rng.sample(["cpu", "mem", "gpu"], 2)}
        capacity = {r: round(rng.uniform(0, 6), rng.choice([0, 1, 2])) for r in ("cpu", "mem", "gpu")}
        total = rng.randint(0, 40)
        b = alg._per_machine_bound(demand, capacity, total)
        brute = max(q for q in range(total + 1) if alg.fits((q,), [demand], capacity))
        assert b == brute, (demand, capacity, total)


def _brute_force_placement_exists(totals, demands, capacity):
    """Some assignment of every task to the machines respects every capacity (exhaustive)."""
    per_machine = [
        [c for c in itertools.product(*(range(t + 1) for t in totals)) if alg.fits(c, demands, cap)] for cap in capacity
    ]
    return any(
        all(sum(c[i] for c in combo) == totals[i] for i in range(len(totals)))
        for combo in itertools.product(*per_machine)
    )


def test_ifs_agrees_with_brute_force_on_fractional_demands():
    """Small instances with demands and capacities in tenths (where float floors go wrong), half
    random, half tight (a placement filling every machine exactly, its capacities written in
    tenths as a user would): IFS finds a placement exactly when one exists, every machine within
    capacity, no machine holding more of a kind than its η. (η from float floors failed 14 of them.)"""
    rng = random.Random(7)
    found = 0
    for i in range(150):
        kinds = rng.randint(1, 3)
        demands = [{"cpu": rng.randint(1, 4) / 10, "mem": rng.randint(0, 7) / 10} for _ in range(kinds)]
        machines = rng.randint(2, 3)
        if i % 2:
            capacity = [{"cpu": rng.randint(0, 9) / 10, "mem": rng.randint(0, 12) / 10} for _ in range(machines)]
            totals = tuple(rng.randint(0, 4) for _ in range(kinds))
        else:
            counts = [[rng.randint(0, 3) for _ in range(kinds)] for _ in range(machines)]
            capacity = [
                {r: round(sum(q * d[r] for q, d in zip(c, demands)), 1) for r in ("cpu", "mem")} for c in counts
            ]
            totals = tuple(map(sum, zip(*counts)))
        got = alg.ifs(totals, demands, capacity, rng.sample(range(machines), machines))
        assert (got is not None) == _brute_force_placement_exists(totals, demands, capacity)
        if got is None:
            continue
        found += 1
        assert tuple(map(sum, zip(*got))) == totals
        for m, counts in enumerate(got):
            assert alg.fits(counts, demands, capacity[m])
            for k, q in enumerate(counts):
                assert q <= alg._per_machine_bound(demands[k], capacity[m], totals[k])
    assert found > 60  # the tight half is feasible by construction


def test_a_machine_at_capacity_takes_no_further_task():
    """Three tasks of 0.1 fill a machine of 0.3 exactly: IFS puts three on each of two machines
    (before η matched ``fits``, 0.3 // 0.1 = 2 left room for 2 + 2 and IFS found nothing)."""
    assert alg.ifs((6,), [{"mem": 0.1}], [{"mem": 0.3}, {"mem": 0.3}], [0, 1]) == [(3,), (3,)]
    assert alg.ifs((7,), [{"mem": 0.1}], [{"mem": 0.3}, {"mem": 0.3}], [0, 1]) is None
    assert alg.ifs((2, 1), [{"mem": 0.1}, {"mem": 0.1, "cpu": 1}], [{"mem": 0.3, "cpu": 1}], [0]) == [(2, 1)]


# ----------------------------------------------------------- ETP
def test_etp_acceptance_rule():
    assert alg.acceptance(10.0, 9.0, 0.1) == 1.0 and alg.acceptance(10.0, 10.0, 0.1) == 1.0
    assert alg.acceptance(10.0, 12.0, 0.1) == pytest.approx(math.exp(-0.2))
    assert alg.acceptance(10.0, 12.0, 5.0) == pytest.approx(math.exp(-10.0))
    assert alg.cost(2.0, 0.5) == 3.0
    assert alg.violation([{"cpu": 12, "mem": 4}], [{"cpu": 8, "mem": 8}]) == pytest.approx(0.5)


def test_etp_returns_the_best_feasible_placement_it_accepted():
    capacity = [{"cpu": 2}, {"cpu": 2}, {"cpu": 2}]
    demands = [{"cpu": 1}] * 4
    target = (2, 2, 1, 1)

    def makespan(y):
        return 1.0 + sum(a != b for a, b in zip(y, target))

    best, t, stats = alg.etp((0, 0, 1, 1), demands, capacity, makespan, beta=2.0, mu=1.0, steps=400)
    assert best == target and t == 1.0 and stats["steps"] == 400
    used = alg.usage(best, demands, 3)
    assert alg.violation(used, capacity) == 0
    assert alg.available(0, (0, 0, 1, 1), demands, capacity, mu=0.0) == [2]
    assert alg.available(0, (0, 0, 1, 1), demands, capacity, mu=1.0) == [1, 2]


# ----------------------------------------------------------- the baselines' rates
def test_mrtf_and_omcoflow_rates_by_hand():
    b = [10.0, 10.0, 10.0]
    r = alg.mrtf_rates([(0, 1), (0, 2), (1, 2)], [30.0, 10.0, 5.0], b, b)
    assert r[2] == 10.0 and r[1] == pytest.approx(1e-5) and r[0] == 10.0  # 1->2 first, then 0->1
    w = alg.omcoflow_rates([(0, 1), (0, 2)], [10.0, 30.0], ["c", "c"], b, b)
    assert w == pytest.approx([7.5, 2.5])  # weights 1/(10/5) and 1/(30/5): 3 to 1


# ----------------------------------------------------------- placements
@pytest.mark.parametrize("name", ["dgtp", "dgtp-place", "distdgl", "dgtp-oes", "omcoflow", "mrtf"])
def test_placements_fit_the_testbed(job, name):
    args = {"iterations": 20} if name in ("dgtp", "dgtp-place", "omcoflow", "mrtf") else {}
    sched = make(SchedulerSpec(name, args))
    sched.check(job.public(), TESTBED)
    placement = sched.place(job.public(), TESTBED)
    check_placement(job, TESTBED, placement)
    res = simulate(job, make(SchedulerSpec(name, args)), TESTBED)
    assert res.makespan > 0 and all(r.end is not None for r in res.items.values())
    for m, server in enumerate(TESTBED.servers):
        here = [job.endpoints[e].demands for e, loc in placement.locations.items() if loc.server == m]
        for r, cap in server_resources(server).items():
            assert sum(d.get(r, 0) for d in here) <= cap


def test_distdgl_colocates_what_fits(job):
    where = distdgl_assignment(job.public(), TESTBED)
    together = [w for w in range(6) if where[f"w{w}"] == where[f"s{w}_0"] == where[f"s{w}_1"]]
    assert together == [0, 1, 2, 3]  # two groups of 5 cores do not fit in 8-core servers (§VI-A)
    assert [where[f"w{w}"] for w in range(4)] == [0, 1, 2, 3]  # each on its data's machine


def test_dgtp_refuses_a_job_without_roles():
    job = Job("plain")
    job.endpoint("a")
    with pytest.raises(SpecError) as err:
        make(SchedulerSpec("dgtp")).check(job, TESTBED)
    assert err.value.field == "endpoints"


# ----------------------------------------------------------- arguments
@pytest.mark.parametrize(
    "args, field",
    [({"beta": 0}, "beta"), ({"beta": -1.0}, "beta"), ({"mu": -0.5}, "mu"), ({"cost_unit": "hours"}, "cost_unit"),
     ({"start": "random"}, "start"), ({"moves": "jumps"}, "moves"), ({"depth": -2}, "depth")],
)  # fmt: skip
def test_bad_dgtp_arguments(args, field):
    for name in ("dgtp", "dgtp-literal", "dgtp-place", "omcoflow", "mrtf"):
        with pytest.raises(SpecError) as err:
            make(SchedulerSpec(name, args), "schedulers[0]")
        assert err.value.field == f"schedulers[0].args.{field}"


def test_bad_dgtp_argument_exits_2(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "cluster: ../dgtp-testbed.yaml\n".replace("../dgtp-testbed.yaml", str(ROOT / "examples" / "dgtp-testbed.yaml"))
        + "job: {generator: gnn_training, args: {scale: 0.005, batch: 40, iterations: 1, profile: 2}}\n"
        + "schedulers: [distdgl, {name: dgtp, args: {mu: -1}}]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "simulate", str(path), "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("railbed: schedulers[1].args.mu:"), proc.stderr
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------- ETP's fast evaluation
def test_fast_evaluation_agrees_with_its_twin_and_the_simulator(job):
    from schedulers import dgtp as d
    from schedulers.dgtp_eval import CompiledJob

    public = job.public()
    ev = d.evaluators(public, TESTBED, 3, 0)
    compiled = CompiledJob(d.profile_job(public, 3, 0), TESTBED, d.bandwidth(TESTBED))
    names = d._movable(public)
    rng = random.Random(3)
    for _ in range(8):
        y = tuple(rng.randrange(4) for _ in names)  # over-full placements too: workers share GPUs
        fast = ev["fast"](y)
        assert fast == compiled.makespan_reference(d.placement_from(public, TESTBED, dict(zip(names, y))))
        assert fast == pytest.approx(ev["simulate"](y), rel=1e-9)


def test_etp_cost_runs_on_the_backend_it_is_handed(job):
    """T'_Y through the backend seam: the plain-Python twin gives the default's numbers; a backend
    that calls no hooks cannot run OES and is refused."""
    from railbed.backend import backend
    from schedulers import dgtp as d

    public = job.public()
    names = d._movable(public)
    y = tuple(k % 4 for k in range(len(names)))
    fluid = d.simulated_makespan(public, TESTBED, 2, 0)(y)
    twin = d.simulated_makespan(public, TESTBED, 2, 0, backend=backend("fluid-reference"))(y)
    assert twin == pytest.approx(fluid, rel=1e-9)
    with pytest.raises(SpecError, match="calls no hooks"):
        d.simulated_makespan(public, TESTBED, 2, 0, backend=backend("fluid-rules"))


def test_fast_evaluation_declines_what_it_does_not_model(job):
    from schedulers import dgtp as d

    leafy = ClusterSpec.from_dict(
        {"servers": [{"count": 4, "gpus": 2, "nic_rate": 8e9}], "fabric": {"type": "single_switch", "latency": 1e-5}}
    )
    assert d.fast_makespan(job.public(), leafy, 2, 0) is None


# ----------------------------------------------------------- the graph behind the job
def test_job_records_its_graph_partition_and_home_share(job):
    g = job.items["i0.fetch.g0.s0_0"].tags["graph"]
    assert g["partitioner"] == "metis" and g["dataset"] == "ogbn-products" and 0 < g["home_share"] < 1
    assert 0 < g["edge_cut"] < 0.5 and g["scale"] == 0.005
    hashed = generate("gnn_training", {**SMALL, "dataset": "products", "partitioner": "hash"})
    h = hashed.items["i0.fetch.g0.s0_0"].tags["graph"]
    assert h["edge_cut"] > 2 * g["edge_cut"] and h["home_share"] < g["home_share"]
    stores = {job.items[f"i{n}.store.g0"].duration for n in range(3)}
    assert len(stores) == 3 and all(d > 0 for d in stores)  # from what each iteration sampled


@pytest.mark.parametrize(
    "args, field",
    [({"partitioner": "spectral"}, "partitioner"), ({"efficiency": 0}, "efficiency"), ({"scale": 2.0}, "scale"),
     ({"dataset": "cora"}, "dataset")],
)  # fmt: skip
def test_bad_job_arguments_name_the_field(args, field):
    with pytest.raises(SpecError) as err:
        generate("gnn_training", {**SMALL, **args})
    assert err.value.field == f"job.args.{field}"


# ----------------------------------------------------------- pipelining (depth)
def test_pipeline_waits_on_the_generated_job(job):
    from schedulers.dgtp import pipeline_waits

    assert pipeline_waits(job, -1) == {}
    sync = pipeline_waits(job, 0)
    assert sync["i2.fetch.g1.s3_0"] == ("i1.pull.w3",) and sync["i1.store.g0"] == ("i0.update",)
    assert "i0.fetch.g1.s3_0" not in sync and "i2.sample.s3_0" not in sync and "i2.mb.s3_0" not in sync
    ahead = pipeline_waits(job, 1)
    assert ahead["i2.fetch.g1.s3_0"] == ("i0.pull.w3",) and ahead["i2.store.g2"] == ("i0.update",)
    assert "i1.fetch.g1.s3_0" not in ahead


def _pipeline_job(fetch: int, t: dict) -> Job:
    """One store (server 0), its sampler, worker and PS on server 1: only the fetch crosses machines."""
    job = Job("pipe")
    job.capacity["cpu"] = 1 << 20
    job.endpoint("g0", Location(0, "cpu", 0), "store")
    job.endpoint("s0_0", Location(1, "cpu", 0), "sampler")
    job.endpoint("w0", Location(1, "gpu0", 0), "worker")
    job.endpoint("ps", Location(1, "cpu", 0), "ps")
    for n in range(3):
        prev = (lambda x, n=n: [f"i{n - 1}.{x}"]) if n else (lambda x: [])
        job.task(f"i{n}.store.g0", "g0", t["store"], prev("store.g0"), iteration=n)
        job.flow(f"i{n}.fetch.g0.s0_0", "g0", "s0_0", fetch, [f"i{n}.store.g0", *prev("fetch.g0.s0_0")], iteration=n)
        job.task(f"i{n}.sample.s0_0", "s0_0", t["sample"], [f"i{n}.fetch.g0.s0_0", *prev("sample.s0_0")], iteration=n)
        job.flow(f"i{n}.mb.s0_0", "s0_0", "w0", 1000, [f"i{n}.sample.s0_0", *prev("mb.s0_0")], iteration=n)
        job.task(f"i{n}.train.w0", "w0", t["train"], [f"i{n}.mb.s0_0", *prev("train.w0"), *prev("pull.w0")],
                 iteration=n)  # fmt: skip
        job.flow(f"i{n}.push.w0", "w0", "ps", 1000, [f"i{n}.train.w0", *prev("push.w0")], iteration=n)
        job.task(f"i{n}.update", "ps", t["update"], [f"i{n}.push.w0", *prev("update")], iteration=n)
        job.flow(f"i{n}.pull.w0", "ps", "w0", 1000, [f"i{n}.update", *prev("pull.w0")], iteration=n)
    return job.validate()


def test_synchronous_and_prefetch_makespans_by_hand():
    """Store 8 ms, fetch TF (about 10 ms), sample 2, train 3, update 0.5; three iterations.
    Synchronous (depth 0): every iteration waits for the last one's parameters, 3 (8 + TF + 5.5).
    Prefetch (depth 1): store 2 waits for update 0 (at 8 + TF + 5.5), so fetch 2 starts at
    2 x 8 + TF + 5.5 (after fetch 1 at 8 + 2 TF); the run ends TF + 5.5 later. Unbounded: stores
    run back to back, fetches one after another from 8 ms: 8 + 3 TF + 5.5."""
    from schedulers.dgtp import DistDgl

    class Pinned(DistDgl):
        def place(self, job, cluster):
            self.prepare(job)
            return Placement({e: ep.pin for e, ep in job.endpoints.items()})

    rate = 8e9
    cl = ClusterSpec.from_dict({"servers": [{"count": 2, "gpus": 1, "nic_rate": rate}],
                                "fabric": {"type": "single_switch"}})  # fmt: skip
    t = {"store": 8e-3, "sample": 2e-3, "train": 3e-3, "update": 0.5e-3}
    job = _pipeline_job(10_000_000, t)
    tf = 8 * wire_bytes(10_000_000) / rate
    rest = t["sample"] + t["train"] + t["update"]
    got = {d: simulate(job, Pinned(d), cl).makespan for d in (0, 1, -1)}
    assert got[0] == pytest.approx(3 * (t["store"] + tf + rest), rel=1e-9)
    assert got[1] == pytest.approx(max(2 * t["store"] + tf + rest, t["store"] + 2 * tf) + tf + rest, rel=1e-9)
    assert got[-1] == pytest.approx(t["store"] + 3 * tf + rest, rel=1e-9)
    assert got[0] > got[1] > got[-1]


def test_every_baseline_notes_the_home_share_and_dgtp_its_search(job):
    res = simulate(job, make(SchedulerSpec("distdgl")), TESTBED)
    assert any("home-store share of fetched bytes" in n for n in res.notes)
    assert any(n.startswith("pipelining depth 0") for n in res.notes)
    res = simulate(job, make(SchedulerSpec("dgtp", {"iterations": 30})), TESTBED)
    assert any(n.startswith("ETP (variant moves from distdgl, cost in percent") for n in res.notes)
    assert any(n.startswith("ETP trace (step: best T' ms): 0: ") for n in res.notes)


# ----------------------------------------------------------- ETP: Alg. 2 as written against the variant
def test_the_variants_swaps_reach_what_alg_2_cannot():
    """Two full machines (2 cores each), a 2-core task on each, μ = 0.5: moving either task would
    put 4 cores where (1 + μ) 2 = 3 fit, so every M_avail is empty and Alg. 2 never leaves its start
    (every step is stuck); the variant's swap reaches the better placement in its first steps."""
    capacity = [{"cpu": 2}, {"cpu": 2}]
    demands = [{"cpu": 2}, {"cpu": 2}]

    def makespan(y):
        return 1.0 if y == (1, 0) else 2.0

    start = (0, 1)
    assert all(alg.available(j, start, demands, capacity, 0.5) == [] for j in (0, 1))
    best, t, stats = alg.etp(start, demands, capacity, makespan, 0.1, 0.5, 200, random.Random(1))
    assert best == start and t == 2.0 and stats["stuck"] == 200 and stats["accepted"] == 0
    variant = lambda y, rng: alg.propose_variant(y, demands, capacity, rng)  # noqa: E731
    best, t, stats = alg.etp(start, demands, capacity, makespan, 0.1, 0.5, 200, random.Random(1), variant)
    assert best == (1, 0) and t == 1.0 and stats["trace"][-1][1] == 1.0


def test_swaps_keep_every_machine_within_capacity():
    rng = random.Random(4)
    kinds = [{"cpu": 2, "mem": 7}, {"cpu": 1, "mem": 3, "gpu": 1}, {"cpu": 1, "mem": 5}]
    for _ in range(200):
        capacity = [{"cpu": 8, "mem": 48, "gpu": 2} for _ in range(4)]
        demands = [rng.choice(kinds) for _ in range(12)]
        y = tuple(rng.randrange(4) for _ in demands)
        if alg.violation(alg.usage(y, demands, 4), capacity) > 0:
            continue
        new = alg.propose_variant(y, demands, capacity, rng)
        if new is not None:
            assert alg.violation(alg.usage(new, demands, 4), capacity) == 0
            assert sorted(new) == sorted(y) or sum(a != b for a, b in zip(new, y)) == 1


def test_max_min_under_oes_caps_gives_every_flow_its_cap():
    """The fast evaluator's premise (schedulers/dgtp_eval.py): on a single switch a flow contends on
    its source's egress and its destination's ingress, OES's caps never over-fill them, so the one
    max-min solver (railbed.maxmin, as the simulator runs it) gives every flow exactly its cap."""
    from railbed.maxmin import maxmin, maxmin_reference

    rng = random.Random(5)
    for _ in range(300):
        m = rng.randint(2, 6)
        bw = [rng.choice([1e9, 1e10, 2.5e10, rng.uniform(1e8, 1e11)]) for _ in range(m)]
        flows = [tuple(rng.sample(range(m), 2)) for _ in range(rng.randint(1, 24))]
        caps = alg.oes_rates(flows, bw, bw)
        links = [[s, m + d] for s, d in flows]
        for solve in (maxmin, maxmin_reference):
            assert list(solve(bw + bw, links, [0] * len(flows), caps)) == caps
