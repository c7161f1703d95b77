"""The backend seam: what runs a job under a scheduler on a cluster and returns a :class:`RunResult`.

Every backend drives the same scheduler contract (:mod:`railbed.scheduler`) and returns the same
result schema; it differs in what it models (:class:`Capabilities`). Registered by name in
:data:`BACKENDS` (``"module:attribute"``, imported when a run first names it, so naming the
emulator costs no Mininet import)::

    emulate          the emulated cluster: namespaces, tc, real TCP flows (emulator/backend.py; root)
    fluid            the flow-level simulator: every scheduler hook, max-min rates in numba
    fluid-reference  the same with the plain-Python network: the slow, obviously correct twin
    fluid-rules      one numba kernel over the schedulers' rules (Scheduler.rule): jobs as arrays,
                     thousands of GPUs (simulator/rules/)
    packet           packet-level simulation on ns-3 (simulator/packet/): TCP, queues, drops

Old spellings (``--engine numba|reference|compact``; ``simulator`` and ``emulator``, a result's
``backend`` before it was the registered name) are aliases with a note. A name is
decoded once, where an input is read (the CLI's ``--backend``, a claims file's ``engine``),
by :func:`backend`; what travels on is the :class:`Backend`.

A backend owns its settings and its counters. Its settings are its own top-level keys of a
scenario (``Capabilities.settings``: the emulator's ``latency``, ``timeout``, ``capture``, ...;
the packet backend's ``packet``), which its ``parse_settings`` reads when a scenario gives one
(:func:`owners` finds it: every registered backend is read, light by contract, only for a key
the core does not know); each run gets them as ``RunOptions.settings[its name]``
(``RunOptions.own``). :class:`RunOptions` itself holds only what every backend reads. What only
it measures goes in ``RunResult.counters[its name]``. A new backend is one module and one
``BACKENDS.register(name, target)`` line (``tests/test_own_backend.py``). Code asks a backend's
:class:`Capabilities`, never its name.

A backend is used one run at a time (:meth:`Backend.run`) or, to build a cluster once for
several runs (the emulator: one testbed for every scheduler of a scenario), through
:meth:`Backend.session`. :meth:`Backend.check` is its part of the pre-flight: what this
machine can do at the run's size, before anything is built or written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from railbed.errors import SpecError
from railbed.job import Job
from railbed.plugins import Registry
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec


@dataclass(frozen=True)
class Capabilities:
    """What a backend models and needs (a run checks these, never a backend's name)."""

    needs_root: bool = False  # builds namespaces and links: root, one testbed per machine
    packets: bool = False  # carries packets: TCP dynamics, ACKs, queues and drops are in its times
    hooks: bool = True  # calls every scheduler hook during the run; False: place, rule and gate_split only
    host_models: bool = True  # times intra-host legs with the servers' hardware models (railbed.hosts)
    array_jobs: bool = False  # runs jobs too large for a Job, built as arrays (workloads.ARRAY_FORMS)
    exact: bool = True  # the same inputs give the same times (no wall clock in them)
    max_gpus: int = 0  # the largest cluster run with it here in minutes (README, bench/), for messages
    settings: tuple[str, ...] = ()  # the scenario's top-level keys it owns, read by its parse_settings


TCP_CONGESTION = ("cubic", "reno", "bbr", "dctcp")
"""TCP congestion controls a packet-level backend may run (``RunOptions.tcp``; Linux's names).

``cubic`` is the default: Linux's own, and ns-3's ``TcpCubic`` in the packet backend, so both
packet-level backends run the same TCP whatever the machine's default is (a network namespace
inherits the host's, ``bbr`` on some machines, and may not change it: the emulator sets it on
every socket). ``reno`` is ns-3's ``TcpNewReno``; ``dctcp`` needs ECN marking in the network
(the packet backend's ``packet.ecn``; the emulated network has no RED to mark with)."""


def parse_tcp(value: object, field: str = "tcp") -> str:
    """A congestion control of :data:`TCP_CONGESTION`; ``SpecError(field)`` otherwise."""
    if not isinstance(value, str) or value not in TCP_CONGESTION:
        raise SpecError(field, f"one of {', '.join(TCP_CONGESTION)}, got {value!r}")
    return value


@dataclass(frozen=True)
class RunOptions:
    """How to run, beside the job, scheduler and cluster: a scenario's settings. The fields are those
    every backend reads or is checked against (the simulators: ``policy``, ``progress``, ``analysis``;
    ``scale``: what :meth:`Backend.check` returns; ``tcp``: every backend whose capabilities say
    ``packets``); a backend's own settings are ``settings[its name]`` (what its ``parse_settings``
    made of its keys of the scenario, ``Capabilities.settings``; absent: its defaults)."""

    policy: Any = "dscp-priority"  # tc policy (a name or a Policy): which DSCPs are strict-priority classes
    progress: Callable[[str], None] | None = None  # progress lines of a long run
    run_dir: Path | None = None  # where a run may write files of its own (packet captures, items.npz)
    scale: float | None = None  # rate scale k (None: the backend's own choice; model time where it has none)
    analysis: bool = True  # add the run's analysis (railbed.analysis: network-free bound, critical path, overlap)
    tcp: str = "cubic"  # TCP congestion control of the backends that carry packets: TCP_CONGESTION
    settings: Mapping[str, Any] = field(default_factory=dict)  # backend name -> its own settings

    def own(self, backend: str, default: Any = None) -> Any:
        """The settings of ``backend`` (its registered name), or ``default`` when the scenario gave none."""
        value = self.settings.get(backend)
        return default if value is None else value


class Session(Protocol):
    """A cluster built (or modelled) once for several runs."""

    scale: float | None  # the rate scale k runs use (None: model time is the backend's own time)

    def describe(self) -> str:
        """One line on what was built (empty when nothing was)."""
        ...

    def run(self, job: Job, scheduler: Scheduler, options: RunOptions) -> RunResult: ...


class Backend(Protocol):
    name: str
    summary: str  # one line for ``--help``
    capabilities: Capabilities

    def check(self, cluster: ClusterSpec, options: RunOptions) -> float | None:
        """The pre-flight's part: what this machine can do for this cluster (``SpecError`` or
        ``EnvironmentProblem``); returns the scale k runs will use, None if it has none."""
        ...

    def session(self, cluster: ClusterSpec, options: RunOptions) -> contextlib.AbstractContextManager[Session]: ...

    def run(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        """One run, ``job`` under ``scheduler`` on ``cluster``."""
        ...

    def parse_settings(self, block: dict[str, Any], cluster: ClusterSpec) -> Any:
        """Its own keys of a scenario (``block``: those of ``capabilities.settings`` the scenario gives,
        never empty) -> its settings object (``RunOptions.settings[name]``); ``SpecError`` naming the key."""
        ...


class Unbuilt:
    """The :class:`Session` of a backend that builds nothing: each run is :meth:`Backend.run`."""

    scale = None

    def __init__(self, backend: Backend, cluster: ClusterSpec) -> None:
        self.backend, self.cluster = backend, cluster

    def describe(self) -> str:
        return ""

    def run(self, job: Job, scheduler: Scheduler, options: RunOptions) -> RunResult:
        return self.backend.run(job, scheduler, self.cluster, options)


class ModelBackend:
    """Base of the backends that build nothing (the simulators): no pre-flight, a session per run."""

    name = ""
    summary = ""
    capabilities = Capabilities()

    def check(self, cluster: ClusterSpec, options: RunOptions) -> float | None:
        return None

    @contextlib.contextmanager
    def session(self, cluster: ClusterSpec, options: RunOptions) -> Iterator[Session]:
        yield Unbuilt(self, cluster)

    def run(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        raise NotImplementedError

    def parse_settings(self, block: dict[str, Any], cluster: ClusterSpec) -> Any:
        raise NotImplementedError(f"{self.name} owns no scenario keys")


BACKENDS = Registry(
    "backend",
    {
        "emulate": "emulator.backend:EMULATE",
        "fluid": "simulator.fluid.backend:FLUID",
        "fluid-reference": "simulator.fluid.backend:FLUID_REFERENCE",
        "fluid-rules": "simulator.rules.backend:FLUID_RULES",
        "packet": "simulator.packet.backend:PACKET",
    },
    # numba, reference, compact: the old --engine; simulator, emulator: RunResult.backend before it was
    # the registered name (a result.json written then reads as the backend it came from)
    aliases={
        "numba": "fluid", "reference": "fluid-reference", "compact": "fluid-rules",
        "simulator": "fluid", "emulator": "emulate",
    },
)  # fmt: skip


def backend(name: object, field: str = "backend") -> Backend:
    """The backend registered as ``name`` (or an old spelling of it); ``SpecError(field)`` if none."""
    return BACKENDS.get(name, field)


def owners() -> dict[str, str]:
    """Scenario key -> the registered backend that owns it (``Capabilities.settings``). Reads (imports)
    every registered backend: call it only for a key the core does not know. Two backends owning
    one key is a registration mistake: ``ValueError``."""
    out: dict[str, str] = {}
    for name in BACKENDS.names():
        for key in backend(name).capabilities.settings:
            if key in out:
                raise ValueError(f"scenario key {key!r} is owned by backends {out[key]!r} and {name!r}")
            out[key] = name
    return out
