"""Every run's analysis (railbed/analysis.py): hand-computed jobs, engine agreement, figures.

The hand-built jobs run on one switch without latency, with NICs of
C = 8 * FRAME * 1e6 bit/s: one full frame per microsecond, so a flow of
n * MSS payload bytes takes exactly n microseconds alone on a link.
"""

import math
import random

import pytest

from railbed import analysis, plots
from railbed.analysis import Timeline, contention_estimate, network_free_makespan, timeline_of
from railbed.dispatch import Dispatcher
from railbed.job import Job, Leg, Location, PathOption
from railbed.results import RunResult
from railbed.spec import ClusterSpec
from railbed.units import FRAME, MSS
from schedulers import HOLD, Decision, Scheduler, by_name
from simulator import simulate
from simulator.fluid.network import ReferenceNetwork
from simulator.rules import network_free_run, simulate_compact, timeline_of_compact
from workloads.moe import moe_training

C = 8 * FRAME * 1e6
MS = 1e-3
SPEC = ClusterSpec.from_dict(
    {"servers": [{"count": 4, "gpus": 1, "nics": 1, "nic_rate": C}], "fabric": {"type": "single_switch", "latency": 0}}
)


def ms_flow(ms: float) -> int:
    """Payload bytes that take ``ms`` milliseconds alone on a link of rate C."""
    return int(round(ms * 1000)) * MSS


def pp_beside_dp(dscp_pp: int = 0) -> Job:
    """a (1 ms on w0) -> p (PP, 2 ms alone, w0 -> w1) -> b (2 ms on w1); d (DP, 2 ms alone,
    w0 -> w1) ready at 0. p and d share w0's egress port and the switch's port into w1."""
    job = Job("pp-beside-dp")
    for s in range(4):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.task("a", "w0", 1 * MS)
    job.flow("p", "w0", "w1", ms_flow(2), ["a"], coflow="pp", coflow_type="PP", tags={"dscp": dscp_pp})
    job.task("b", "w1", 2 * MS, ["p"])
    job.flow("d", "w0", "w1", ms_flow(2), coflow="dp", coflow_type="DP", tags={"dscp": 0})
    return job


def test_a_pp_chain_beside_a_dp_flow_shares_its_nic_fairly():
    """fifo (max-min, one class). d runs alone 0-1 ms (half done); from 1 ms p and d share the
    port at C/2: d's other half takes 2 ms (ends at 3), p has done 1 ms of its 2 by then and
    ends alone at 4; b runs 4-6. Makespan 6 ms.

    Critical path (back from b): b [4, 6] (compute), p [1, 4] (PP: ready at a's end), a [0, 1]:
    compute 3 ms, PP 3 ms, exposed 3/6 = 0.5. Without a network: a 0-1, p instant, b 1-3:
    3 ms, max speedup 6/3 = 2. Overlap: PP and DP both active on w0's port and on the port
    into w1 during [1, 3]: 2/6 of the makespan on each, so PP/DP = 1/3, PP/PP = DP/DP = 0.
    Contention: during [1, 3] both are limited by the saturated shared port, where the other
    type runs: 2 ms each, of 3 ms active each: 4/6 = 2/3 (each type 2/3). Busiest port: w0's
    (and the switch's into w1) carries p and d, 4 ms at its rate: room 6 / max(3, 4) = 1.5."""
    job = pp_beside_dp()
    res = simulate(job, by_name("fifo"), SPEC, analysis=True)
    a = res.analysis
    assert res.makespan == pytest.approx(6 * MS, rel=1e-9)
    assert a["network_free_makespan"] == pytest.approx(3 * MS, rel=1e-9)
    assert a["max_speedup"] == pytest.approx(2.0, rel=1e-9)
    assert a["busiest_port"]["port"] in {"h0:h0-eth0", "sw0:sw0-eth1"}
    assert a["busiest_port"]["seconds"] == pytest.approx(4 * MS, rel=1e-9)
    assert a["busiest_port"]["share"] == pytest.approx(4 / 6, rel=1e-9)
    assert a["room"] == pytest.approx(1.5, rel=1e-9)
    cp = a["critical_path"]
    assert cp["items"] == ["a", "p", "b"]
    assert cp["time"]["compute"] == pytest.approx(3 * MS, rel=1e-9)
    assert cp["time"]["PP"] == pytest.approx(3 * MS, rel=1e-9)
    assert cp["time"]["DP"] == 0 and cp["time"]["idle"] == 0
    assert sum(cp["time"].values()) == pytest.approx(res.makespan, rel=1e-12)
    assert a["exposed_comm_fraction"] == pytest.approx(0.5, rel=1e-9)
    share = a["overlap"]["share"]
    assert share["PP"]["DP"] == share["DP"]["PP"] == pytest.approx(1 / 3, rel=1e-9)
    assert share["PP"]["PP"] == share["DP"]["DP"] == 0
    assert set(a["overlap"]["links"]) == {"h0:h0-eth0", "sw0:sw0-eth1"}
    for per in a["overlap"]["links"].values():
        assert per == {"PP/DP": pytest.approx(1 / 3, rel=1e-9)}
    ct = a["contention"]
    assert ct["share"] == pytest.approx(2 / 3, rel=1e-9)
    assert ct["by_type"] == {"PP": pytest.approx(2 / 3, rel=1e-9), "DP": pytest.approx(2 / 3, rel=1e-9)}


def test_strict_priority_for_the_pp_flow_halves_its_exposed_time():
    """tag-priority, p in a higher class (DSCP 46). d alone 0-1 ms; p takes the whole port 1-3,
    d starved; d's last half 3-4; b 3-5. Makespan 5 ms; the path a, p, b: compute 3, PP 2,
    exposed 0.4; network-free still 3 ms: max speedup 5/3. Overlap: both active on the
    ports during [1, 3] (d starved is still active): 2/5. Contention: p runs at the port's
    rate and the only other type there gets nothing: not contended; d is limited by the
    saturated port where PP runs during [1, 3]: 2 ms of d's 4 active, of 6 flow-ms: 1/3."""
    res = simulate(pp_beside_dp(dscp_pp=46), by_name("tag-priority"), SPEC, analysis=True)
    a = res.analysis
    assert res.makespan == pytest.approx(5 * MS, rel=1e-9)
    assert a["critical_path"]["items"] == ["a", "p", "b"]
    assert a["exposed_comm_fraction"] == pytest.approx(0.4, rel=1e-9)
    assert a["max_speedup"] == pytest.approx(5 / 3, rel=1e-9)
    assert a["room"] == pytest.approx(5 / 4, rel=1e-9)  # the busiest port's 4 ms bounds it, not compute's 3
    assert a["overlap"]["share"]["PP"]["DP"] == pytest.approx(0.4, rel=1e-9)
    assert a["contention"]["share"] == pytest.approx(1 / 3, rel=1e-9)
    assert a["contention"]["by_type"] == {"PP": 0.0, "DP": pytest.approx(0.5, rel=1e-9)}


def test_two_coflow_types_on_disjoint_ports_never_overlap():
    """PP w0 -> w1 and DP w2 -> w3 at the same time: no port in common (the switch's ports into
    w1 and w3 differ), so overlap 0, contention 0 (each alone on its ports)."""
    job = Job("disjoint")
    for s in range(4):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.flow("p", "w0", "w1", ms_flow(2), coflow_type="PP")
    job.flow("d", "w2", "w3", ms_flow(3), coflow_type="DP")
    a = simulate(job, by_name("fifo"), SPEC, analysis=True).analysis
    assert a["overlap"]["types"] == ["PP", "DP"]
    assert all(v == 0 for row in a["overlap"]["share"].values() for v in row.values())
    assert a["overlap"]["links"] == {} and a["contention"]["share"] == 0
    assert a["exposed_comm_fraction"] == pytest.approx(1.0) and a["critical_path"]["items"] == ["d"]
    assert a["network_free_makespan"] == 0 and a["max_speedup"] is None and "no compute" in a["notes"][0]


def test_a_compute_only_job_has_max_speedup_one_exactly():
    """Two tasks on one device of capacity 1 and one after both on another: the network-free
    run is the run itself, so max_speedup is 1.0 exactly; the second task waited for the
    device, so the path goes through the first (the device slot), then the dependency."""
    job = Job("compute-only", capacity={"gpu0": 1})
    job.endpoint("x", Location(0, "gpu0", 0))
    job.endpoint("y", Location(1, "gpu0", 0))
    job.task("t1", "x", 2 * MS)
    job.task("t2", "x", 3 * MS)
    job.task("t3", "y", 1 * MS, ["t1", "t2"])
    a = simulate(job, by_name("fifo"), SPEC, analysis=True).analysis
    assert a["max_speedup"] == 1.0 and a["network_free_makespan"] == a["makespan"] == pytest.approx(6 * MS)
    assert a["exposed_comm_fraction"] == 0
    assert a["critical_path"]["items"] == ["t1", "t2", "t3"]
    assert a["critical_path"]["time"]["compute"] == pytest.approx(6 * MS)
    assert a["overlap"]["types"] == [] and a["contention"]["share"] == 0


def test_same_type_overlap_counts_two_coflows_not_two_flows_of_one():
    """DP/DP is two different DP coflows on one port (Fig. 5.2: "DP coflows across different
    layers"). Two flows of one coflow out of w0 for 2 ms: 0; the same two flows as two coflows:
    they share w0's port for their whole 4 ms (each at C/2): 4/4 = 1."""
    for coflows, want in ((("dp0", "dp0"), 0.0), (("dp0", "dp1"), 1.0)):
        job = Job("dp-dp")
        for s in range(4):
            job.endpoint(f"w{s}", Location(s, "gpu0", 0))
        job.flow("g1", "w0", "w1", ms_flow(2), coflow=coflows[0], coflow_type="DP")
        job.flow("g2", "w0", "w2", ms_flow(2), coflow=coflows[1], coflow_type="DP")
        a = simulate(job, by_name("fifo"), SPEC, analysis=True).analysis
        assert a["makespan"] == pytest.approx(4 * MS, rel=1e-9)
        assert a["overlap"]["share"]["DP"]["DP"] == pytest.approx(want, abs=1e-12)
        assert a["contention"]["share"] == 0  # one type only


class HoldBehindActive(Scheduler):
    """Holds a PP flow while any flow is active on its source NIC (a host-side priority queue
    the wrong way round: PP waits for DP). Counts ``place`` calls."""

    name = "hold-pp"
    placed = 0

    def place(self, job, cluster):
        HoldBehindActive.placed += 1
        self.seen_place = True
        return super().place(job, cluster)

    def on_ready(self, item, view):
        if getattr(item, "coflow_type", None) == "PP":
            here = view.location(item.src)
            if any((f.src.server, f.src.nic) == (here.server, here.nic) for f in view.active.values()):
                return HOLD
        return Decision()


def test_a_held_flow_waits_for_the_flow_that_held_it_and_without_a_network_its_hold_resolves():
    """d (DP, 2 ms) runs 0-2 alone on w0's port; p is ready at 1 ms but held until d ends at 2,
    then runs alone 2-4; b 4-6. Path (back from b): b, p (it started after it was ready: the
    flow on its NIC that ended at its start is d), d from 0: DP 2, PP 2, compute 2, exposed
    4/6. Without a network the hold resolves in the instant d starts and ends: a 0-1, p, b
    1-3: 3 ms. ``place`` ran once: the network-free run reuses the run's placement. A task
    elsewhere also ends at 2 ms (n on w2): the flow on p's own NIC is the one that held it."""
    HoldBehindActive.placed = 0
    job = pp_beside_dp()
    job.task("n", "w2", 2 * MS)
    a = simulate(job, HoldBehindActive(), SPEC, analysis=True).analysis
    assert HoldBehindActive.placed == 1
    assert a["makespan"] == pytest.approx(6 * MS, rel=1e-9)
    assert a["critical_path"]["items"] == ["d", "p", "b"]
    t = a["critical_path"]["time"]
    assert (t["DP"], t["PP"], t["compute"]) == pytest.approx((2 * MS, 2 * MS, 2 * MS), rel=1e-9)
    assert a["exposed_comm_fraction"] == pytest.approx(4 / 6, rel=1e-9)
    assert a["network_free_makespan"] == pytest.approx(3 * MS, rel=1e-9)


def test_the_network_free_run_starts_from_the_scheduler_as_place_left_it():
    """The copy kept after ``place`` has the state ``place`` set and none of the run's."""

    class Counting(Scheduler):
        name = "counting"

        def place(self, job, cluster):
            self.offers = 0
            return super().place(job, cluster)

        def on_ready(self, item, view):
            self.offers += 1
            return Decision()

    sched = Counting()
    d = Dispatcher(pp_beside_dp(), sched, SPEC, snapshot=True)
    assert d.placed_scheduler is not sched and d.placed_scheduler.offers == 0
    free = network_free_makespan(d.job, d.placed_scheduler, SPEC, d.placement)
    assert free == pytest.approx(3 * MS) and d.placed_scheduler.offers == 4 and sched.offers == 0


def test_legs_and_same_server_flows_take_no_time_without_a_network():
    """t1 (1 ms) -> f (w0 -> w1 over a path option with a 3 ms source leg and a 2 ms
    destination leg, 5 ms on the wire) -> t2 (1 ms): 1 + 3 + 5 + 2 + 1 = 12 ms; the whole
    flow is communication on the critical path (legs included). Without a network the legs
    take 0 s too: 2 ms, max speedup 6."""
    job = Job("legs")
    job.endpoint("x", Location(0, "gpu0", 0))
    job.endpoint("y", Location(1, "gpu0", 0))
    job.task("t1", "x", 1 * MS)
    leg = PathOption("via-cpu", src_leg=Leg("gpu0", "cpu", 3 * MS), dst_leg=Leg("cpu", "gpu0", 2 * MS))
    job.flow("f", "x", "y", ms_flow(5), ["t1"], options=[leg], coflow_type="PP")
    job.task("t2", "y", 1 * MS, ["f"])
    a = simulate(job, by_name("fifo"), SPEC, analysis=True).analysis
    assert a["makespan"] == pytest.approx(12 * MS, rel=1e-9)
    assert a["network_free_makespan"] == pytest.approx(2 * MS, rel=1e-9)
    assert a["critical_path"]["time"]["PP"] == pytest.approx(10 * MS, rel=1e-9)


def small_moe():
    job = moe_training(
        dp=2, tp=1, pp=2, ep=2, experts=4, layers=2, hidden=256, ffn=512, seq=256, microbatches=2,
        schedule="1f1b", seed=3, gpus_per_server=2, nics_per_server=2, layout="dp-outer", skew=3.0,
    )  # fmt: skip
    servers = max(e.pin.server for e in job.endpoints.values()) + 1
    spec = ClusterSpec.from_dict(
        {
            "servers": [{"count": servers, "gpus": 2, "nics": 2, "nic_rate": "10Gbit"}],
            "fabric": {"type": "leaf_spine", "servers_per_leaf": 2, "spines": 2, "uplink_rate": "10Gbit",
                       "latency": "1us"},
        }
    )  # fmt: skip
    return job, spec


@pytest.mark.parametrize("name", ["megatron", "hermod", "lina"])
def test_the_simulator_and_the_compact_engine_give_the_same_analysis_on_a_moe_job(name):
    """Same job, same scheduler: every field agrees (the network-free runs, one driving the
    Dispatcher with instant flows and one the compact kernel with zero bits, too); Hermod
    splits its EP coflows (sub-flows never appear on the path: their originals do)."""
    job, spec = small_moe()
    slow = simulate(job, by_name(name), spec, analysis=True).analysis
    fast = simulate_compact(job, by_name(name), spec, analysis=True).analysis
    for key in ("makespan", "network_free_makespan", "max_speedup", "exposed_comm_fraction", "room"):
        assert fast[key] == pytest.approx(slow[key], rel=1e-12), key
    assert fast["busiest_port"]["port"] == slow["busiest_port"]["port"]
    assert fast["busiest_port"]["seconds"] == pytest.approx(slow["busiest_port"]["seconds"], rel=1e-9)
    assert slow["max_speedup"] > 1.05 and slow["exposed_comm_fraction"] > 0.05  # the network matters here
    assert fast["critical_path"]["items"] == slow["critical_path"]["items"]
    assert set(slow["critical_path"]["items"]) <= set(job.items)
    assert fast["critical_path"]["time"] == pytest.approx(slow["critical_path"]["time"], rel=1e-9, abs=1e-15)
    assert fast["overlap"]["types"] == slow["overlap"]["types"]
    for a in slow["overlap"]["types"]:
        assert fast["overlap"]["share"][a] == pytest.approx(slow["overlap"]["share"][a], rel=1e-9, abs=1e-15)
    assert fast["contention"]["share"] == pytest.approx(slow["contention"]["share"], rel=1e-9, abs=1e-15)
    assert fast["contention"]["by_type"] == pytest.approx(slow["contention"]["by_type"], rel=1e-9, abs=1e-15)


def test_the_reference_network_measures_the_same_contention():
    """The numba engine's contention meter against the reference engine's (plain twin)."""
    job, spec = small_moe()
    fast = simulate(job, by_name("megatron"), spec, analysis=True).analysis["contention"]
    slow = simulate(job, by_name("megatron"), spec, network=ReferenceNetwork, analysis=True).analysis["contention"]
    assert fast["share"] > 0
    assert fast["share"] == pytest.approx(slow["share"], rel=1e-9)
    assert fast["by_type"] == pytest.approx(slow["by_type"], rel=1e-9)


def test_the_network_free_run_of_the_compact_engine_keeps_its_rules_holds():
    """Hermod's hosts hold flows behind better ones (its rules): with zero bits the holds
    resolve in an instant, and the zero-bit kernel run equals the Dispatcher's."""
    from simulator.rules import compact

    job, spec = small_moe()
    sched = by_name("hermod")
    cj = compact(job, sched, spec)
    d = Dispatcher(job, by_name("hermod"), spec, snapshot=True)
    assert network_free_run(cj).makespan == pytest.approx(
        network_free_makespan(job, d.placed_scheduler, spec, d.placement), rel=1e-12
    )


def test_overlap_and_critical_path_are_the_same_from_records_and_from_arrays():
    """timeline_of (records) and timeline_of_compact (arrays) describe one run alike."""
    from railbed.topology import Topology

    job, spec = small_moe()
    shares = {}
    for name in ("megatron", "hermod"):
        run = simulate_compact(job, by_name(name), spec)
        rec = run.to_run_result(job, name)
        a, b = timeline_of(rec.items, job.items, Topology(spec)), timeline_of_compact(run)
        assert analysis.critical_path(a) == analysis.critical_path(b)
        oa, ob = analysis.overlap(a), analysis.overlap(b)
        assert oa["types"] == ob["types"] and oa["links"].keys() == ob["links"].keys()
        for t in oa["types"]:
            assert oa["share"][t] == pytest.approx(ob["share"][t], rel=1e-12)
        shares[name] = oa["share"]
    assert shares["megatron"]["DP"]["EP"] > 0 and shares["megatron"]["EP"]["EP"] > 0


def test_the_emulators_estimate_counts_slowed_flows_beside_another_type():
    """The emulator's estimate on the records of the runs above. fifo: p (mean rate 2/3 of C)
    and d (2/3 of C) were slowed and ran beside each other's type on w0's port during
    [1, 3]: 2 ms each of 3 each, 2/3: the simulator's exact measure. Strict priority: p ran
    at C (not slowed); d (mean C/2) beside PP for 2 ms of its 4: 2/6 = 1/3, exact too. Two
    DP coflows sharing a port: one type, 0."""
    from railbed.topology import Topology

    for dscp, name, want in ((0, "fifo", 2 / 3), (46, "tag-priority", 1 / 3)):
        job = pp_beside_dp(dscp)
        res = simulate(job, by_name(name), SPEC, analysis=True)
        est = contention_estimate(timeline_of(res.items, job.items, Topology(SPEC)))
        assert est["share"] == pytest.approx(want, rel=1e-9) == res.analysis["contention"]["share"]
        assert est["method"].startswith("estimate")
    job = Job("dp-dp")
    for s in range(3):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.flow("g1", "w0", "w1", ms_flow(2), coflow="dp0", coflow_type="DP")
    job.flow("g2", "w0", "w2", ms_flow(2), coflow="dp1", coflow_type="DP")
    res = simulate(job, by_name("fifo"), SPEC)
    assert contention_estimate(timeline_of(res.items, job.items, Topology(SPEC)))["share"] == 0


def test_the_estimate_counts_a_flow_slowed_elsewhere_beside_another_type():
    """Where the estimate and the exact measure part. p (PP, w0 -> w1, 2 ms alone) shares w0's
    port with g (DP, w0 -> w2, 1 ms alone, capped at C/4 by its rate tag); p and q (PP,
    w3 -> w1, 2 ms alone) share the port into w1 at C/2 each. All three end at 4 ms.
    Exactly: p and q are limited by the port into w1, where only PP runs, g by its cap: 0.
    The estimate: p was slowed (mean C/2 < 0.9 C) and ran beside DP on w0's port for its
    4 ms; q was slowed but never beside another type; g kept its cap's rate: 4 of 12
    flow-ms, 1/3."""
    from railbed.topology import Topology

    job = Job("elsewhere")
    for s in range(4):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.flow("p", "w0", "w1", ms_flow(2), coflow_type="PP")
    job.flow("q", "w3", "w1", ms_flow(2), coflow_type="PP")
    job.flow("g", "w0", "w2", ms_flow(1), coflow_type="DP", tags={"rate": C / 4})
    res = simulate(job, by_name("tag-priority"), SPEC, analysis=True)
    assert res.makespan == pytest.approx(4 * MS, rel=1e-9)
    assert res.analysis["contention"]["share"] == 0
    est = contention_estimate(timeline_of(res.items, job.items, Topology(SPEC)))
    assert est["share"] == pytest.approx(1 / 3, rel=1e-9)
    assert est["by_type"] == {"PP": pytest.approx(0.5, rel=1e-9), "DP": 0.0}


def test_result_json_and_summary_keep_the_analysis(tmp_path):
    res = simulate(pp_beside_dp(), by_name("fifo"), SPEC, analysis=True)
    res.save(tmp_path / "r.json")
    back = RunResult.load(tmp_path / "r.json")
    assert back.analysis == res.analysis
    for field in ("network_free_makespan", "max_speedup", "exposed_comm_fraction", "critical_path", "overlap"):
        assert field in back.analysis
    text = back.summary()
    assert "max speedup 2x" in text and "exposed comm    50.0% of the critical path" in text
    assert "PP/DP 33.3%" in text
    assert "(66.7% of the makespan): room 1.5x" in text


def test_the_figures_rows_are_the_analysis(tmp_path):
    """critical-<run>.csv marks exactly the path's items (in path order); overlap-<run>.csv is
    the share matrix."""
    res = simulate(pp_beside_dp(), by_name("fifo"), SPEC, analysis=True)
    rows = plots.critical_rows(res)
    assert [r[1] for r in rows if r[5]] == res.analysis["critical_path"]["items"]
    assert {r[1] for r in rows if not r[5]} == {"d"}
    assert [r[6] for r in rows if r[5]] == ["compute", "PP", "compute"]
    assert plots.critical_path(res, tmp_path / "critical").exists()
    ov = plots.overlap_rows(res)
    assert [[a, b] for a, b, _ in ov] == [["PP", "PP"], ["PP", "DP"], ["DP", "PP"], ["DP", "DP"]]
    assert ov[1][2] == pytest.approx(1 / 3)
    assert plots.overlap_heatmap(res, tmp_path / "overlap").exists()
    assert plots.critical_rows(simulate(pp_beside_dp(), by_name("fifo"), SPEC)) == []  # no analysis, no figure


def test_a_long_chain_walks_fast_and_sums_to_the_makespan():
    """A synthetic timeline of 200 000 items (alternating tasks and flows in one chain, plus
    noise items): the path is the chain, its time the makespan."""
    n = 100_000
    rng = random.Random(1)
    chain = 2 * n
    import numpy as np

    dur = np.array([rng.uniform(1, 2) for _ in range(chain)])
    end = np.cumsum(dur)
    start = end - dur
    ready = start.copy()
    is_flow = np.arange(chain) % 2 == 1
    pred_ptr = np.concatenate([[0], np.arange(chain)]).astype(np.int64)
    pred_idx = np.arange(chain - 1, dtype=np.int64)
    minus = np.full(chain, -1, np.int64)
    tl = Timeline(
        [f"i{k}" for k in range(chain)], is_flow, is_flow.copy(), ready, start, end,
        np.where(is_flow, 0, -1).astype(np.int32), ["DP"], np.where(is_flow, 0, -1), np.where(is_flow, -1, 0),
        np.where(is_flow, 0, -1), minus, pred_ptr, pred_idx, np.zeros(chain + 1, np.int64), np.zeros(0, np.int64), [],
        np.zeros(0), np.zeros(chain), np.full(chain, np.inf),
    )  # fmt: skip
    cp = analysis.critical_path(tl)
    assert len(cp["items"]) == chain
    assert cp["time"]["compute"] + cp["time"]["DP"] == pytest.approx(end[-1], rel=1e-9)
    assert cp["time"]["DP"] == pytest.approx(dur[is_flow].sum(), rel=1e-9)
    assert math.isclose(cp["length"], end[-1])


def test_a_scheduler_that_cannot_be_copied_or_fails_without_a_network_leaves_a_note():
    """The run's results and the rest of its analysis stand; ``network_free_makespan`` and
    ``max_speedup`` are null, and a note says why."""

    class NoCopy(Scheduler):
        name = "no-copy"

        def __deepcopy__(self, memo):
            raise TypeError("holds a socket")

    class FailsAlone(Scheduler):
        name = "fails-alone"
        broken = False

        def __deepcopy__(self, memo):
            twin = FailsAlone()
            twin.broken = True
            return twin

        def on_ready(self, item, view):
            if self.broken:
                raise KeyError("no such flow")
            return Decision()

    for sched, words in ((NoCopy(), "cannot be copied after place"), (FailsAlone(), "run without a network failed")):
        res = simulate(pp_beside_dp(), sched, SPEC, analysis=True)
        a = res.analysis
        assert res.makespan == pytest.approx(6 * MS, rel=1e-9)
        assert a["network_free_makespan"] is None and a["max_speedup"] is None
        assert words in a["notes"][0] and a["critical_path"]["items"] == ["a", "p", "b"]
        assert "note            network_free_makespan" in res.summary()


def test_a_split_coflow_counts_its_bytes_once_at_the_busiest_port():
    """Hermod splits EP coflows into sub-flows (Alg. 3) on the same NICs: the busiest port carries
    the bytes megatron's unsplit flows carry there (within a frame's rounding per sub-flow), not
    twice them (the originals' records hold the same bytes)."""
    job, spec = small_moe()
    runs = {n: simulate(job, by_name(n), spec, analysis=True).analysis for n in ("megatron", "hermod")}
    whole, split = runs["megatron"]["busiest_port"], runs["hermod"]["busiest_port"]
    assert split["seconds"] == pytest.approx(whole["seconds"], rel=1e-3)
    assert runs["hermod"]["room"] >= 1.0 - 1e-9 and runs["megatron"]["room"] >= 1.0 - 1e-9
