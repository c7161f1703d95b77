"""tc plans as data: filters classify every DSCP as the mapping says; shaping parameters."""

import random

import pytest

from railbed.errors import SpecError
from railbed.units import FRAME
from tc_policies.plan import (
    DscpPriorityPolicy,
    FifoPolicy,
    HtbClass,
    Qdisc,
    U32Filter,
    aligned_blocks,
    policy_by_name,
    shaping_params,
    validate_dscp,
)


def covered(blocks):
    return {x for x in range(64) for v, m in blocks if x & m == v}


@pytest.mark.parametrize("seed", range(30))
def test_aligned_blocks_cover_exactly(seed):
    rng = random.Random(seed)
    values = {x for x in range(64) if rng.random() < rng.random()}
    blocks = aligned_blocks(values)
    assert covered(blocks) == values
    # blocks are disjoint: each value matched once
    for x in values:
        assert sum(1 for v, m in blocks if x & m == v) == 1


def test_aligned_blocks_aggregate_class_selectors():
    assert aligned_blocks(set(range(8, 16))) == [(8, 0x38)]
    assert aligned_blocks(set(range(64))) == [(0, 0)]


@pytest.mark.parametrize("use_prio", [False, True])
def test_default_mapping_classifies_by_class_selector(use_prio):
    plan = DscpPriorityPolicy(use_prio_qdisc=use_prio).compile(100e6)
    assert [plan.classify(d) for d in range(64)] == [d >> 3 for d in range(64)]


@pytest.mark.parametrize("seed", range(10))
def test_random_mapping_classifies_as_given(seed):
    rng = random.Random(seed)
    table = tuple(rng.randrange(8) for _ in range(64))
    plan = DscpPriorityPolicy(table).compile(10e6)
    assert tuple(plan.classify(d) for d in range(64)) == table
    for f in plan.items:
        if isinstance(f, U32Filter):
            assert f.tos_mask & ~0xFC == 0 and f.tos_value & ~f.tos_mask == 0


def test_htb_priority_structure():
    plan = DscpPriorityPolicy().compile(100e6)
    classes = [c for c in plan.items if isinstance(c, HtbClass)]
    parent = classes[0]
    assert parent.rate == parent.ceil == 12_500_000
    leaves = classes[1:]
    assert len(leaves) == 8
    for leaf in leaves:
        assert leaf.ceil == parent.rate and leaf.rate <= 1000 and leaf.parent == parent.classid
    # higher class -> lower HTB prio number (served first)
    by_class = {c: next(x for x in leaves if x.classid == cid) for c, cid in plan.class_ids.items()}
    assert [by_class[c].prio for c in range(8)] == list(range(7, -1, -1))


def test_prio_qdisc_variant_structure_and_render():
    plan = DscpPriorityPolicy(use_prio_qdisc=True).compile(50e6)
    kinds = [q.kind for q in plan.items if isinstance(q, Qdisc)]
    assert kinds[:2] == ["htb", "prio"] and kinds.count("pfifo") == 8
    text = "\n".join(plan.render("rail0-eth0"))
    assert "prio bands 8" in text and "match ip dsfield 0xe0 0xe0" in text


def test_fifo_is_one_class():
    plan = FifoPolicy().compile(10e6)
    assert sum(isinstance(i, HtbClass) for i in plan.items) == 1
    assert not any(isinstance(i, U32Filter) for i in plan.items)
    assert all(plan.classify(d) == 0 for d in range(64))


@pytest.mark.parametrize("rate", [1e6, 10e6, 100e6, 500e6, 10e9])
def test_burst_is_about_a_millisecond_never_below_a_frame(rate):
    rate_b, burst, quantum, queue = shaping_params(rate)
    assert burst >= FRAME
    assert burst == max(FRAME, int(rate_b * 1e-3))
    assert FRAME <= quantum <= 200_000 and queue >= 64


def test_bad_inputs():
    with pytest.raises(SpecError):
        shaping_params(-1)
    for bad in (64, -1, 3.5, True):
        with pytest.raises(SpecError) as err:
            validate_dscp(bad, "flows[0].dscp")
        assert err.value.field == "flows[0].dscp"
    with pytest.raises(SpecError):
        DscpPriorityPolicy.from_mapping({64: 1})
    with pytest.raises(SpecError) as err:
        policy_by_name("wfq")
    assert err.value.field == "policy"
