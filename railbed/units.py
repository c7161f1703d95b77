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

MTU = 1500
ETH_HEADER = 14
IP_HEADER = 20
TCP_HEADER = 32  # 20 bytes + 12 bytes of timestamp option (Linux default)
FRAME = MTU + ETH_HEADER  # 1514 bytes on the wire per full-size packet
MSS = MTU - IP_HEADER - TCP_HEADER  # 1448 payload bytes per full-size packet
GOODPUT_FRACTION = MSS / FRAME

_RATE_UNITS = {
    "": 1.0,
    "bit": 1.0,
    "bps": 1.0,
    "k": 1e3,
    "kbit": 1e3,
    "kbps": 1e3,
    "m": 1e6,
    "mbit": 1e6,
    "mbps": 1e6,
    "g": 1e9,
    "gbit": 1e9,
    "gbps": 1e9,
    "t": 1e12,
    "tbit": 1e12,
    "tbps": 1e12,
}
_SIZE_UNITS = {
    "": 1.0,
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "kib": 1024.0,
    "mib": 1024.0**2,
    "gib": 1024.0**3,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _parse(value: object, units: dict[str, float], field: str, what: str) -> float:
    if isinstance(value, bool):
        raise SpecError(field, f"expected a {what}, got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if not match or match.group(2).lower() not in units:
            raise SpecError(field, f"cannot read {value!r} as a {what}")
        number = float(match.group(1)) * units[match.group(2).lower()]
    else:
        raise SpecError(field, f"expected a {what}, got {value!r}")
    if not math.isfinite(number):
        raise SpecError(field, f"{what} must be finite, got {value!r}")
    return number


def parse_rate(value: object, field: str) -> float:
    """Read a rate in bit/s: a number (``100e9``) or a string (``"100Gbit"``).

    Raises :class:`SpecError` naming ``field`` unless the rate is positive.
    """
    rate = _parse(value, _RATE_UNITS, field, "rate")
    if rate <= 0:
        raise SpecError(field, f"rate must be positive, got {value!r}")
    return rate


def parse_duration(value: object, field: str) -> float:
    """Read a duration in seconds: a number or a string (``"2us"``); >= 0."""
    seconds = _parse(value, _TIME_UNITS, field, "duration")
    if seconds < 0:
        raise SpecError(field, f"duration must not be negative, got {value!r}")
    return seconds


def parse_size(value: object, field: str) -> int:
    """Read a byte count: a number or a string (``"64MB"``, ``"4MiB"``); >= 0, whole bytes."""
    nbytes = _parse(value, _SIZE_UNITS, field, "size in bytes")
    if nbytes < 0:
        raise SpecError(field, f"size must not be negative, got {value!r}")
    return int(round(nbytes))


def format_rate(bps: float) -> str:
    """Human form of a rate in bit/s (``"100 Gbit/s"``)."""
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.4g} {unit}"
    return f"{bps:.4g} bit/s"


def wire_bytes(payload: int) -> int:
    """Bytes on the wire (frames) needed to carry ``payload`` TCP bytes in full segments."""
    if payload <= 0:
        return 0
    packets = math.ceil(payload / MSS)
    return payload + packets * (FRAME - MSS)


def goodput(wire_rate: float) -> float:
    """TCP payload rate carried by a saturated link of ``wire_rate`` bit/s."""
    return wire_rate * GOODPUT_FRACTION


# The emulator shapes every egress port with offloads off. bench/bench_platform.py
# measured one link shaped within 2 % up to 2 Gbit/s on a 2-core VM; 500 Mbit/s per
# link leaves headroom for many links at once. bench/bench_runtime.py measured the
# aggregate: 32 concurrent TCP flows (0.64 Gbit/s real, each through 2 shaped ports
# and a bridge) kept 97 % of their rate on the 2-core VM, 64 flows (1.28 Gbit/s) only
# 83 %; so about 300 Mbit/s of shaped traffic per core.
MAX_REAL_LINK_RATE = 500e6
REAL_BUDGET_PER_CORE = 300e6
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
    def default_for(cls, link_rates: list[float], host_nic_rates: list[float], cores: int) -> RateScale:
        """Pick ``k`` so no real link exceeds :data:`MAX_REAL_LINK_RATE` and all
        host NICs together stay within the machine's shaping budget
        (:data:`REAL_BUDGET_PER_CORE` per core), rounded up to 1, 2 or 5 x 10^n.

        The budget assumes about half of the NICs send at once; a scenario that
        saturates every NIC should pass a larger ``--scale``.
        """
        if not link_rates:
            return cls(1.0)
        per_link = max(link_rates) / MAX_REAL_LINK_RATE
        aggregate = 0.5 * sum(host_nic_rates) / (REAL_BUDGET_PER_CORE * max(1, cores))
        return cls(_nice_ceil(max(per_link, aggregate)))
