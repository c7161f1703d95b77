"""Intra-host interconnect graphs (NCCL-like): typed nodes and links, presets, routes.

Nodes: ``gpu``, ``pcie_switch``, ``cpu``, ``nic``, ``nvswitch``, ``accel``
(and ``wire``: the network side of a NIC, added automatically). Links:
``nvlink`` (with a link count), ``pcie`` (with a generation), ``qpi``,
``axi`` (on-board), ``nic`` (a NIC's port to the network). Every link is
full duplex: each direction has the full bandwidth.

Units follow railbed: bandwidth in **bit/s**, latency in seconds. Preset
files give speeds in GB/s (as the DGCL paper's Table 1 does) and are
converted on load.

Default speeds, DGCL (seed 002) Table 1, GB/s: NV2 48.35, NV1 24.22, PCIe
11.13, QPI 9.56, IB 6.37, Ethernet 3.12. A link of ``n`` NVLinks gets the
NV2 value for n = 2 and ``n x NV1`` otherwise (the paper measured only 1 and
2). A preset's ``speeds`` section overrides these (then ``nvlink`` is per
link and multiplied by the count). Latencies are not in the paper; we use
1 us per hop by default (configurable per preset as ``latency_us``).

Path rates. Table 1 measured one GPU pair alone over each kind of
connection: it is the rate of one *path*, not necessarily the capacity of
the shared link the path crosses (DGCL's Table 3 measures how GPUs sharing
the QPI degrade each other). A preset's ``path_speeds`` (GB/s by link kind)
caps one transfer whose route crosses a link of that kind
(:meth:`IntraHostGraph.path_cap`), while ``speeds`` sets the shared links'
capacities; without ``path_speeds`` (the ``-literal`` reading, and every
preset but the ``*-dgcl`` ones) the link capacity is both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import yaml

from railbed.errors import SpecError

PRESET_DIR = Path(__file__).resolve().parent / "presets"
NODE_TYPES = ("gpu", "pcie_switch", "cpu", "nic", "nvswitch", "accel", "wire", "switch")
LINK_TYPES = ("nvlink", "pcie", "qpi", "axi", "nic")
GB = 8e9  # one GB/s in bit/s

DGCL_TABLE1_GBPS = {"nv2": 48.35, "nv1": 24.22, "pcie": 11.13, "qpi": 9.56, "ib": 6.37, "ethernet": 3.12}
NIC_SPEEDS_GBPS = {"ib": 6.37, "ethernet": 3.12, "hdr200": 25.0, "ndr400": 50.0}
DEFAULT_SPEEDS_GBPS = {"pcie": 11.13, "qpi": 9.56, "axi": 12.8}  # axi: 512-bit @ 200 MHz, our choice
DEFAULT_LATENCY = 1e-6


@dataclass(frozen=True)
class HwLink:
    a: str
    b: str
    kind: str
    bandwidth: float  # bit/s, each direction
    latency: float = DEFAULT_LATENCY
    count: int = 1  # NVLinks in this connection, or PCIe generation for pcie


@dataclass
class IntraHostGraph:
    """A server's interconnect. Directed link ``2*i`` is ``links[i]`` a->b, ``2*i+1`` b->a."""

    name: str
    node_types: dict[str, str]
    links: list[HwLink]
    meta: dict = field(default_factory=dict)

    # ------------------------------------------------------------ structure
    @cached_property
    def nodes(self) -> list[str]:
        return list(self.node_types)

    @cached_property
    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.nodes)}

    def of_type(self, kind: str) -> list[str]:
        return [n for n, t in self.node_types.items() if t == kind]

    @property
    def gpus(self) -> list[str]:
        return self.of_type("gpu")

    @cached_property
    def capacity(self) -> np.ndarray:
        """Bandwidth (bit/s) of every directed link."""
        return np.repeat(np.array([lk.bandwidth for lk in self.links], dtype=np.float64), 2)

    @cached_property
    def latency(self) -> np.ndarray:
        return np.repeat(np.array([lk.latency for lk in self.links], dtype=np.float64), 2)

    @cached_property
    def _adjacency(self) -> dict[str, list[tuple[str, int]]]:
        adj: dict[str, list[tuple[str, int]]] = {n: [] for n in self.nodes}
        for i, lk in enumerate(self.links):
            adj[lk.a].append((lk.b, 2 * i))
            adj[lk.b].append((lk.a, 2 * i + 1))
        return adj

    def nvlinks(self, gpu: str) -> int:
        return sum(lk.count for lk in self.links if lk.kind == "nvlink" and gpu in (lk.a, lk.b))

    def directed(self, a: str, b: str) -> int | None:
        """The directed link a->b if the two nodes are joined directly."""
        for nb, d in self._adjacency[a]:
            if nb == b:
                return d
        return None

    # --------------------------------------------------------------- routing
    def routes(self, src: str, dst: str) -> list[tuple[list[int], float]]:
        """How a transfer src->dst is carried: [(directed links, fraction of bytes)].

        Peer-to-peer routing as the hardware does it (DGCL section 3, NCCL):
        intermediate nodes are never GPUs (relaying through a GPU is a plan's
        choice, e.g. SPST's). Among such paths the widest (largest bottleneck)
        wins, then the one with fewer hops. Through NVSwitches the transfer is
        split over all switch planes in proportion to their bandwidth.
        """
        if src == dst:
            return [([], 1.0)]
        direct = self.directed(src, dst)
        if direct is not None:
            return [([direct], 1.0)]
        planes = [(n, d) for n, d in self._adjacency[src] if self.node_types[n] == "nvswitch"]
        if planes and self.node_types[dst] == "gpu":
            split = []
            for sw, d in planes:
                back = self.directed(sw, dst)
                if back is not None:
                    split.append(([d, back], min(self.capacity[d], self.capacity[back])))
            if split:
                total = sum(w for _, w in split)
                return [(path, w / total) for path, w in split]
        path = self._widest_path(src, dst)
        if path is None:
            raise ValueError(f"{self.name}: no route from {src} to {dst}")
        return [(path, 1.0)]

    def _widest_path(self, src: str, dst: str) -> list[int] | None:
        # Widest-shortest path by exhaustive label setting (graphs have < 50 nodes).
        best: dict[str, tuple[float, int, list[int]]] = {src: (float("inf"), 0, [])}
        frontier = [src]
        while frontier:
            nxt = []
            for node in frontier:
                width, hops, path = best[node]
                for nb, d in self._adjacency[node]:
                    if nb != dst and self.node_types[nb] in ("gpu", "wire"):
                        continue
                    cand = (min(width, self.capacity[d]), hops + 1, path + [d])
                    old = best.get(nb)
                    if old is None or (cand[0], -cand[1]) > (old[0], -old[1]):
                        best[nb] = cand
                        if nb != dst:
                            nxt.append(nb)
            frontier = nxt
        return best[dst][2] if dst in best else None

    @cached_property
    def path_caps(self) -> dict[str, float]:
        """Bit/s cap of one transfer by the kind of link its route crosses (``path_speeds``)."""
        return dict(self.meta.get("path_caps", {}))

    def path_cap(self, src: str, dst: str) -> float:
        """The rate one transfer src->dst cannot exceed alone: the smallest ``path_speeds`` entry of
        a link kind its route crosses (inf without one)."""
        caps = self.path_caps
        if not caps or src == dst:
            return float("inf")
        kinds = {self.links[d // 2].kind for path, _ in self.routes(src, dst) for d in path}
        return min([caps[k] for k in kinds if k in caps], default=float("inf"))

    def path_bandwidth(self, src: str, dst: str) -> float:
        """Bit/s of one transfer alone on its route(s): slowest hop of each plane, summed."""
        alone = sum(min(self.capacity[d] for d in path) if path else float("inf") for path, _ in self.routes(src, dst))
        return min(alone, self.path_cap(src, dst))

    def check(self) -> None:
        """Validate structure and the preset's ``expect`` section (raises SpecError)."""
        for lk in self.links:
            for end in (lk.a, lk.b):
                if end not in self.node_types:
                    raise SpecError(f"{self.name}.links", f"unknown node {end!r}")
            if lk.bandwidth <= 0:
                raise SpecError(f"{self.name}.links", f"{lk.a}-{lk.b}: bandwidth must be positive")
        expect = self.meta.get("expect", {})
        if "nvlinks_per_gpu" in expect:
            for g in self.gpus:
                if self.nvlinks(g) != expect["nvlinks_per_gpu"]:
                    raise SpecError(
                        f"{self.name}.links", f"{g} has {self.nvlinks(g)} NVLinks, expected {expect['nvlinks_per_gpu']}"
                    )


# ------------------------------------------------------------------ loading
def _speed(kind: str, count: int, speeds: dict[str, float]) -> float:
    if kind == "nvlink":
        if "nvlink" in speeds:
            return count * speeds["nvlink"] * GB
        if count == 2:
            return DGCL_TABLE1_GBPS["nv2"] * GB
        return count * DGCL_TABLE1_GBPS["nv1"] * GB
    if kind in speeds:
        return speeds[kind] * GB
    return DEFAULT_SPEEDS_GBPS[kind] * GB


def from_dict(doc: dict, source: str = "preset") -> IntraHostGraph:
    """Build and check a graph from a parsed preset (see the files in ``presets/``)."""
    if not isinstance(doc, dict):
        raise SpecError(source, "expected a mapping")
    allowed = {"name", "expect", "nodes", "links", "nic_speed", "speeds", "path_speeds", "latency_us"}
    for key in doc:
        if key not in allowed:
            raise SpecError(f"{source}.{key}", "unknown key")
    name = doc.get("name", source)
    speeds = {k: float(v) for k, v in (doc.get("speeds") or {}).items()}
    latency = float(doc.get("latency_us", 1.0)) * 1e-6
    node_types: dict[str, str] = {}
    for kind, names in (doc.get("nodes") or {}).items():
        if kind not in NODE_TYPES:
            raise SpecError(f"{name}.nodes.{kind}", f"unknown node type (known: {', '.join(NODE_TYPES)})")
        for n in names:
            node_types[str(n)] = kind
    links = []
    for i, item in enumerate(doc.get("links") or []):
        if not isinstance(item, list) or len(item) not in (3, 4):
            raise SpecError(f"{name}.links[{i}]", "expected [a, b, type] or [a, b, type, count]")
        a, b, kind = str(item[0]), str(item[1]), str(item[2])
        count = int(item[3]) if len(item) == 4 else (3 if kind == "pcie" else 1)
        if kind not in LINK_TYPES:
            raise SpecError(f"{name}.links[{i}]", f"unknown link type {kind!r}")
        links.append(HwLink(a, b, kind, _speed(kind, count, speeds), latency, count))
    nic_speed = doc.get("nic_speed")
    if nic_speed is not None:
        if nic_speed not in NIC_SPEEDS_GBPS:
            raise SpecError(f"{name}.nic_speed", f"unknown NIC speed {nic_speed!r}")
        for nic in [n for n, t in node_types.items() if t == "nic"]:
            node_types[f"{nic}:wire"] = "wire"
            links.append(HwLink(nic, f"{nic}:wire", "nic", NIC_SPEEDS_GBPS[nic_speed] * GB, latency))
    path_caps = {}
    for kind, value in (doc.get("path_speeds") or {}).items():
        if kind not in LINK_TYPES or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise SpecError(f"{name}.path_speeds.{kind}", f"expected a link type and a positive GB/s, got {value!r}")
        path_caps[kind] = float(value) * GB
    graph = IntraHostGraph(name, node_types, links, {"expect": doc.get("expect") or {}, "path_caps": path_caps})
    graph.check()
    return graph


def join(graphs: list[IntraHostGraph], nics: list[str], rates: list[float], latency: float = DEFAULT_LATENCY):
    """Servers side by side (nodes ``s<i>.<node>``; the NICs' network-side ``wire`` nodes dropped),
    NIC ``nics[i]`` of server ``i`` joined to one network ``switch`` node by a link of ``rates[i]``
    bit/s: the communication topology of a multi-server job (DGCL §7's 16 GPUs on two servers)."""
    node_types: dict[str, str] = {"switch": "switch"}
    links: list[HwLink] = []
    for i, g in enumerate(graphs):
        node_types |= {f"s{i}.{n}": t for n, t in g.node_types.items() if t != "wire"}
        links += [replace(lk, a=f"s{i}.{lk.a}", b=f"s{i}.{lk.b}") for lk in g.links if lk.kind != "nic"]
        links.append(HwLink(f"s{i}.{nics[i]}", "switch", "nic", float(rates[i]), latency))
    caps: dict[str, float] = {}
    for g in graphs:
        for kind, cap in g.path_caps.items():
            caps[kind] = min(cap, caps.get(kind, cap))
    joined = IntraHostGraph("+".join(g.name for g in graphs), node_types, links, {"path_caps": caps})
    joined.check()
    return joined


def load_preset(name: str) -> IntraHostGraph:
    """``dgx1-v100``, ``pcie8``, ``dgx-a100`` or ``dgx-h100`` (or a path to a YAML file)."""
    path = Path(name)
    if not path.suffix:
        path = PRESET_DIR / f"{name}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
        raise SpecError("intra_host", f"unknown preset {name!r} (known: {known})")
    return from_dict(yaml.safe_load(path.read_text()), source=path.stem)


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))
