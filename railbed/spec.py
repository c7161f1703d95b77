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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from railbed.errors import SpecError
from railbed.safeload import MAX_YAML_BYTES as _MAX_BYTES
from railbed.safeload import describe, key_name, load_yaml, read_text
from railbed.units import format_rate, parse_duration, parse_rate

if TYPE_CHECKING:
    from hwmodels.leo import DatapathSpec

FABRIC_KINDS = ("single_switch", "leaf_spine", "rail_optimized")
MAX_LEAVES = 250  # one /16 of 10.0.0.0/8 per leaf or rail
MAX_SPINES = 250
MAX_PORTS_PER_LEAF = 60000
MAX_NICS_PER_SERVER = 64


@dataclass(frozen=True)
class Server:
    """One server: its GPUs, NICs (model rates in bit/s) and resource capacities."""

    name: str
    gpus: int
    nic_rates: tuple[float, ...]
    resources: Mapping[str, float] = field(default_factory=dict)
    intra_host: str | None = None
    datapath: DatapathSpec | None = None  # LEO's datapath model (hwmodels.leo), one stateful model per server in a run

    @property
    def nics(self) -> int:
        return len(self.nic_rates)


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
        doc = _mapping(data, "", {"name", "servers", "fabric"}, required={"servers", "fabric"})
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
        return {
            "name": self.name,
            "servers": [
                {
                    "gpus": s.gpus,
                    "nics": s.nics,
                    "nic_rate": list(s.nic_rates),
                    "resources": dict(s.resources),
                    **({"intra_host": s.intra_host} if s.intra_host else {}),
                    **({"datapath": _datapath_doc(s.datapath)} if s.datapath else {}),
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
            hw = s.intra_host or (_datapath_text(s.datapath) if s.datapath else None)
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
        return "\n".join(lines)


# ---------------------------------------------------------------- validation
def _mapping(value: object, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
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


def _int(value: object, where: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(where, f"expected a whole number, got {describe(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise SpecError(where, f"must be {bound}, got {value}")
    return value


_GROUP_KEYS = {"count", "gpus", "nics", "nic_rate", "resources", "intra_host", "datapath"}


def _servers(value: object) -> tuple[Server, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("servers", "expected a non-empty list of server groups")
    servers: list[Server] = []
    for g, group in enumerate(value):
        where = f"servers[{g}]"
        group = _mapping(group, where, _GROUP_KEYS, required={"nic_rate"})
        count = _int(group.get("count", 1), f"{where}.count", 1, 65000)
        gpus = _int(group.get("gpus", 1), f"{where}.gpus", 0, 1024)
        raw_rate = group["nic_rate"]
        if isinstance(raw_rate, list):
            if not raw_rate:
                raise SpecError(f"{where}.nic_rate", "empty list")
            rates = tuple(parse_rate(r, f"{where}.nic_rate[{i}]") for i, r in enumerate(raw_rate))
            nics = _int(group.get("nics", len(rates)), f"{where}.nics", 1, MAX_NICS_PER_SERVER)
            if nics != len(rates):
                raise SpecError(f"{where}.nic_rate", f"lists {len(rates)} rates but nics is {nics}")
        else:
            nics = _int(group.get("nics", 1), f"{where}.nics", 1, MAX_NICS_PER_SERVER)
            rates = (parse_rate(raw_rate, f"{where}.nic_rate"),) * nics
        resources = _resources(group.get("resources", {}), f"{where}.resources")
        intra = _intra_host(group.get("intra_host"), gpus, where)
        datapath = _datapath(group["datapath"], f"{where}.datapath") if "datapath" in group else None
        if intra is not None and datapath is not None:
            raise SpecError(f"{where}.datapath", "a server has either an intra_host graph or a datapath, not both")
        for _ in range(count):
            servers.append(Server(f"h{len(servers)}", gpus, rates, resources, intra, datapath))
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


def _intra_host(intra: object, gpus: int, where: str) -> str | None:
    if intra is None:
        return None
    from hwmodels.graph import load_preset, presets  # pure data; imported late to keep spec light

    if not isinstance(intra, str) or intra not in presets():
        raise SpecError(f"{where}.intra_host", f"unknown preset {describe(intra)} (known: {', '.join(presets())})")
    preset_gpus = len(load_preset(intra).gpus)
    if preset_gpus != gpus:
        raise SpecError(f"{where}.gpus", f"{gpus} GPUs but intra_host {intra} has {preset_gpus}")
    return intra


_DATAPATH_KEYS = {"preset", "model", "cpu_cores", "acc_cores", "pcie_rate", "axi_rate", "compute", "jitter", "seed"}
_DATAPATH_MODELS = ("direct", "on-path", "off-path")


def _datapath(value: object, where: str) -> DatapathSpec:
    """A server's LEO datapath: a preset of §6.4 (f-nic, g+f-nic, bf-3) and overrides.

    ``compute: {function: {cpu: 0.7us, acc: 5GB/s}}`` gives a time per call or a
    processing rate; ``jitter: [3us, 9us]`` the delay range at this server's NIC."""
    from hwmodels.leo import HOST_PRESETS, datapath_spec  # pure data; imported late to keep spec light

    doc = _mapping(value, where, _DATAPATH_KEYS, required={"preset"})
    preset = doc["preset"]
    if not isinstance(preset, str) or preset not in HOST_PRESETS:
        known = ", ".join(HOST_PRESETS)
        raise SpecError(f"{where}.preset", f"unknown datapath preset {describe(preset)} (known: {known})")
    over: dict[str, Any] = {}
    if "model" in doc:
        if doc["model"] not in _DATAPATH_MODELS:
            known = ", ".join(_DATAPATH_MODELS)
            raise SpecError(f"{where}.model", f"unknown hardware model {describe(doc['model'])} (known: {known})")
        over["model"] = doc["model"]
    for key in ("cpu_cores", "acc_cores"):
        if key in doc:
            over[key] = _int(doc[key], f"{where}.{key}", 1, 4096)
    for key in ("pcie_rate", "axi_rate"):
        if key in doc:
            rate = parse_rate(doc[key], f"{where}.{key}")
            if not 0 < rate < math.inf:
                raise SpecError(f"{where}.{key}", "must be a positive rate")
            over[key.replace("_rate", "_gbps")] = rate / 8e9
    if "seed" in doc:
        over["seed"] = _int(doc["seed"], f"{where}.seed", 0, 2**63 - 1)
    if "jitter" in doc:
        jit = doc["jitter"]
        if not isinstance(jit, list) or len(jit) != 2:
            raise SpecError(f"{where}.jitter", f"expected [min, max] durations, got {describe(jit)}")
        lo, hi = (parse_duration(j, f"{where}.jitter[{i}]") for i, j in enumerate(jit))
        if hi < lo:
            raise SpecError(f"{where}.jitter", f"max {hi:g} s is below min {lo:g} s")
        over["jitter"] = (lo, hi)
    over["compute"], over["rate"] = _functions(doc.get("compute", {}), f"{where}.compute")
    return datapath_spec(preset, **over)


def _functions(value: object, where: str) -> tuple[dict, dict]:
    """``{function: {device: duration or rate}}`` -> (fixed times, rates)."""
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping of function to per-device times, got {describe(value)}")
    times: dict[str, dict[str, float]] = {}
    rates: dict[str, dict[str, float]] = {}
    for name, per_dev in value.items():
        fwhere = f"{where}.{key_name(name)}"
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise SpecError(fwhere, "a function name must be a short string")
        if not isinstance(per_dev, dict) or not per_dev:
            raise SpecError(fwhere, f"expected a mapping of device (cpu, acc) to time or rate, not {describe(per_dev)}")
        for dev, t in per_dev.items():
            dwhere = f"{fwhere}.{key_name(dev)}"
            if dev not in ("cpu", "acc"):
                raise SpecError(dwhere, "unknown device (known: cpu, acc)")
            if isinstance(t, str) and ("/" in t or t.rstrip().endswith(("bit", "Bps", "bps"))):
                rate = parse_rate(t, dwhere)
                if not 0 < rate < math.inf:
                    raise SpecError(dwhere, "a processing rate must be positive")
                rates.setdefault(name, {})[dev] = rate
            else:
                times.setdefault(name, {})[dev] = parse_duration(t, dwhere)
    return times, rates


def _datapath_text(d: DatapathSpec) -> str:
    jitter = f", jitter {d.jitter[0] * 1e6:g}-{d.jitter[1] * 1e6:g} us" if d.jitter else ""
    return f"{d.preset} ({d.model}, {d.cpu_cores} CPU cores, {d.acc_cores} accelerator cores{jitter})"


def _datapath_doc(d: DatapathSpec) -> dict[str, Any]:
    """The ``datapath`` mapping :func:`_datapath` reads back to an equal spec."""
    doc: dict[str, Any] = {
        "preset": d.preset,
        "model": d.model,
        "cpu_cores": d.cpu_cores,
        "acc_cores": d.acc_cores,
        "pcie_rate": d.pcie_gbps * 8e9,
        "axi_rate": d.axi_gbps * 8e9,
        "seed": d.seed,
        "compute": {f: dict(t) for f, t in d.compute.items()},
    }
    for f, per in d.rate.items():
        doc["compute"].setdefault(f, {}).update({dev: f"{r!r}bit/s" for dev, r in per.items()})
    doc["compute"] = {f: t for f, t in doc["compute"].items() if t}
    if d.jitter is not None:
        doc["jitter"] = list(d.jitter)
    return doc


_FABRIC_KEYS = {"type", "spines", "uplink_rate", "latency", "servers_per_leaf", "rails"}


def _fabric(value: object, servers: tuple[Server, ...]) -> Fabric:
    doc = _mapping(value, "fabric", _FABRIC_KEYS, required={"type"})
    kind = doc["type"]
    if not isinstance(kind, str) or kind not in FABRIC_KINDS:
        raise SpecError("fabric.type", f"unknown fabric {describe(kind)} (known: {', '.join(FABRIC_KINDS)})")
    latency = parse_duration(doc.get("latency", 0), "fabric.latency")
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
        return Fabric(kind, latency=latency)

    spines = _int(doc.get("spines", 1), "fabric.spines", 1 if kind == "leaf_spine" else 0, MAX_SPINES)
    if kind == "leaf_spine":
        reject("rails")
        per_leaf = _int(doc.get("servers_per_leaf", len(servers)), "fabric.servers_per_leaf", 1)
        leaves = -(-len(servers) // per_leaf)
        if leaves > MAX_LEAVES:
            raise SpecError("fabric.servers_per_leaf", f"gives {leaves} leaves; at most {MAX_LEAVES}")
        return Fabric(kind, spines, uplink, latency, servers_per_leaf=per_leaf)

    reject("servers_per_leaf")
    rails = _int(doc.get("rails", servers[0].nics), "fabric.rails", 1, MAX_LEAVES)
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
    return Fabric(kind, spines, uplink, latency, rails=rails)
