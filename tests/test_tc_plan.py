"""tc plans as data: filters classify every DSCP as the mapping says; shaping parameters."""

import random

import pytest
import tc_reading

from railbed.errors import SpecError
from railbed.units import FRAME
from tc_policies.plan import (
    ETH_P_ARP,
    ETH_P_IP,
    DscpPriorityPolicy,
    FifoPolicy,
    HtbClass,
    Qdisc,
    U32Filter,
    U32Match,
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
    leaves = [c for c in classes[1:] if c.classid in plan.class_ids.values()]
    assert len(leaves) == 8 and len(classes) == 10  # parent, 8 DSCP classes, the ACK class
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


def test_fifo_is_one_data_class_plus_acks():
    plan = FifoPolicy().compile(10e6)
    classes = [i for i in plan.items if isinstance(i, HtbClass)]
    assert len(classes) == 3 and list(plan.class_ids) == [0]
    assert not any(isinstance(i, U32Filter) for i in plan.items)
    assert all(plan.classify(d) == 0 for d in range(64))


@pytest.mark.parametrize("policy", [FifoPolicy(), DscpPriorityPolicy(), DscpPriorityPolicy(use_prio_qdisc=True)])
def test_small_tcp_packets_go_first_in_every_policy(policy):
    """Pure ACKs (IP length < 128, protocol TCP) get a filter evaluated before any DSCP
    filter, to a class served before all data."""
    plan = policy.compile(100e6)
    acks = [i for i in plan.items if isinstance(i, U32Match) and i.protocol == ETH_P_IP]
    arps = [i for i in plan.items if isinstance(i, U32Match) and i.protocol == ETH_P_ARP]
    assert len(acks) == 1 and len(arps) == 1
    ack = acks[0]
    assert arps[0].target == ack.target  # every ARP frame (Ethernet, IPv4), to the ACKs' class
    assert "protocol arp prio 3 u32 match u32 0x00010800 0xffffffff at 0" in "\n".join(plan.render("eth0"))
    dscp_prios = {f.prio for f in plan.items if isinstance(f, U32Filter)}
    assert all(ack.prio < p for p in dscp_prios)

    def matches(length: int, proto: int) -> bool:
        header = bytes([0x45, 0, length >> 8, length & 0xFF, 0, 0, 0, 0, 64, proto, 0, 0])
        words = {o: int.from_bytes(header[o : o + 4], "big") for o in (0, 4, 8)}
        return all(words[o] & m == v for v, m, o in ack.keys)

    assert matches(52, 6) and matches(127, 6)
    assert not matches(128, 6) and not matches(1500, 6) and not matches(52, 17)
    if isinstance(policy, FifoPolicy) or not policy.use_prio_qdisc:
        target = next(c for c in plan.items if isinstance(c, HtbClass) and c.classid == ack.target)
        assert target.prio == 0
    else:
        assert ack.target == plan.class_ids[7]
    assert "match u32 0x00060000 0x00ff0000 at 8" in "\n".join(plan.render("eth0"))


def test_netem_leaves_when_delay_is_given():
    plan = FifoPolicy().compile(100e6, delay_s=2e-3)
    netem = [q for q in plan.items if isinstance(q, Qdisc) and q.kind == "netem"]
    assert len(netem) == 2 and all(q.params["delay"] == 2000 for q in netem)  # the data leaf and the ACK leaf
    # the limit also holds the packets in flight during the delay (12.5 MB/s * 2 ms / 1514 B)
    assert netem[0].params["limit"] >= 64 + 16
    assert "netem delay 2000us" in "\n".join(plan.render("eth0"))
    assert not any(q.kind == "netem" for q in FifoPolicy().compile(100e6).items if isinstance(q, Qdisc))


@pytest.mark.parametrize("rate", [1e6, 10e6, 100e6, 500e6, 10e9])
def test_burst_is_about_a_millisecond_never_below_a_frame(rate):
    rate_b, burst, quantum, queue = shaping_params(rate)
    assert burst >= FRAME
    assert burst == max(FRAME, int(rate_b * 1e-3))
    assert FRAME <= quantum <= 200_000 and queue >= 64


def test_policy_names():
    """dscp-priority is HTB prio classes whatever the kernel has; the prio qdisc is opt-in."""
    assert policy_by_name("dscp-priority") == DscpPriorityPolicy(use_prio_qdisc=False)
    assert policy_by_name("dscp-priority-prio") == DscpPriorityPolicy(use_prio_qdisc=True)
    assert policy_by_name("fifo") == FifoPolicy()


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


# ------------------------------------------- an independent reading of the plan
# tc_reading evaluates the rendered tc commands as the kernel would; these
# tests never call TcPlan.classify, so a plan that is wrong in its structure
# (bands reversed, HTB's default class, the priomap) cannot agree with itself.
DATA = 1500  # a full-size data packet: never matched by the ACK filter


def keys_by_class(plan, table):
    """{class: set of service keys of every DSCP the table maps to that class}."""
    tree = tc_reading.read(plan.render("eth0"))
    out = {}
    for dscp, cls in enumerate(table):
        out.setdefault(cls, set()).add(tc_reading.service_key(tree, tc_reading.ipv4_header(dscp, DATA)))
    return out


def assert_strict_order(plan, table):
    """Every DSCP of a class lands in one queue; a higher class is served strictly first."""
    by_class = keys_by_class(plan, table)
    for cls, keys in by_class.items():
        assert len(keys) == 1, f"class {cls} is split over queues {sorted(keys)}"
    key = {cls: keys.pop() for cls, keys in by_class.items()}
    order = sorted(key)
    for lower, higher in zip(order, order[1:]):
        assert key[higher] < key[lower], f"class {higher} {key[higher]} is not served before class {lower} {key[lower]}"


@pytest.mark.parametrize("use_prio", [False, True])
def test_rendered_plan_serves_higher_classes_first(use_prio):
    table = tuple(d >> 3 for d in range(64))
    assert_strict_order(DscpPriorityPolicy(use_prio_qdisc=use_prio).compile(100e6), table)


@pytest.mark.parametrize("use_prio", [False, True])
def test_rendered_plan_puts_dscp_zero_in_the_lowest_queue(use_prio):
    """DSCP 0 matches no DSCP filter: HTB's default class or the priomap must be the lowest."""
    tree = tc_reading.read(DscpPriorityPolicy(use_prio_qdisc=use_prio).compile(100e6).render("eth0"))
    keys = {d: tc_reading.service_key(tree, tc_reading.ipv4_header(d, DATA)) for d in range(64)}
    assert keys[0] == max(keys.values())
    assert keys[0] > keys[8] > keys[16] > keys[24] > keys[32] > keys[40] > keys[48] > keys[56]
    # the expected queues, read by hand from the module docstring
    assert keys[0] == ((0, 7) if use_prio else (7,)) and keys[56] == ((0, 0) if use_prio else (0,))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("use_prio", [False, True])
def test_rendered_random_mapping_orders_as_given(seed, use_prio):
    rng = random.Random(seed)
    table = tuple(rng.randrange(8) for _ in range(64))
    assert_strict_order(DscpPriorityPolicy(table, use_prio_qdisc=use_prio).compile(10e6), table)


@pytest.mark.parametrize("policy", [FifoPolicy(), DscpPriorityPolicy(), DscpPriorityPolicy(use_prio_qdisc=True)])
def test_rendered_plan_sends_acks_no_later_than_any_data(policy):
    tree = tc_reading.read(policy.compile(100e6).render("eth0"))
    ack = tc_reading.service_key(tree, tc_reading.ipv4_header(0, 52))
    data = [tc_reading.service_key(tree, tc_reading.ipv4_header(d, DATA)) for d in range(64)]
    assert all(ack <= k for k in data)
    assert tc_reading.service_key(tree, tc_reading.ipv4_header(0, 52, proto=17)) == data[0]  # small UDP: data
    assert tc_reading.service_key(tree, tc_reading.ARP_FRAME) == ack  # ARP: with the ACKs, before all data


def test_fifo_rendered_plan_is_one_queue_for_every_dscp():
    tree = tc_reading.read(FifoPolicy().compile(100e6).render("eth0"))
    assert len({tc_reading.service_key(tree, tc_reading.ipv4_header(d, DATA)) for d in range(64)}) == 1


@pytest.mark.parametrize("policy", [FifoPolicy(), DscpPriorityPolicy(), DscpPriorityPolicy(use_prio_qdisc=True)])
def test_every_packet_meets_the_link_latency(policy):
    """With a delay, whatever queue a packet ends in is a netem of that delay: data of every
    DSCP, pure ACKs and SYNs (small TCP) and small UDP. A leaf without it lets the handshake
    and the ACK clock skip the latency, so TCP sees half the RTT."""
    tree = tc_reading.read(policy.compile(100e6, delay_s=2e-3).render("eth0"))
    packets = [tc_reading.ipv4_header(d, DATA) for d in range(64)]
    packets += [tc_reading.ipv4_header(d, 52) for d in (0, 46, 56)]
    packets += [tc_reading.ipv4_header(0, 60, proto=17)]
    for header in packets:
        leaf = tc_reading.leaf_qdisc(tree, header)
        assert leaf is not None and leaf.kind == "netem", f"{header.hex()} ends in {leaf}"
        assert leaf.params["delay"] == ["2000us"]
