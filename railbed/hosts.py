"""Hardware models of a server: the contract a run times intra-host legs with, and the kinds of
model a cluster file's server group may name.

A flow or request with an intra-host *leg* (GPU to NIC, NIC to accelerator, GPU to GPU inside
one server, ...) asks its server's model how long the leg takes and at what rate it can feed
the NIC. Any object with :meth:`HostModel.leg` and :meth:`HostModel.legs` is a host model; one
may also answer :meth:`HostModel.nic_delay` (the delay a flow with path options meets at the
server's NIC, a seeded draw: LEO's jitter). All units: bytes, seconds, bit/s.

A *kind* (:class:`HostKind`) is a cluster-file key of a server group (``intra_host: dgx1-v100``,
``datapath: {preset: bf-3}``) with what the core needs of it: read and check the value, write
it back, the devices it adds to a server, and a model per server for a run. A server has at
most one. Kinds are registered in :data:`KINDS` by their key (the module is imported when a
cluster file first uses the key): a new kind is one module and one line there. The core reads
kinds only through this registry (``railbed.spec`` parses, ``railbed.dispatch`` times legs).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from railbed.plugins import Registry


@dataclass(frozen=True)
class HostLeg:
    """A leg as a host model is asked it: between two of the server's devices, ``nbytes`` long."""

    src: str
    dst: str
    nbytes: float
    start: float = 0.0  # used by stateful models: model time the leg starts (s)
    work: str | None = None  # a function the leg's device runs (datapath models: its compute table)


@dataclass(frozen=True)
class LegTiming:
    duration: float  # s
    inject_rate: float  # bit/s the leg can push into the NIC (inf when it does not end at one)


class HostModel(Protocol):
    def leg(self, leg: HostLeg) -> LegTiming: ...

    def legs(self, legs: list[HostLeg]) -> list[LegTiming]:
        """Concurrent legs (they share the server's links)."""
        ...

    # optional: ``nic_delay() -> float``, the delay a flow with path options meets at this
    # server's NIC, drawn per flow in the order flows start (the Dispatcher asks if present)


class HostKind(Protocol):
    """One kind of hardware model, keyed by ``field`` in a cluster file's server group."""

    field: str

    def parse(self, raw: Any, where: str, gpus: int) -> Hashable:
        """The kind's spec from the file's value (``SpecError`` naming ``where`` or a field under it)."""
        ...

    def to_doc(self, spec: Any) -> Any:
        """The value :meth:`parse` reads back to an equal spec."""
        ...

    def describe(self, spec: Any) -> str:
        """A few words for a cluster's summary."""
        ...

    def devices(self, spec: Any) -> tuple[str, ...]:
        """Device names the model adds to a server (placements may name them)."""
        ...

    def model(self, spec: Any, server: int) -> HostModel:
        """The model of server ``server`` for one run (a stateful model: a new one per run)."""
        ...


@dataclass(frozen=True)
class HostSpec:
    """A server's hardware model: its kind (the cluster-file key) and the kind's spec."""

    kind: str
    spec: Any

    def definition(self) -> HostKind:
        return host_kind(self.kind)


KINDS = Registry(
    "hardware-model kind",
    {
        "intra_host": "hwmodels.intra_host:KIND",  # an interconnect graph preset (NVLink, PCIe, NVSwitch)
        "datapath": "hwmodels.datapath:KIND",  # LEO's SmartNIC/FPGA datapath with its queues
    },
)


def host_kind(name: str) -> HostKind:
    """The kind registered under the cluster-file key ``name``."""
    return KINDS.get(name, "servers.kind")
