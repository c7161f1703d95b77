"""The two host models (the contract is :mod:`railbed.hosts`: ``leg``, ``legs``).

A flow or request that has an intra-host *leg* (GPU to GPU inside a server,
GPU to NIC, CPU to accelerator, ...) asks the server's model how long the leg
takes and at what rate it can feed the NIC::

    model = host_model("dgx1-v100")
    timing = model.leg(HostLeg("gpu0", "nic0", 64e6))
    timing.duration      # s, alone on the server
    timing.inject_rate   # bit/s the leg can push into the NIC (inf if it does not end at a NIC)
    model.legs([...])    # several concurrent legs: they share links (max-min)

:class:`GraphHostModel` wraps an :class:`~hwmodels.graph.IntraHostGraph`
(NVLink/PCIe/QPI/NVSwitch presets; the ``intra_host`` kind,
:mod:`hwmodels.intra_host`), :class:`DatapathHost` is one server's LEO
datapath with its queues (the ``datapath`` kind, :mod:`hwmodels.datapath`):
a run keeps one per server, and each leg starts at the model time it is
asked for and waits in the queues earlier legs left (eqs. 6.1/6.2). All
units: bytes, seconds, bit/s.
"""

from __future__ import annotations

import numpy as np

from hwmodels.graph import IntraHostGraph, load_preset
from hwmodels.leo import LEG_DEVICES, DatapathSpec, HostQueues, host_datapath
from hwmodels.transfer import transfer_times
from railbed.hosts import HostLeg, LegTiming


class GraphHostModel:
    """Legs over an interconnect graph; concurrent legs share links (max-min fair)."""

    def __init__(self, graph: IntraHostGraph) -> None:
        self.graph = graph

    def _inject(self, leg: HostLeg) -> float:
        if self.graph.node_types.get(leg.dst) not in ("nic", "wire"):
            return float("inf")
        return float(self.graph.path_bandwidth(leg.src, leg.dst))

    def leg(self, leg: HostLeg) -> LegTiming:
        return self.legs([leg])[0]

    def legs(self, legs: list[HostLeg]) -> list[LegTiming]:
        times = transfer_times(self.graph, [(lg.src, lg.dst, lg.nbytes) for lg in legs])
        return [LegTiming(float(t), self._inject(lg)) for t, lg in zip(times, legs)]


class DatapathHost:
    """One server's LEO datapath (a :class:`~hwmodels.leo.DatapathSpec`): CPU, accelerator and
    their links to the NIC, with queues kept across legs for the whole run (eqs. 6.1/6.2).

    A leg goes from a device (``cpu``, ``acc``) to ``nic`` or from ``nic`` to a device; it
    arrives at ``leg.start`` (model time, non-decreasing over calls), finds the queues its
    elements hold then, and adds its work: ``8 * nbytes / BW`` on each link and the device's
    compute time of ``leg.work`` (a function of the spec's ``compute`` table). Its duration
    is the queues it found plus its base time (traverse + compute).

    ``nic_delay`` draws the delay a flow with path options meets at this server's NIC
    (``spec.jitter``, uniform, from a generator seeded by the spec's seed and ``server``)."""

    def __init__(self, spec: DatapathSpec, server: int = 0) -> None:
        self.spec = spec
        model = host_datapath(spec.model, spec.cpu_cores, spec.acc_cores, spec.pcie_gbps, spec.axi_gbps)
        self.queues = HostQueues(model)
        self._rng = np.random.default_rng([spec.seed, server]) if spec.jitter else None

    def nic_delay(self) -> float:
        """One draw of the NIC's jitter (§6.4: 3-9 us at the requester), 0 without a ``jitter`` range."""
        if self._rng is None:
            return 0.0
        lo, hi = self.spec.jitter
        return float(self._rng.uniform(lo, hi))

    def _path(self, leg: HostLeg) -> tuple[str, str, np.ndarray]:
        """(path name, device, compute vector) of a leg."""
        if leg.dst == "nic" and leg.src in LEG_DEVICES:
            dev, path = leg.src, f"{leg.src}>nic"
        elif leg.src == "nic" and leg.dst in LEG_DEVICES:
            dev, path = leg.dst, f"nic>{leg.dst}"
        else:
            raise ValueError(f"a datapath leg goes between nic and cpu or acc, not {leg.src} -> {leg.dst}")
        compute = np.zeros(len(self.queues.model.elements))
        t = self.spec.work_time(leg.work, dev, leg.nbytes)
        if t > 0:
            compute[self.queues.model.index(dev)] = t
        else:
            path += "/dma"
        return path, dev, compute

    def _inject(self, path: str) -> float:
        return min(self.queues.bw[e] for e in self.queues.model.paths[path] if self.queues.is_link[e])

    def cost(self, leg: HostLeg) -> tuple[float, float]:
        """(T, Q_toll) of the leg alone: its base time and the work it adds to its elements (eq. 6.5)."""
        path, _, compute = self._path(leg)
        return self.queues.base(path, leg.nbytes, compute)

    def demand(self, leg: HostLeg) -> tuple[np.ndarray, np.ndarray]:
        """(element ids, work each receives) of the leg: T_c at its device, 8 * bytes / BW on each link."""
        path, _, compute = self._path(leg)
        ids = self.queues.path_ids[path]
        q = self.queues
        work = np.array([8.0 * leg.nbytes / q.bw[e] if q.is_link[e] else compute[e] for e in ids])
        return ids, work

    @property
    def size(self) -> int:
        """Number of elements (devices and links) of the host."""
        return len(self.queues.model.elements)

    def capacities(self) -> np.ndarray:
        return self.queues.cap.astype(float)

    def leg(self, leg: HostLeg) -> LegTiming:
        path, _, compute = self._path(leg)
        jct, _ = self.queues.step(path, leg.start, leg.nbytes, compute)
        return LegTiming(jct, self._inject(path))

    def legs(self, legs: list[HostLeg]) -> list[LegTiming]:
        out: list[LegTiming] = [LegTiming(0.0, 0.0)] * len(legs)
        for i in sorted(range(len(legs)), key=lambda i: legs[i].start):
            out[i] = self.leg(legs[i])
        return out


def host_model(preset: str) -> GraphHostModel:
    """The host model of an intra-host preset name (``ClusterSpec`` servers' ``intra_host``)."""
    return GraphHostModel(load_preset(preset))
