"""The scheduler interface: hooks the run-time calls, on both backends.

A scheduler is a class with four hooks; the emulated run-time
(:mod:`emulator.runtime`) and the simulator call them the same way through
:class:`railbed.dispatch.Dispatcher`, so a scheduler written once runs
unchanged on both.

``place(job, cluster) -> Placement``
    Once, before the run. ``job`` is the public view (sizes revealed only on
    readiness are ``None``); endpoints the job pins keep their pin.
``on_ready(item, view) -> Decision``
    When a task or flow's dependencies have all finished, and again after
    every later event while the item is held. Return ``Decision()`` to start
    now (tasks still queue for a device slot), ``HOLD`` to wait, and for
    flows the DSCP (0..63) and an optional rate cap (model wire bit/s).
``on_flows_changed(view) -> dict[flow id, rate or None]``
    After the set of active flows changed (flows started or finished). The
    answer re-caps any active flow (``None`` removes its cap); flows not
    named keep theirs.
``choose_path(flow, view) -> int``
    For a flow that offers alternative paths (``flow.options``), when it
    becomes ready, before ``on_ready``: the index of the option to use.

:class:`Scheduler` implements all four with the system default behaviour
(pins, then round-robin placement; start at once; DSCP 0; no caps; first
option); subclasses override what they decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from railbed.job import Flow, Item, Job, Location, Placement, Task
from railbed.spec import ClusterSpec
from railbed.topology import Topology


@dataclass(frozen=True)
class Decision:
    """What to do with a ready item: start it (or hold), DSCP and rate cap for flows."""

    start: bool = True
    dscp: int = 0
    rate: float | None = None  # model wire bit/s; None = uncapped


HOLD = Decision(start=False)


@dataclass(frozen=True)
class ActiveFlow:
    flow: Flow
    src: Location
    dst: Location
    dscp: int
    rate: float | None
    started: float  # model seconds


@dataclass
class RunView:
    """What a scheduler may look at during a run (read-only by convention).

    ``now`` is model time. ``active`` are flows in the network, ``running``
    tasks holding a device slot, ``held`` the ids the scheduler held, ``done``
    finished ids, ``ready_at`` the time each item became ready.
    """

    job: Job
    cluster: ClusterSpec
    topology: Topology
    placement: Placement
    now: float = 0.0
    active: dict[str, ActiveFlow] = field(default_factory=dict)
    running: dict[str, Task] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    ready_at: dict[str, float] = field(default_factory=dict)

    def location(self, endpoint: str) -> Location:
        return self.placement[endpoint]


class Scheduler:
    """Base class with the system-default behaviour for every hook (see module doc)."""

    name = "base"

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        return default_placement(job, cluster)

    def on_ready(self, item: Item, view: RunView) -> Decision:
        return Decision()

    def on_flows_changed(self, view: RunView) -> Mapping[str, float | None]:
        return {}

    def choose_path(self, flow: Flow, view: RunView) -> int:
        return 0

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        """Before anything is built: reject a job this scheduler cannot run (a tag it
        reads that is out of range, say) by raising :class:`railbed.errors.SpecError`
        naming the field (``items.<id>.tags.dscp``). Default: accept everything."""


def default_placement(job: Job, cluster: ClusterSpec) -> Placement:
    """Pins first; the other endpoints round-robin over servers, then GPUs.

    Endpoint *i* (in job order, unpinned) goes to server ``i % S``, GPU
    ``(i // S) % gpus`` and the NIC of the same index modulo the server's
    NICs (GPU *g* uses NIC *g* on a rail-optimized server), so consecutive
    endpoints land on different servers and their flows cross the network.
    """
    servers = cluster.servers
    out: dict[str, Location] = {}
    i = 0
    for name, ep in job.endpoints.items():
        if ep.pin is not None:
            out[name] = ep.pin
            continue
        s = i % len(servers)
        gpus = max(1, servers[s].gpus)
        g = (i // len(servers)) % gpus
        out[name] = Location(s, f"gpu{g}", g % servers[s].nics)
        i += 1
    return Placement(out)
