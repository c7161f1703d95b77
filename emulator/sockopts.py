"""Socket options of the emulated hosts' flows, for the run-time and the traffic processes
(:mod:`emulator.agent`, :mod:`emulator.blaster`: standard library only, so they start fast).

Python's :mod:`socket` names some Linux options only on recent versions; the numbers are
Linux's (``include/uapi/asm-generic/socket.h``, ``include/uapi/linux/tcp.h``)."""

from __future__ import annotations

import socket

SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)
TCP_CONGESTION_OPT = getattr(socket, "TCP_CONGESTION", 13)


def set_congestion(sock: socket.socket, name: str) -> None:
    """Give ``sock`` the congestion control ``name`` (root may name any the kernel has: it loads
    the module; a network namespace cannot change its default away from the host's)."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION_OPT, name.encode())


def congestion_of(sock: socket.socket) -> str:
    """The congestion control the kernel runs for ``sock``."""
    return sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION_OPT, 16).rstrip(b"\0").decode()
