"""Hermod's pure functions (schedulers/hermod_alg.py): the DSCP codec, the priority order of
Tables 5.3-5.4 (seed 004, §5.3.1), and Alg. 3's EP matching (§5.3.2)."""

import itertools
import random

import numpy as np
import pytest

from schedulers.hermod_alg import (
    CTYPES,
    Factors,
    _phases,
    consumer_key,
    decode,
    dscp_of,
    encode,
    factors_of,
    matching_phases,
    phases_reference,
    phases_time,
    port_matching,
    priority_key,
    queue_level,
    queued_dscp,
)


def test_codec_round_trips_all_64_values():
    seen = set()
    for dscp in range(64):
        fields = decode(dscp)
        assert encode(*fields) == dscp
        seen.add(fields)
    assert len(seen) == 64
    for bad in ((8, 0, 0), (0, 2, 0), (0, 0, 4), (-1, 0, 0)):
        with pytest.raises(ValueError):
            encode(*bad)
    with pytest.raises(ValueError):
        decode(64)


def test_fields_sit_where_section_5_4_says():
    assert encode(7, 0, 0) >> 3 == 7  # MID in the top three bits: the switch's class (dscp >> 3)
    assert encode(0, 1, 0) == 4 and encode(0, 0, 3) == 3


def first(a: Factors, b: Factors, interleaved: bool = False) -> Factors:
    return min(a, b, key=lambda f: priority_key(f, interleaved))


@pytest.mark.parametrize("interleaved", [False, True])
def test_table_5_3_cases(interleaved):
    # Case I: PP of microbatch 0 before EP of microbatch 1 (lower MID first)
    assert first(Factors(0, "PP", 2), Factors(1, "EP", 1), interleaved) == Factors(0, "PP", 2)
    # Case II: EP and PP before DP (DP carries the last MID of its iteration)
    for t in ("EP", "PP"):
        assert first(Factors(3, t, 5), Factors(3, "DP", 1), interleaved) == Factors(3, t, 5)
    # Case III: next iteration's microbatch-0 EP/PP of a front layer before a later layer's gather
    ag = factors_of("DP", 3, 4, "ag")
    assert ag == Factors(0, "DP", 4)
    assert first(Factors(0, "EP", 1), ag, interleaved) == Factors(0, "EP", 1)
    # lower LID first among equal MID and CType
    assert first(Factors(2, "EP", 3), Factors(2, "EP", 1), interleaved) == Factors(2, "EP", 1)


def test_table_5_4_conflicts():
    # MID + LID, no DP: MID wins (layer 2 of microbatch 0 before layer 1 of microbatch 1)
    assert first(Factors(0, "EP", 2), Factors(1, "EP", 1)) == Factors(0, "EP", 2)
    # MID + LID with DP: the paper's example, a layer-2 DP (all-gather, "microbatch-1 of the
    # next iteration") before a layer-1 EP of microbatch 2
    ag = factors_of("DP", 3, 2, "ag")
    assert first(ag, Factors(1, "EP", 1)) == ag
    # reduce-scatter keeps the last MID: after every EP/PP of its own iteration
    rs = factors_of("DP", 3, 2, "rs")
    assert rs == Factors(3, "DP", 2) and first(rs, Factors(3, "PP", 7)) == Factors(3, "PP", 7)


def test_interleaved_orders_ep_before_pp_before_dp():
    ep, pp, dp = Factors(1, "EP", 3), Factors(1, "PP", 0), Factors(1, "DP", 0)
    assert sorted([dp, pp, ep], key=lambda f: priority_key(f, True)) == [ep, pp, dp]
    # 1F1B: EP and PP tie on CType, LID decides
    assert sorted([dp, ep, pp], key=priority_key) == [pp, ep, dp]


@pytest.mark.parametrize("interleaved", [False, True])
def test_dscp_is_a_monotone_quantization_of_the_key(interleaved):
    count = 6  # layers held by the sending GPU
    combos = [Factors(m, c, lid) for m in range(8) for c in CTYPES for lid in range(count)]
    code = {f: dscp_of(f, f.lid, count, interleaved) for f in combos}
    for a, b in itertools.combinations(combos, 2):
        if interleaved and a.mid == b.mid and {a.ctype, b.ctype} == {"PP", "DP"}:
            assert (code[a] ^ code[b]) >> 2 == 0  # the one documented tie: same MID and CType bits
            continue
        ka, kb = priority_key(a, interleaved), priority_key(b, interleaved)
        if ka < kb:
            assert code[a] >= code[b], (a, b)
        elif kb < ka:
            assert code[b] >= code[a], (a, b)
    # the first microbatches' EP coflows land in distinct switch classes, highest first
    assert [code[Factors(m, "EP", 0)] >> 3 for m in range(8)] == list(range(7, -1, -1))


def test_consumer_key_puts_dp_after_its_iteration_and_as_microbatch_0_of_the_next():
    rs, ag = consumer_key("DP", 0, 7, 9), consumer_key("DP", 0, 7, 2)
    assert ag < rs  # between DP coflows, the layer consumed first
    for ctype in ("EP", "PP"):
        assert consumer_key(ctype, 0, 7, 30) < ag  # the cooldown of iteration 0 first
        assert consumer_key(ctype, 1, 0, 31) < ag  # the next iteration's microbatch 0 first (Case III)
        assert ag < consumer_key(ctype, 1, 1, 0)  # before its microbatch 1 (Table 5.4, MID + LID)
    assert consumer_key(None, 0, 2, 1) == consumer_key("EP", 0, 2, 1)  # metadata counts as EP


@pytest.mark.parametrize("interleaved", [False, True])
def test_queues_keep_the_key_order_of_flows_that_meet(interleaved):
    """Flows that can share a port: EP/PP of one iteration, and DP of that iteration or the one
    before. Higher key never gets a higher queue, except where the docstring says the switches
    lose the order: DP of iteration 0 against iteration 1's microbatches >= 1."""
    count, mids = 4, range(10)
    flows = [(c, 1, m, lid) for c in ("EP", "PP") for m in mids for lid in range(count)]
    flows += [("DP", it, 9, lid) for it in (0, 1) for lid in range(count)]
    queue = {f: queued_dscp(Factors(f[2], f[0], f[3]), f[3], count, interleaved) >> 3 for f in flows}
    lost = set()
    for a, b in itertools.permutations(flows, 2):
        if consumer_key(*a, interleaved) < consumer_key(*b, interleaved) and queue[a] < queue[b]:
            lost.add((a[0], a[1], b[0], b[2] >= 1))
    assert lost == {("DP", 0, c, True) for c in ("EP", "PP")}
    assert {queue[f] for f in flows if f[0] == "DP"} == {0}
    assert queue[("EP", 1, 0, 0)] == 7 and queue[("PP", 1, 0, 0)] == (7 if not interleaved else 6)
    assert queue_level(9, "EP", interleaved) == 1  # positions from 6 on share the lowest EP/PP queue


def test_queue_level_rejects_bad_factors():
    with pytest.raises(ValueError):
        queue_level(0, "TP")
    with pytest.raises(ValueError):
        queue_level(-1, "EP")


def brute_force(matrix: np.ndarray) -> int:
    """Least total time of whole flows packed into matchings run one after another
    (each round as long as its largest flow): every partition into matchings, searched."""
    flows = sorted(((int(matrix[i, j]), i, j) for i, j in zip(*np.nonzero(matrix))), reverse=True)
    best = [sum(b for b, _, _ in flows)]

    def place(k: int, rounds: list[tuple[set, set, int]], cost: int) -> None:
        if cost >= best[0]:
            return
        if k == len(flows):
            best[0] = cost
            return
        b, i, j = flows[k]
        for r, (snd, rcv, top) in enumerate(rounds):
            if i not in snd and j not in rcv:
                rounds[r] = (snd | {i}, rcv | {j}, max(top, b))
                place(k + 1, rounds, cost + max(0, b - top))
                rounds[r] = (snd, rcv, top)
        rounds.append(({i}, {j}, b))
        place(k + 1, rounds, cost + b)
        rounds.pop()

    place(0, [], 0)
    return best[0]


def random_matrix(rng, n: int, skew: float = 1.0) -> np.ndarray:
    m = (rng.pareto(skew, size=(n, n)) * 1000).astype(np.int64) + rng.integers(0, 2, size=(n, n))
    np.fill_diagonal(m, 0)
    return m


def test_subphases_carry_exactly_the_matrix_and_are_matchings():
    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 8, 16):
        for _ in range(5):
            m = random_matrix(rng, n)
            phases = matching_phases(m)
            got = np.zeros_like(m)
            for phase in phases:
                assert len({i for i, _, _ in phase}) == len(phase) == len({j for _, j, _ in phase})
                assert all(b > 0 for _, _, b in phase)
                for i, j, b in phase:
                    got[i, j] += b
            assert (got == m).all()
            lower = max(m.sum(0).max(), m.sum(1).max())
            assert phases_time(phases) >= lower


def _alg3_matrices(rng: np.random.Generator, count: int):
    """Random EP matrices with many ties: small counts, on/off large ones, all equal, dense 40-bit."""
    for k in range(count):
        n = int(rng.integers(2, 12))
        if k % 4 == 0:
            m = rng.integers(0, 4, (n, n))
        elif k % 4 == 1:
            m = rng.integers(0, 2, (n, n)) * rng.integers(1, 1 << 30, (n, n))
        elif k % 4 == 2:
            m = np.full((n, n), int(rng.integers(1, 1000)))
        else:
            m = rng.integers(0, 1 << 40, (n, n)) * (rng.random((n, n)) < 0.7)
        m = m.astype(np.int64)
        np.fill_diagonal(m, 0)
        yield m


def test_the_numba_loop_takes_scipys_matching_at_every_subphase():
    """Alg. 3's loop in numba (``_phases_kernel``, its own shortest augmenting path solver) against
    its twin over scipy's ``linear_sum_assignment``: the same matching at every sub-phase, ties
    included (several optimal matchings at most steps of these matrices), so the same sub-phases."""
    rng = np.random.default_rng(7)
    for m in _alg3_matrices(rng, 4000):
        assert list(_phases(m)) == list(phases_reference(m)), m.tolist()


def test_subphases_no_worse_than_brute_force_on_small_matrices():
    rng = np.random.default_rng(11)
    for n in (2, 3, 4):
        for _ in range(6 if n < 4 else 3):
            m = random_matrix(rng, n)
            assert phases_time(matching_phases(m)) <= brute_force(m), m


def test_port_matching_with_a_gpu_per_port_is_alg3_chained_per_sender_and_receiver():
    m = np.array([[0, 5, 3], [2, 0, 4], [1, 1, 0]])
    flows = [(i, j, int(m[i, j])) for i in range(3) for j in range(3) if m[i, j]]
    pieces = port_matching(flows)
    phases = matching_phases(m)
    got = sorted((k, flows[n][0], flows[n][1], b) for n, mine in enumerate(pieces) for k, b, _ in mine)
    assert got == sorted((k, i, j, b) for k, phase in enumerate(phases) for i, j, b in phase)
    for n, mine in enumerate(pieces):
        for k, _, deps in mine:
            for nn, kk in deps:
                assert kk < k and (flows[nn][0] == flows[n][0] or flows[nn][1] == flows[n][1])
    assert all(not deps for mine in pieces for k, _, deps in mine if k == 0)


def test_port_matching_over_shared_ports_carries_each_flow_in_port_matchings():
    """Several flows per port pair (GPUs behind one NIC): per sub-phase every port sends to one
    port and receives from one, each flow's pieces add up to it, and a piece waits only for the
    previous sub-phase's pieces of its own source or destination port."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        ports = int(rng.integers(2, 6))
        flows = []
        for _ in range(int(rng.integers(1, 25))):
            s, d = rng.choice(ports, size=2, replace=False)
            flows.append((f"nic{s}", f"nic{d}", int(rng.integers(0, 5000))))
        pieces = port_matching(flows)
        assert [sum(b for _, b, _ in mine) for mine in pieces] == [b for _, _, b in flows]
        by_phase = {}
        for n, mine in enumerate(pieces):
            assert all(b > 0 for _, b, _ in mine)
            for k, _, deps in mine:
                by_phase.setdefault(k, set()).add(flows[n][:2])
                for nn, kk in deps:
                    assert kk < k and (flows[nn][0] == flows[n][0] or flows[nn][1] == flows[n][1])
        for pairs in by_phase.values():
            assert len({s for s, _ in pairs}) == len(pairs) == len({d for _, d in pairs})
    with pytest.raises(ValueError):
        port_matching([("a", "a", 1)])


def test_matching_rejects_bad_matrices():
    for bad in ([[1, 0], [0, 0]], [[0, -1], [0, 0]], [[0, 1, 2]]):
        with pytest.raises(ValueError):
            matching_phases(bad)


def test_port_matching_batch_is_each_coflow_alone():
    """Alg. 3 on many coflows at once (the compact engine's form) gives every coflow the pieces,
    phases, sizes and dependencies it gets alone, its flows and pieces numbered after the earlier
    coflows'; ports a flow per pair or shared (then a flow is split where a portion ends)."""
    from schedulers.hermod_alg import port_matching_arrays, port_matching_batch

    rng = random.Random(7)
    coflows = []
    for k in range(40):
        ports = rng.randint(2, 6)
        pairs = [(s, d) for s in range(ports) for d in range(ports) if s != d]
        if k % 2:  # shared ports: several flows per pair
            pairs = [rng.choice(pairs) for _ in range(rng.randint(1, 12))]
        coflows.append(([f"p{s}" for s, _ in pairs], [f"p{d}" for _, d in pairs],
                        [rng.choice([0, rng.randint(1, 10**6)]) for _ in pairs]))  # fmt: skip
    # coflows again (the batch keeps a matrix's sub-phases): as they were, and with other port names
    coflows += [coflows[3], coflows[4], ([s.replace("p", "q") for s in coflows[6][0]],
                                        [d.replace("p", "q") for d in coflows[6][1]], coflows[6][2])]  # fmt: skip
    pc, first = port_matching_batch(coflows)
    base = 0
    for c, (src, dst, size) in enumerate(coflows):
        one, a, b = port_matching_arrays(src, dst, size), first[c], first[c + 1]
        assert np.array_equal(pc.flow[a:b] - base, one.flow) and np.array_equal(pc.size[a:b], one.size)
        assert np.array_equal(pc.phase[a:b], one.phase)
        assert np.array_equal(pc.dep_ptr[a : b + 1] - pc.dep_ptr[a], one.dep_ptr)
        assert np.array_equal(pc.dep[pc.dep_ptr[a] : pc.dep_ptr[b]] - a, one.dep)
        assert [sum(int(x) for x in one.size[one.flow == n]) for n in range(len(src))] == list(size)
        base += len(src)
