"""Mininet node classes of a railbed cluster, configured through netlink.

Mininet's model: a topology is pure data (:mod:`emulator.topo`), behaviour
lives in node classes. Each class reads its :class:`NodeConfig` from the
``railbed`` parameter and configures its own namespace with pyroute2
(addresses, bridge, rules, routes, tc plans); sysctls and offloads go
through the node's shell.

* :class:`ServerHost`: a server; policy routing so NIC *i*'s traffic leaves
  through NIC *i*; ECMP (L4 hash) to the spines of each NIC's leaf.
* :class:`NamespaceBridge`: an L2 switch (leaf, rail or single switch) as a
  Linux bridge inside its own namespace, so nothing of a run lives in the
  root namespace and no STP is needed (leaves never bridge to each other).
* :class:`SpineRouter`: an L3 spine, one port per leaf subnet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mininet.node import Host, Node, Switch

from emulator.netns import iproute_in
from railbed.topology import CLUSTER_PREFIX, spine_mark, spine_table
from tc_policies.netlink import apply_plan
from tc_policies.plan import TcPlan

# Called with (node name, shell pid) as soon as a node's namespace exists, so a
# run killed right after can still be cleaned up (see emulator.state).
on_node_started: Callable[[str, int], None] | None = None

BASE_SYSCTLS = (
    "net.ipv6.conf.all.disable_ipv6=1",
    "net.ipv6.conf.default.disable_ipv6=1",
)
HOST_SYSCTLS = (
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv4.conf.all.arp_ignore=1",
    "net.ipv4.conf.all.arp_announce=2",
    "net.ipv4.fib_multipath_hash_policy=1",
    # TCP small queues: at most 128 KB of one socket waits in the host's own
    # egress queue (the kernel default, up to 4 MB, overflowed the NIC queue
    # and delayed the ACKs of reverse flows by tens of real ms).
    "net.ipv4.tcp_limit_output_bytes=131072",
)
# The floor of TCP's retransmission timeout on a server's routes (real seconds). Linux's timers do
# not scale with k: at the default 200 ms, a lost tail packet stalled its flow for 200 ms real (the
# retransmission timeout, or the tail loss probe, which waits 200 ms when one packet is out, never
# past the retransmission timeout): 200/k ms of model time. At k = 1000 two 170 us pipeline flows
# took 375-420 us (the backends-agree test's flake: retransmits, no timeout counted, so the probe).
# At 5 ms, low-priority flows that strict priority starves longer than srtt + 5 ms get spurious
# timeouts (5-6 per tag-priority run of crosscheck-small): each resends a packet and restarts slow
# start, a few RTTs at these rates, against 200 ms per tail loss. Set as the route metric
# ``rto_min`` (locked), which every kernel honours (``ip route ... rto_min 5ms``).
RTO_MIN = 0.005
# A lost SYN (or SYN-ACK) waits TCP_TIMEOUT_INIT, 1 s real, whatever the route's rto_min.
SYN_TIMEOUT = 1.0
RTAX_RTO_MIN = 13  # linux/rtnetlink.h
HOST_ROUTE_METRICS = {"RTAX_RTO_MIN": round(RTO_MIN * 1000), "RTAX_LOCK": 1 << RTAX_RTO_MIN}
ROUTER_SYSCTLS = HOST_SYSCTLS[:2] + ("net.ipv4.ip_forward=1",)


@dataclass(frozen=True)
class IfaceConfig:
    ifname: str
    address: str | None
    plan: TcPlan | None
    prefixlen: int = 16
    mtu: int = 1500  # the fabric's (railbed.units.Framing): every port of a fabric has the same


@dataclass(frozen=True)
class RouteTable:
    """Policy table of one NIC: traffic from ``source`` leaves through ``ifname``.

    With several spines, NIC ``nic`` also gets one table per spine, chosen by
    the socket mark of a flow pinned to it (:func:`railbed.topology.spine_mark`)."""

    table: int
    source: str
    ifname: str
    subnet: str
    gateways: tuple[str, ...]
    nic: int = 0


@dataclass(frozen=True)
class NodeConfig:
    ifaces: tuple[IfaceConfig, ...]
    tables: tuple[RouteTable, ...] = ()
    main_gateways: tuple[tuple[str, str], ...] = field(default=())  # (gateway, ifname)


def netns_path(node: Node) -> str:
    return f"/proc/{node.pid}/ns/net"


def _prefix(cidr: str) -> tuple[str, int]:
    addr, length = cidr.split("/")
    return addr, int(length)


def _multipath(ipr, table: int, hops: list[tuple[str, int]], metrics: dict) -> None:
    dst, length = _prefix(CLUSTER_PREFIX)
    if len(hops) == 1:
        ipr.route("add", dst=dst, dst_len=length, table=table, gateway=hops[0][0], oif=hops[0][1], metrics=metrics)
    else:
        multipath = [{"gateway": g, "oif": i} for g, i in hops]
        ipr.route("add", dst=dst, dst_len=length, table=table, multipath=multipath, metrics=metrics)


class _RailbedNode:
    """Shared configuration steps (mixed into Mininet node classes)."""

    sysctls: tuple[str, ...] = ()  # role-specific, on top of BASE_SYSCTLS set at registration
    route_metrics: dict = {}  # on every route the node adds
    pid: int
    name: str

    def _registered(self) -> None:
        self.cmd("sysctl -q -w " + " ".join(BASE_SYSCTLS))
        if on_node_started is not None:
            on_node_started(self.name, self.pid)

    def railbed_config(self) -> NodeConfig:
        return self.params["railbed"]

    def configure(self, bridge: bool = False) -> None:
        cfg = self.railbed_config()
        if self.sysctls:
            self.cmd("sysctl -q -w " + " ".join(self.sysctls))
        offload = "; ".join(f"ethtool -K {i.ifname} tso off gso off gro off" for i in cfg.ifaces)
        if offload:
            self.cmd(offload + " >/dev/null 2>&1")
        with iproute_in(netns_path(self)) as ipr:
            index = {i.ifname: ipr.link_lookup(ifname=i.ifname)[0] for i in cfg.ifaces}
            if bridge:
                ipr.link("add", ifname="br0", kind="bridge", br_stp_state=0, br_forward_delay=0)
                br = ipr.link_lookup(ifname="br0")[0]
                for i in cfg.ifaces:
                    ipr.link("set", index=index[i.ifname], mtu=i.mtu)
                    ipr.link("set", index=index[i.ifname], master=br)
                ipr.link("set", index=br, mtu=max((i.mtu for i in cfg.ifaces), default=1500), state="up")
            for i in cfg.ifaces:
                if i.address:
                    ipr.addr("add", index=index[i.ifname], address=i.address, prefixlen=i.prefixlen)
                    intf = self.nameToIntf.get(i.ifname)
                    if intf is not None:  # so Mininet's CLI (ping, pingall) knows the address
                        intf.ip, intf.prefixLen = i.address, i.prefixlen
                ipr.link("set", index=index[i.ifname], mtu=i.mtu, state="up")
                if i.plan is not None:
                    apply_plan(ipr, index[i.ifname], i.plan)
            metrics = self.route_metrics
            for t in cfg.tables:
                net, length = _prefix(t.subnet)
                ipr.route(
                    "add", dst=net, dst_len=length, table=t.table, oif=index[t.ifname], scope=253, prefsrc=t.source,
                    metrics=metrics,
                )  # fmt: skip
                if t.gateways:
                    _multipath(ipr, t.table, [(g, index[t.ifname]) for g in t.gateways], metrics)
                ipr.rule("add", table=t.table, priority=1000 + t.table, src=t.source, src_len=32)
                for spine, gateway in enumerate(t.gateways if len(t.gateways) > 1 else ()):
                    pinned = spine_table(t.nic, spine)
                    ipr.route(
                        "add", dst=net, dst_len=length, table=pinned, oif=index[t.ifname], scope=253, prefsrc=t.source,
                        metrics=metrics,
                    )  # fmt: skip
                    _multipath(ipr, pinned, [(gateway, index[t.ifname])], metrics)
                    ipr.rule(
                        "add", table=pinned, priority=500, src=t.source, src_len=32,
                        fwmark=spine_mark(spine), fwmask=0xFFFFFFFF,
                    )  # fmt: skip
            if cfg.main_gateways:
                _multipath(ipr, 254, [(g, index[ifn]) for g, ifn in cfg.main_gateways], metrics)


class ServerHost(_RailbedNode, Host):
    """A server of the cluster (see module docstring)."""

    sysctls = HOST_SYSCTLS
    route_metrics = HOST_ROUTE_METRICS

    def __init__(self, name: str, **params) -> None:
        Host.__init__(self, name, **params)
        self._registered()

    def config(self, **_params) -> dict:
        self.cmd("ip link set lo up")
        self.configure()
        return {}


class SpineRouter(_RailbedNode, Node):
    """An L3 spine (see module docstring)."""

    sysctls = ROUTER_SYSCTLS

    def __init__(self, name: str, **params) -> None:
        Node.__init__(self, name, **params)
        self._registered()

    def config(self, **_params) -> dict:
        self.configure()
        return {}


class NamespaceBridge(_RailbedNode, Switch):
    """An L2 switch as a Linux bridge in its own namespace (see module docstring)."""

    controlIntf = None

    def __init__(self, name: str, **params) -> None:
        params["inNamespace"] = True
        params.pop("listenPort", None)
        Switch.__init__(self, name, dpid="1", **params)
        self._registered()

    def start(self, _controllers) -> None:
        self.configure(bridge=True)

    def connected(self) -> bool:
        return True

    def stop(self, deleteIntfs: bool = False) -> None:  # noqa: N803 - Mininet's signature
        self.terminate()
