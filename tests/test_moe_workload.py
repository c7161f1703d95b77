"""The moe_training generator (workloads/moe.py): pipeline schedules (1F1B in-flight
microbatches, counted on a simulated run), EP sizes revealed on ready after the metadata
all-gather, Table 5.5 preset sizes, GPUs sharing NICs, registration and bad arguments."""

import numpy as np
import pytest

from railbed.errors import SpecError
from railbed.job import Flow
from railbed.spec import ClusterSpec
from schedulers import by_name
from simulator import simulate
from workloads import GENERATORS, generate
from workloads.moe import PRESETS, buckets, crossing, megatron_bucket, moe_training, stage_order

CLUSTER = ClusterSpec.from_dict(
    {
        "servers": [{"count": 4, "gpus": 8, "nics": 2, "nic_rate": "100Gbit"}],
        "fabric": {"type": "rail_optimized", "spines": 1, "uplink_rate": "100Gbit"},
    }
)
SMALL = dict(dp=2, pp=4, ep=2, layers=4, hidden=256, ffn=512, seq=128, experts=4, topk=2, microbatches=8)
SMALL["nics_per_server"] = 2


def in_flight(result, stage: int) -> int:
    """Most microbatches of ``stage`` (replica 0) between their first forward task's start and
    their last backward task's end at one time."""
    spans: dict[int, list[float]] = {}
    for r in result.items.values():
        if r.kind == "task" and r.id.endswith(f".p{stage}d0t0") and ".attn." in r.id:
            m = r.attrs["microbatch"]
            lo, hi = spans.get(m, [np.inf, -np.inf])
            spans[m] = [min(lo, r.start), max(hi, r.end)]
    events = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_in_flight_microbatches_per_stage(schedule):
    job = moe_training(schedule=schedule, **SMALL)
    result = simulate(job, by_name("fifo"), CLUSTER)
    assert result.makespan > 0
    for p in range(4):
        want = 4 - p if schedule == "1f1b" else 8  # 1F1B keeps pp - p microbatches at stage p
        assert in_flight(result, p) == want, (schedule, p)


def test_stage_orders():
    assert stage_order("1f1b", 4, 6, 1) == [("F", 0, 0), ("F", 1, 0)] + [
        op for i in range(4) for op in (("F", i + 2, 0), ("B", i, 0))
    ] + [("B", 4, 0), ("B", 5, 0)]
    inter = stage_order("interleaved", 2, 4, 0, 2)  # Megatron: chunk 0 of microbatches 0-1, then chunk 1
    assert inter[:5] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1), ("F", 2, 0)]
    for sched, ch in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        for p in range(4):
            ops = stage_order(sched, 4, 8, p, ch)
            assert sorted(ops) == sorted((k, m, c) for k in "FB" for m in range(8) for c in range(ch))
            for m in range(8):
                for c in range(ch):
                    assert ops.index(("F", m, c)) < ops.index(("B", m, c))


def test_interleaved_runs_and_keeps_every_layer():
    job = moe_training(schedule="interleaved", chunks=2, **{**SMALL, "layers": 8})
    result = simulate(job, by_name("fifo"), CLUSTER)
    attn = {(r.attrs["layer"], r.id.split(".")[1]) for r in result.items.values() if ".attn." in r.id}
    assert attn == {(layer, k) for layer in range(8) for k in "FB"}
    assert in_flight(result, 3) <= in_flight(result, 0)  # the first stage warms up most


def test_ep_sizes_are_revealed_on_ready_after_the_metadata_gather():
    job = moe_training(**SMALL)
    public = job.public()
    ep = [f for f in job.flows if f.coflow_type == "EP" and not f.tags.get("metadata")]
    assert ep and all(f.reveal == "on_ready" and public.items[f.id].size is None for f in ep)
    dispatch = [f for f in ep if ".dispatch." in f.id]
    assert dispatch and all(any(".meta." in d for d in f.deps) for f in dispatch)
    meta = [f for f in job.flows if f.tags.get("metadata")]
    assert meta and all(public.items[f.id].size == 512 for f in meta)


def test_ep_matrix_carries_every_routed_token():
    job = moe_training(**SMALL, seed=3)
    sent = sum(f.size for f in job.flows if ".i0.ep.dispatch.l0.m0." in f".{f.id}" and f.src == "p0d0t0")
    local = [t for t in job.tasks if t.id == "i0.F.expert.l0.m0.p0d0t0"]
    assert local and 0 < sent <= 128 * 2 * 256 * 2  # tokens x topk x hidden x bf16, minus its own experts'
    a = moe_training(**SMALL, seed=3)
    b = moe_training(**SMALL, seed=4)
    sizes = [[f.size for f in j.flows if f.coflow_type == "EP"] for j in (a, b)]
    assert sizes[0] == [f.size for f in job.flows if f.coflow_type == "EP"] and sizes[0] != sizes[1]


def test_preset_sizes():
    job = moe_training(model="mixtral-8x7b", dp=8, microbatches=2, layers=2, nics_per_server=2)
    act = next(f for f in job.flows if f.coflow_type == "PP")
    assert act.size == 4096 * 4 * 4096 * 2  # seq x microbatch x hidden x bf16
    gpt = moe_training(model="gpt3-13b", dp=2, microbatches=4, layers=4, nics_per_server=2)
    act = next(f for f in gpt.flows if f.coflow_type == "PP")
    assert act.size == 2048 * 4 * 5120 * 2 // 4  # TP 4, sequence parallel
    dp = [f for f in gpt.flows if f.coflow_type == "DP" and f.id.endswith(".s0.r0")]
    assert dp and all(f.size == 12 * 5120**2 * 2 // 4 // 2 for f in dp)  # 12 h^2 / TP, chunk of a 2-ring
    assert not [f for f in gpt.flows if f.coflow_type == "EP"]
    assert set(PRESETS) == {"qwen-moe-12l", "qwen-moe-24l", "mixtral-8x7b", "mixtral-8x22b", "gpt3-13b", "gpt3-175b"}


def test_gpus_share_nics_and_zero2_tags():
    job = moe_training(**SMALL, zero2=True)
    nics = {ep.pin.device: ep.pin.nic for ep in job.endpoints.values()}
    assert nics == {f"gpu{g}": g // 4 for g in range(8)}
    phases = {f.tags["dp_phase"] for f in job.flows if f.coflow_type == "DP"}
    assert phases == {"rs", "ag"}
    assert all(f.microbatch == 7 for f in job.flows if f.coflow_type == "DP")


def test_registered_and_bad_arguments_name_the_field():
    assert GENERATORS["moe_training"] is moe_training
    job = generate("moe_training", {"pp": 2, "dp": 2, "layers": 2, "seq": 64, "hidden": 64, "ffn": 64})
    assert isinstance(next(iter(job.items.values())), object) and any(isinstance(i, Flow) for i in job.items.values())
    for args, where in (
        ({"model": "gpt5"}, "model"),
        ({"schedule": "zigzag"}, "schedule"),
        ({"ep": 3}, "ep"),
        ({"layers": 3}, "layers"),
        ({"schedule": "interleaved", "chunks": 2, "microbatches": 3}, "microbatches"),
        ({"tp": 3}, "tp"),
    ):
        with pytest.raises(SpecError) as err:
            generate("moe_training", args)
        assert err.value.field == f"job.args.{where}", args
    with pytest.raises(SpecError, match="items"):
        generate("moe_training", {"model": "mixtral-8x22b", "dp": 128})


def test_double_binary_tree_moves_half_per_tree_and_gates_the_next_iteration():
    job = moe_training(**{**SMALL, "dp": 4, "ep": 4}, dp_algo="tree", iterations=2, zero2=True)
    dense = [f for f in job.flows if f.id.startswith("i0.dp.l0.p0t0.")]
    n, half = 4, -(-(4 * 256 * 256 * 2) // 2)  # 4 h^2 bf16 gradients per layer, half per tree
    assert len(dense) == 2 * 2 * (n - 1) and {f.size for f in dense} == {half}
    for k in (0, 1):
        tree = [f for f in dense if f.tags["tree"] == k]
        ups = [f for f in tree if ".up" in f.id]
        assert {f.tags["dp_phase"] for f in ups} == {"rs"} and len({f.src for f in ups}) == n - 1
        assert len({f.dst for f in tree if ".down" in f.id}) == n - 1
    nxt = next(t for t in job.tasks if t.id == "i1.F.attn.l0.m0.p0d0t0")
    assert any(d.startswith("i0.dp.l0.p0t0.t") and ".down" in d for d in nxt.deps)
    with pytest.raises(SpecError):
        moe_training(**SMALL, dp_algo="butterfly")


@pytest.mark.parametrize("model,dp", [("gpt3-13b", 2), ("qwen-moe-12l", 8)])
def test_shrink_divides_every_size_and_compute_time_by_its_square(model, dp):
    args = dict(model=model, dp=dp, layers=4, microbatches=4, nics_per_server=2, zero2=True)
    full, small = moe_training(**args), moe_training(**args, shrink=4)
    assert sorted(full.items) == sorted(small.items)  # same structure
    ratios = {"task": [], "flow": []}
    for iid, item in full.items.items():  # routed tokens (EP flows, experts) are drawn again
        if not (".ep." in iid or ".meta." in iid or ".expert." in iid):
            other = small.items[iid]
            ratios["flow" if isinstance(item, Flow) else "task"].append(
                other.size / item.size if isinstance(item, Flow) else other.duration / item.duration
            )
    for kind, values in ratios.items():
        assert values and np.allclose(values, 1 / 16, rtol=1e-3), (kind, min(values), max(values))
    if model.startswith("qwen"):  # routed work in total: 1/16 up to the draws
        ep = [sum(f.size for f in j.flows if ".ep." in f.id) for j in (full, small)]
        work = [sum(t.duration for t in j.tasks if ".expert." in t.id) for j in (full, small)]
        assert ep[1] / ep[0] == pytest.approx(1 / 16, rel=0.05) and work[1] / work[0] == pytest.approx(1 / 16, rel=0.01)
    with pytest.raises(SpecError) as err:
        moe_training(**args, shrink=3)
    assert err.value.field == "shrink"


def test_ep_groups_cross_servers_with_megatrons_expert_tensor_parallelism():
    """TP 8 on 8-GPU servers, EP 8 over DP 8: ETP = TP (Megatron-Core's default), so an EP group
    is 8 data-parallel replicas at one tensor rank, one per server (Table 5.1: EP across nodes).
    Each expert shard computes 1/8 of the tokens routed to it from its 8 tensor ranks' groups."""
    kw = dict(model="mixtral-8x22b", dp=8, pp=2, layers=2, microbatches=2, hidden=512, ffn=1024, seq=256,
              nics_per_server=8)  # fmt: skip
    job = moe_training(**kw)
    server = {n: e.pin.server for n, e in job.endpoints.items()}
    coflows: dict[str, set] = {}
    for f in job.flows:
        if f.coflow_type == "EP" and not f.tags.get("metadata"):
            coflows.setdefault(f.coflow, set()).update((f.src, f.dst))
    assert coflows and all(len(m) == 8 and len({server[r] for r in m}) == 8 for m in coflows.values())
    assert all(len({r[-2:] for r in m}) == 1 for m in coflows.values())  # one tensor rank per group
    routed = 0
    for f in job.flows:  # tokens into expert shard 0 of expert-data rank 0, from the 8 groups, incl. own
        if ".i0.ep.dispatch.l0.m0." in f".{f.id}" and f.dst.startswith("p0d0"):
            routed += f.size // (512 * 2)
    expert = [t for t in job.tasks if t.id.startswith("i0.F.expert.l0.m0.p0d0t")]
    assert len(expert) == 8 and len({t.duration for t in expert}) == 1
    assert expert[0].duration > 0 and routed > 0
    assert {d for t in expert for d in t.deps} >= {f.id for f in job.flows if ".dispatch.l0.m0." in f.id
                                                    and f.dst.startswith("p0d0")}  # fmt: skip
    assert "EP" in crossing(job) and "PP" in crossing(job) and "DP" in crossing(job)


def test_folded_experts_when_ep_exceeds_dp():
    """Qwen-MoE-24L's EP 32 over DP 16 (Table 5.5): ETP 1, an EP group is 32 consecutive ranks."""
    job = moe_training(model="qwen-moe-24l", dp=4, pp=2, ep=8, layers=2, microbatches=2, hidden=256, ffn=256,
                       seq=256, nics_per_server=8)  # fmt: skip
    members = {f.src for f in job.flows if f.coflow == "i0.ep.dispatch.l0.m0.pp0d0t0"}
    assert members == {f"p0d0t{t}" for t in range(8)}  # TP 8 x DP 4 plane, 8 consecutive = one replica


def test_buckets_follow_megatron():
    """Megatron-Core: max(40e6, 1e6 dp) parameters per bucket on stage 0, one bucket elsewhere;
    a bucket closes once it holds at least the size (here at layer boundaries)."""
    assert megatron_bucket(16, 0, 0) == 40e6 and megatron_bucket(64, 0, 0) == 64e6
    assert megatron_bucket(16, 1, 0) == float("inf") and megatron_bucket(16, 0, 1) == float("inf")
    assert buckets([5, 4, 3, 2, 1], 15, 40) == [[5, 4, 3], [2, 1]]
    assert buckets([3, 2], 50, 40) == [[3], [2]] and buckets([3, 2, 1], 1, float("inf")) == [[3, 2, 1]]
    job = moe_training(model="gpt3-13b", dp=2, layers=8, microbatches=4, nics_per_server=2, layout="dp-outer")
    dense = {f.coflow for f in job.flows if f.coflow_type == "DP"}
    per_layer = 12 * 5120**2 // 4  # 78.6 M parameters per tensor rank: a bucket each on stage 0
    assert per_layer > 40e6
    by_stage = {p: sorted(c for c in dense if f".p{p}t0" in c) for p in range(4)}
    assert by_stage[0] == ["i0.dp.l0.p0t0", "i0.dp.l1.p0t0"]
    assert all(len(by_stage[p]) == 1 for p in (1, 2, 3))  # one bucket: starts after its first layer's backward
    first = next(f for f in job.flows if f.id == "i0.dp.l3.p1t0.s0.r0")
    assert list(first.deps) == ["i0.B.attn.l2.m3.p1d0t0"]
    one = moe_training(model="gpt3-13b", dp=2, layers=8, microbatches=4, nics_per_server=2, bucket_params=10**12)
    assert len({f.coflow for f in one.flows if f.coflow_type == "DP" and f.coflow.endswith("p0t0")}) == 1


def test_crossing_names_what_each_rank_order_puts_on_the_network():
    kw = dict(model="qwen-moe-12l", dp=8, layers=4, microbatches=4, nics_per_server=2)
    assert crossing(moe_training(**kw)) == {"PP"}  # Megatron's order: a stage (EP 8 = DP 8) is a server
    assert crossing(moe_training(**kw, layout="dp-outer")) == {"EP", "DP"}


def test_a_strided_expert_grid_puts_the_testbeds_ep_groups_across_the_stages_servers():
    """Mixtral-8x7B on the testbed (t1 p2 e8 d16, 8-GPU servers): Megatron-Core's grid makes an EP
    group 8 consecutive replicas, one server; ``expert_grid: strided`` takes them edp = 2 apart,
    4 on each of the stage's two servers. Every expert shard is still held once per group and its
    gradient reduced over the edp replicas holding it (the same routed tokens either way)."""
    kw = dict(model="mixtral-8x7b", dp=16, layers=2, microbatches=2, shrink=8, nics_per_server=2)
    groups = {}
    for grid in ("megatron", "strided"):
        job = moe_training(**kw, expert_grid=grid)
        server = {n: e.pin.server for n, e in job.endpoints.items()}
        members: dict[str, set] = {}
        for f in job.flows:
            if f.coflow_type == "EP" and not f.tags.get("metadata") and f.coflow.startswith("i0.ep.dispatch.l0.m0."):
                members.setdefault(f.coflow, set()).update((f.src, f.dst))
        groups[grid] = [sorted(m) for m in members.values()]
        spans = {len({server[r] for r in m}) for m in members.values()}
        assert spans == ({1} if grid == "megatron" else {2}), (grid, spans)
        assert sorted(r for m in members.values() for r in m) == sorted(n for n in job.endpoints if n.startswith("p0"))
    assert {f"p0d{d}t0" for d in range(0, 16, 2)} in [set(m) for m in groups["strided"]]
    with pytest.raises(SpecError) as err:
        moe_training(**kw, expert_grid="ring")
    assert err.value.field == "expert_grid"


def test_expert_tensor_parallelism_as_an_argument():
    """``etp: 1`` on TP 8 x EP 8 x DP 8 (Megatron's --expert-tensor-parallel-size 1): an EP group
    is 8 consecutive ranks, one server, and each GPU holds its expert whole, so the expert
    gradients reduced over the 8 servers are 8x the default's (ETP = TP: 1/8 of an expert each,
    edp 1, none). A value that does not divide tp is bad input naming the field."""
    kw = dict(model="mixtral-8x22b", dp=8, pp=2, layers=2, microbatches=2, hidden=512, ffn=1024, seq=256,
              nics_per_server=8)  # fmt: skip
    edp = {}
    for etp in (None, 1):
        job = moe_training(**kw, etp=etp)
        server = {n: e.pin.server for n, e in job.endpoints.items()}
        members: dict[str, set] = {}
        for f in job.flows:
            if f.coflow_type == "EP" and not f.tags.get("metadata"):
                members.setdefault(f.coflow, set()).update((f.src, f.dst))
        assert {len({server[r] for r in m}) for m in members.values()} == ({8} if etp is None else {1})
        edp[etp] = sum(f.size for f in job.flows if f.coflow.startswith("i0.edp."))
    assert edp[None] == 0 and edp[1] > 0
    job = moe_training(**kw, etp=1)
    server = {n: e.pin.server for n, e in job.endpoints.items()}
    assert all(server[f.src] != server[f.dst] for f in job.flows if f.coflow.startswith("i0.edp."))
    for bad in (3, 16, 0):
        with pytest.raises(SpecError) as err:
            moe_training(**kw, etp=bad)
        assert err.value.field == "etp"
