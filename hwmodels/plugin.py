"""Plug-in contract between hardware models and the run-time / simulator.

A flow or request that has an intra-host *leg* (GPU to GPU inside a server,
GPU to NIC, CPU to accelerator, ...) asks the server's model how long the leg
takes and at what rate it can feed the NIC::

    model = host_model("dgx1-v100")
    timing = model.leg(Leg("gpu0", "nic0", 64e6))
    timing.duration      # s, alone on the server
    timing.inject_rate   # bit/s the leg can push into the NIC (inf if it does not end at a NIC)
    model.legs([...])    # several concurrent legs: they share links (max-min)

Any object with ``leg`` and ``legs`` of these signatures is a host model:
:class:`GraphHostModel` wraps an :class:`~hwmodels.graph.IntraHostGraph`
(NVLink/PCIe/QPI/NVSwitch presets), :class:`DatapathHostModel` wraps a LEO
datapath model (legs are its communication paths; ``legs`` runs them as a
request stream through the queue recurrences). All units: bytes, seconds,
bit/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hwmodels.graph import IntraHostGraph, load_preset
from hwmodels.leo import PATH_NAMES, DatapathModel, RequestStream, queue_jct
from hwmodels.transfer import transfer_times


@dataclass(frozen=True)
class Leg:
    src: str
    dst: str
    nbytes: float
    start: float = 0.0  # used by request-stream models: arrival time of the leg (s)


@dataclass(frozen=True)
class LegTiming:
    duration: float
    inject_rate: float


class HostModel(Protocol):
    def leg(self, leg: Leg) -> LegTiming: ...

    def legs(self, legs: list[Leg]) -> list[LegTiming]: ...


class GraphHostModel:
    """Legs over an interconnect graph; concurrent legs share links (max-min fair)."""

    def __init__(self, graph: IntraHostGraph) -> None:
        self.graph = graph

    def _inject(self, leg: Leg) -> float:
        if self.graph.node_types.get(leg.dst) not in ("nic", "wire"):
            return float("inf")
        return float(self.graph.path_bandwidth(leg.src, leg.dst))

    def leg(self, leg: Leg) -> LegTiming:
        return self.legs([leg])[0]

    def legs(self, legs: list[Leg]) -> list[LegTiming]:
        times = transfer_times(self.graph, [(lg.src, lg.dst, lg.nbytes) for lg in legs])
        return [LegTiming(float(t), self._inject(lg)) for t, lg in zip(times, legs)]


class DatapathHostModel:
    """Legs are LEO communication paths (``src``-``dst`` in cpu/acc); ``nbytes`` crosses
    each link; ``compute`` gives T_c per device. Concurrent legs queue per (6.1)/(6.2)."""

    def __init__(self, model: DatapathModel, compute: dict[str, float] | None = None) -> None:
        self.model = model
        self.compute = compute or {}

    def leg(self, leg: Leg) -> LegTiming:
        return self.legs([leg])[0]

    def legs(self, legs: list[Leg]) -> list[LegTiming]:
        order = sorted(range(len(legs)), key=lambda i: legs[i].start)
        names = list(PATH_NAMES)
        ne = len(self.model.elements)
        compute = np.zeros((len(legs), ne))
        for dev, t in self.compute.items():
            for host in ("req", "resp"):
                compute[:, self.model.index(f"{host}.{dev}")] = t
        stream = RequestStream(
            np.array([legs[i].start for i in order]),
            np.arange(len(legs)),
            np.array([names.index(f"{legs[i].src}-{legs[i].dst}") for i in order]),
            np.array([legs[i].nbytes for i in order], dtype=np.float64),
            compute,
        )
        jct, _ = queue_jct(self.model, stream)
        out: list[LegTiming] = [LegTiming(0.0, 0.0)] * len(legs)
        for row, i in enumerate(order):
            links = [e for e in self.model.path_elements(f"{legs[i].src}-{legs[i].dst}") if e.kind == "link"]
            out[i] = LegTiming(float(jct[row]), min(e.bandwidth for e in links))
        return out


def host_model(preset: str) -> GraphHostModel:
    """The host model of an intra-host preset name (``ClusterSpec`` servers' ``intra_host``)."""
    return GraphHostModel(load_preset(preset))
