"""A scenario's ``packet`` settings (pure: no ns-3): buffers, TCP, ECN. Errors name the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from railbed.errors import SpecError
from railbed.safeload import describe, key_name
from railbed.units import parse_duration

TCPS = {"cubic": "ns3::TcpCubic", "newreno": "ns3::TcpNewReno", "dctcp": "ns3::TcpDctcp"}


@dataclass(frozen=True)
class PacketOptions:
    """``buffer``: packets per priority band at a switch port (None: the emulator's leaf queue at
    the emulator's default k for the cluster, so the two backends drop alike); ``host_buffer``:
    at a host NIC (the kernel's txqueuelen); ``rto_min``: TCP's minimum retransmission timeout,
    model seconds (a datacenter setting: Linux's 200 ms would dominate every loss at these
    RTTs; the emulator locks 5 ms of real time, 5/k ms of model time); ``ecn``: mark ECN
    (CE) at this many packets in a band, a step as DCTCP wants (0: off, drop-tail only);
    ``tcp``: the congestion control (:data:`TCPS`; ``dctcp`` needs ``ecn``)."""

    buffer: int | None = None
    host_buffer: int = 1000
    rto_min: float = 1e-3
    ecn: int = 0
    tcp: str = "cubic"

    def describe(self) -> str:
        buf = f"{self.buffer} packets" if self.buffer else "the emulator's leaf queue"
        ecn = f"ECN at {self.ecn} packets" if self.ecn else "no ECN"
        return f"TCP {self.tcp}, min RTO {self.rto_min * 1e3:g} ms, switch bands {buf}, host {self.host_buffer}, {ecn}"


def parse_packet(raw: Any, field: str = "packet") -> PacketOptions:
    """``{buffer, host_buffer, rto_min, ecn, tcp}`` (all optional) -> :class:`PacketOptions`."""
    if raw is None:
        return PacketOptions()
    if not isinstance(raw, dict):
        raise SpecError(field, f"expected a mapping, got {describe(raw)}")
    known = {"buffer", "host_buffer", "rto_min", "ecn", "tcp"}
    for key in raw:
        if key not in known:
            raise SpecError(f"{field}.{key_name(key)}", f"unknown key (known: {', '.join(sorted(known))})")
    tcp = raw.get("tcp", "cubic")
    if tcp not in TCPS:
        raise SpecError(f"{field}.tcp", f"one of {', '.join(TCPS)}, got {describe(tcp)}")
    opts = PacketOptions(
        buffer=_count(raw.get("buffer"), f"{field}.buffer", none_ok=True),
        host_buffer=_count(raw.get("host_buffer", 1000), f"{field}.host_buffer"),
        rto_min=_seconds(raw.get("rto_min", 1e-3), f"{field}.rto_min"),
        ecn=_count(raw.get("ecn", 0), f"{field}.ecn", zero_ok=True),
        tcp=tcp,
    )
    if opts.tcp == "dctcp" and not opts.ecn:
        raise SpecError(f"{field}.tcp", "dctcp needs ECN marking: give packet.ecn (packets in a band)")
    return opts


def _count(value: Any, field: str, none_ok: bool = False, zero_ok: bool = False) -> Any:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero_ok else 1) or value > 10**7:
        raise SpecError(field, f"a whole number of packets{' (0: off)' if zero_ok else ''}, got {describe(value)}")
    return value


def _seconds(value: Any, field: str) -> float:
    seconds = parse_duration(value, field) if isinstance(value, str) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 1e-6 <= seconds <= 10:
        raise SpecError(field, f"a time between 1us and 10s, got {describe(value)}")
    return float(seconds)
