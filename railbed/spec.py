"""ClusterSpec: the servers and fabric of a cluster, as plain validated data.

A spec is written in YAML (or built in Python) and validated on load; every
error names the field (``servers[1].nic_rate: rate must be positive``) and
unknown keys are errors. Example (the DGTP testbed of seed 000, section VI-A:
four servers with two GPUs, 8 cores and 48 GB each; two with 50 Gbit/s NICs
and two limited to 10 Gbit/s)::

    name: dgtp-testbed
    servers:
      - count: 2
        gpus: 2
        nic_rate: 50Gbit
        resources: {cpu: 8, gpu: 2, mem: 48}
      - count: 2
        gpus: 2
        nic_rate: 10Gbit
        resources: {cpu: 8, gpu: 2, mem: 48}
    fabric:
      type: single_switch

Fabrics:

``single_switch``
    every NIC on one L2 switch.
``leaf_spine``
    ``servers_per_leaf`` consecutive servers (all their NICs) on each leaf,
    every leaf joined to each of ``spines`` spine routers.
``rail_optimized``
    NIC *i* of every server on rail switch *i* (so every server has exactly
    ``rails`` NICs); ``spines`` spine routers join the rails. GPU *i* sends
    through NIC *i*.

Rates are model rates in bit/s (see :mod:`railbed.units`); they accept
numbers (``100e9``) and strings (``"100Gbit"``).

Every fabric may declare its MTU (``mtu: 9000``; 1500 by default, or 4096)
and its framing (``framing: none`` for payload-only links; ``ethernet`` by
default): :class:`railbed.units.Framing`, read by every backend.

``buffer`` (``buffer: 1.3MB``) is each switch port's egress queue in bytes,
counted in the fabric's frames (:meth:`Fabric.queue_packets`) and the same at
every scale factor k: the emulator's leaf queues and the packet backend's bands
hold it. Without it a switch port holds the emulator's default, ``max(64, 5 ms
of frames)`` at the real rate, which is 5 us of model time at k = 1000: a
shallow buffer no switch of the papers has.

A server group may name one hardware model by the key of its kind
(:data:`railbed.hosts.KINDS`: ``intra_host: dgx1-v100``, ``datapath: {...}``);
the kind reads and checks the value (:attr:`Server.host`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.hosts import KINDS, HostSpec
from railbed.safeload import MAX_YAML_BYTES as _MAX_BYTES
from railbed.safeload import describe, key_name, load_yaml, read_text
from railbed.units import ETHERNET, Framing, format_rate, parse_duration, parse_framing, parse_rate, parse_size

FABRIC_KINDS = ("single_switch", "leaf_spine", "rail_optimized")
MAX_LEAVES = 250  # one /16 of 10.0.0.0/8 per leaf or rail
MAX_SPINES = 250
MAX_PORTS_PER_LEAF = 60000
MAX_NICS_PER_SERVER = 64
MAX_BUFFER_BYTES = 1 << 30  # 1 GiB per port: far above any switch's whole shared buffer


@dataclass(frozen=True)
class Server:
    """One server: its GPUs, NICs (model rates in bit/s) and resource capacities."""

    name: str
    gpus: int
    nic_rates: tuple[float, ...]
    resources: Mapping[str, float] = field(default_factory=dict)
    host: HostSpec | None = None  # its hardware model, of a kind registered in railbed.hosts.KINDS
    group: int = field(default=0, compare=False)  # its group in the file (``servers[group]``), for messages

    @property
    def nics(self) -> int:
        return len(self.nic_rates)

    def host_spec(self, kind: str) -> Any:
        """The spec of the server's hardware model if it is of ``kind`` (a cluster-file key:
        ``intra_host``, ``datapath``), else ``None``."""
        return self.host.spec if self.host is not None and self.host.kind == kind else None


@dataclass(frozen=True)
class Fabric:
    """How servers are connected. ``uplink_rate`` is the rate of each
    switch-to-spine link; ``latency`` the one-way latency of every link."""

    kind: str
    spines: int = 0
    uplink_rate: float | None = None
    latency: float = 0.0
    servers_per_leaf: int | None = None
    rails: int | None = None
    framing: Framing = ETHERNET  # the MTU and what a rate counts (``mtu``, ``framing`` keys)
    buffer: int | None = None  # bytes per switch-port egress queue; None: the emulator's default

    def queue_packets(self) -> int | None:
        """A switch port's queue in packets: ``buffer`` in whole frames (None: the backend's default)."""
        return None if self.buffer is None else -(-self.buffer // self.framing.frame)


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster: servers plus fabric. Build with :meth:`from_dict` or :meth:`load`."""

    name: str
    servers: tuple[Server, ...]
    fabric: Fabric

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path) -> ClusterSpec:
        """Read and validate a YAML file (through :mod:`railbed.safeload`: bounded size,
        aliases and depth; binary files refused)."""
        return cls.from_yaml(read_text(path, _MAX_BYTES, str(path)), source=str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> ClusterSpec:
        return cls.from_dict(load_yaml(text, source))

    @classmethod
    def from_dict(cls, data: object) -> ClusterSpec:
        """Validate a parsed document (see the module docstring for the schema)."""
        doc = check_mapping(data, "", {"name", "servers", "fabric"}, required={"servers", "fabric"})
        name = _name(doc.get("name", "cluster"), "name")
        servers = _servers(doc["servers"])
        fabric = _fabric(doc["fabric"], servers)
        return cls(name=name, servers=servers, fabric=fabric)

    # ---------------------------------------------------------------- building
    @classmethod
    def rail_optimized(
        cls,
        servers: int,
        rails: int,
        spines: int,
        nic_rate: float = 100e9,
        uplink_rate: float | None = None,
        gpus: int | None = None,
        mtu: int = ETHERNET.mtu,
    ) -> ClusterSpec:
        """Rail-optimized cluster of ``servers`` x ``rails`` GPUs (one GPU per NIC)."""
        return cls.from_dict(
            {
                "name": f"rail-{servers}x{rails}",
                "servers": [
                    {"count": servers, "gpus": rails if gpus is None else gpus, "nics": rails, "nic_rate": nic_rate}
                ],
                "fabric": {
                    "type": "rail_optimized",
                    "spines": spines,
                    **({"uplink_rate": uplink_rate} if uplink_rate else {}),
                    **({"mtu": mtu} if mtu != ETHERNET.mtu else {}),
                },
            }
        )

    # ------------------------------------------------------------------- views
    @property
    def gpus(self) -> int:
        return sum(s.gpus for s in self.servers)

    def to_dict(self) -> dict[str, Any]:
        """A document :meth:`from_dict` reads back to an equal spec (one group per server)."""
        fab: dict[str, Any] = {"type": self.fabric.kind, "latency": self.fabric.latency}
        if self.fabric.kind != "single_switch":
            fab["spines"] = self.fabric.spines
            fab["uplink_rate"] = self.fabric.uplink_rate
        if self.fabric.servers_per_leaf is not None:
            fab["servers_per_leaf"] = self.fabric.servers_per_leaf
        if self.fabric.rails is not None:
            fab["rails"] = self.fabric.rails
        if self.fabric.framing != ETHERNET:
            fab["mtu"] = self.fabric.framing.mtu
            fab["framing"] = "none" if self.fabric.framing.payload_only else "ethernet"
        if self.fabric.buffer is not None:
            fab["buffer"] = self.fabric.buffer
        return {
            "name": self.name,
            "servers": [
                {
                    "gpus": s.gpus,
                    "nics": s.nics,
                    "nic_rate": list(s.nic_rates),
                    "resources": dict(s.resources),
                    **({s.host.kind: s.host.definition().to_doc(s.host.spec)} if s.host else {}),
                }
                for s in self.servers
            ],
            "fabric": fab,
        }

    def summary(self) -> str:
        """A few human lines: servers, NICs, fabric."""
        f = self.fabric
        lines = [
            f"cluster {self.name}: {len(self.servers)} servers, {self.gpus} GPUs, "
            f"{sum(s.nics for s in self.servers)} NICs, fabric {f.kind}"
        ]
        if f.kind == "rail_optimized":
            lines.append(f"  {f.rails} rails, {f.spines} spines, uplinks {format_rate(f.uplink_rate or 0)}")
        elif f.kind == "leaf_spine":
            leaves = -(-len(self.servers) // (f.servers_per_leaf or 1))
            lines.append(
                f"  {leaves} leaves of {f.servers_per_leaf} servers, {f.spines} spines, "
                f"uplinks {format_rate(f.uplink_rate or 0)}"
            )
        groups: dict[tuple, list[str]] = {}
        for s in self.servers:
            hw = s.host.definition().describe(s.host.spec) if s.host else None
            key = (s.gpus, s.nic_rates, tuple(sorted(s.resources.items())), hw)
            groups.setdefault(key, []).append(s.name)
        for (gpus, rates, res, hw), names in groups.items():
            nic_text = ", ".join(format_rate(r) for r in rates)
            extra = f", resources {dict(res)}" if res else ""
            extra += f", intra-host {hw}" if hw else ""
            lines.append(
                f"  {len(names)} x ({gpus} GPUs, NICs [{nic_text}]{extra}): {names[0]}..{names[-1]}"
                if len(names) > 1
                else f"  1 x ({gpus} GPUs, NICs [{nic_text}]{extra}): {names[0]}"
            )
        if f.latency:
            lines.append(f"  link latency {f.latency * 1e6:g} us")
        if f.framing != ETHERNET:
            lines.append(f"  {f.framing.describe()}")
        if f.buffer is not None:
            lines.append(f"  switch buffer {f.buffer} bytes per port ({f.queue_packets()} frames)")
        return "\n".join(lines)


# ---------------------------------------------------------------- validation
def check_mapping(value: object, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
    """``value`` as a mapping with only ``allowed`` keys and every ``required`` one (errors name ``where.key``)."""
    if not isinstance(value, dict):
        raise SpecError(where or "document", f"expected a mapping, got {describe(value)}")
    for key in value:
        if key not in allowed:
            raise SpecError(_join(where, key_name(key)), f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required):
        if key not in value:
            raise SpecError(_join(where, key), "missing")
    return value


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


MAX_NAME_CHARS = 100


def _name(value: object, where: str) -> str:
    """A name that goes into file names and messages: a short printable string."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise SpecError(where, f"must be a printable string of 1..{MAX_NAME_CHARS} characters, got {describe(value)}")
    return value


def check_int(value: object, where: str, minimum: int, maximum: int | None = None) -> int:
    """``value`` as a whole number in ``minimum..maximum`` (``bool`` refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(where, f"expected a whole number, got {describe(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise SpecError(where, f"must be {bound}, got {value}")
    return value


_GROUP_KEYS = {"count", "gpus", "nics", "nic_rate", "resources"}  # and the hardware-model kinds' keys


def _servers(value: object) -> tuple[Server, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("servers", "expected a non-empty list of server groups")
    servers: list[Server] = []
    for g, group in enumerate(value):
        where = f"servers[{g}]"
        group = check_mapping(group, where, _GROUP_KEYS | set(KINDS.names()), required={"nic_rate"})
        count = check_int(group.get("count", 1), f"{where}.count", 1, 65000)
        gpus = check_int(group.get("gpus", 1), f"{where}.gpus", 0, 1024)
        raw_rate = group["nic_rate"]
        if isinstance(raw_rate, list):
            if not raw_rate:
                raise SpecError(f"{where}.nic_rate", "empty list")
            rates = tuple(parse_rate(r, f"{where}.nic_rate[{i}]") for i, r in enumerate(raw_rate))
            nics = check_int(group.get("nics", len(rates)), f"{where}.nics", 1, MAX_NICS_PER_SERVER)
            if nics != len(rates):
                raise SpecError(f"{where}.nic_rate", f"lists {len(rates)} rates but nics is {nics}")
        else:
            nics = check_int(group.get("nics", 1), f"{where}.nics", 1, MAX_NICS_PER_SERVER)
            rates = (parse_rate(raw_rate, f"{where}.nic_rate"),) * nics
        resources = _resources(group.get("resources", {}), f"{where}.resources")
        host = _host(group, gpus, where)
        for _ in range(count):
            servers.append(Server(f"h{len(servers)}", gpus, rates, resources, host, group=g))
        if len(servers) > 65000:
            raise SpecError("servers", f"at most 65000 servers, got more (group {g} reaches {len(servers)})")
    return tuple(servers)


def _resources(value: object, where: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping of name to capacity, got {describe(value)}")
    resources: dict[str, float] = {}
    for key, cap in value.items():
        if not isinstance(key, str) or not key or len(key) > MAX_NAME_CHARS:
            raise SpecError(f"{where}.{key_name(key)}", "a resource name must be a short string")
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 <= cap < math.inf:
            raise SpecError(f"{where}.{key}", f"capacity must be a finite number >= 0, got {describe(cap)}")
        resources[key] = float(cap)
    return resources


def _host(group: dict, gpus: int, where: str) -> HostSpec | None:
    """The group's hardware model: at most one key of a registered kind (railbed.hosts.KINDS)."""
    kinds = [k for k in KINDS.names() if k in group]
    if len(kinds) > 1:
        raise SpecError(f"{where}.{kinds[1]}", f"a server has one hardware model; {' and '.join(kinds)} are given")
    if not kinds:
        return None
    kind = KINDS.get(kinds[0], f"{where}.{kinds[0]}")
    return HostSpec(kinds[0], kind.parse(group[kinds[0]], f"{where}.{kinds[0]}", gpus))


_FABRIC_KEYS = {"type", "spines", "uplink_rate", "latency", "servers_per_leaf", "rails", "mtu", "framing", "buffer"}


def _fabric(value: object, servers: tuple[Server, ...]) -> Fabric:
    doc = check_mapping(value, "fabric", _FABRIC_KEYS, required={"type"})
    kind = doc["type"]
    if not isinstance(kind, str) or kind not in FABRIC_KINDS:
        raise SpecError("fabric.type", f"unknown fabric {describe(kind)} (known: {', '.join(FABRIC_KINDS)})")
    latency = parse_duration(doc.get("latency", 0), "fabric.latency")
    framing = parse_framing(doc.get("mtu", ETHERNET.mtu), doc.get("framing", "ethernet"))
    buffer = _buffer(doc.get("buffer"), framing)
    max_nic = max(max(s.nic_rates) for s in servers)
    uplink = parse_rate(doc["uplink_rate"], "fabric.uplink_rate") if "uplink_rate" in doc else max_nic

    def reject(key: str) -> None:
        if key in doc:
            raise SpecError(f"fabric.{key}", f"not used by a {kind} fabric")

    if kind == "single_switch":
        for key in ("spines", "uplink_rate", "servers_per_leaf", "rails"):
            reject(key)
        ports = sum(s.nics for s in servers)
        if ports > MAX_PORTS_PER_LEAF:
            raise SpecError("servers", f"{ports} NICs exceed one switch's {MAX_PORTS_PER_LEAF} ports")
        return Fabric(kind, latency=latency, framing=framing, buffer=buffer)

    spines = check_int(doc.get("spines", 1), "fabric.spines", 1 if kind == "leaf_spine" else 0, MAX_SPINES)
    if kind == "leaf_spine":
        reject("rails")
        per_leaf = check_int(doc.get("servers_per_leaf", len(servers)), "fabric.servers_per_leaf", 1)
        leaves = -(-len(servers) // per_leaf)
        if leaves > MAX_LEAVES:
            raise SpecError("fabric.servers_per_leaf", f"gives {leaves} leaves; at most {MAX_LEAVES}")
        return Fabric(kind, spines, uplink, latency, servers_per_leaf=per_leaf, framing=framing, buffer=buffer)

    reject("servers_per_leaf")
    rails = check_int(doc.get("rails", servers[0].nics), "fabric.rails", 1, MAX_LEAVES)
    for s in servers:
        if s.nics != rails:
            more = "more rails than NICs" if rails > s.nics else "more NICs than rails"
            raise SpecError(
                "fabric.rails",
                f"{rails} rails but server {s.name} has {s.nics} NICs "
                f"({more}); a rail-optimized server has one NIC per rail",
            )
    if len(servers) > MAX_PORTS_PER_LEAF:
        raise SpecError("servers", f"{len(servers)} servers exceed a rail switch's ports")
    return Fabric(kind, spines, uplink, latency, rails=rails, framing=framing, buffer=buffer)


def _buffer(value: object, framing: Framing) -> int | None:
    """``fabric.buffer`` in bytes: at least one frame, at most :data:`MAX_BUFFER_BYTES` (None: absent)."""
    if value is None:
        return None
    nbytes = parse_size(value, "fabric.buffer")
    if not framing.frame <= nbytes <= MAX_BUFFER_BYTES:
        raise SpecError(
            "fabric.buffer", f"must hold one frame ({framing.frame} bytes) and at most 1 GiB, got {nbytes} bytes"
        )
    return nbytes
