"""Varys's SEBF with MADD rates (schedulers/varys_alg.py, schedulers/varys.py): the pure
functions against hand-computed answers, and a two-coflow run where SEBF's average CCT beats
per-flow fair sharing by a computable amount on the fluid backends."""

import math
from pathlib import Path

import pytest

from railbed.backend import RunOptions, backend
from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import SchedulerSpec, by_name, make
from schedulers.varys_alg import CoflowFlow, bottleneck, madd_rates, sebf_madd, sebf_order
from workloads.traces import trace_cluster

CAP = {p: 1.0 for p in ("s0", "s1", "s2")}
DOWN = {p: 1.0 for p in ("r0", "r1", "r2", "r3")}


def test_bottleneck_is_the_most_loaded_port_over_what_is_left_there():
    flows = [CoflowFlow("a", "s0", "r0", 3.0), CoflowFlow("b", "s1", "r0", 1.0)]
    assert bottleneck(flows, CAP, DOWN) == 4.0  # r0 receives 4 bits at 1 bit/s
    assert bottleneck(flows, {**CAP, "s0": 0.5}, {**DOWN, "r0": 2.0}) == 6.0  # s0: 3 bits at 0.5
    assert bottleneck(flows, CAP, {**DOWN, "r0": 0.0}) == math.inf
    assert bottleneck([CoflowFlow("z", "s0", "r0", 0.0)], CAP, DOWN) == 0.0


def test_sebf_orders_by_bottleneck_then_arrival_then_id():
    coflows = {
        "x": [CoflowFlow("x1", "s0", "r0", 4.0)],
        "y": [CoflowFlow("y1", "s0", "r1", 1.0), CoflowFlow("y2", "s1", "r1", 0.5)],  # r1: 1.5
        "z": [CoflowFlow("z1", "s2", "r2", 1.5)],
        "w": [CoflowFlow("w1", "s2", "r3", 1.5)],
    }
    assert sebf_order(coflows, CAP, DOWN, {"y": 2.0, "z": 1.0, "w": 1.0}) == ["w", "z", "y", "x"]


def test_madd_slows_a_coflows_short_flows_to_its_bottleneck_leaving_room_for_the_next():
    """B = {b1: s0->r1 3 bits, b2: s1->r2 1 bit}, Gamma_B = 3 s: b1 at 1, b2 at 1/3 (both end at
    3 s); C = {c: s1->r3 1 bit} then has 2/3 of s1 left: Gamma_C = 1.5 s, c at 2/3. Nothing is
    left to backfill on s1; greedy per-flow rates would have given b2 all of s1."""
    coflows = {
        "B": [CoflowFlow("b1", "s0", "r1", 3.0), CoflowFlow("b2", "s1", "r2", 1.0)],
        "C": [CoflowFlow("c", "s1", "r3", 1.0)],
    }
    rates = madd_rates(["B", "C"], coflows, CAP, DOWN)
    assert rates == pytest.approx({"b1": 1.0, "b2": 1 / 3, "c": 2 / 3}, rel=1e-12)


def test_a_blocked_coflow_gets_the_greedy_backfill_its_free_ports_allow_and_only_the_floor_in_the_paper():
    """A = {a: s0->r0 1 bit} first (Gamma 1): a takes s0. B's b1 needs s0 (nothing left: Gamma
    inf, no MADD rate). Greedy backfill (Varys's code) gives b2 all of s1/r2; the paper's gives
    only flows with a MADD rate, so b2 keeps the floor like b1."""
    coflows = {
        "A": [CoflowFlow("a", "s0", "r0", 1.0)],
        "B": [CoflowFlow("b1", "s0", "r1", 3.0), CoflowFlow("b2", "s1", "r2", 1.0)],
    }
    assert sebf_order(coflows, CAP, DOWN) == ["A", "B"]
    greedy = sebf_madd(coflows, CAP, DOWN, backfill="greedy", floor=1e-6)
    assert greedy == pytest.approx({"a": 1.0, "b1": 1e-6, "b2": 1.0}, rel=1e-12)
    paper = sebf_madd(coflows, CAP, DOWN, floor=1e-6)
    assert paper == pytest.approx({"a": 1.0, "b1": 1e-6, "b2": 1e-6}, rel=1e-12)


def test_paper_backfill_shares_an_ingress_ports_rest_in_madd_ratios_greedy_gives_it_to_the_first():
    """B = {b1: s1->r1 1, b2: s1->r2 1, b3: s2->r2 2}: Gamma 3 (r2 receives 3): MADD 1/3, 1/3,
    2/3; left: s1 1/3, s2 1/3, r1 2/3, r2 0. Paper: s1's 1/3 split 1:1 between b1 and b2, b2's
    half finds r2 full: b1 1/2. Greedy: b1 takes all of s1's 1/3: b1 2/3."""
    coflows = {
        "B": [CoflowFlow("b1", "s1", "r1", 1.0), CoflowFlow("b2", "s1", "r2", 1.0), CoflowFlow("b3", "s2", "r2", 2.0)]
    }
    madd = {"b2": 1 / 3, "b3": 2 / 3}
    assert madd_rates(["B"], coflows, CAP, DOWN) == pytest.approx({"b1": 1 / 2, **madd}, rel=1e-12)
    assert madd_rates(["B"], coflows, CAP, DOWN, "greedy") == pytest.approx({"b1": 2 / 3, **madd}, rel=1e-12)


def test_sebf_refuses_an_unknown_backfill_by_its_argument():
    with pytest.raises(SpecError) as err:
        make(SchedulerSpec("sebf", {"backfill": "fair"}), "schedulers[1]")
    assert err.value.field == "schedulers[1].args.backfill"


# ------------------------------------------------------------------ runs
S = 1448 * 1000  # payload bytes in whole segments: wire bytes are exactly 1514 * 1000
RATE = 1e9
T = 8 * wire_bytes(S) / RATE  # one S at one port's rate


def two_coflows() -> Job:
    """A: a h0->h2 (S). B: b1 h0->h3 (3S), b2 h1->h4 (S). a and b1 share h0's uplink.
    Fair sharing: a and b1 at R/2 until a ends at 2T, b1's 2S left then take 2T: CCT_A 2T,
    CCT_B 4T, mean 3T. SEBF: A first (Gamma T < 3T): a at R ends at T, b2 backfilled at R
    (ends at T), b1 at the floor until T, then alone: CCT_A T, CCT_B 4T, mean 2.5T."""
    job = Job("two-coflows")
    for s in range(5):
        job.endpoint(f"h{s}", Location(s, "gpu0", 0))
    job.flow("a", "h0", "h2", S, coflow="A")
    job.flow("b1", "h0", "h3", 3 * S, coflow="B")
    job.flow("b2", "h1", "h4", S, coflow="B")
    return job


def ccts(res) -> dict[str, float]:
    return {"A": res.items["a"].end, "B": max(res.items["b1"].end, res.items["b2"].end)}


@pytest.mark.parametrize("backfill", ["paper", "greedy"])
@pytest.mark.parametrize("name", ["fluid", "fluid-reference"])
def test_sebf_beats_fair_sharing_by_half_a_coflow_time_on_average(name, backfill):
    """With either backfill: b2 runs at R from 0 (greedy) or at the floor, then at R/3 beside b1
    from T (paper, MADD on B alone: both end at 4T); B ends at 4T either way."""
    cluster = ClusterSpec.from_dict(trace_cluster(5, RATE))
    fair = ccts(backend(name).run(two_coflows(), by_name("fifo"), cluster, RunOptions(analysis=False)))
    sebf = make(SchedulerSpec("sebf", {"backfill": backfill}))
    sebf = ccts(backend(name).run(two_coflows(), sebf, cluster, RunOptions(analysis=False)))
    assert fair == pytest.approx({"A": 2 * T, "B": 4 * T}, rel=1e-9)
    assert sebf == pytest.approx({"A": T, "B": 4 * T}, rel=1e-5)  # b1's floor: 1e-6 of a port for T
    assert (fair["A"] + fair["B"]) / 2 - (sebf["A"] + sebf["B"]) / 2 == pytest.approx(0.5 * T, rel=1e-4)


def test_sebf_refuses_hidden_sizes():
    job = Job("hidden")
    for s in range(2):
        job.endpoint(f"h{s}", Location(s, "gpu0", 0))
    job.flow("f", "h0", "h1", S, reveal="hidden")
    with pytest.raises(SpecError) as err:
        by_name("sebf").check(job, ClusterSpec.from_dict(trace_cluster(2)))
    assert err.value.field == "items.f.reveal"


def test_a_coflow_released_together_is_rated_once_and_flows_ending_inside_it_change_nothing(monkeypatch):
    """The tiny trace (tests/test_traces.py): coflow 1's four flows are released at 0 by four
    release events; sebf rates them once, all four at once (Varys reschedules per coflow, not
    per flow), and then only at coflow arrivals and departures: at most 2 x 3 re-ratings. With
    ``reschedule: flow`` a flow's end inside a coflow re-rates too."""
    import schedulers.varys as varys
    from workloads.traces import import_trace

    calls = []

    def spy(coflows, *args):
        calls.append(sorted(f.id for fl in coflows.values() for f in fl))
        return sebf_madd(coflows, *args)

    monkeypatch.setattr(varys, "sebf_madd", spy)
    job = import_trace(Path(__file__).resolve().parents[1] / "examples" / "traces" / "tiny-coflow-benchmark.txt")
    cluster = ClusterSpec.from_dict(trace_cluster(8))
    backend("fluid").run(job, by_name("sebf"), cluster, RunOptions(analysis=False))
    assert calls[0] == ["c1.m0.r2", "c1.m0.r3", "c1.m1.r2", "c1.m1.r3"]
    assert len(calls) <= 6
    coflow_mode = len(calls)
    calls.clear()
    backend("fluid").run(job, make(SchedulerSpec("sebf", {"reschedule": "flow"})), cluster, RunOptions(analysis=False))
    assert calls[0] == ["c1.m0.r2", "c1.m0.r3", "c1.m1.r2", "c1.m1.r3"] and len(calls) > coflow_mode
