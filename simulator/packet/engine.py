"""ns-3 for the packet backend: import it (once per process, about 10 s), compile ``glue.cpp``
with cppyy, set TCP's defaults, and build a :class:`~simulator.packet.fabric.Plan` in it.

Only this module imports ns-3, and only when a packet run starts: ``railbed`` and the other
backends never load it. A machine without the ``ns3`` package gets a one-line ``SpecError``
naming the extra that installs it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.units import ETHERNET, Framing
from simulator.packet.fabric import INFRA_BASE, Plan
from simulator.packet.options import TCPS, PacketOptions

GLUE = Path(__file__).with_name("glue.cpp")
MISSING = "the packet backend needs ns-3: pip install 'railbed[packet]' (scripts/provision.sh installs it)"
SOCKET_BUFFER = 6 * 1024 * 1024  # bytes: Linux's largest autotuned receive buffer (tcp_rmem's max)
MSL = 1e-6  # s: TIME_WAIT is 2 MSL; a closed flow's port is free again at once (no stray segments here)

_loaded: tuple[Any, Any] | None = None


def available() -> bool:
    """Whether the ``ns3`` package is installed (without importing it)."""
    return importlib.util.find_spec("ns3") is not None


def require(field: str = "backend") -> None:
    if not available():
        raise SpecError(field, MISSING)


def load() -> tuple[Any, Any]:
    """(ns, glue): ns-3's bindings and the compiled ``railbed_packet`` namespace."""
    global _loaded
    if _loaded is None:
        require()
        from ns import ns  # noqa: I001 - loads every ns-3 library and its headers (~10 s)
        import cppyy

        cppyy.cppdef(GLUE.read_text())
        _loaded = (ns, cppyy.gbl.railbed_packet)
    return _loaded


def configure(ns: Any, options: PacketOptions, framing: Framing = ETHERNET) -> None:
    """TCP's defaults for the sockets a run creates (set before any is); segments of the
    fabric's MSS (``framing.mss``: 1448 B at MTU 1500, 8948 B at 9000)."""
    d = ns.Config.SetDefault
    d("ns3::TcpL4Protocol::SocketType", ns.TypeIdValue(ns.TypeId.LookupByName(TCPS[options.tcp])))
    d("ns3::TcpSocket::SegmentSize", ns.UintegerValue(framing.mss))
    d("ns3::TcpSocket::SndBufSize", ns.UintegerValue(SOCKET_BUFFER))
    d("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(SOCKET_BUFFER))
    d("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    d("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.Seconds(options.rto_min / 10)))
    d("ns3::TcpSocket::ConnTimeout", ns.TimeValue(ns.Seconds(options.rto_min)))
    d("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(options.rto_min)))
    d("ns3::TcpSocketBase::ClockGranularity", ns.TimeValue(ns.Seconds(1e-6)))
    d("ns3::TcpSocketBase::MaxSegLifetime", ns.DoubleValue(MSL))
    d("ns3::TcpSocketBase::UseEcn", ns.StringValue("On" if options.ecn else "Off"))


def build(glue: Any, plan: Plan, classes: tuple[int, ...], ecn: int) -> None:
    """The plan in ns-3: nodes, links with their queues (band ``7 - class`` of each DSCP),
    forwarding tables, host addresses (one per spine slot) and a listener on every host."""
    glue.Reset()
    for dscp, cls in enumerate(classes):
        glue.SetBand(dscp, 7 - cls)
    glue.AddNodes(len(plan.nodes))
    for i, link in enumerate(plan.links):
        glue.AddLink(
            link.a, link.b, plan.device_rate(link), link.latency,
            INFRA_BASE + 2 * i, INFRA_BASE + 2 * i + 1, link.limits[0], link.limits[1], ecn, plan.framing.mtu,
        )  # fmt: skip
    for node, (role, leaf) in enumerate(plan.roles):
        glue.SetRole(node, role, leaf)
    for node, k, port in plan.down:
        glue.SetDown(node, k, glue.PortIface(port))
    for node, spine, port in plan.up:
        glue.SetUp(node, spine, glue.PortIface(port))
    for (server, nic), port in plan.host_ports.items():
        iface = glue.PortIface(port)
        for spine in [None, *range(plan.spines)]:
            glue.AddAddress(server, iface, plan.nic_address((server, nic), spine))
    for node, (role, _) in enumerate(plan.roles):
        if role == 0:
            glue.Listen(node)
    glue.Start()
