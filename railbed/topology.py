"""The concrete network of a ClusterSpec: nodes, ports, links, addresses, paths.

Pure data, shared by the emulator (which builds exactly this) and the
simulator (which routes flows over it). The design avoids L2 loops with any
number of spines:

* every leaf (or rail, or the single switch) is an L2 domain of its own, a
  Linux bridge, with subnet ``10.<leaf>.0.0/16``;
* every spine is an L3 router with one port in each leaf's subnet
  (``10.<leaf>.255.<spine+1>``);
* a host sends traffic for another leaf to one spine, so cross-leaf traffic
  crosses exactly one spine and same-leaf traffic never reaches one. The
  run-time's flows carry a socket mark that picks the spine
  :meth:`Topology.ecmp_spine` chose (one table per NIC and spine); unmarked
  traffic (ping, iperf) uses the kernel's ECMP (L4 hash);
* source-based routing inside the server: a packet from NIC *i*'s address
  leaves through NIC *i* (``ip rule from <addr> table 100+i``), which makes
  GPU *i*'s traffic use rail *i* in a rail-optimized fabric.

Node names: servers ``h<s>``, switches ``sw0`` / ``leaf<l>`` / ``rail<r>``,
spines ``spine<p>``. Interface names: ``h<s>-eth<n>`` (NIC *n*),
``<switch>-eth<k>`` (port to a host), ``<switch>-sp<p>`` (uplink to spine
*p*), ``spine<p>-eth<l>`` (port to leaf *l*).
"""

from __future__ import annotations

import ipaddress
import os
import zlib
from dataclasses import dataclass
from functools import cached_property

from railbed.spec import ClusterSpec
from railbed.units import RateScale

ROUTE_TABLE_BASE = 100
SPINE_TABLE_BASE = 1000  # table of NIC n pinned to spine p: 1000 + 256 n + p (spines <= 250)


def spine_table(nic: int, spine: int) -> int:
    """Policy table that sends NIC ``nic``'s cross-leaf traffic through spine ``spine`` only."""
    return SPINE_TABLE_BASE + 256 * nic + spine


def spine_mark(spine: int) -> int:
    """Socket mark (``SO_MARK``) that selects :func:`spine_table` of the sending NIC."""
    return spine + 1


CLUSTER_PREFIX = "10.0.0.0/8"


@dataclass(frozen=True)
class Port:
    """One end of a link: an interface on a node, with its egress rate (model bit/s)."""

    node: str
    ifname: str
    rate: float
    address: str | None = None  # "10.1.0.3"; /16 subnet of its leaf


@dataclass(frozen=True)
class Link:
    a: Port
    b: Port
    latency: float
    kind: str  # "nic" (host to switch) or "uplink" (switch to spine)


@dataclass(frozen=True)
class Nic:
    """A server's NIC: its port, leaf and the spine gateways reachable through it."""

    server: int
    index: int
    port: Port
    leaf: int
    gateways: tuple[str, ...]


@dataclass(frozen=True)
class Hop:
    """A flow crosses the egress queue of ``ifname`` on ``node``."""

    node: str
    ifname: str


def port_label(port: str) -> str:
    """What a port name (``node:ifname``, as :class:`Topology` names them) is, in words: the
    egress queue of ``h0:h0-eth1`` is "server 0, NIC 1, egress"; ``rail0:rail0-eth2`` "rail0's
    port 2, towards a server"; ``rail0:rail0-sp1`` "rail0 to spine 1"; ``spine1:spine1-eth0``
    "spine 1 to switch 0". A name of another form is returned as it is."""
    node, _, ifname = port.partition(":")
    tail = ifname.removeprefix(f"{node}-")
    if node.startswith("h") and node[1:].isdigit() and tail.startswith("eth") and tail[3:].isdigit():
        return f"server {node[1:]}, NIC {tail[3:]}, egress"
    if node.startswith("spine") and tail.startswith("eth") and tail[3:].isdigit():
        return f"spine {node[5:]} to switch {tail[3:]}"
    if tail.startswith("sp") and tail[2:].isdigit():
        return f"{node} to spine {tail[2:]}"
    if tail.startswith("eth") and tail[3:].isdigit():
        return f"{node}'s port {tail[3:]}, towards a server"
    return port


def leaf_subnet(leaf: int) -> str:
    return f"10.{leaf}.0.0/16"


def host_address(leaf: int, port_index: int) -> str:
    n = port_index + 1
    return f"10.{leaf}.{n >> 8}.{n & 0xFF}"


def spine_address(leaf: int, spine: int) -> str:
    return f"10.{leaf}.255.{spine + 1}"


class Topology:
    """Nodes, links and routing of one :class:`ClusterSpec`."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        fab = spec.fabric
        servers = spec.servers
        if fab.kind == "single_switch":
            self.switches = ["sw0"]
            leaf_of = [[0] * s.nics for s in servers]
        elif fab.kind == "leaf_spine":
            per = fab.servers_per_leaf or len(servers)
            self.switches = [f"leaf{i}" for i in range(-(-len(servers) // per))]
            leaf_of = [[i // per] * s.nics for i, s in enumerate(servers)]
        else:
            self.switches = [f"rail{r}" for r in range(fab.rails or 0)]
            leaf_of = [list(range(s.nics)) for s in servers]
        self.hosts = [s.name for s in servers]
        self.spines = [f"spine{p}" for p in range(fab.spines)]
        self.links: list[Link] = []
        self.nics: list[list[Nic]] = []
        self._port_to_host: dict[tuple[int, int], Port] = {}
        next_port = [0] * len(self.switches)
        for si, server in enumerate(servers):
            nics = []
            for n, rate in enumerate(server.nic_rates):
                leaf = leaf_of[si][n]
                k = next_port[leaf]
                next_port[leaf] += 1
                sw = self.switches[leaf]
                host_port = Port(server.name, f"{server.name}-eth{n}", rate, host_address(leaf, k))
                sw_port = Port(sw, f"{sw}-eth{k}", rate)
                self.links.append(Link(host_port, sw_port, fab.latency, "nic"))
                self._port_to_host[(si, n)] = sw_port
                gws = tuple(spine_address(leaf, p) for p in range(fab.spines))
                nics.append(Nic(si, n, host_port, leaf, gws))
            self.nics.append(nics)
        uplink = fab.uplink_rate or 0.0
        for leaf, sw in enumerate(self.switches):
            for p, spine in enumerate(self.spines):
                self.links.append(
                    Link(
                        Port(sw, f"{sw}-sp{p}", uplink),
                        Port(spine, f"{spine}-eth{leaf}", uplink, spine_address(leaf, p)),
                        fab.latency,
                        "uplink",
                    )
                )

    # ------------------------------------------------------------------ lookup
    @cached_property
    def ports(self) -> dict[tuple[str, str], Port]:
        """Every port by (node, ifname)."""
        out = {}
        for link in self.links:
            out[(link.a.node, link.a.ifname)] = link.a
            out[(link.b.node, link.b.ifname)] = link.b
        return out

    def ports_of(self, node: str) -> list[Port]:
        return [p for (n, _), p in self.ports.items() if n == node]

    def nic_address(self, server: int, nic: int) -> str:
        return self.nics[server][nic].port.address or ""

    # ----------------------------------------------------------------- routing
    def path(self, src: tuple[int, int], dst: tuple[int, int], spine: int | None = None) -> list[Hop]:
        """Egress queues a packet from NIC ``src`` = (server, nic) to NIC ``dst`` crosses.

        Same leaf: the source NIC, then the leaf's port to the destination.
        Other leaf: source NIC, leaf uplink to ``spine``, spine port to the
        destination leaf, destination leaf's port to the host. ``spine`` is
        the ECMP choice (the emulator's kernel hashes; the simulator picks).
        """
        s_nic = self.nics[src[0]][src[1]]
        d_nic = self.nics[dst[0]][dst[1]]
        hops = [Hop(s_nic.port.node, s_nic.port.ifname)]
        down = self._port_to_host[dst]
        if s_nic.leaf != d_nic.leaf:
            if not self.spines:
                raise ValueError(f"no spine joins leaf {s_nic.leaf} and leaf {d_nic.leaf}")
            p = 0 if spine is None else spine
            if not 0 <= p < len(self.spines):
                raise ValueError(f"spine {p} out of range")
            sw = self.switches[s_nic.leaf]
            hops.append(Hop(sw, f"{sw}-sp{p}"))
            hops.append(Hop(self.spines[p], f"{self.spines[p]}-eth{d_nic.leaf}"))
        hops.append(Hop(down.node, down.ifname))
        return hops

    def one_way_latency(self, src: tuple[int, int], dst: tuple[int, int]) -> float:
        """The fabric latency of every link a flow from NIC ``src`` to NIC ``dst`` crosses."""
        return self.spec.fabric.latency * len(self.path(src, dst))

    def ecmp_spine(self, src: tuple[int, int], dst: tuple[int, int], key: str) -> int | None:
        """The spine a flow from NIC ``src`` to NIC ``dst`` crosses (``None``: same leaf).

        ECMP by a hash of the flow's id (CRC-32), so both backends route every
        flow over the same spine: the simulator follows it and the emulator
        marks the flow's socket so policy routing sends it there (the kernel's
        own L4 hash would pick differently in every run). Like real ECMP, two
        big flows may collide on one spine."""
        if self.nics[src[0]][src[1]].leaf == self.nics[dst[0]][dst[1]].leaf:
            return None
        return zlib.crc32(key.encode()) % len(self.spines) if self.spines else None

    def host_routes(self, server: int) -> list[tuple[int, str, str, tuple[str, ...]]]:
        """Policy routing of one server: (table, source address, ifname, gateways) per NIC.

        Table ``100 + n`` sends everything from NIC *n*'s address out of NIC *n*:
        its leaf subnet directly, the rest of 10/8 through the leaf's spines.
        """
        return [
            (ROUTE_TABLE_BASE + nic.index, nic.port.address or "", nic.port.ifname, nic.gateways)
            for nic in self.nics[server]
        ]

    def check_addresses(self) -> None:
        """Assert every address is unique and inside its leaf subnet (a self-check)."""
        seen: set[str] = set()
        for port in self.ports.values():
            if port.address is None:
                continue
            if port.address in seen:
                raise AssertionError(f"duplicate address {port.address}")
            seen.add(port.address)
            leaf = int(port.address.split(".")[1])
            if ipaddress.ip_address(port.address) not in ipaddress.ip_network(leaf_subnet(leaf)):
                raise AssertionError(f"{port.address} outside {leaf_subnet(leaf)}")


def default_scale(spec: ClusterSpec, topo: Topology | None = None) -> RateScale:
    """The rate scale k this machine uses for ``spec`` by default (:meth:`RateScale.default_for`)."""
    topo = topo if topo is not None else Topology(spec)
    return RateScale.default_for(
        [p.rate for p in topo.ports.values()], [r for s in spec.servers for r in s.nic_rates], os.cpu_count() or 1,
        spec.fabric.framing,
    )
