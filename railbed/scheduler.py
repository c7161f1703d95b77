"""The scheduler contract: the hooks the run core calls, on both backends.

A scheduler is a class with a few hooks; the emulated run-time
(:mod:`emulator.runtime`) and the simulator call them the same way through
:class:`railbed.dispatch.Dispatcher`, so a scheduler written once runs
unchanged on both. Policies live in :mod:`schedulers`; this module is the
core they build on.

``place(job, cluster) -> Placement``
    Once, before the run. ``job`` is the public view (sizes revealed only on
    readiness are ``None``); endpoints the job pins keep their pin. The
    placement is checked: servers, NICs and devices exist, and the summed
    ``demands`` of the endpoints on a server fit its ``resources``.
``on_ready(item, view) -> Decision | Split``
    When a task or flow's dependencies have all finished, and again after
    every later event while the item is held. Return ``Decision()`` to start
    now (tasks still queue for a device slot), ``HOLD`` to wait, and for
    flows the DSCP (0..63) and an optional rate cap (model wire bit/s).
    ``hold(*events)`` waits too, and says what can change the answer: the
    item is offered again only after one of those events (:class:`OnNic`,
    :class:`OnDone`, :class:`OnSlot`, :class:`OnTime`), not after every one.
    For a flow, :class:`Split` replaces it (and any other held flows) with
    scheduler-made sub-flows: chunks, phases, relays through other
    endpoints. The original is done when its last sub-flow is.
``on_flows_changed(view) -> dict[flow id, rate | None | Change]``
    After the set of active flows changed (flows started or finished), and
    at every wake-up the scheduler asked for. The answer re-caps any active
    flow (``None`` removes its cap) or, with :class:`Change`, re-marks its
    DSCP; flows not named keep theirs.
``on_done(item, record, view)``
    After every task and flow (sub-flows included) finished; ``record`` is
    its :class:`railbed.results.ItemRecord` (ready, start, end, where, path).
``choose_path(flow, view) -> int``
    For a flow that offers alternative paths (``flow.options``), when it
    becomes ready, before ``on_ready``: the index of the option to use.
``choose_spine(flow, src, dst, view) -> int | None``
    For a flow between leaves when it starts on the network (``src``/``dst``: the
    :class:`~railbed.job.Location` of its NICs): the spine its route crosses (an index of
    ``view.topology.spines``; ``None``: the fabric's ECMP hash,
    :meth:`~railbed.topology.Topology.ecmp_spine`). Every backend already follows a flow's
    spine (:attr:`railbed.actions.StartFlow.spine`): the simulators' routes, the packet
    backend's per-spine addresses, the emulator's socket mark (Crux's path choice, §4.1).
``on_job_arrived(job_name, job, view) -> float | None``
    In a run of several jobs (:mod:`railbed.jobs`: every item's ``job`` names its job), when
    job ``job_name`` arrives (its first item is released), before any of its items is offered;
    ``job`` is its part of the run's job (its items and endpoints, sizes as ``place`` sees them).
    The answer is a time shift (model seconds, ``None`` or 0: none): none of the job's items
    is ready before arrival + shift (CASSINI's interleaving of periodic jobs). A per-job
    priority is ``on_ready``'s DSCP chosen by ``item.job``.
``on_job_finished(job_name, view)``
    After the last item of job ``job_name`` ended. ``view.jobs`` maps the jobs that arrived to
    their arrival times, ``view.jobs_done`` the finished ones to their ends.
``rule(flow, placement, cluster) -> Rule | None``
    ``on_ready``'s answer for a flow as a pure function of it (:class:`Rule`),
    or ``None``. A scheduler that writes ``rule`` and no ``on_ready`` is
    answered by its rules on every backend (the Dispatcher reads them with
    :class:`railbed.rulebook.RuleBook`); the compact engine
    (:mod:`simulator.rules`) runs only schedulers with rules.
``gate_split(flows, placement, cluster) -> Split``
    The split of a group of flows whose rules name one ``gate`` (once all
    are held; the compact engine makes it before the run).
``gate_split_arrays(gates, placement, cluster) -> SplitArrays | None``
    Only for the compact engine, optional: ``gate_split`` of every gate at
    once, in array form (:class:`SplitArrays` over the gates' flows in
    order: sub-flows as columns, dependencies as index arrays), which the
    engine checks and appends with numpy instead of one Python step per
    sub-flow; ``None`` (the default): ``gate_split`` per gate. A scheduler
    that has it derives ``gate_split`` (and its ``on_ready`` split) from it
    with :meth:`SplitArrays.split`, so both forms are one.

The view (:class:`RunView`) is what a scheduler may read: model time, the
active flows with their progress (bytes delivered and remaining, current
rate, and how old those numbers are), running tasks, held and finished
items with their records. ``view.wake_at(t)`` asks for a wake-up at model
time ``t``: the scheduler then gets ``on_flows_changed`` and its held items
are offered again.

:class:`Scheduler` implements every hook with the system default behaviour
(pins, then round-robin placement; start at once; DSCP 0; no caps; first
option); subclasses override what they decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from railbed.job import Flow, Item, Job, Location, Placement, Task
from railbed.results import ItemRecord
from railbed.spec import ClusterSpec
from railbed.topology import Topology


@dataclass(frozen=True)
class Decision:
    """What to do with a ready item: start it (or hold), DSCP and rate cap for flows."""

    start: bool = True
    dscp: int = 0
    rate: float | None = None  # model wire bit/s; None = uncapped
    until: tuple[Wake, ...] | None = None  # a hold's wake-up events (see hold); None: every event


HOLD = Decision(start=False)


class OnNic(NamedTuple):
    """A held item's wake-up: a network flow starts or ends with NIC ``nic`` of ``server`` as its
    ``end`` (``"src"``: the flows sending from that NIC changed, ``view.sending``; ``"dst"``: the
    flows into it)."""

    server: int
    nic: int
    end: str = "src"


class OnDone(NamedTuple):
    """A held item's wake-up: the item ``item`` finished."""

    item: str


class OnSlot(NamedTuple):
    """A held item's wake-up: a task starts or ends on ``device`` of ``server`` (its slots changed)."""

    server: int
    device: str


class OnTime(NamedTuple):
    """A held item's wake-up: model time ``t`` is reached."""

    t: float


class OnReady(NamedTuple):
    """A held item's wake-up: the item ``item`` became ready (it joins the held items; a wait
    for a group's last member, as a gate's)."""

    item: str
    ready: bool = True  # a second field: OnReady(x) must not equal OnDone(x)


class OnFewer(NamedTuple):
    """A held item's wake-up: fewer than ``limit`` network flows send from NIC ``nic`` of
    ``server`` (``view.sending``). The holder promises that its answer is a hold while ``limit``
    or more send there: the waiting items are then woken one at a time in ready order, the next
    only if the count is still under ``limit`` after the last one's offer, not all at once."""

    server: int
    nic: int
    limit: int
    fewer: bool = True  # a fourth field: OnFewer never equals an OnNic


Wake = OnNic | OnDone | OnSlot | OnTime | OnReady | OnFewer  # tuples of distinct shapes: each equals only its own kind


def hold(*until: Wake) -> Decision:
    """Hold the offered item until one of ``until`` happens; then it is offered again (at the next
    settling of the run, in the order items became ready). Without events: ``HOLD`` (offered again
    after every event). Only the events named wake it: a scheduler whose answer can change on
    anything else must name that too (or hold with ``HOLD``). ``view.wake_at`` does not wake it."""
    if not until:
        return HOLD
    for w in until:
        if type(w) not in _WAKES:
            raise TypeError(f"hold() takes OnNic, OnDone, OnSlot, OnTime, OnReady or OnFewer events, got {w!r}")
    return _hold(until)


@lru_cache(maxsize=1 << 12)
def _hold(until: tuple[Wake, ...]) -> Decision:  # one immutable Decision per set of events: holds are frequent
    return Decision(start=False, until=until)


_WAKES = frozenset((OnNic, OnDone, OnSlot, OnTime, OnReady, OnFewer))


@dataclass(frozen=True)
class Rule:
    """A flow's ``on_ready`` answer as a pure function of the flow: the DSCP and cap it starts
    with, and when it waits. Read once for every backend (:class:`railbed.rulebook.RuleBook`,
    for a scheduler without ``on_ready``) and re-implemented by the compact engine's kernel
    (:mod:`simulator.rules`).

    The flow is held while a network flow active on its source NIC has ``key < bar``, and,
    if ``queued``, while a held ``queued`` flow on that NIC has ``key < bar`` (the minimum
    over the flows held when the offer round began). If the scheduler's ``hold_by_class`` is
    true, only flows in the same class-selector (``dscp >> 3``, the switch queue) count: a
    host-side queue for the order the network's 8 queues cannot carry (Hermod, §5.4). ``bar = 0`` never holds (keys are
    ``>= 0``). Hermod's host-side priority queue is ``key = bar = priority``, ``queued``;
    Lina's DP-behind-backward-EP is ``key`` 0 for backward EP flows, 1 else, ``bar`` 1 for DP.

    ``gate``: the flow is one of a group split together (Hermod's EP coflows between servers,
    Alg. 3, §5.3.2): it is held until every flow with the same ``gate`` is held when an offer
    round begins; then, at the first of them in the held list, the scheduler's
    :meth:`Scheduler.gate_split` of the group (its flows in job order) replaces them all, and
    the sub-flows with no dependencies start (``dscp``, ``rate``, ``bar`` do not apply to a
    gated flow; its sub-flows count as active with its ``key``)."""

    dscp: int = 0
    rate: float | None = None  # model wire bit/s; None = uncapped
    key: int = 0
    bar: int = 0
    queued: bool = False
    gate: str | None = None


@dataclass(frozen=True)
class SubFlow:
    """A scheduler-made piece of a flow: ``size`` bytes from endpoint ``src`` to ``dst``.

    ``id`` must be new in the run. ``deps`` name other sub-flows of the same
    :class:`Split` (or any finished item); a sub-flow starts, with its own
    ``dscp`` and ``rate`` cap, as soon as they are done (``on_ready`` is not
    asked again). ``src``/``dst`` default to the original's endpoints.

    ``carries`` makes it a multicast hop: ``((original id, bytes), ...)``
    names every original of the same split whose bytes it carries and how
    many of its ``size`` bytes are that original's (each at most ``size``;
    one copy serves several originals, as a relay that forwards an embedding
    it also keeps, or a reduction, as the reverse of such a hop carrying the
    summed gradients of several destinations' copies. Bytes are shared only
    among originals of one source or of one destination: the largest share
    per source, summed, or per destination, summed, is at most ``size``).
    Empty (the default): all its bytes belong to the original it is listed
    under (an original's own list may then be empty). Byte conservation is
    checked per original over these shares; an original is done when the
    last sub-flow carrying it is."""

    id: str
    size: int
    src: str | None = None
    dst: str | None = None
    deps: tuple[str, ...] = ()
    dscp: int = 0
    rate: float | None = None
    carries: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Split:
    """Replace ready flows by sub-flows: ``{original flow id: [SubFlow, ...]}``.

    Every original must be ready and not started (the item being offered,
    or one the scheduler holds). Per original, the sub-flows must carry its
    bytes from its source to its destination: the sizes leaving the source
    and arriving at the destination each add up to the original's size, and
    every other endpoint forwards what it receives (a relay). The original
    counts as done when its last sub-flow is; the run checks, per byte, that
    its destination received its size. A sub-flow with ``carries`` counts,
    for each original it names, with that original's share of its bytes."""

    parts: Mapping[str, Sequence[SubFlow]]


@dataclass(frozen=True, eq=False)
class SplitArrays:
    """A :class:`Split` of ``flows`` (a list of originals) in array form, for the compact engine
    (:meth:`Scheduler.gate_split_arrays`, where ``flows`` are the gates' flows, gate after gate,
    and the sub-flows of several splits follow one another): ``m`` sub-flows, each between its
    original's ends,
    listed as the :class:`Split` lists them (each original's together, originals in the
    Split's order; per original in its own order): the order the run makes them in.

    ``flow[x]`` is sub-flow ``x``'s original (an index into ``flows``),
    ``size[x]`` its bytes, ``dscp[x]`` its DSCP, ``rate[x]`` its cap (``inf``: none; ``rate``
    ``None``: none capped). Its id is its original's id followed by
    ``suffixes[suffix[x]]`` (a small table: Hermod's ``".h<phase>"``). It depends on the
    sub-flows ``dep[dep_ptr[x]:dep_ptr[x + 1]]`` (indices into this split, in that order).
    :meth:`split` is the same split as a :class:`Split`; the engine checks the arrays as the
    Dispatcher checks that one (every original gets sub-flows, its bytes conserved, ids new,
    no cycle)."""

    flow: np.ndarray
    size: np.ndarray
    suffix: np.ndarray
    suffixes: Sequence[str]
    dep_ptr: np.ndarray
    dep: np.ndarray
    dscp: np.ndarray
    rate: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.flow)

    def split(self, flows: Sequence[Flow]) -> Split:
        """The :class:`Split` these arrays stand for (every original of ``flows`` listed)."""
        fl, sx, size, dscp = self.flow.tolist(), self.suffix.tolist(), self.size.tolist(), self.dscp.tolist()
        ptr, dep = self.dep_ptr.tolist(), self.dep.tolist()
        rate = [None] * len(fl) if self.rate is None else [None if math.isinf(r) else r for r in self.rate.tolist()]
        ids = [flows[n].id + self.suffixes[s] for n, s in zip(fl, sx)]
        parts: dict[str, list[SubFlow]] = {}
        for x, n in enumerate(fl):
            deps = tuple(ids[d] for d in dep[ptr[x] : ptr[x + 1]])
            parts.setdefault(flows[n].id, []).append(SubFlow(ids[x], size[x], deps=deps, dscp=dscp[x], rate=rate[x]))
        for f in flows:  # an original without sub-flows (which the run refuses) is still named
            parts.setdefault(f.id, [])
        return Split(parts)


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()
"""Leave this property of an active flow as it is (see :class:`Change`)."""


@dataclass(frozen=True)
class Change:
    """An answer of ``on_flows_changed`` for one active flow: a new cap and/or a new DSCP."""

    rate: float | None = KEEP
    dscp: int = KEEP


ProgressSource = Callable[[str], "tuple[int, float, float]"]
"""flow id -> (payload bytes delivered, current model wire bit/s, model time of these numbers)."""


@dataclass(eq=False, slots=True)
class ActiveFlow:
    """A flow in the network (or in its latency), as a scheduler sees it.

    ``rate`` is the cap (``None``: uncapped). Progress is read on demand from
    the backend: the simulator knows it exactly; the emulator's agents
    report received bytes periodically, and ``as_of`` says when they last
    did (model seconds)."""

    flow: Flow
    src: Location
    dst: Location
    dscp: int
    rate: float | None
    started: float  # model seconds
    progress_source: ProgressSource | None = field(default=None, repr=False)

    def _progress(self) -> tuple[int, float, float]:
        if self.progress_source is None:
            return 0, 0.0, self.started
        return self.progress_source(self.flow.id)

    @property
    def delivered(self) -> int:
        """Payload bytes the receiver has (as of :attr:`as_of`)."""
        return self._progress()[0]

    @property
    def remaining(self) -> int | None:
        """Payload bytes still to deliver; ``None`` while the flow's size is hidden (``reveal="hidden"``)."""
        if self.flow.size is None:
            return None
        return max(0, self.flow.size - self._progress()[0])

    @property
    def current_rate(self) -> float:
        """The flow's rate now (model wire bit/s); 0 while it waits for its latency."""
        return self._progress()[1]

    @property
    def as_of(self) -> float:
        """Model time of the progress numbers (``view.now`` on the simulator)."""
        return self._progress()[2]


class DoneRecords(Mapping):
    """``RunView.records``: the records of finished items, read through to the run's
    records (no second dict of millions of entries at 8192 GPUs). Iterates in the run's
    record order (the job's items, then sub-flows as made), not the done set's hash order."""

    __slots__ = ("_records", "_done")

    def __init__(self, records: dict[str, ItemRecord], done: set[str]) -> None:
        self._records, self._done = records, done

    def __getitem__(self, item_id: str) -> ItemRecord:
        if item_id not in self._done:
            raise KeyError(item_id)
        return self._records[item_id]

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._done

    def __iter__(self):
        done = self._done
        return (i for i in self._records if i in done)

    def __len__(self) -> int:
        return len(self._done)


@dataclass
class RunView:
    """What a scheduler may look at during a run (read-only by convention).

    ``now`` is model time. ``active`` are flows in the network, ``running``
    tasks holding a device slot, ``held`` the ids the scheduler held (in ready order; the same
    list object while the same items are held: do not change it), ``done``
    finished ids and ``records`` their :class:`~railbed.results.ItemRecord`,
    ``ready_at`` the time each item became ready, ``sending`` the number of active flows per
    source NIC (``(server, nic)``; a NIC with none may be absent).
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
    records: Mapping[str, ItemRecord] = field(default_factory=dict)
    ready_at: dict[str, float] = field(default_factory=dict)
    wakes: list[float] = field(default_factory=list)
    jobs: dict[str, float] = field(default_factory=dict)  # job -> its arrival time, once it arrived
    jobs_done: dict[str, float] = field(default_factory=dict)  # job -> the end of its last item
    sending: dict[tuple[int, int], int] = field(default_factory=dict)

    def location(self, endpoint: str) -> Location:
        return self.placement[endpoint]

    def wake_at(self, t: float) -> None:
        """Be woken at model time ``t`` (``on_flows_changed``, then held items offered again)."""
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
            raise ValueError(f"wake_at needs a finite model time, got {t!r}")
        self.wakes.append(max(float(t), self.now))


class Scheduler:
    """Base class with the system-default behaviour for every hook (see module doc)."""

    name = "base"
    label: str | None = None  # a scenario's label for this instance; results name the run by it
    hold_by_class = False  # Rule holds count only flows of the same dscp >> 3 (see Rule)

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        return default_placement(job, cluster)

    def on_ready(self, item: Item, view: RunView) -> Decision | Split:
        return Decision()

    def on_flows_changed(self, view: RunView) -> Mapping[str, float | None | Change]:
        return {}

    def on_done(self, item: Item, record: ItemRecord, view: RunView) -> None:
        return None

    def choose_path(self, flow: Flow, view: RunView) -> int:
        return 0

    def choose_spine(self, flow: Flow, src: Location, dst: Location, view: RunView) -> int | None:
        return None

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> float | None:
        return None

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        return None

    def rule(self, flow: Flow, placement: Placement, cluster: ClusterSpec) -> Rule | None:
        """After ``place``: this scheduler's decisions for ``flow`` as a :class:`Rule`, or
        ``None`` if they are not a pure function of the flow (then the compact engine refuses
        the run). A scheduler without ``on_ready`` is answered by it on every backend
        (:class:`railbed.rulebook.RuleBook`); one with both must make them agree (tests run
        both engines). Tasks always start.
        Default: the base behaviour (DSCP 0, no cap, no waits) when no decision hook is
        overridden, else ``None``."""
        mine = type(self)
        if any(getattr(mine, h) is not getattr(Scheduler, h) for h in _DECISION_HOOKS):
            return None
        return Rule()

    def gate_split(self, flows: list[Flow], placement: Placement, cluster: ClusterSpec) -> Split:
        """After ``place``: the :class:`Split` that answers the offer of the flows whose
        :class:`Rule` names one ``gate`` (in job order) once all are held, on every backend
        (:class:`railbed.rulebook.RuleBook`) and in the compact engine. It must be a pure
        function of those flows (and equal ``on_ready``'s answer where a scheduler has both).
        Default: none."""
        raise NotImplementedError(f"{self.name} gates flows but has no gate_split")

    def gate_split_arrays(
        self, gates: list[list[Flow]], placement: Placement, cluster: ClusterSpec
    ) -> SplitArrays | None:
        """Optional, for the compact engine: ``gate_split`` of each gate's flows (``gates``, each
        as ``gate_split`` gets it) at once, as one :class:`SplitArrays` over the gates' flows in
        order (a sub-flow depends only on sub-flows of its own gate); the engine then checks and
        appends the sub-flows with numpy. ``None``: the engine calls ``gate_split`` per gate. It
        must be the same splits: for one gate, ``gate_split_arrays([flows], ...).split(flows) ==
        gate_split(flows, ...)`` (derive ``gate_split`` from it). Default: ``None``."""
        return None

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        """Before anything is built: reject a job this scheduler cannot run (a tag it
        reads that is out of range, say) by raising :class:`railbed.errors.SpecError`
        naming the field (``items.<id>.tags.dscp``). Default: accept everything."""

    def notes(self) -> list[str]:
        """At the end of the run: lines for the result's notes (what the scheduler decided before
        or during the run and why, e.g. a placement search's trace). Default: none."""
        return []


_DECISION_HOOKS = ("on_ready", "on_flows_changed", "on_done", "choose_path", "on_job_arrived", "on_job_finished")


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


def crowded_gpus(job: Job, placement: Placement) -> list[tuple[int, str, list[str]]]:
    """(server, GPU, endpoints) of every GPU that ``placement`` gives two endpoints or more, at least
    one of them unpinned (a placement's choice, not the job's): the default placement goes round
    the GPUs again when a job has more unpinned endpoints than the cluster has GPUs, and the
    endpoints then share a GPU (and its NIC) without a word. Pinned endpoints that share a GPU are
    the job's own layout and are not reported."""
    groups: dict[tuple[int, str], list[str]] = {}
    for name, loc in placement.locations.items():
        if loc.device.startswith("gpu"):
            groups.setdefault((loc.server, loc.device), []).append(name)
    endpoints = job.endpoints
    return [
        (server, device, names)
        for (server, device), names in groups.items()
        if len(names) > 1 and any(n in endpoints and endpoints[n].pin is None for n in names)
    ]


def crowding_note(job: Job, placement: Placement, cluster: ClusterSpec) -> str | None:
    """One line on :func:`crowded_gpus`, or None when no GPU is shared."""
    crowded = crowded_gpus(job, placement)
    if not crowded:
        return None
    server, device, names = crowded[0]
    unpinned = sum(1 for ep in job.endpoints.values() if ep.pin is None)
    others = f" and {len(crowded) - 1} more GPUs" if len(crowded) > 1 else ""
    return (
        f"{unpinned} unpinned endpoints on a cluster of {cluster.gpus} GPUs: {', '.join(names[:3])} share "
        f"server {server} {device}{others}"
    )
