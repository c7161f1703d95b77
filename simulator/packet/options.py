"""A scenario's ``packet`` settings (pure: no ns-3): buffers, ECN, TCP's minimum RTO. Errors name the field.

The congestion control is the scenario's ``tcp`` (:data:`railbed.backend.TCP_CONGESTION`, shared with
the emulator); :data:`TCPS` maps its names to ns-3's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from railbed.errors import SpecError
from railbed.safeload import describe, key_name
from railbed.units import parse_duration

TCPS = {"cubic": "ns3::TcpCubic", "reno": "ns3::TcpNewReno", "dctcp": "ns3::TcpDctcp"}
# ns-3's TcpBbr, measured (bench/bench_sharing.py): a 1 MB flow alone in strict priority's empty high
# band took 1.9x its time, with or without TcpSocketState::EnablePacing; the emulator's bbr did not
NOT_HERE = {"bbr": "ns-3's TcpBbr leaves an idle link half used on these jobs (a lone 1 MB flow 1.9x its time)"}


@dataclass(frozen=True)
class PacketOptions:
    """``buffer``: packets per priority band at a switch port (None: the emulator's leaf queue at
    the emulator's default k for the cluster, so the two backends drop alike); ``host_buffer``:
    at a host NIC (the kernel's txqueuelen); ``rto_min``: TCP's minimum retransmission timeout,
    model seconds (a datacenter setting: Linux's 200 ms would dominate every loss at these
    RTTs; the emulator locks 5 ms of real time, 5/k ms of model time); ``ecn``: mark ECN
    (CE) at this many packets in a band, a step as DCTCP wants (0: off, drop-tail only);
    ``tcp``: the congestion control, the scenario's ``tcp`` (:data:`TCPS`; ``dctcp`` needs ``ecn``)."""

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
    """``{buffer, host_buffer, rto_min, ecn}`` (all optional) -> :class:`PacketOptions` (its ``tcp``
    is the run's: :func:`check_tcp`, then the backend sets it)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise SpecError(field, f"expected a mapping, got {describe(raw)}")
    if "tcp" in raw:
        raise SpecError(f"{field}.tcp", "moved to the scenario's top-level `tcp` (the emulator runs it too)")
    known = {"buffer", "host_buffer", "rto_min", "ecn"}
    for key in raw:
        if key not in known:
            raise SpecError(f"{field}.{key_name(key)}", f"unknown key (known: {', '.join(sorted(known))})")
    return PacketOptions(
        buffer=_count(raw.get("buffer"), f"{field}.buffer", none_ok=True),
        host_buffer=_count(raw.get("host_buffer", 1000), f"{field}.host_buffer"),
        rto_min=_seconds(raw.get("rto_min", 1e-3), f"{field}.rto_min"),
        ecn=_count(raw.get("ecn", 0), f"{field}.ecn", zero_ok=True),
    )


def check_tcp(tcp: str, options: PacketOptions | None) -> None:
    """A run's congestion control against its packet settings: ``dctcp`` needs ECN marking."""
    if tcp in NOT_HERE:
        raise SpecError("tcp", f"not on the packet backend: {NOT_HERE[tcp]} (bench/bench_sharing.py)")
    if tcp not in TCPS:
        raise SpecError("tcp", f"one of {', '.join(TCPS)}, got {describe(tcp)}")
    if tcp == "dctcp" and not (options and options.ecn):
        raise SpecError("tcp", "dctcp needs ECN marking: give packet.ecn (packets in a band)")


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
