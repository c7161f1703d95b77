"""What this machine can emulate: limits measured here, checked before anything is built.

A cluster file can describe 65,000 servers; one VM cannot emulate them. The
emulator refuses, before it creates a namespace, a cluster that would
exceed any of these (``railbed check`` prints the same verdict as a note):

* **namespaces** (build time): every host, switch and spine is a network
  namespace with a shell. Measured on the 2-core development VM with
  ``Testbed.start`` (leaf-spine, 16 servers per leaf, 2 spines): 11, 36,
  70, 138, 274 and 546 namespaces built in 0.75, 1.9, 3.7, 8.0, 28 and 39 s
  (52-103 ms each, 72 ms at 546). At most :data:`MAX_BUILD_SECONDS` of
  building: :data:`MAX_NODES` namespaces.
* **memory**: 0.5-1.5 MB per namespace (MemAvailable before and after the
  builds above) and 20 MB per server for its traffic agent (the RSS of
  ``python -m emulator.agent``); the total must fit in half of the memory
  available now.
* **fidelity per core**: no link can be shaped below 1 Mbit/s real
  (:data:`railbed.units.MIN_REAL_LINK_RATE`) and the machine shapes about
  300 Mbit/s per core (:data:`railbed.units.REAL_BUDGET_PER_CORE`); with half
  the NICs busy, that allows ``2 x 300 x cores`` host NICs whatever k is.
* **per link**: at the chosen k every shaped port must be between 1 Mbit/s
  and :data:`MAX_REAL_LINK_RATE_SHAPED` real (HTB on veth without offloads
  holds about 2 Gbit/s per link here, bench/bench_platform.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import MIN_REAL_LINK_RATE, REAL_BUDGET_PER_CORE, RateScale, format_rate

BUILD_SECONDS_PER_NODE = 0.072  # 546 namespaces in 39 s on the 2-core VM
MAX_BUILD_SECONDS = 120.0
MAX_NODES = int(MAX_BUILD_SECONDS / BUILD_SECONDS_PER_NODE)  # 1666
MEMORY_PER_NODE = 1.5e6  # bytes per namespace (measured 0.5-1.5 MB)
MEMORY_PER_AGENT = 20e6  # bytes: RSS of one traffic agent
MAX_REAL_LINK_RATE_SHAPED = 10e9


@dataclass(frozen=True)
class EmulationCost:
    """What building ``spec`` here would take."""

    nodes: int
    host_nics: int
    build_seconds: float
    memory_bytes: float

    def summary(self) -> str:
        return (
            f"emulation: {self.nodes} namespaces, about {self.build_seconds:.0f} s to build, "
            f"{self.memory_bytes / 1e6:.0f} MB with agents"
        )


def cost(spec: ClusterSpec, topo: Topology) -> EmulationCost:
    nodes = len(topo.hosts) + len(topo.switches) + len(topo.spines)
    return EmulationCost(
        nodes=nodes,
        host_nics=sum(s.nics for s in spec.servers),
        build_seconds=nodes * BUILD_SECONDS_PER_NODE,
        memory_bytes=nodes * MEMORY_PER_NODE + len(spec.servers) * MEMORY_PER_AGENT,
    )


def meminfo(key: str) -> float:
    """Field ``key`` of /proc/meminfo (``MemAvailable``, ``MemTotal``) in bytes (inf where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def available_memory() -> float:
    """MemAvailable of /proc/meminfo in bytes (inf where it cannot be read)."""
    return meminfo("MemAvailable")


def problems(
    spec: ClusterSpec, topo: Topology, scale: RateScale, cores: int | None = None, memory: float | None = None
) -> list[tuple[str, str]]:
    """(field, reason) for every limit of the module docstring that ``spec`` at ``scale`` exceeds."""
    cores = max(1, cores or os.cpu_count() or 1)
    memory = available_memory() if memory is None else memory
    c = cost(spec, topo)
    out = []
    if c.nodes > MAX_NODES:
        out.append(
            (
                "servers",
                f"{c.nodes} namespaces would take about {c.build_seconds / 60:.0f} min to build here "
                f"({BUILD_SECONDS_PER_NODE * 1000:.0f} ms each, measured); at most {MAX_NODES} "
                f"({MAX_BUILD_SECONDS:.0f} s); use railbed simulate",
            )
        )
    if c.memory_bytes > memory / 2:
        out.append(
            (
                "servers",
                f"needs about {c.memory_bytes / 1e9:.1f} GB ({MEMORY_PER_NODE / 1e6:.1f} MB per namespace, "
                f"{MEMORY_PER_AGENT / 1e6:.0f} MB per traffic agent); half of the {memory / 1e9:.1f} GB available "
                "is the limit; use railbed simulate",
            )
        )
    max_nics = int(2 * REAL_BUDGET_PER_CORE * cores / MIN_REAL_LINK_RATE)
    if c.host_nics > max_nics:
        out.append(
            (
                "servers",
                f"{c.host_nics} NICs: this {cores}-core machine shapes about "
                f"{format_rate(REAL_BUDGET_PER_CORE)} per core, so with half of them busy at the "
                f"minimum {format_rate(MIN_REAL_LINK_RATE)} at most {max_nics}; use railbed simulate",
            )
        )
    out.extend(rate_problems(topo, scale))
    return out


def rate_problems(topo: Topology, scale: RateScale) -> list[tuple[str, str]]:
    """Every shaped port between 1 Mbit/s and :data:`MAX_REAL_LINK_RATE_SHAPED` real at ``scale``."""
    rates = [p.rate for p in topo.ports.values()]
    if not rates:
        return []
    slowest, fastest = min(rates), max(rates)
    out = []
    if scale.real_rate(slowest) < MIN_REAL_LINK_RATE:
        out.append(
            (
                "scale",
                f"scale {scale.k:g} makes the slowest link (model {format_rate(slowest)}) "
                f"{format_rate(scale.real_rate(slowest))} real, below "
                f"{format_rate(MIN_REAL_LINK_RATE)}; use a smaller --scale",
            )
        )
    if scale.real_rate(fastest) > MAX_REAL_LINK_RATE_SHAPED:
        out.append(
            (
                "scale",
                f"scale {scale.k:g} makes the fastest link (model {format_rate(fastest)}) "
                f"{format_rate(scale.real_rate(fastest))} real, above the "
                f"{format_rate(MAX_REAL_LINK_RATE_SHAPED)} a shaper here can hold; use a larger --scale",
            )
        )
    return out


def check_emulable(spec: ClusterSpec, topo: Topology, scale: RateScale) -> None:
    """Raise :class:`SpecError` (the first problem) unless this machine can emulate ``spec`` at ``scale``."""
    found = problems(spec, topo, scale)
    if found:
        raise SpecError(*found[0])
