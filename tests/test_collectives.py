"""Collective algorithms (workloads/collectives.py): each one's fluid makespan on a uniform cluster
against its alpha-beta closed form (per step: the latency of its 2 links, plus the bytes through its
busiest port in full frames over the NIC rate, railbed/units.py), within 1e-6; what is not defined
is refused; a run's summary shows nccl-tests' algbw and busbw."""

import math

import pytest

from railbed.errors import SpecError
from railbed.metrics import METRICS, collective_bandwidths
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import by_name
from simulator import simulate
from workloads import generate
from workloads.collectives import ALGORITHMS, DEFINED, OPERATIONS, bus_factor

B, LAT = 10e9, 1e-6
A = 2 * LAT  # alpha: a flow crosses 2 links (NIC to switch, switch to NIC)
S = 3 << 20  # bytes; n = 8 divides it, and 3 MiB is not a whole number of segments


def t(payload: int) -> float:
    """beta x bytes: ``payload`` in full frames (1514 on the wire per 1448 of payload) at B."""
    return 8 * wire_bytes(payload) / B


def up(a: int, b: int) -> int:
    return -(-a // b)


def star(n: int) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": n, "gpus": 1, "nic_rate": B}], "fabric": {"type": "single_switch", "latency": LAT}}
    )


def rails(servers: int, g: int) -> ClusterSpec:
    return ClusterSpec.from_dict({
        "servers": [{"count": servers, "gpus": g, "nics": g, "nic_rate": B}],
        "fabric": {"type": "rail_optimized", "rails": g, "spines": 1, "latency": LAT},
    })  # fmt: skip


def makespan(cluster: ClusterSpec, **args) -> float:
    job = generate("collective", {"size": S, **args})
    return simulate(job, by_name("fifo"), cluster).makespan


def ring(op: str, n: int, S: int = S) -> float:
    """n - 1 steps (2 (n - 1) for all-reduce) of S / n to the next rank: every port carries one flow."""
    return (2 if op == "all-reduce" else 1) * (n - 1) * (A + t(up(S, n)))


def halving_doubling(op: str, n: int, S: int = S) -> float:
    """log2 n steps each: halving exchanges S / 2^(k+1), doubling S 2^k / n (pairs: one flow per port)."""
    k = range(int(math.log2(n)))
    halving = sum(A + t(up(S, 2 << i)) for i in k)
    doubling = sum(A + t(up(S << i, n)) for i in k)
    return {"reduce-scatter": halving, "all-gather": doubling, "all-reduce": halving + doubling}[op]


def direct(op: str, n: int, S: int = S) -> float:
    """One step in which every rank's NIC carries n - 1 flows of S / n (the root's n - 1 of S for a
    broadcast); all-reduce is two such steps."""
    if op == "broadcast":
        return A + (n - 1) * t(S)
    return (2 if op == "all-reduce" else 1) * (A + (n - 1) * t(up(S, n)))


@pytest.mark.parametrize("op", DEFINED["ring"])
@pytest.mark.parametrize("n", [4, 8])
def test_ring(op, n):
    if op == "broadcast":  # a chain, 4 chunks pipelined: n - 1 + 3 waves, each one chunk per link
        closed = (n - 1 + 3) * (A + t(up(S, 4)))
        assert makespan(star(n), operation=op, ranks=n, algorithm="ring", chunks=4) == pytest.approx(closed, rel=1e-6)
    else:
        assert makespan(star(n), operation=op, ranks=n, algorithm="ring") == pytest.approx(ring(op, n), rel=1e-6)


@pytest.mark.parametrize("op", DEFINED["halving-doubling"])
@pytest.mark.parametrize("n", [4, 8])
def test_halving_doubling(op, n):
    got = makespan(star(n), operation=op, ranks=n, algorithm="halving-doubling")
    assert got == pytest.approx(halving_doubling(op, n), rel=1e-6)


@pytest.mark.parametrize("op", OPERATIONS)
@pytest.mark.parametrize("n", [4, 8])
def test_direct(op, n):
    assert makespan(star(n), operation=op, ranks=n, algorithm="direct") == pytest.approx(direct(op, n), rel=1e-6)


def test_double_binary_tree_on_four_ranks():
    """Trees [0, 1, 2, 3] and [3, 2, 1, 0] (heaps), S / 2 each. All-reduce, derived by hand:
    up 1: 3->1, 2->0 (tree 0), 1->3, 0->2 (tree 1), every port one flow: t(S/2); up 2: 1->0, 2->3:
    t(S/2); down 1: 0->1, 0->2 and 3->2, 3->1, two flows on each of those ports: 2 t(S/2); down 2:
    1->3, 2->0: t(S/2); 4 latencies. Broadcast from rank 0, trees [0, 1, 2, 3] and [0, 3, 2, 1]:
    0 sends to 1, 2 (tree 0) and 3, 2 (tree 1) at once, four flows on its NIC: 4 t(S/2); then 1->3
    and 3->1: t(S/2); 2 latencies."""
    half = up(S, 2)
    got = makespan(star(4), operation="all-reduce", ranks=4, algorithm="tree")
    assert got == pytest.approx(4 * A + 5 * t(half), rel=1e-6)
    got = makespan(star(4), operation="broadcast", ranks=4, algorithm="tree")
    assert got == pytest.approx(2 * A + 5 * t(half), rel=1e-6)


def test_pipelined_tree_broadcast_on_two_ranks():
    """Two ranks: each tree is one hop 0 -> 1 carrying S / 2 in c chunks; both share 0's NIC, so the
    c chunks of both trees take 2 c t(S / 2c) back to back, plus one latency per chunk in a chain."""
    for c in (1, 4):
        got = makespan(star(2), operation="broadcast", ranks=2, algorithm="tree", chunks=c)
        assert got == pytest.approx(c * (A + 2 * t(up(up(S, 2), c))), rel=1e-6)


@pytest.mark.parametrize("op", DEFINED["hierarchical"])
@pytest.mark.parametrize("across", ["ring", "halving-doubling", "direct"])
def test_hierarchical_on_a_rail_optimized_cluster(op, across):
    """4 servers x 4 GPUs: the steps inside a server are same-server flows (no network, no time
    without a hardware model), so the time is the algorithm across servers on each rail over S / 4
    bytes, the four rails in parallel (a rail switch per rail: two links per flow)."""
    g, servers = 4, 4
    inner = {"ring": ring, "halving-doubling": halving_doubling, "direct": direct}[across]
    closed = inner(op, servers, up(S, g))
    got = makespan(rails(servers, g), operation=op, ranks=servers * g, algorithm="hierarchical",
                   gpus_per_server=g, across=across)  # fmt: skip
    assert got == pytest.approx(closed, rel=1e-6)


def test_every_algorithm_has_a_closed_form_test():
    tested = {"ring", "halving-doubling", "direct", "tree", "hierarchical"}
    assert tested == set(ALGORITHMS)


@pytest.mark.parametrize(
    "args, field, says",
    [
        ({"operation": "all-to-all", "algorithm": "ring"}, "job.args.algorithm", "ring all-to-all is not defined"),
        ({"operation": "all-gather", "algorithm": "tree"}, "job.args.algorithm", "tree all-gather is not defined"),
        ({"operation": "broadcast", "algorithm": "halving-doubling"}, "job.args.algorithm", "not defined"),
        ({"operation": "all-to-all", "algorithm": "hierarchical", "gpus_per_server": 2}, "job.args.algorithm", ""),
        ({"operation": "broadcast", "algorithm": "hierarchical", "gpus_per_server": 2}, "job.args.algorithm", ""),
        ({"algorithm": "halving-doubling", "ranks": 6}, "job.args.ranks", "power of two"),
        ({"algorithm": "hierarchical", "ranks": 6, "gpus_per_server": 4}, "job.args.gpus_per_server", "whole servers"),
        ({"algorithm": "ring", "chunks": 4}, "job.args.chunks", "only tree and ring broadcast"),
        ({"operation": "gather"}, "job.args.operation", "unknown collective"),
        ({"algorithm": "bruck"}, "job.args.algorithm", "unknown algorithm"),
    ],
)
def test_what_is_not_defined_is_refused_naming_the_argument(args, field, says):
    with pytest.raises(SpecError) as e:
        generate("collective", {"ranks": 8, **args})
    assert e.value.field == field and says in e.value.message


def test_the_summary_shows_algbw_and_busbw_as_nccl_tests_defines_them():
    for op in ("all-reduce", "all-gather", "broadcast"):
        job = generate("collective", {"operation": op, "size": S, "ranks": 8, "algorithm": "direct"})
        res = simulate(job, by_name("fifo"), star(8))
        (row,) = collective_bandwidths(res)
        assert row["algbw"] == pytest.approx(S / res.makespan, rel=1e-9)
        factor = {"all-reduce": 2 * 7 / 8, "all-gather": 7 / 8, "broadcast": 1.0}[op]
        assert factor == bus_factor(op, 8)
        assert row["busbw"] == pytest.approx(row["algbw"] * factor, rel=1e-12)
        assert METRICS["busbw"](res) == row["busbw"]
        line = next(x for x in res.summary().splitlines() if x.strip().startswith("collective"))
        assert f"algbw {S / res.makespan / 1e9:.3f} GB/s" in line and f"busbw {row['busbw'] / 1e9:.3f} GB/s" in line
    # a job without collective tags has none
    assert math.isnan(METRICS["busbw"](simulate(generate("all_to_all", {"n": 2}), by_name("fifo"), star(2))))


def test_hybrid_parallel_takes_its_dp_all_reduce_algorithm():
    """The default is the ring it always had (same items); ``collective`` picks another, tagged."""
    base = {"dp": 4, "pp": 2, "microbatches": 2, "gradient": "8MB", "layout": "rail"}
    ring_job = generate("hybrid_parallel", base)
    tagged = generate("hybrid_parallel", {**base, "collective": {"algorithm": "ring"}})
    assert ring_job.items.keys() == tagged.items.keys()
    assert all(f.tags == {} for f in ring_job.flows)
    dp = [f for f in tagged.flows if f.coflow_type == "DP"]
    assert dp and all(f.tags["algorithm"] == "ring" and f.tags["bytes"] == 8 * 10**6 for f in dp)
    tree = generate("hybrid_parallel", {**base, "collective": {"algorithm": "tree", "chunks": 2}})
    dp = [f for f in tree.flows if f.coflow_type == "DP"]
    # pp stages x 2 trees x 2 chunks x (up, down) x 3 edges of a 4-rank tree
    assert len(dp) == 2 * 2 * 2 * 2 * 3 and {f.tags["algorithm"] for f in dp} == {"tree"}
    for bad, field in (({"algorithm": "tree", "chunk": 2}, "job.args.collective.chunk"),
                       ({"algorithm": "halving-doubling"}, "job.args.collective.algorithm")):  # fmt: skip
        with pytest.raises(SpecError) as e:
            generate("hybrid_parallel", {**base, "dp": 3, "collective": bad})
        assert e.value.field == field
