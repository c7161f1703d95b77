"""A ClusterSpec as a Mininet ``Topo``: pure data, built in ``Topo.build``.

Usable on its own with Mininet's ``mn`` (see ``emulator/mn_custom.py``)::

    sudo mn --custom emulator/mn_custom.py --topo railbed,examples/rail-4x4.yaml --controller none
"""

from __future__ import annotations

from mininet.topo import Topo

from emulator.nodes import IfaceConfig, NamespaceBridge, NodeConfig, RouteTable, ServerHost, SpineRouter
from railbed.errors import SpecError
from railbed.machine import rate_problems
from railbed.spec import ClusterSpec
from railbed.topology import Topology, leaf_subnet
from railbed.units import RateScale
from tc_policies.plan import Policy

HOST_QUEUE_PACKETS = 1000  # the kernel's default txqueuelen (see tc_policies.plan)


def check_real_rates(topology: Topology, scale: RateScale) -> None:
    """Every shaped rate must be one this machine's HTB can hold (:func:`railbed.machine.rate_problems`)."""
    found = rate_problems(topology, scale)
    if found:
        raise SpecError(*found[0])


class ClusterTopo(Topo):
    """Mininet topology of a :class:`ClusterSpec` with tc plans from ``policy`` at ``scale``.

    ``netem_latency``: every egress queue delays packets by the fabric's link
    latency (times k) with netem; only where the kernel has netem."""

    def build(  # noqa: D102
        self,
        spec: ClusterSpec,
        policy: Policy,
        scale: RateScale,
        topology: Topology | None = None,
        netem_latency: bool = False,
    ) -> None:
        topo = topology if topology is not None else Topology(spec)
        check_real_rates(topo, scale)
        self.railbed_topology = topo
        plans: dict[float, object] = {}
        delay = scale.real_time(spec.fabric.latency) if netem_latency else 0.0
        framing = spec.fabric.framing

        def plan(rate: float, host: bool):
            if (rate, host) not in plans:  # a switch port: fabric.buffer in frames, else the policy's default
                queue = HOST_QUEUE_PACKETS if host else spec.fabric.queue_packets()
                real = framing.shaped_rate(scale.real_rate(rate))
                plans[(rate, host)] = policy.compile(real, delay, queue, framing.frame)
            return plans[(rate, host)]

        def ifaces(node: str) -> tuple[IfaceConfig, ...]:
            host = node in topo.hosts
            return tuple(
                IfaceConfig(p.ifname, p.address, plan(p.rate, host), mtu=framing.mtu) for p in topo.ports_of(node)
            )

        for s, name in enumerate(topo.hosts):
            tables = tuple(
                RouteTable(t, src, ifn, leaf_subnet(topo.nics[s][k].leaf), gws, k)
                for k, (t, src, ifn, gws) in enumerate(topo.host_routes(s))
            )
            main = tuple((g, topo.nics[s][0].port.ifname) for g in topo.nics[s][0].gateways)
            self.addHost(name, cls=ServerHost, railbed=NodeConfig(ifaces(name), tables, main))
        for name in topo.switches:
            self.addSwitch(name, cls=NamespaceBridge, railbed=NodeConfig(ifaces(name)))
        for name in topo.spines:
            self.addHost(name, cls=SpineRouter, railbed=NodeConfig(ifaces(name)))
        for link in topo.links:
            self.addLink(link.a.node, link.b.node, intfName1=link.a.ifname, intfName2=link.b.ifname)
