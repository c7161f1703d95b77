"""Hermod and its baselines (schedulers/hermod.py) on the simulator: the order of §5.3.1 shows
in completion times, Alg. 3's sub-phases carry an EP coflow, Lina holds DP behind backward EP,
the Table 5.2 heuristics mark their type, and all are registered.

Cluster: 3 servers, one 8 Gbit/s NIC each, one switch, no latency: a flow of ``S`` payload
bytes alone takes ``T``."""

import pytest

from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import REGISTRY, SchedulerSpec, by_name, make
from schedulers.hermod import SCHEDULERS
from simulator import simulate
from workloads.mechanisms import ep_shared_nic

RATE = 8e9
SPEC = ClusterSpec.from_dict(
    {"servers": [{"count": 3, "gpus": 2, "nic_rate": RATE}], "fabric": {"type": "single_switch"}}
)
S = 10_000_000
T = 8 * wire_bytes(S) / RATE


def two_gpus() -> Job:
    job = Job("hermod-order")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    return job


def three_coflows() -> Job:
    """A DP reduction (last microbatch), PP of microbatch 1 and of microbatch 0, ready together."""
    job = two_gpus()
    job.flow("dp", "a", "b", S, coflow="dp", coflow_type="DP", microbatch=3, layer=0, tags={"dp_phase": "rs"})
    job.flow("pp1", "a", "b", S, coflow="pp1", coflow_type="PP", microbatch=1, layer=2)
    job.flow("pp0", "a", "b", S, coflow="pp0", coflow_type="PP", microbatch=0, layer=2)
    return job.validate()


def ends(result, ids=("pp0", "pp1", "dp")) -> list[float]:
    return [result.items[i].end / T for i in ids]


def test_hermod_order_shows_in_completion_times():
    job = three_coflows()
    assert ends(simulate(job, by_name("hermod"), SPEC)) == pytest.approx([1, 2, 3])
    assert ends(simulate(job, by_name("megatron"), SPEC)) == pytest.approx([3, 3, 3])  # fair sharing
    assert ends(simulate(job, by_name("dp-first"), SPEC))[2] == pytest.approx(1)
    assert ends(simulate(job, by_name("pp-first"), SPEC)) == pytest.approx([2, 2, 3])
    marks = simulate(job, by_name("hermod"), SPEC).items
    assert marks["pp0"].dscp >> 3 == 7 and marks["pp1"].dscp >> 3 == 6 and marks["dp"].dscp >> 3 == 0
    literal = simulate(job, by_name("hermod-literal"), SPEC)
    assert ends(literal) == pytest.approx([1, 2, 3])
    assert literal.items["dp"].dscp >> 3 == 4  # MID 3 in the top bits (§5.4 as written)


def test_literal_host_wait_keeps_order_inside_a_switch_class():
    """Same MID, PP before DP by CType: hermod-literal gives both one class at the switch (same
    MID level) and the host waits; hermod puts them in different queues."""
    job = two_gpus()
    job.flow("dp", "a", "b", S, coflow_type="DP", microbatch=0, layer=0, tags={"dp_phase": "ag"})
    job.flow("pp", "a", "b", S, coflow_type="PP", microbatch=0, layer=1)
    job.validate()
    res = simulate(job, by_name("hermod-literal"), SPEC)
    assert res.items["dp"].dscp >> 3 == res.items["pp"].dscp >> 3
    assert ends(res, ("pp", "dp")) == pytest.approx([1, 2])
    assert ends(simulate(job, by_name("hermod-intra"), SPEC), ("pp", "dp")) == pytest.approx([2, 2])
    no_wait = make(SchedulerSpec("hermod-literal", {"host_wait": "off"}))
    assert ends(simulate(job, no_wait, SPEC), ("pp", "dp")) == pytest.approx([2, 2])
    queued = simulate(job, by_name("hermod"), SPEC)
    assert queued.items["pp"].dscp >> 3 == 7 and queued.items["dp"].dscp >> 3 == 0
    assert ends(queued, ("pp", "dp")) == pytest.approx([1, 2])
    no_wait = make(SchedulerSpec("hermod", {"host_wait": "off"}))
    assert ends(simulate(job, no_wait, SPEC), ("pp", "dp")) == pytest.approx([1, 2])  # the queues alone


def test_pp_preempts_dp_in_flight_of_the_same_microbatch():
    """Issue 25's mechanism: a DP flow on the wire from t = 0, a PP flow of the same microbatch
    ready at T/2 on the same NIC. hermod (different queues) and pp-first: the PP flow takes the
    link at once, ends at 1.5 T, DP at 2 T. hermod-literal (one queue, the host does not stop a
    running flow) and megatron: fair sharing, DP ends at 1.5 T, PP at 2 T."""
    job = two_gpus()
    job.flow("dp", "a", "b", S, coflow_type="DP", microbatch=0, layer=0, coflow="dp")
    job.task("c", "a", T / 2)
    job.flow("pp", "a", "b", S, ["c"], coflow_type="PP", microbatch=0, layer=0, coflow="pp")
    job.validate()
    for name, want in (("hermod", [1.5, 2]), ("pp-first", [1.5, 2]), ("hermod-literal", [2, 1.5]),
                       ("megatron", [2, 1.5])):  # fmt: skip
        assert ends(simulate(job, by_name(name), SPEC), ("pp", "dp")) == pytest.approx(want), name


def test_zero2_all_gather_yields_to_the_current_iterations_cooldown():
    """A ZeRO-2 all-gather of iteration 0 and a PP flow of iteration 0's microbatch 3 (cooldown),
    ready together on one NIC: hermod sends the PP flow first (its data is consumed in this
    iteration), hermod-literal the all-gather (MID 0)."""
    job = two_gpus()
    job.flow("ag", "a", "b", S, coflow_type="DP", iteration=0, microbatch=3, layer=5, tags={"dp_phase": "ag"})
    job.flow("pp", "a", "b", S, coflow_type="PP", iteration=0, microbatch=3, layer=2)
    job.validate()
    assert ends(simulate(job, by_name("hermod"), SPEC), ("pp", "ag")) == pytest.approx([1, 2])
    assert ends(simulate(job, by_name("hermod-literal"), SPEC), ("pp", "ag")) == pytest.approx([2, 1])


def test_backward_reverse_serves_the_last_microbatchs_backward_first():
    """Two backward PP flows (microbatches 0 and 3 of 4) ready together on one NIC: the thesis's
    order sends microbatch 0 first; ``backward: reverse`` microbatch 3; a forward flow keeps the
    thesis's order under both."""
    job = two_gpus()
    job.flow("b0", "a", "b", S, coflow_type="PP", microbatch=0, layer=1, tags={"pass": "B"})
    job.flow("b3", "a", "b", S, coflow_type="PP", microbatch=3, layer=1, tags={"pass": "B"})
    job.flow("f1", "b", "a", S, coflow_type="PP", microbatch=1, layer=0, tags={"pass": "F"})
    job.validate()
    assert ends(simulate(job, by_name("hermod"), SPEC), ("b0", "b3")) == pytest.approx([1, 2])
    rev = make(SchedulerSpec("hermod", {"backward": "reverse"}))
    res = simulate(job, rev, SPEC)
    assert ends(res, ("b3", "b0", "f1")) == pytest.approx([1, 2, 1])
    assert res.items["b3"].dscp >> 3 == 7 and res.items["b0"].dscp >> 3 == 4 and res.items["f1"].dscp >> 3 == 6
    for bad in ({"backward": "last"}, {"backward": "reverse", "literal": True}):
        with pytest.raises(Exception, match="backward"):
            make(SchedulerSpec("hermod", bad))


def ep_job() -> Job:
    job = Job("ep")
    for s in range(3):
        job.endpoint(f"g{s}", Location(s, "gpu0", 0))
    sizes = {(0, 1): 3 * S, (0, 2): S, (1, 0): S, (1, 2): 2 * S, (2, 0): 2 * S, (2, 1): S}
    for (i, j), size in sizes.items():
        job.flow(f"e{i}{j}", f"g{i}", f"g{j}", size, reveal="on_ready", coflow="ep", coflow_type="EP", microbatch=0)
    return job.validate()


def test_ep_coflow_split_into_matching_subphases():
    job = ep_job()
    res = simulate(job, by_name("hermod-intra"), SPEC)
    subs = [r for r in res.items.values() if r.parent]
    assert subs and {r.parent for r in subs} == {f.id for f in job.flows}
    for f in job.flows:
        assert res.items[f.id].received == f.size
        assert sum(r.size for r in subs if r.parent == f.id) == f.size
    fifo = simulate(job, by_name("megatron"), SPEC)
    assert res.makespan <= fifo.makespan * (1 + 1e-5)  # sub-flows add a few partial packets' headers
    assert res.makespan == pytest.approx(4 * T, rel=1e-5)  # the largest row/column sum: no incast


def senders_into_a_nic_at_once(job: Job, res) -> int:
    """The most source NICs whose sub-flows are on the wire into one NIC at the same time."""
    server = {f.id: (job.endpoints[f.src].pin.server, job.endpoints[f.dst].pin.server) for f in job.flows}
    subs = [r for r in res.items.values() if r.parent]
    most = 0
    for r in subs:
        t = (r.start + r.end) / 2
        dst = server[r.parent][1]
        at_once = {server[o.parent][0] for o in subs if o.start < t < o.end and server[o.parent][1] == dst}
        most = max(most, len(at_once))
    return most


def test_ep_matching_over_nics_shared_by_gpus():
    """Alg. 3 over the NICs (hermod's ``match: nic``): every NIC receives from one NIC at a time
    and the coflow ends at the busiest NIC's bytes, 4 T. Over the GPUs (the thesis's matrix,
    ``match: gpu``), two GPUs behind one NIC receive from two NICs at once (incast at the port)."""
    job = ep_shared_nic(S)  # ep_job's NIC matrix (4 T) over 3 servers of 2 GPUs on one NIC
    nic = simulate(job, by_name("hermod-intra"), SPEC)
    assert nic.makespan == pytest.approx(4 * T, rel=1e-5)
    assert senders_into_a_nic_at_once(job, nic) == 1
    gpu = simulate(job, make(SchedulerSpec("hermod", {"inter": False, "match": "gpu"})), SPEC)
    assert senders_into_a_nic_at_once(job, gpu) == 2
    assert gpu.makespan >= nic.makespan * (1 - 1e-9)
    for res in (nic, gpu):
        assert all(res.items[f.id].received == f.size for f in job.flows)


def test_flat_subphases_mark_alg3s_sub_flows_lowest():
    """``subphases: flat`` (a probe): the sub-flows of a split EP coflow carry DSCP 0; ``hermod``
    marks them as their coflow (microbatch 0: queue 7)."""
    job = ep_shared_nic(S)  # ep_job's NIC matrix (4 T) over 3 servers of 2 GPUs on one NIC
    for args, queue in (({}, 7), ({"subphases": "flat"}, 0)):
        res = simulate(job, make(SchedulerSpec("hermod", args)), SPEC)
        subs = [r for r in res.items.values() if r.parent]
        assert subs and {(r.dscp or 0) >> 3 for r in subs} == {queue}, args


def test_lina_holds_dp_behind_backward_ep_on_the_same_nic():
    job = two_gpus()
    job.flow("ep", "a", "b", S, coflow="ep", coflow_type="EP", microbatch=0, tags={"pass": "B"})
    job.task("late", "a", T / 2)
    job.flow("dp", "a", "b", S, ["late"], coflow="dp", coflow_type="DP", microbatch=0)
    job.validate()
    res = simulate(job, by_name("lina"), SPEC)
    assert res.items["dp"].start == pytest.approx(T) and res.items["ep"].end == pytest.approx(T)
    assert all(r.dscp in (0, None) for r in res.items.values() if r.kind == "flow")


def test_registered_with_arguments():
    for cls in SCHEDULERS:
        assert REGISTRY[cls.name] is cls
    sched = make(SchedulerSpec("hermod", {"interleaved": True, "intra": False}, "h-il"))
    assert sched.interleaved and not sched.intra and sched.label == "h-il"
    assert by_name("hermod-inter").intra is False and by_name("hermod-intra").inter is False
    assert by_name("hermod-literal").literal and not by_name("hermod").literal


def test_tree_flows_run_at_half_line_rate_under_hermod():
    job = two_gpus()
    job.flow("t", "a", "b", S, coflow_type="DP", microbatch=0, tags={"tree": 0, "dp_phase": "ar"})
    job.validate()
    res = simulate(job, by_name("hermod"), SPEC)
    assert res.items["t"].rate == RATE / 2 and res.items["t"].end == pytest.approx(2 * T)


def test_metadata_all_gather_goes_first_and_never_waits_behind_ep_transfers():
    """An EP transfer of microbatch 0 on the wire from t = 0; microbatch 1's 512-byte metadata
    (token counts, §5.3.2) ready at T/2 on the same NIC. hermod (``metadata: top``) sends it at
    once: it ends at T/2 (plus 512 bytes' time), as under megatron's fair sharing. Ordered as EP
    (``metadata: ep``, hermod-literal's) it waits for microbatch 0's transfer: T. Both engines."""
    from simulator.rules import simulate_compact

    job = two_gpus()
    job.flow("ep", "a", "b", S, coflow_type="EP", microbatch=0, layer=0)
    job.task("c", "a", T / 2)
    job.flow("meta", "a", "b", 512, ["c"], coflow_type="EP", microbatch=1, layer=0, tags={"metadata": True})
    job.validate()
    ep_order = make(SchedulerSpec("hermod", {"metadata": "ep"}))
    cases = [("hermod", by_name("hermod"), 0.5), ("megatron", by_name("megatron"), 0.5)]
    cases += [("metadata: ep", ep_order, 1.0), ("hermod-literal", by_name("hermod-literal"), 1.0)]
    for name, sched, want in cases:
        fluid = simulate(job, sched, SPEC).items["meta"].end
        rules = simulate_compact(job, sched, SPEC).to_run_result(job, name).items["meta"].end
        assert [fluid / T, rules / T] == pytest.approx([want, want], abs=1e-3), name
    assert simulate(job, by_name("hermod"), SPEC).items["meta"].dscp >> 3 == 7
    with pytest.raises(Exception, match="metadata"):
        make(SchedulerSpec("hermod", {"metadata": "first"}))
