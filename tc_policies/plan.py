"""tc configurations as data.

A *policy* (what a researcher chooses: FIFO, DSCP strict priority) compiles,
for one egress port of a given real rate, into a :class:`TcPlan`: an ordered
list of qdiscs, classes and filters. A plan is applied with pyroute2
(:mod:`tc_policies.netlink`) or rendered as the equivalent ``tc`` commands
for humans (:meth:`TcPlan.render`). Nothing here needs root.

Shaping
    HTB on every egress port: a parent class at the link rate, burst and
    cburst about 1 ms of bytes (never below one full frame), quantum the
    burst clamped to [frame, 200000] bytes (the kernel's HTB warns above
    200000). "Frame" is the fabric's full-size frame (``frame``: MTU + 14
    bytes; 1514 by default, 9014 on a jumbo fabric). Leaf queues are ``pfifo`` of ``max(64, 5 ms of bytes)``
    packets; the papers are silent on switch buffers, this is our choice.
    Host NIC ports get ``queue_packets`` = 1000 instead (the kernel's default
    ``txqueuelen``): a host's own queue must hold what TCP small queues let a
    socket put there (up to 1 MB), or the sender drops its own packets.
TCP ACKs and ARP
    Every policy gives pure TCP ACKs (TCP packets shorter than 128 bytes) and
    ARP a leaf of their own served before all data (HTB prio 0; the top band of
    ``prio``). Without it, ACKs of a flow queue behind the data of the
    reverse direction and TCP's ACK clock, not the link, limits flows that
    meet head-on (measured: 5-25 % slower); the fluid model the simulator
    shares with us has no ACKs at all.
Link latency
    ``compile(rate, delay_s)`` with ``delay_s > 0`` makes every leaf queue a
    ``netem delay`` qdisc (its limit grows by the packets in flight during
    the delay). Only where the kernel has netem; otherwise the run-time's
    agents add the latency (see ``emulator.runtime``).
DSCP strict priority (8 classes)
    class ``c`` (0 lowest .. 7 highest) holds the DSCP values the mapping
    gives it (default ``dscp >> 3``, the class-selector bits). With only HTB:
    one leaf per class under the parent, ``rate`` tiny (8 kbit/s), ``ceil``
    the link, HTB ``prio = 7 - c``, u32 filters on the DS field. This is the
    default on every kernel. Opt-in where the kernel has ``prio``
    (``use_prio_qdisc``, policy ``dscp-priority-prio``): HTB shapes, a child
    ``prio`` qdisc with 8 bands gives strict priority, the same u32 filters
    pick the band.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Union

from railbed.errors import SpecError
from railbed.units import FRAME

TOS_WORD_SHIFT = 16  # the TOS byte is bits 16..23 of the IPv4 header's first word
DS_MASK = 0xFC
PRIORITY_CLASSES = 8
LEAF_MIN_RATE = 1000  # bytes/s: the "tiny" guaranteed rate of a priority leaf (8 kbit/s)
# The burst of a leaf's own tiny rate: one frame. HTB stores burst / rate as a 32-bit tick count
# (pyroute2's calc_xmittime: 2.3e7 ticks for a frame at 1000 B/s), so the link's 1 ms burst at
# 1000 B/s overflowed it above ~2.2 Gbit/s real (struct.error in pyroute2: examples/dgtp-testbed.yaml
# at k = 1, bench_platform at 4000 Mbit/s). Leaves borrow up to the link rate with ``cburst`` (the
# link's burst), which is what shapes them. Rates themselves above 32 bits of bytes/s go as HTB's
# 64-bit attributes (pyroute2 does it).
LEAF_BURST = FRAME  # at the default MTU; a policy's ``frame`` replaces it
MAX_QUANTUM = 200_000


def handle(major: int, minor: int = 0) -> int:
    return (major << 16) | minor


def fmt_handle(h: int) -> str:
    major, minor = h >> 16, h & 0xFFFF
    return f"{major:x}:{minor:x}" if minor else f"{major:x}:"


@dataclass(frozen=True)
class Qdisc:
    kind: str  # "htb", "pfifo", "prio", "netem"
    handle: int
    parent: int | None  # None = root
    params: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class HtbClass:
    classid: int
    parent: int
    rate: int  # bytes/s
    ceil: int  # bytes/s
    burst: int  # bytes
    cburst: int  # bytes
    quantum: int  # bytes
    prio: int = 0


@dataclass(frozen=True)
class U32Filter:
    """Match ``(tos & mask) == value`` on the IPv4 TOS byte and send to ``target``."""

    parent: int
    prio: int
    tos_value: int
    tos_mask: int
    target: int

    @property
    def key(self) -> tuple[int, int, int]:
        """(value, mask, offset) of the 32-bit u32 key."""
        return self.tos_value << TOS_WORD_SHIFT, self.tos_mask << TOS_WORD_SHIFT, 0

    def matches(self, dscp: int) -> bool:
        return ((dscp << 2) & self.tos_mask) == self.tos_value


ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806


@dataclass(frozen=True)
class U32Match:
    """A u32 filter on ``protocol`` frames whose every ``(value, mask, offset)`` 32-bit key must match."""

    parent: int
    prio: int
    keys: tuple[tuple[int, int, int], ...]
    target: int
    protocol: int = ETH_P_IP


ACK_MAX_LENGTH = 128  # IP total length below this: a pure ACK (with options) or a tiny segment
# IPv4 total length (bytes 2-3 of word 0) < 128 and protocol (byte 9, word 8) == TCP
SMALL_TCP_KEYS = ((0x00000000, 0x0000FF80, 0), (0x00060000, 0x00FF0000, 8))
# ARP's hardware type Ethernet (bytes 0-1) and protocol type IPv4 (bytes 2-3): every ARP frame here.
# (An all-zero key, "match anything", is mangled by pyroute2's u32 encoder.)
ARP_KEYS = ((0x00010800, 0xFFFFFFFF, 0),)
ACK_FILTER_PRIO = 1
DSCP_FILTER_PRIO = 2
ARP_FILTER_PRIO = 3  # its own: a u32 priority holds one protocol

TcItem = Union[Qdisc, HtbClass, U32Filter, U32Match]


@dataclass(frozen=True)
class TcPlan:
    """An ordered tc configuration for one port; ``classes`` maps priority class to classid."""

    items: tuple[TcItem, ...]
    policy: str
    rate_bps: float
    class_ids: dict[int, int] = field(default_factory=dict, hash=False)

    def render(self, dev: str) -> list[str]:
        """The equivalent ``tc`` commands (for humans and docs; never executed)."""
        out = []
        for it in self.items:
            if isinstance(it, Qdisc):
                where = "root" if it.parent is None else f"parent {fmt_handle(it.parent)}"
                opts = " ".join(_render_param(k, v) for k, v in it.params.items())
                out.append(f"tc qdisc add dev {dev} {where} handle {fmt_handle(it.handle)} {it.kind} {opts}".rstrip())
            elif isinstance(it, HtbClass):
                out.append(
                    f"tc class add dev {dev} parent {fmt_handle(it.parent)} classid {fmt_handle(it.classid)} "
                    f"htb rate {it.rate * 8}bit ceil {it.ceil * 8}bit burst {it.burst}b cburst {it.cburst}b "
                    f"quantum {it.quantum} prio {it.prio}"
                )
            elif isinstance(it, U32Match):
                keys = " ".join(f"match u32 {v:#010x} {m:#010x} at {o}" for v, m, o in it.keys)
                proto = "arp" if it.protocol == ETH_P_ARP else "ip"
                out.append(
                    f"tc filter add dev {dev} parent {fmt_handle(it.parent)} protocol {proto} prio {it.prio} "
                    f"u32 {keys} flowid {fmt_handle(it.target)}"
                )
            else:
                out.append(
                    f"tc filter add dev {dev} parent {fmt_handle(it.parent)} protocol ip prio {it.prio} "
                    f"u32 match ip dsfield {it.tos_value:#04x} {it.tos_mask:#04x} flowid {fmt_handle(it.target)}"
                )
        return out

    def classify(self, dscp: int) -> int:
        """The priority class a packet with ``dscp`` lands in (evaluates the filters)."""
        filters = sorted((f for f in self.items if isinstance(f, U32Filter)), key=lambda f: f.prio)
        by_target = {cid: c for c, cid in self.class_ids.items()}
        for flt in filters:
            if flt.matches(dscp):
                return by_target[flt.target]
        return 0


def _render_param(key: str, value: object) -> str:
    if key == "default":
        return f"default {value:x}"
    if key == "delay":
        return f"delay {value}us"
    if key == "priomap":
        return "priomap " + " ".join(str(v) for v in value)
    return f"{key} {value}"


# ----------------------------------------------------------------- shaping
def shaping_params(rate_bps: float, frame: int = FRAME) -> tuple[int, int, int, int]:
    """(rate bytes/s, burst bytes, quantum bytes, leaf queue packets) for a real rate and the
    fabric's full-size ``frame`` (bytes)."""
    if not rate_bps > 0:
        raise SpecError("rate", f"must be positive, got {rate_bps!r}")
    rate = max(1, int(round(rate_bps / 8)))
    burst = max(frame, int(rate * 1e-3))
    quantum = min(MAX_QUANTUM, max(frame, burst))
    queue = max(64, int(rate * 5e-3 / frame))
    return rate, burst, quantum, queue


def leaf_queue(handle_: int, parent: int, queue: int, rate: int, delay_s: float, frame: int = FRAME) -> Qdisc:
    """The leaf FIFO of a class: ``pfifo``, or ``netem`` holding packets ``delay_s`` long."""
    if delay_s <= 0:
        return Qdisc("pfifo", handle_, parent, {"limit": queue})
    in_flight = int(rate * delay_s / frame) + 1
    return Qdisc("netem", handle_, parent, {"delay": int(round(delay_s * 1e6)), "limit": queue + in_flight})


def validate_dscp(dscp: object, field_name: str = "dscp") -> int:
    if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
        raise SpecError(field_name, f"DSCP must be a whole number in 0..63, got {dscp!r}")
    return dscp


def aligned_blocks(values: set[int], width: int = 6) -> list[tuple[int, int]]:
    """Cover a set of ``width``-bit values with few aligned prefix blocks.

    Returns (value, mask) pairs such that ``x`` is in ``values`` exactly when
    ``x & mask == value`` for one pair; like CIDR aggregation.
    """
    full = (1 << width) - 1
    out: list[tuple[int, int]] = []
    remaining = set(values)
    for v in sorted(values):
        if v not in remaining:
            continue
        size = 1
        while True:
            bigger = size * 2
            if bigger > full + 1 or v % bigger:
                break
            if not all(x in remaining for x in range(v, v + bigger)):
                break
            size = bigger
        for x in range(v, v + size):
            remaining.discard(x)
        out.append((v, full & ~(size - 1)))
    return out


def leaf_class(
    classid: int, parent: int, rate: int, burst: int, quantum: int, prio: int, frame: int = LEAF_BURST
) -> HtbClass:
    """An HTB leaf: a tiny guaranteed rate (burst of one frame) borrowing up to the link ``rate``."""
    return HtbClass(classid, parent, min(LEAF_MIN_RATE, rate), rate, frame, burst, quantum, prio=prio)


def control_filters(parent: int, target: int) -> list[U32Match]:
    """Pure TCP ACKs and ARP to ``target``, the class served before all data.

    ARP too: a request or reply dropped by a full data queue costs a neighbour
    resolution of 1 s real (``retrans_time``), 1000/k ms of model time, and the
    run's first packets between two hosts are ARP (a loaded switch port's data
    FIFO is full during incast)."""
    return [
        U32Match(parent, ACK_FILTER_PRIO, SMALL_TCP_KEYS, target),
        U32Match(parent, ARP_FILTER_PRIO, ARP_KEYS, target, ETH_P_ARP),
    ]


def ack_class(
    root: int, top: int, rate: int, burst: int, quantum: int, queue: int, delay_s: float, frame: int = FRAME
) -> list[TcItem]:
    """The HTB leaf for pure TCP ACKs and ARP (served first) and its filters.

    Its queue delays like every other leaf: SYNs and ACKs that skipped netem
    made TCP's handshake free and its RTT half the configured one (measured
    in the VM lane: a 10 KB flow gained 0.48 RTT from netem instead of 1.5)."""
    ack = handle(1, ACK_CLASS_MINOR)
    return [
        leaf_class(ack, top, rate, burst, quantum, prio=0, frame=frame),
        leaf_queue(handle(ACK_QDISC_MAJOR), ack, queue, rate, delay_s, frame),
        *control_filters(root, ack),
    ]


ACK_CLASS_MINOR = 0x2
ACK_QDISC_MAJOR = 0x20


# ---------------------------------------------------------------- policies
@dataclass(frozen=True)
class FifoPolicy:
    """The baseline: one HTB class at the link rate, one FIFO queue, DSCP ignored."""

    name: str = "fifo"

    def compile(
        self, rate_bps: float, delay_s: float = 0.0, queue_packets: int | None = None, frame: int = FRAME
    ) -> TcPlan:
        """The plan of one port of real rate ``rate_bps`` on a fabric of full-size ``frame`` bytes."""
        rate, burst, quantum, queue = shaping_params(rate_bps, frame)
        queue = queue_packets or queue
        root, top, data = handle(1), handle(1, 1), handle(1, 0x10)
        return TcPlan(
            (
                Qdisc("htb", root, None, {"default": 0x10}),
                HtbClass(top, root, rate, rate, burst, burst, quantum),
                leaf_class(data, top, rate, burst, quantum, prio=1, frame=frame),
                leaf_queue(handle(0x10), data, queue, rate, delay_s, frame),
                *ack_class(root, top, rate, burst, quantum, queue, delay_s, frame),
            ),
            self.name,
            rate_bps,
            {0: data},
        )


@dataclass(frozen=True)
class DscpPriorityPolicy:
    """Strict priority between 8 classes chosen by DSCP (see module docstring).

    ``dscp_class`` maps DSCP (0..63) to class 0..7 (7 served first); missing
    values go to class 0. ``use_prio_qdisc`` picks the kernel ``prio`` qdisc
    for the priority part instead of HTB prio classes.
    """

    dscp_class: tuple[int, ...] = tuple(d >> 3 for d in range(64))
    use_prio_qdisc: bool = False
    name: str = "dscp-priority"

    def __post_init__(self) -> None:
        if len(self.dscp_class) != 64:
            raise SpecError("dscp_class", f"needs 64 entries, got {len(self.dscp_class)}")
        for d, c in enumerate(self.dscp_class):
            if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < PRIORITY_CLASSES:
                raise SpecError(f"dscp_class[{d}]", f"class must be in 0..7, got {c!r}")

    @classmethod
    def from_mapping(cls, mapping: dict[int, int], use_prio_qdisc: bool = False) -> DscpPriorityPolicy:
        table = [0] * 64
        for d, c in mapping.items():
            table[validate_dscp(d, f"dscp_class[{d!r}]")] = c
        return cls(tuple(table), use_prio_qdisc)

    def filters(self, parent: int, target_of: dict[int, int]) -> list[U32Filter]:
        out = []
        for c in range(PRIORITY_CLASSES - 1, 0, -1):
            members = {d for d, k in enumerate(self.dscp_class) if k == c}
            for value, mask in aligned_blocks(members):
                out.append(U32Filter(parent, DSCP_FILTER_PRIO, value << 2, mask << 2, target_of[c]))
        return out

    def compile(
        self, rate_bps: float, delay_s: float = 0.0, queue_packets: int | None = None, frame: int = FRAME
    ) -> TcPlan:
        """The plan of one port of real rate ``rate_bps`` on a fabric of full-size ``frame`` bytes."""
        rate, burst, quantum, queue = shaping_params(rate_bps, frame)
        queue = queue_packets or queue
        root, top = handle(1), handle(1, 1)
        if self.use_prio_qdisc:
            prio = handle(2)
            # band b (0 served first) holds class 7 - b; unmatched traffic -> class 0 band.
            target = {c: handle(2, PRIORITY_CLASSES - c) for c in range(PRIORITY_CLASSES)}
            items: list[TcItem] = [
                Qdisc("htb", root, None, {"default": 1}),
                HtbClass(top, root, rate, rate, burst, burst, quantum),
                Qdisc("prio", prio, top, {"bands": PRIORITY_CLASSES, "priomap": [PRIORITY_CLASSES - 1] * 16}),
            ]
            for c in range(PRIORITY_CLASSES):
                items.append(leaf_queue(handle(0x10 + c), target[c], queue, rate, delay_s, frame))
            items += control_filters(prio, target[PRIORITY_CLASSES - 1])
            items += self.filters(prio, target)
            return TcPlan(tuple(items), self.name + "/prio", rate_bps, target)
        target = {c: handle(1, 0x10 + c) for c in range(PRIORITY_CLASSES)}
        items = [Qdisc("htb", root, None, {"default": 0x10}), HtbClass(top, root, rate, rate, burst, burst, quantum)]
        for c in range(PRIORITY_CLASSES):
            items.append(leaf_class(target[c], top, rate, burst, quantum, PRIORITY_CLASSES - 1 - c, frame))
            items.append(leaf_queue(handle(0x10 + c), target[c], queue, rate, delay_s, frame))
        items += ack_class(root, top, rate, burst, quantum, queue, delay_s, frame)
        items += self.filters(root, target)
        return TcPlan(tuple(items), self.name + "/htb", rate_bps, target)


Policy = Union[FifoPolicy, DscpPriorityPolicy]


POLICIES: dict[str, Callable[[], Policy]] = {
    "dscp-priority": DscpPriorityPolicy,
    "dscp-priority-prio": lambda: DscpPriorityPolicy(use_prio_qdisc=True),
    "fifo": FifoPolicy,
}
"""The registry of tc policies by name: the CLI, the scenario loader and :func:`policy_by_name` read it.

``dscp-priority`` uses HTB prio classes on every kernel, also where the kernel has the ``prio``
qdisc (measured in the VM lane on Debian's 6.1 kernel: the HTB classes kept class 7 at 99-101 %
of the port against 91-100 % and its ping under load at 0.7-0.9 ms against up to 10 ms;
docs/vm-lane.md); ``dscp-priority-prio`` puts the ``prio`` qdisc under the HTB shaper (needs
``sch_prio``: the testbed refuses it otherwise)."""


def policy_by_name(name: str, field: str = "policy") -> Policy:
    """A fresh policy of :data:`POLICIES` by name."""
    make = POLICIES.get(name)
    if make is None:
        raise SpecError(field, f"unknown tc policy {name!r} (known: {', '.join(POLICIES)})")
    return make()
