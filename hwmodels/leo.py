"""MINC datapath models of LEO (seed 004, chapter 6, sections 6.2.1-6.2.2).

Hardware models (Fig. 6.5c and section 6.4's testbeds): each host has a CPU,
an accelerator (FPGA, SoC SmartNIC or GPU) and a NIC:

``direct``   accelerator and NIC are separate endpoints on one PCIe switch
             (CPU-switch, switch-accelerator, switch-NIC over PCIe);
``on-path``  the accelerator sits between NIC and CPU: NIC-accelerator over
             on-board AXI, accelerator-CPU over PCIe;
``off-path`` the NIC has a switch/router inside: NIC-CPU over PCIe and
             NIC-accelerator (the SmartNIC's SoC) over on-board AXI.

Communication paths (6.2.1) go from the requester to the responder: CPU-CPU,
CPU-Acc, Acc-CPU, Acc-Acc. A path is the sequence of compute nodes and
links it traverses: the requester's device and its links to the NIC, then
the responder's links from the NIC and its device. Elements of the two hosts
are distinct (``req.*``, ``resp.*``); the network between them is outside
the model (LEO: inter-host transport is the NIC's business).

Queues (equations 6.1 and 6.2). Requests arrive at times ``a_t``; request t
has type r_t and chosen path p_t; Δt_t = a_{t+1} - a_t. For a compute node c
on p_t the queue grows by T_c(c, r_t), for a link l on p_t by S(r_t)/BW(l);
every queue drains by Δt_t and never goes below 0. A request waits, at each
element of its path, the queue it finds on arrival, Q_{t-1}; so its
intra-host JCT is ``sum_e Q(e)_{t-1} + T(p, r)`` with
``T(p, r) = sum_l T_tr(l) + sum_c T_c(c, r)`` (6.3's terms). The paper
writes Q(p)_t in (6.3); we read it as the queue the request finds, which
makes a request on an idle path cost exactly T(p, r).

Parallel capacity (the paper's "Discussion": "increase queue latency when
the capacity is exceeded"): a compute node of capacity K is K servers fed
in arrival order (the Kiefer-Wolfowitz workload vector); K = 1 is exactly
(6.1). Links always have capacity 1.

The numba kernel ``_queue_kernel`` touches only the elements of each
request's path (draining lazily by the time elapsed since each element was
last touched); :func:`queue_jct_reference` applies (6.1)/(6.2) literally to
every element at every step. Tests check that they agree.

In a run (section "one host in a run" below): each server has its own
elements (:func:`host_datapath`) and queues (:class:`HostQueues`, the same
numba ``_step`` one leg at a time), so a request's legs on the requester
and on the responder queue where they happen, when they happen.
:class:`DatapathSpec` is a server's datapath as the cluster file gives it,
:data:`HOST_PRESETS` §6.4's hosts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from hwmodels.graph import GB

PATH_NAMES = ("cpu-cpu", "cpu-acc", "acc-cpu", "acc-acc")
# Defaults, our choices where the thesis gives no number: PCIe Gen3 x16 ~12.8 GB/s
# usable (the FPGA testbed of 6.4 uses PCIe Gen3 x16), on-board AXI 512 bit at
# 250 MHz = 16 GB/s, 1 us base traverse time per PCIe hop and 0.5 us per AXI hop.
PCIE_GBPS, AXI_GBPS = 12.8, 16.0
PCIE_TRAVERSE, AXI_TRAVERSE = 1e-6, 0.5e-6


@dataclass(frozen=True)
class Element:
    name: str
    kind: str  # "compute" or "link"
    bandwidth: float = 0.0  # bit/s (links)
    traverse: float = 0.0  # base traverse time T_tr (links), s
    capacity: int = 1  # parallel capacity (compute nodes)


@dataclass
class DatapathModel:
    """Elements of requester and responder hosts and the four communication paths."""

    name: str
    elements: list[Element]
    paths: dict[str, list[int]] = field(default_factory=dict)

    def index(self, name: str) -> int:
        return next(i for i, e in enumerate(self.elements) if e.name == name)

    def path_elements(self, path: str) -> list[Element]:
        return [self.elements[i] for i in self.paths[path]]


def _host_links(kind: str, pcie: float, axi: float) -> dict[str, list[tuple[str, float, float]]]:
    """Links (name, bit/s, traverse) from each device to the NIC in one host."""
    p = ("pcie", pcie * GB, PCIE_TRAVERSE)
    a = ("axi", axi * GB, AXI_TRAVERSE)
    if kind == "direct":
        return {"cpu": [("cpu-sw", *p[1:]), ("sw-nic", *p[1:])], "acc": [("acc-sw", *p[1:]), ("sw-nic", *p[1:])]}
    if kind == "on-path":
        return {"cpu": [("cpu-acc", *p[1:]), ("acc-nic", *a[1:])], "acc": [("acc-nic", *a[1:])]}
    if kind == "off-path":
        return {"cpu": [("cpu-nic", *p[1:])], "acc": [("acc-nic", *a[1:])]}
    raise ValueError(f"unknown hardware model {kind!r} (direct, on-path, off-path)")


def datapath_model(
    kind: str, cpu_capacity: int = 1, acc_capacity: int = 1, pcie_gbps: float = PCIE_GBPS, axi_gbps: float = AXI_GBPS
) -> DatapathModel:
    """The ``direct``, ``on-path`` or ``off-path`` model of two identical hosts."""
    links = _host_links(kind, pcie_gbps, axi_gbps)
    elements: list[Element] = []
    ids: dict[str, int] = {}

    def add(el: Element) -> int:
        if el.name not in ids:
            ids[el.name] = len(elements)
            elements.append(el)
        return ids[el.name]

    for host in ("req", "resp"):
        add(Element(f"{host}.cpu", "compute", capacity=cpu_capacity))
        add(Element(f"{host}.acc", "compute", capacity=acc_capacity))
        for dev in ("cpu", "acc"):
            for name, bw, tr in links[dev]:
                add(Element(f"{host}.{name}", "link", bw, tr))
    model = DatapathModel(kind, elements)
    for path in PATH_NAMES:
        src, dst = path.split("-")
        seq = [ids[f"req.{src}"]] + [ids[f"req.{n}"] for n, _, _ in links[src]]
        seq += [ids[f"resp.{n}"] for n, _, _ in reversed(links[dst])] + [ids[f"resp.{dst}"]]
        model.paths[path] = seq
    return model


@dataclass(frozen=True)
class RequestStream:
    """Requests: arrival time (s), type, chosen path; per-type size and compute times."""

    arrival: np.ndarray  # (N,) non-decreasing
    rtype: np.ndarray  # (N,) int
    path: np.ndarray  # (N,) int index into path_names
    size: np.ndarray  # (R,) bytes crossing each link
    compute: np.ndarray  # (R, E) compute time of type r at element e (0 for links)


def _tables(model: DatapathModel, path_names: list[str]):
    e = len(model.elements)
    ptr = np.zeros(len(path_names) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(model.paths[p]) for p in path_names])
    idx = np.array([i for p in path_names for i in model.paths[p]], dtype=np.int64)
    is_link = np.array([el.kind == "link" for el in model.elements])
    bw = np.array([el.bandwidth if el.kind == "link" else 1.0 for el in model.elements])
    tr = np.array([el.traverse for el in model.elements])
    cap = np.array([el.capacity if el.kind == "compute" else 1 for el in model.elements], dtype=np.int64)
    return ptr, idx, is_link, bw, tr, cap, e


@njit(cache=True)
def _step(work, last, is_link, bw, tr, cap, now, elems, nbytes, compute):  # pragma: no cover
    """One request (or leg) arriving at ``now`` on elements ``elems``: (6.1)/(6.2) for those
    elements, drained lazily since each was last touched. ``compute[e]`` is T_c at element e.
    Returns (JCT, queueing part): the queues found on arrival plus the base time."""
    total_wait = 0.0
    base = 0.0
    for x in range(elems.shape[0]):
        e = elems[x]
        gone = now - last[e]
        k = cap[e]
        for s in range(k):
            w = work[e, s] - gone
            work[e, s] = w if w > 0.0 else 0.0
        last[e] = now
        total_wait += work[e, 0]
        if is_link[e]:
            work[e, 0] += 8.0 * nbytes / bw[e]
            base += tr[e]
        else:
            work[e, 0] += compute[e]
            base += compute[e]
            # keep the workload vector sorted (insertion of the grown first entry)
            s = 0
            while s + 1 < k and work[e, s] > work[e, s + 1]:
                tmp = work[e, s]
                work[e, s] = work[e, s + 1]
                work[e, s + 1] = tmp
                s += 1
    return total_wait + base, total_wait


@njit(cache=True)
def _queue_kernel(arrival, rtype, path, size, compute, ptr, idx, is_link, bw, tr, cap):  # pragma: no cover
    n = arrival.shape[0]
    ne = is_link.shape[0]
    kmax = 1
    for e in range(ne):
        if cap[e] > kmax:
            kmax = cap[e]
    work = np.zeros((ne, kmax))  # remaining workload of each server of each element
    last = np.zeros(ne)  # time each element was last brought up to date
    jct = np.empty(n)
    wait = np.empty(n)
    for t in range(n):
        r = rtype[t]
        p = path[t]
        elems = idx[ptr[p] : ptr[p + 1]]
        jct[t], wait[t] = _step(work, last, is_link, bw, tr, cap, arrival[t], elems, size[r], compute[r])
    return jct, wait


def queue_jct(model: DatapathModel, stream: RequestStream, path_names: list[str] | None = None):
    """(intra-host JCT, queueing part) per request, with (6.1)/(6.2) (numba)."""
    names = list(path_names or PATH_NAMES)
    ptr, idx, is_link, bw, tr, cap, _ = _tables(model, names)
    if np.any(np.diff(stream.arrival) < 0):
        raise ValueError("arrival times must be non-decreasing")
    return _queue_kernel(
        np.asarray(stream.arrival, dtype=np.float64),
        np.asarray(stream.rtype, dtype=np.int64),
        np.asarray(stream.path, dtype=np.int64),
        np.asarray(stream.size, dtype=np.float64),
        np.asarray(stream.compute, dtype=np.float64),
        ptr,
        idx,
        is_link,
        bw,
        tr,
        cap,
    )


def queue_jct_reference(model: DatapathModel, stream: RequestStream, path_names: list[str] | None = None):
    """(6.1) and (6.2) applied literally: every element's queue updated at every step."""
    names = list(path_names or PATH_NAMES)
    els = model.elements
    # one workload list per element (K servers for a compute node of capacity K)
    queue = [[0.0] * (el.capacity if el.kind == "compute" else 1) for el in els]
    n = len(stream.arrival)
    jct, wait = np.zeros(n), np.zeros(n)
    for t in range(n):
        r = int(stream.rtype[t])
        on_path = model.paths[names[int(stream.path[t])]]
        waits = sum(min(queue[e]) for e in on_path)  # the queue the request finds: Q_{t-1}
        base = sum(els[e].traverse if els[e].kind == "link" else stream.compute[r][e] for e in on_path)
        wait[t], jct[t] = waits, waits + base
        dt = stream.arrival[t + 1] - stream.arrival[t] if t + 1 < n else 0.0
        for e, el in enumerate(els):
            q = sorted(queue[e])
            if e in on_path:  # Q_t = max(Q_{t-1} + work - dt, 0)
                q[0] += 8.0 * stream.size[r] / el.bandwidth if el.kind == "link" else stream.compute[r][e]
            queue[e] = [max(x - dt, 0.0) for x in q]  # otherwise Q_t = max(Q_{t-1} - dt, 0)
    return jct, wait


# ------------------------------------------------------------------ framing on the wire
# The simulator and the emulator carry request messages as TCP (railbed.units.wire_bytes: 66 B of
# Ethernet/IPv4/TCP-with-timestamps headers per 1448 B segment): the emulator's agents send real TCP.
# The thesis's messages ride RDMA ("LEO is currently built on hardware transport RDMA", §6.2.2;
# "inter-host communication is handled and transparentized by the hardware transport, e.g., RDMA",
# §6.2.2) and a response carries LEO's header, "as much as 4 bytes for each response message"
# (§6.4.3). RoCEv2 per packet (IBTA Annex A17): Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 58 B,
# plus AETH 4 on READ responses (KVS's values) or RETH 16 on a READ/WRITE's first packet: we count 62.
# Path MTU 4096 B (RoCE's largest; the thesis does not give it). Not counted either way: preamble,
# FCS and inter-frame gap (veth links have none, HTB does not count them), ACKs.
ROCE_HEADER, ROCE_MTU, LEO_HEADER = 62, 4096, 4


def rocev2_wire_bytes(payload: int, response: bool = False) -> int:
    """Bytes on the wire for a message of ``payload`` bytes over RoCEv2 (LEO's 4 B on a response)."""
    payload += LEO_HEADER if response else 0
    return payload + max(1, -(-payload // ROCE_MTU)) * ROCE_HEADER if payload > 0 else 0


def tcp_wire_bytes(payload: int, response: bool = False) -> int:
    """Bytes on the wire for a message of ``payload`` bytes as railbed's backends carry it (TCP)."""
    from railbed.units import wire_bytes

    return wire_bytes(payload)


FRAMINGS = {"tcp": tcp_wire_bytes, "rocev2": rocev2_wire_bytes}
SIMULATED_FRAMING = "tcp"  # what the simulator charges (simulator/fluid/run.py: wire_bytes)


# ------------------------------------------------------------------ one host in a run
# A run keeps one stateful model per server (hwmodels.plugin.DatapathHost). Its legs are
# halves of a communication path: on the requester the device's compute, then its links
# to the NIC; on the responder the NIC's links to the device, then the device's compute.
# A leg that computes nothing crosses only the links (a DMA needs no core; our choice,
# the thesis does not say whether a response waits for the device's queue).
LEG_DEVICES = ("cpu", "acc")


@dataclass(frozen=True)
class DatapathSpec:
    """A server's datapath as the cluster file gives it (§6.2.1 hardware abstractions, §6.4.1 hosts).

    ``compute`` maps a function name (what a request runs, e.g. ``kvs``) to its time per
    device: a fixed time in seconds, or a processing rate in bit/s (``rate`` entries:
    time = 8 * bytes / rate). ``jitter`` is the (min, max) delay added at this server's NIC
    (§6.4: 3-9 us at the requester), drawn uniformly from ``seed``."""

    preset: str
    model: str  # direct | on-path | off-path
    cpu_cores: int
    acc_cores: int
    pcie_gbps: float  # GB/s usable per PCIe hop
    axi_gbps: float
    nic_gbit: float  # the NIC's line rate in the preset (informational: the network uses nic_rate)
    compute: dict[str, dict[str, float]] = field(default_factory=dict)  # fixed seconds
    rate: dict[str, dict[str, float]] = field(default_factory=dict)  # bit/s
    jitter: tuple[float, float] | None = None
    seed: int = 0

    def work_time(self, name: str | None, device: str, nbytes: float) -> float:
        """T_c of function ``name`` on ``device`` for a message of ``nbytes`` (0 for no function)."""
        if name is None:
            return 0.0
        if name in self.compute and device in self.compute[name]:
            return self.compute[name][device]
        if name in self.rate and device in self.rate[name]:
            return 8.0 * nbytes / self.rate[name][device]
        known = sorted(set(self.compute) | set(self.rate))
        raise KeyError(f"function {name!r} has no time on {device} (functions: {', '.join(known) or 'none'})")


# Calibration from the thesis's own testbed (§6.4), each number with the sentence it comes from.
# KVS (§6.4.2, Fig. 6.10a): "the LEO counterpart without multi-path support starts to increase its
# median latency when system workload is above 5Mrps, outperforming the CPU-based DrTM-KV by ~1.5x".
# We read a knee as the capacity of the path behind it: the accelerator path serves 5.0 Mops, the
# CPU path 5.0 / 1.5 = 3.33 Mops (DrTM-KV's knee, modelled as LEO's CPU path: the thesis does not
# measure LEO's own CPU path alone). These are DEVICE capacities: a preset's per-call time is
# cores / capacity, so changing the core count keeps the stated capacity.
# (§6.1.2's 23.0 and 71.8 Mops are another system's numbers [139], kept as KVS_MOTIVATION_*.)
KVS_ACC_MOPS, KVS_CPU_MOPS = 5.0e6, 5.0e6 / 1.5
KVS_MOTIVATION_CPU_OP, KVS_MOTIVATION_ACC_OP = 16 / 23.0e6, 24 / 71.8e6  # per op and core, §6.1.2
# DFS (§6.4.2): "its compression time is longer than that of the CPU, i.e., 2.18ms vs 0.89ms" (one
# CPU core against BF-3's engine). The thesis does not say per file or per chunk: we read it as per
# 1 MB file ("compresses/decompresses 1MB file with 256KB IO chunks"), so 1/4 of it per chunk. These
# are PER-CALL times: the CPU path's capacity grows with the cores, as Fig. 6.11 sweeps them.
DFS_CPU_FILE, DFS_ACC_FILE = 0.89e-3, 2.18e-3
# Unstated (docs/leo.md lists value, reason and range; scenarios/leo/sensitivity.py sweeps them):
# decompression as long as compression (the thesis times only compression); EBS's QoS + block +
# address lookups (Solar's offloaded functions, §6.4.1) 2 us on a core, 1 us on the FPGA; DML's
# reduction 5 GB/s per CPU core and 100 GB/s on an A100 (a fraction of its HBM).
DFS_DECOMPRESS_FACTOR = 1.0
EBS_CPU_LOOKUP, EBS_ACC_LOOKUP = 2e-6, 1e-6
DML_CPU_RATE, DML_GPU_RATE = 5 * GB, 100 * GB

_FUNCTIONS = {  # seconds per call on one core (or one engine)
    "compress": {"cpu": DFS_CPU_FILE / 4, "acc": DFS_ACC_FILE / 4},
    "decompress": {"cpu": DFS_DECOMPRESS_FACTOR * DFS_CPU_FILE / 4, "acc": DFS_DECOMPRESS_FACTOR * DFS_ACC_FILE / 4},
    "ebs": {"cpu": EBS_CPU_LOOKUP, "acc": EBS_ACC_LOOKUP},
}
_CAPACITIES = {"kvs": {"cpu": KVS_CPU_MOPS, "acc": KVS_ACC_MOPS}}  # calls per second of the whole device
HOST_PRESETS: dict[str, dict] = {
    # §6.4.1: "F-NIC adopts Intel servers with 8-core Xeon Silver 4110 CPU, 192GB memory, PCIe 3.0, 100GE
    # cables, and Xilinx VU35P FPGAs" (off-path for KVS, on-path for EBS, Table 6.4). The FPGA's
    # parallelism is not given: we keep the 24 cores of §6.1.2's SmartNIC (unstated, swept 1..24)
    "f-nic": dict(model="off-path", cpu_cores=8, acc_cores=24, pcie_gbps=12.8, axi_gbps=16.0, nic_gbit=100.0),
    # F-NIC plus A100s (direct model; DML's accelerator is the GPU, one reduction at a time: our choice)
    "g+f-nic": dict(model="direct", cpu_cores=8, acc_cores=1, pcie_gbps=12.8, axi_gbps=16.0, nic_gbit=100.0),
    # §6.4.1: "BF-3 uses Intel servers with 32-core Xeon Silver 4309Y CPU, 512GB memory, PCIe 4.0, 200GE
    # cables, and NVIDIA BlueField-3" (off-path; one compression engine: unstated)
    "bf-3": dict(model="off-path", cpu_cores=32, acc_cores=1, pcie_gbps=25.6, axi_gbps=16.0, nic_gbit=200.0),
}
_RATES = {"reduce": {"cpu": DML_CPU_RATE, "acc": DML_GPU_RATE}}


def datapath_spec(preset: str, **overrides) -> DatapathSpec:
    """The preset's spec with ``overrides`` (``cpu_cores=16``, ``compute={...}`` merged per function)."""
    if preset not in HOST_PRESETS:
        raise KeyError(preset)
    base = dict(HOST_PRESETS[preset])
    compute = {f: dict(t) for f, t in _FUNCTIONS.items()}
    rate = {f: dict(t) for f, t in _RATES.items()}
    for name, per_dev in overrides.pop("compute", {}).items():
        compute.setdefault(name, {}).update(per_dev)
        for dev in per_dev:
            rate.get(name, {}).pop(dev, None)
    for name, per_dev in overrides.pop("rate", {}).items():
        rate.setdefault(name, {}).update(per_dev)
        for dev in per_dev:
            compute.get(name, {}).pop(dev, None)
    base.update(overrides)
    cores = {"cpu": base["cpu_cores"], "acc": base["acc_cores"]}
    for name, per_dev in _CAPACITIES.items():  # a device capacity: per-call time = cores / capacity
        for dev, ops in per_dev.items():
            if dev not in compute.get(name, {}) and dev not in rate.get(name, {}):
                compute.setdefault(name, {})[dev] = cores[dev] / ops
    return DatapathSpec(preset=preset, compute=compute, rate=rate, **base)


def host_datapath(kind: str, cpu_capacity: int = 1, acc_capacity: int = 1, pcie_gbps=PCIE_GBPS, axi_gbps=AXI_GBPS):
    """One host's elements (``cpu``, ``acc``, links to the NIC) and its legs as paths:
    ``cpu>nic``, ``nic>acc``... (device computes) and ``cpu>nic/dma``... (links only)."""
    links = _host_links(kind, pcie_gbps, axi_gbps)
    elements = [Element("cpu", "compute", capacity=cpu_capacity), Element("acc", "compute", capacity=acc_capacity)]
    ids = {"cpu": 0, "acc": 1}
    for dev in LEG_DEVICES:
        for name, bw, tr in links[dev]:
            if name not in ids:
                ids[name] = len(elements)
                elements.append(Element(name, "link", bw, tr))
    model = DatapathModel(f"{kind}-host", elements)
    for dev in LEG_DEVICES:
        out = [ids[n] for n, _, _ in links[dev]]
        model.paths[f"{dev}>nic"] = [ids[dev], *out]
        model.paths[f"nic>{dev}"] = [*reversed(out), ids[dev]]
        model.paths[f"{dev}>nic/dma"] = out
        model.paths[f"nic>{dev}/dma"] = list(reversed(out))
    return model


class HostQueues:
    """The queues of one host's elements, kept between legs (a leg at a time, in model-time order)."""

    def __init__(self, model: DatapathModel) -> None:
        self.model = model
        names = list(model.paths)
        self.path_ids = {p: np.array(model.paths[p], dtype=np.int64) for p in names}
        ptr, idx, self.is_link, self.bw, self.tr, self.cap, ne = _tables(model, names)
        self.work = np.zeros((ne, int(self.cap.max())))
        self.last = np.zeros(ne)
        self.now = 0.0

    def step(self, path: str, now: float, nbytes: float, compute: np.ndarray) -> tuple[float, float]:
        """(JCT, queueing part) of a leg on ``path`` arriving at ``now`` (6.1)/(6.2) (numba)."""
        if now < self.now:
            raise ValueError(f"leg at {now!r} s arrives before the last one ({self.now!r} s)")
        self.now = now
        jct, wait = _step(
            self.work, self.last, self.is_link, self.bw, self.tr, self.cap, float(now),
            self.path_ids[path], float(nbytes), compute,
        )  # fmt: skip
        return float(jct), float(wait)

    def base(self, path: str, nbytes: float, compute: np.ndarray) -> tuple[float, float]:
        """(T, Q_toll) of a leg on ``path`` (eq. 6.5's terms): base traverse + compute, and the work it adds."""
        ids = self.model.paths[path]
        t = sum(self.tr[e] if self.is_link[e] else compute[e] for e in ids)
        toll = sum(8.0 * nbytes / self.bw[e] if self.is_link[e] else compute[e] for e in ids)
        return float(t), float(toll)
