"""The packet backend's network, as data: ns-3 nodes, links, queues, addresses and forwarding
tables of a :class:`~railbed.topology.Topology` (pure: no ns-3 here; ``engine.build`` applies it).

* every node of the topology (servers, leaf/rail switches, spines) is an ns-3 node and every
  link a point-to-point link of the link's rate and the fabric's latency; a switch forwards
  at L3 (the emulator's leaves are bridges: the queues a packet crosses are the same);
* addresses encode the route (see ``glue.cpp``): a host NIC has one address per spine slot
  (:func:`address`); a flow goes to and from the slot of the spine ``Topology.ecmp_spine``
  chose, so the Dispatcher's per-flow ECMP pinning holds for its data and its ACKs;
* every egress port has 8 strict-priority bands of drop-tail FIFOs of ``limit`` packets.

Link rates: ns-3 serialises the IP packet plus a 2-byte PPP header; a rate in railbed is
Ethernet frames (IP + 14 bytes, ``railbed.units``), so a link runs at ``rate x (MTU + 2) /
FRAME``: a full-size packet then takes exactly its frame's time. The MTU is the fabric's
(``fabric.mtu``: every device's MTU, and TCP's segment size in ``engine.configure``); a
payload-only fabric (``framing: none``) shapes ``Framing.shaped_rate(rate)``, as the emulator.
"""

from __future__ import annotations

from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.topology import Topology
from railbed.units import FRAME, Framing, RateScale
from tc_policies.plan import shaping_params

PPP_HEADER = 2
HOST_BUFFER = 1000  # packets per band at a host NIC: the kernel's txqueuelen, as the emulator's host ports
MAX_SLOTS, MAX_LEAVES, MAX_PORTS = 63, 256, 1022  # address bits: 6 slot, 8 leaf, 10 port
INFRA_BASE = (172 << 24) | (16 << 16)  # switch and spine interfaces: outside 10/8, never routed to

HOST, LEAF, SPINE = 0, 1, 2


def address(slot: int, leaf: int, port: int) -> int:
    """The 32-bit address of host port ``port`` of ``leaf`` for spine slot ``slot`` (0: same leaf)."""
    return (10 << 24) | (slot << 18) | (leaf << 10) | (port + 1)


def slot_of(spine: int | None) -> int:
    return 0 if spine is None else spine + 1


@dataclass(frozen=True)
class PlanLink:
    a: int  # node index of the first port's node
    b: int
    rate: float  # model bit/s (Ethernet frames): the fabric's shaped rate
    latency: float
    names: tuple[str, str]  # "node:ifname" of a's port and b's port, as simulator.fabric names them
    limits: tuple[int, int]  # packets per band at each port


@dataclass(frozen=True)
class Plan:
    nodes: list[str]
    roles: list[tuple[int, int]]  # (HOST | LEAF | SPINE, leaf index) per node
    links: list[PlanLink]
    host_ports: dict[tuple[int, int], int]  # (server, nic) -> its port index (2 x link, a side)
    nic_leaf_port: dict[tuple[int, int], tuple[int, int]]  # (server, nic) -> (leaf, port on the leaf)
    down: list[tuple[int, int, int]]  # (switch node, host port or leaf, port index): forwarding down
    up: list[tuple[int, int, int]]  # (leaf node, spine, port index): forwarding up
    spines: int
    framing: Framing = Framing()

    def device_rate(self, link: PlanLink) -> float:
        """The ns-3 device's DataRate: a full-size IP packet + PPP takes its frame's time."""
        return link.rate * (self.framing.mtu + PPP_HEADER) / self.framing.frame

    @property
    def port_names(self) -> list[str]:
        return [name for link in self.links for name in link.names]

    def port_rates(self) -> list[float]:
        return [link.rate for link in self.links for _ in (0, 1)]

    def nic_address(self, nic: tuple[int, int], spine: int | None) -> int:
        leaf, port = self.nic_leaf_port[nic]
        return address(slot_of(spine), leaf, port)


def switch_buffer(rate: float, k: float, frame: int = FRAME) -> int:
    """The emulator's leaf queue at scale ``k``: ``max(64, 5 ms of frames)`` of the real rate
    (``tc_policies.plan.shaping_params``), in packets."""
    return shaping_params(rate / k, frame)[3]


def check_fits(topo: Topology) -> None:
    """The address plan's limits (:data:`MAX_SLOTS` spines + 1, leaves, ports per leaf)."""
    if len(topo.spines) >= MAX_SLOTS:
        raise SpecError("fabric.spines", f"the packet backend takes at most {MAX_SLOTS - 1} spines")
    if len(topo.switches) > MAX_LEAVES:
        raise SpecError("fabric", f"the packet backend takes at most {MAX_LEAVES} leaves or rails")
    per_leaf = [0] * len(topo.switches)
    for nics in topo.nics:
        for nic in nics:
            per_leaf[nic.leaf] += 1
    ports = max(per_leaf, default=0)
    if ports > MAX_PORTS:
        raise SpecError("fabric", f"the packet backend takes at most {MAX_PORTS} host ports per leaf, got {ports}")


def plan(topo: Topology, buffer: int | None, host_buffer: int, k: RateScale) -> Plan:
    """The ns-3 network of ``topo``; switch ports hold ``buffer`` packets per band (None: the
    fabric's ``buffer`` in frames, :meth:`railbed.spec.Fabric.queue_packets`, else the emulator's
    leaf queue at scale ``k``, :func:`switch_buffer`), host NICs ``host_buffer``."""
    check_fits(topo)
    nodes = [*topo.hosts, *topo.switches, *topo.spines]
    index = {name: i for i, name in enumerate(nodes)}
    roles = [(HOST, 0)] * len(topo.hosts)
    roles += [(LEAF, leaf) for leaf in range(len(topo.switches))] + [(SPINE, 0)] * len(topo.spines)
    server_of = {name: s for s, name in enumerate(topo.hosts)}
    links, host_ports, nic_leaf_port, down, up = [], {}, {}, [], []
    framing = topo.spec.fabric.framing
    buffer = buffer or topo.spec.fabric.queue_packets()
    for link in topo.links:
        port = 2 * len(links)
        a, b = link.a, link.b
        rate = framing.shaped_rate(a.rate)
        limits = tuple(
            host_buffer if p.node in server_of else (buffer or switch_buffer(rate, k.k, framing.frame)) for p in (a, b)
        )
        links.append(PlanLink(index[a.node], index[b.node], rate, link.latency, (_name(a), _name(b)), limits))
        if link.kind == "nic":
            nic = (server_of[a.node], int(a.ifname.rsplit("-eth", 1)[1]))
            leaf, k_port = topo.nics[nic[0]][nic[1]].leaf, int(b.ifname.rsplit("-eth", 1)[1])
            host_ports[nic] = port
            nic_leaf_port[nic] = (leaf, k_port)
            down.append((index[b.node], k_port, port + 1))
        else:
            spine = int(a.ifname.rsplit("-sp", 1)[1])
            leaf = int(b.ifname.rsplit("-eth", 1)[1])
            up.append((index[a.node], spine, port))
            down.append((index[b.node], leaf, port + 1))
    return Plan(nodes, roles, links, host_ports, nic_leaf_port, down, up, len(topo.spines), framing)


def _name(port) -> str:
    return f"{port.node}:{port.ifname}"
