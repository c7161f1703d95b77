"""Units, wire overhead and the one model-to-real rate scale.

What a "rate" means in railbed
------------------------------
A rate is always a **wire rate**: bits per second of Ethernet frames as the
Linux shaper counts them, i.e. IP packet plus the 14-byte Ethernet header
(no preamble, FCS or inter-frame gap, which veth links do not have). HTB's
byte counters count exactly these bytes, so "configured" and "achieved"
rates in fidelity reports compare like with like.

Goodput (TCP payload per second) is lower by the header share: with MTU 1500
and TCP timestamps a full segment carries 1448 payload bytes in a 1514-byte
frame, so goodput = 0.9564 x wire rate (4.36 % overhead). :func:`goodput`
and :func:`wire_bytes` convert between the two; the simulator uses the same
functions so both backends agree on what a rate means.

The fabric's MTU is a cluster setting (``fabric.mtu``: 1500, 4096 as RoCE's
largest, 9000 jumbo) and so is the framing (``fabric.framing``: ``ethernet``,
the default, or ``none``: payload-only links, for comparison with simulators
that count payload); a :class:`Framing` carries both and every backend asks it.
At MTU 9000 a full segment carries 8948 bytes in a 9014-byte frame (goodput
0.9927 x wire rate) and a flow needs 1/6.18 of the packets it needs at 1500.

Model time and real time
------------------------
Library values are in model units (a 100 Gbit/s NIC is ``100e9``). The
emulator shapes ``model_rate / k`` and stretches compute times and latencies
by ``k``; results are divided back by ``k``. :class:`RateScale` is the only
place that does this conversion.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.safeload import describe

MTU = 1500
ETH_HEADER = 14
IP_HEADER = 20
TCP_HEADER = 32  # 20 bytes + 12 bytes of timestamp option (Linux default)
FRAME = MTU + ETH_HEADER  # 1514 bytes on the wire per full-size packet
MSS = MTU - IP_HEADER - TCP_HEADER  # 1448 payload bytes per full-size packet
GOODPUT_FRACTION = MSS / FRAME
MTUS = (1500, 4096, 9000)  # Ethernet's, RoCE's largest, jumbo frames: what training fabrics declare
FRAMINGS = ("ethernet", "none")

# Units are read case-sensitively where case carries meaning: ``b`` is a bit,
# ``B`` a byte. ``bit`` is unambiguous in any case (tc's ``mbit``, ``Gbit``).
# tc reads ``bps`` as *bytes* per second and networking papers as *bits*: railbed
# takes the papers' convention (``100Gbps`` = 100 Gbit/s) only with an upper-case
# prefix and refuses the all-lower-case forms tc uses (``gbps``, ``mbps``,
# ``kbps``, ``bps``), as it refuses ``mb``, ``gb`` (megabits or megabytes?).
_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BINARY = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
_TC_LOWER = {"m": 1e6, "g": 1e9, "t": 1e12}  # tc's mbit, gbit, tbit
_BIT_SUFFIXES = ("bit", "bit/s", "b/s", "bps", "b")
_BYTE_SUFFIXES = ("B", "B/s", "Bps")


def _unit_table() -> dict[str, tuple[float, str]]:
    """Every accepted unit -> (factor, "bit", "byte" or "bare")."""
    table: dict[str, tuple[float, str]] = {"": (1.0, "bare")}
    for prefix, factor in {**_PREFIXES, **_BINARY}.items():
        for suffix in _BIT_SUFFIXES:
            table[prefix + suffix] = (factor, "bit")
        for suffix in _BYTE_SUFFIXES:
            table[prefix + suffix] = (factor, "byte")
        if prefix and not prefix.endswith("i"):
            table[prefix] = (factor, "bare")  # "1.5M": a bare prefix
    for prefix, factor in {**_TC_LOWER, **{p.lower(): f for p, f in _BINARY.items()}}.items():
        table[prefix + "bit"] = (factor, "bit")
    return table


_UNITS = _unit_table()
_AMBIGUOUS = {p + s for p in ("k", "m", "g", "t") for s in ("bps", "b", "b/s")} | {"bps"}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z/\u00b5]*)\s*$")
MAX_QUANTITY_CHARS = 40
MAX_MODEL_RATE = 1e15  # 1 Pbit/s: beyond any link railbed models
MAX_SIZE_BYTES = 1e18  # an exabyte; byte counts stay exact 64-bit integers


def _split(value: object, field: str, what: str) -> tuple[float, str]:
    """(number, unit text) of a number or a string like ``"2.5 Gbit"``."""
    if isinstance(value, bool):
        raise SpecError(field, f"expected a {what}, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            number, unit = float(value), ""
        except OverflowError:
            raise SpecError(field, f"{what} is too large") from None
    elif isinstance(value, str) and len(value) <= MAX_QUANTITY_CHARS and (match := _QUANTITY.match(value)):
        number, unit = float(match.group(1)), match.group(2)
    else:
        raise SpecError(field, f"cannot read {describe(value)} as a {what}")
    if not math.isfinite(number):
        raise SpecError(field, f"{what} must be finite, got {describe(value)}")
    return number, unit


TC_NOTE = " (tc reads bps as bytes/s)"  # said of rates only: a size has no tc reading


def _scaled(value: object, field: str, what: str, hint: str) -> tuple[float, str]:
    """(number x unit prefix, kind of unit: "bit", "byte" or "bare")."""
    number, unit = _split(value, field, what)
    if unit in _AMBIGUOUS:
        raise SpecError(
            field,
            f"{describe(value)} is ambiguous: {unit!r} could be bits or bytes{TC_NOTE if what == 'rate' else ''}; "
            f"write b or bit for bits, B for bytes ({hint})",
        )
    if unit not in _UNITS:
        raise SpecError(field, f"cannot read {describe(value)} as a {what} (unknown unit {unit!r}; {hint})")
    factor, kind = _UNITS[unit]
    return number * factor, kind


def parse_rate(value: object, field: str) -> float:
    """Read a rate in bit/s: a number (``100e9``) or a string: ``"100Gbit"``,
    ``"100Gbps"``, ``"100G"`` (bits), ``"12.5GB/s"``, ``"12.5GBps"`` (bytes: 100 Gbit/s).

    Case matters: ``b`` is a bit, ``B`` a byte. All-lower-case ``gbps``,
    ``mbps``, ``kbps``, ``bps``, ``gb`` (bytes to tc, bits to papers) are
    refused as ambiguous. Raises :class:`SpecError` naming ``field`` unless
    0 < rate <= :data:`MAX_MODEL_RATE`.
    """
    number, kind = _scaled(value, field, "rate", "e.g. 100Gbit, 100Gbps, 12.5GB/s")
    rate = number * 8 if kind == "byte" else number
    if rate <= 0:
        raise SpecError(field, f"rate must be positive, got {describe(value)}")
    if rate > MAX_MODEL_RATE:
        raise SpecError(field, f"rate must be at most {format_rate(MAX_MODEL_RATE)}, got {describe(value)}")
    return rate


def parse_duration(value: object, field: str) -> float:
    """Read a duration in seconds: a number or a string (``"2us"``, ``"1.5ms"``); >= 0."""
    number, unit = _split(value, field, "duration")
    if unit.lower() not in _TIME_UNITS:
        raise SpecError(field, f"cannot read {describe(value)} as a duration (units: s, ms, us, ns)")
    seconds = number * _TIME_UNITS[unit.lower()]
    if seconds < 0:
        raise SpecError(field, f"duration must not be negative, got {describe(value)}")
    return seconds


def parse_size(value: object, field: str) -> int:
    """Read a byte count: a number (bytes) or a string: ``"64MB"``, ``"4MiB"`` (bytes),
    ``"4Mb"``, ``"4Mbit"`` (bits: 500000 bytes). ``mb``, ``gb`` and a bare prefix
    (``"4M"``) are refused as ambiguous. >= 0, rounded to whole bytes."""
    number, kind = _scaled(value, field, "size in bytes", "e.g. 64MB, 4MiB, 4Mbit")
    if kind == "bare" and number != _split(value, field, "size")[0]:
        raise SpecError(field, f"{describe(value)} is ambiguous: write MB for bytes or Mbit for bits")
    nbytes = number / 8 if kind == "bit" else number
    if nbytes < 0:
        raise SpecError(field, f"size must not be negative, got {describe(value)}")
    if nbytes > MAX_SIZE_BYTES:
        raise SpecError(field, f"size must be at most {MAX_SIZE_BYTES:.0e} bytes, got {describe(value)}")
    return int(round(nbytes))


def format_rate(bps: float) -> str:
    """Human form of a rate in bit/s (``"100 Gbit/s"``)."""
    for unit, scale in (("Pbit/s", 1e15), ("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.4g} {unit}"
    return f"{bps:.4g} bit/s"


@dataclass(frozen=True)
class Framing:
    """What a link's rate counts: TCP/IPv4 (timestamps on) in Ethernet frames of ``mtu``, or,
    with ``payload_only``, the payload alone (``framing: none``).

    Packets are real on the emulator and the packet backend whatever the framing: there the
    MTU sets the interfaces' MTU and TCP's segment size, and a payload-only link is shaped at
    ``rate x frame / mss`` (:meth:`shaped_rate`), so its payload gets the declared rate (the
    ACKs' bytes aside). The fluid model charges :meth:`wire_bytes` against the declared rate."""

    mtu: int = MTU
    payload_only: bool = False

    @property
    def frame(self) -> int:
        """Bytes of a full-size frame as the shaper counts them (IP packet + Ethernet header)."""
        return self.mtu + ETH_HEADER

    @property
    def mss(self) -> int:
        """TCP payload bytes of a full-size segment."""
        return self.mtu - IP_HEADER - TCP_HEADER

    @property
    def goodput_fraction(self) -> float:
        """Payload share of a saturated link's declared rate (1 for payload-only links)."""
        return 1.0 if self.payload_only else self.mss / self.frame

    def packets(self, payload: int) -> int:
        """Full-size segments (the last one partial) that carry ``payload`` bytes."""
        return -(-max(0, payload) // self.mss)

    def wire_bytes(self, payload: int) -> int:
        """Bytes a flow of ``payload`` TCP bytes counts against a link's declared rate."""
        if payload <= 0:
            return 0
        return payload if self.payload_only else payload + self.packets(payload) * (self.frame - self.mss)

    def shaped_rate(self, rate: float) -> float:
        """The wire rate a packet-carrying backend shapes for a link declared at ``rate``."""
        return rate * self.frame / self.mss if self.payload_only else rate

    def describe(self) -> str:
        return f"MTU {self.mtu}" + (", payload-only links (framing: none)" if self.payload_only else "")


ETHERNET = Framing()  # MTU 1500, frames counted: the default of every cluster


def parse_framing(mtu: object, framing: object, where: str = "fabric") -> Framing:
    """The :class:`Framing` of a fabric's ``mtu`` (one of :data:`MTUS`) and ``framing``
    (one of :data:`FRAMINGS`); errors name ``<where>.mtu`` / ``<where>.framing``."""
    if isinstance(mtu, bool) or not isinstance(mtu, int) or mtu not in MTUS:
        raise SpecError(f"{where}.mtu", f"must be one of {', '.join(map(str, MTUS))} bytes, got {describe(mtu)}")
    if not isinstance(framing, str) or framing not in FRAMINGS:
        raise SpecError(f"{where}.framing", f"must be one of {', '.join(FRAMINGS)}, got {describe(framing)}")
    return Framing(mtu, framing == "none")


def wire_bytes(payload: int, framing: Framing = ETHERNET) -> int:
    """Bytes on the wire (frames) needed to carry ``payload`` TCP bytes in full segments."""
    return framing.wire_bytes(payload)


def goodput(wire_rate: float, framing: Framing = ETHERNET) -> float:
    """TCP payload rate carried by a saturated link of ``wire_rate`` bit/s."""
    return wire_rate * framing.goodput_fraction


# The emulator shapes every egress port with offloads off. bench/bench_platform.py
# measured one link shaped within 2 % up to 2 Gbit/s on a 2-core VM; 500 Mbit/s per
# link leaves headroom for many links at once. bench/bench_runtime.py measured the
# aggregate: 32 concurrent TCP flows (0.64 Gbit/s real, each through 2 shaped ports
# and a bridge) kept 97 % of their rate on the 2-core VM, 64 flows (1.28 Gbit/s) only
# 83 %; so about 300 Mbit/s of shaped traffic per core.
# The cost is per packet: with jumbo frames (MTU 9000: 6.18x fewer packets for the same bytes) 64
# flows carried 2.56 Gbit/s real with fidelity ok on the same 2 cores, beside other work (load
# average 8-9; docs/performance.md, "Where a packet's time goes"): the budget grows with the frame,
# up to 4x (1.2 Gbit/s per core at MTU 9000; MTU 4096's 2.7x is interpolated, not measured).
MAX_REAL_LINK_RATE = 500e6
REAL_BUDGET_PER_CORE = 300e6
MAX_BUDGET_FACTOR = 4.0
MIN_REAL_LINK_RATE = 1e6


def _nice_ceil(x: float) -> float:
    """Smallest value of the form {1, 2, 5} x 10^n that is >= x (and >= 1)."""
    if x <= 1:
        return 1.0
    exponent = math.floor(math.log10(x))
    for mantissa in (1, 2, 5, 10):
        candidate = mantissa * 10.0**exponent
        if candidate >= x * (1 - 1e-12):
            return candidate
    return 10.0 ** (exponent + 1)


@dataclass(frozen=True)
class RateScale:
    """Model-to-real conversion with one factor ``k`` (real rate = model rate / k).

    Times go the other way: a compute task of ``t`` model seconds lasts ``t * k``
    real seconds, and a measured wall time ``w`` is ``w / k`` in model time.
    """

    k: float

    def __post_init__(self) -> None:
        if not (self.k > 0 and math.isfinite(self.k)):
            raise SpecError("scale", f"scale factor must be a positive number, got {self.k!r}")

    def real_rate(self, model_rate: float) -> float:
        return model_rate / self.k

    def model_rate(self, real_rate: float) -> float:
        return real_rate * self.k

    def real_time(self, model_seconds: float) -> float:
        return model_seconds * self.k

    def model_time(self, real_seconds: float) -> float:
        return real_seconds / self.k

    @classmethod
    def default_for(
        cls, link_rates: list[float], host_nic_rates: list[float], cores: int, framing: Framing = ETHERNET
    ) -> RateScale:
        """Pick ``k`` so no real link exceeds :data:`MAX_REAL_LINK_RATE` and all
        host NICs together stay within the machine's shaping budget
        (:data:`REAL_BUDGET_PER_CORE` per core at MTU 1500, more for larger frames up to
        :data:`MAX_BUDGET_FACTOR`), rounded up to 1, 2 or 5 x 10^n.

        The budget assumes about half of the NICs send at once; a scenario that
        saturates every NIC should pass a larger ``--scale``.
        """
        if not link_rates:
            return cls(1.0)
        per_link = max(link_rates) / MAX_REAL_LINK_RATE
        budget = REAL_BUDGET_PER_CORE * min(MAX_BUDGET_FACTOR, framing.frame / FRAME)
        aggregate = 0.5 * sum(host_nic_rates) / (budget * max(1, cores))
        return cls(_nice_ceil(max(per_link, aggregate)))
