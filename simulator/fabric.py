"""The simulator's view of a :class:`~railbed.topology.Topology`: numbered links and routes.

Every egress port of the topology is one directed link of the port's rate
(model bit/s, frames on the wire, as the emulator's HTB classes count). A
route is the list of egress queues :meth:`Topology.path` gives for the
flow's NICs and ECMP spine, so both backends route identically. Its latency
is the fabric's per-link latency times its links, as the emulator's agents
wait it (``emulator.runtime``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from railbed.topology import Topology


@dataclass(frozen=True)
class Route:
    links: tuple[int, ...]
    latency: float


class Fabric:
    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        ports = list(topology.ports.values())
        self.index = {(p.node, p.ifname): i for i, p in enumerate(ports)}
        self.names = [f"{p.node}:{p.ifname}" for p in ports]
        self.capacity = np.array([p.rate for p in ports], dtype=np.float64)
        self._routes: dict[tuple, Route] = {}

    def route(self, src: tuple[int, int], dst: tuple[int, int], spine: int | None) -> Route:
        key = (src, dst, spine)
        route = self._routes.get(key)
        if route is None:
            hops = self.topology.path(src, dst, spine)
            links = tuple(self.index[(h.node, h.ifname)] for h in hops)
            route = Route(links, self.topology.one_way_latency(src, dst))
            self._routes[key] = route
        return route

    def link_stats(self, bits, peak, makespan: float) -> dict[str, dict]:
        """Per-link statistics in the emulator's ``RunResult.links`` shape (links that carried traffic)."""
        return link_stats(self.names, self.capacity, bits, peak, makespan)


def link_stats(names, capacity, bits, peak, makespan: float) -> dict[str, dict]:
    """:meth:`Fabric.link_stats` over link ``names`` and ``capacity`` (also the compact engine's)."""
    out = {}
    for i, name in enumerate(names):
        if bits[i] <= 0:
            continue
        rate = float(capacity[i])
        out[name] = {
            "rate": rate,
            "bytes": int(round(bits[i] / 8)),
            "mean_util": bits[i] / makespan / rate if makespan > 0 else 0.0,
            "peak_util": float(peak[i]),
            "drops": 0,
        }
    return out
