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
        now = arrival[t]
        r = rtype[t]
        p = path[t]
        total_wait = 0.0
        base = 0.0
        for x in range(ptr[p], ptr[p + 1]):
            e = idx[x]
            gone = now - last[e]
            k = cap[e]
            for s in range(k):
                w = work[e, s] - gone
                work[e, s] = w if w > 0.0 else 0.0
            last[e] = now
            total_wait += work[e, 0]
            if is_link[e]:
                work[e, 0] += 8.0 * size[r] / bw[e]
                base += tr[e]
            else:
                work[e, 0] += compute[r, e]
                base += compute[r, e]
                # keep the workload vector sorted (insertion of the grown first entry)
                s = 0
                while s + 1 < k and work[e, s] > work[e, s + 1]:
                    tmp = work[e, s]
                    work[e, s] = work[e, s + 1]
                    work[e, s + 1] = tmp
                    s += 1
        wait[t] = total_wait
        jct[t] = total_wait + base
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
