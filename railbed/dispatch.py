"""The backend-neutral core of a run: dependencies, scheduler hooks, device slots.

Both backends (the emulated run-time and the simulator) drive one
:class:`Dispatcher`. They tell it what finished and when (model time); it
answers with :class:`Action` s to carry out. Keeping the bookkeeping here
means a scheduler sees exactly the same sequence of hook calls on both.

Life of an item
    pending -> ready (all deps done; ``choose_path`` for flows with options,
    then ``on_ready``) -> held (re-offered after every later event) or
    started. A started task waits for a free slot on its device
    (``job.capacity_of(device)`` parallel tasks, FIFO), then runs as a
    :class:`StartWait` of its duration. A started flow runs its phases:
    source leg (a wait), the network transfer (:class:`StartFlow`), the
    destination leg plus the option's extra time (a wait). A flow whose
    endpoints share a server never touches the network: it is one wait of the
    server's host model (0 s when the server has none; the run notes it); the
    same-server flows that start in one batch are timed together (concurrent
    legs: they share the server's links).

Host models
    Each leg is asked of its server's model (:mod:`railbed.hosts`: the kind
    the cluster file names gives one model per server for the run) once,
    when it starts, with the current model time. A stateful model (LEO's
    ``datapath``) keeps its queues for the whole run, so concurrent requests
    wait in them (eqs. 6.1/6.2); a stateless one (an ``intra_host`` graph)
    times a leg as if alone. A flow's record keeps ``intra`` (its legs'
    seconds) and ``jitter``: a flow with path options waits, before the
    network, the ``nic_delay`` of each endpoint's model that has one (LEO:
    a seeded uniform draw, §6.4's 3-9 us at the requester).

After every batch of changes to the set of network flows the dispatcher calls
``on_flows_changed`` and turns its answer into :class:`SetRate` and
:class:`SetDscp` actions. After every item's end it calls ``on_done``.

Sub-flows
    ``on_ready`` may answer :class:`~railbed.scheduler.Split`: the original
    flows (ready, not started) are replaced by scheduler-made sub-flows,
    checked to carry each original's bytes from its source to its
    destination (relays forward what they receive; a multicast hop counts
    for every original in its ``carries``, with that original's share). A sub-flow starts with
    its own DSCP and cap once its dependencies are done; the original ends
    with its last sub-flow, and its record keeps the bytes its destination
    received and the ids of its ``children``.

Wake-ups
    ``view.wake_at(t)`` becomes a :class:`StartWait` with a key ``/wake/<n>``
    on server 0 (both backends already time waits); when it is done the
    scheduler gets ``on_flows_changed`` and its held items are offered again.

Release times
    An item with ``at`` (:attr:`railbed.job.Attributes.at`) later than the moment its
    dependencies are done is not ready yet: a :class:`StartWait` keyed ``/release/<id>`` on
    server 0 times the rest, and when it ends the item becomes ready (at ``at`` at the
    earliest: real clocks round) and is offered as any other.

Several jobs
    Items naming a ``job`` (:mod:`railbed.jobs`) belong to it. When the first of a job's items
    would become ready, the scheduler's ``on_job_arrived`` is asked first; its shift delays every
    item of the job to arrival + shift (release waits, as above). After a job's last item ends,
    ``on_job_finished``.
Held items
    A plain ``HOLD`` is offered again at every settling (after every event).
    A hold that names its wake-up events (:func:`railbed.scheduler.hold`) is
    offered again only at the first settling after one of them: a network flow
    starting or ending at a NIC, as its source or as its destination
    (:class:`OnNic`), an item finishing
    (:class:`OnDone`), a task starting or ending on a device (:class:`OnSlot`),
    a model time (:class:`OnTime`: a wait keyed ``/wake/t<n>``). An event during
    an offer round wakes an item later in the round in time for that round, as
    a re-offer would have seen it. Offers keep the order items became ready.

Progress
    A backend sets :attr:`Dispatcher.progress_source` (flow id -> bytes
    delivered, current rate, model time of the numbers); the view's
    :class:`~railbed.scheduler.ActiveFlow` s read it on demand.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

from railbed.errors import SpecError
from railbed.hosts import KINDS, HostLeg, HostModel
from railbed.job import Flow, Item, Job, Location, Placement, Task, attrs_of
from railbed.jobs import part
from railbed.results import ItemRecord, RunResult
from railbed.scheduler import (
    KEEP,
    ActiveFlow,
    Change,
    Decision,
    DoneRecords,
    OnDone,
    OnNic,
    OnSlot,
    OnTime,
    ProgressSource,
    RunView,
    Scheduler,
    Split,
    SubFlow,
    Wake,
    crowding_note,
)
from railbed.spec import ClusterSpec, Server
from railbed.topology import Topology

WAKE_PREFIX = "/wake/"
RELEASE_PREFIX = "/release/"
# A cap under this share of the flow's slower NIC holds the flow on the packet backends (the
# emulator's agents, ns-3's senders stop writing it): a pacing rate that low stalls a socket long
# after it is raised. The fluid model's counterpart is a rate of almost nothing (MRTF's floor).
HOLD_FRACTION = 1e-3


class SchedulerError(RuntimeError):
    """A scheduler returned something the run cannot carry out."""


class RunStalled(RuntimeError):
    """Nothing runs and the scheduler holds every ready item: the run cannot progress."""


@dataclass(frozen=True)
class StartWait:
    """Wait ``seconds`` (model) on ``server``: a task, or a leg of a flow. Report with ``wait_done(key)``."""

    key: str
    server: int
    seconds: float


@dataclass(frozen=True)
class StartFlow:
    """Send ``size`` payload bytes from NIC ``src`` to NIC ``dst`` (``(server, nic)``).

    ``index`` is a small integer unique in the run (the agents' wire id);
    ``spine`` the ECMP choice for a flow between leaves
    (:meth:`railbed.topology.Topology.ecmp_spine`), else ``None``.
    Report with ``flow_done(id, received)``."""

    id: str
    index: int
    src: tuple[int, int]
    dst: tuple[int, int]
    size: int
    dscp: int
    rate: float | None  # model wire bit/s
    spine: int | None = None


@dataclass(frozen=True)
class SetRate:
    """Change an active flow's cap (model wire bit/s; ``None``: uncapped)."""

    id: str
    rate: float | None


@dataclass(frozen=True)
class SetDscp:
    """Re-mark an active flow: the emulator sets ``IP_TOS`` on its socket, the simulator moves it to that class."""

    id: str
    dscp: int


Action = StartWait | StartFlow | SetRate | SetDscp


def server_devices(server: Server) -> list[str]:
    """Device names an endpoint may be placed on: ``gpu<i>`` (i < gpus), ``cpu``, those its hardware model adds."""
    names = [f"gpu{g}" for g in range(server.gpus)] + ["cpu"]
    if server.host is not None:
        names += [n for n in server.host.definition().devices(server.host.spec) if n not in names]
    return names


def server_resources(server: Server) -> dict[str, float]:
    """What a server offers to endpoint ``demands``: its ``resources``, and ``gpu`` = its GPUs unless given."""
    return {"gpu": float(server.gpus), **{k: float(v) for k, v in server.resources.items()}}


def check_placement(job: Job, cluster: ClusterSpec, placement: Placement) -> None:
    """Every endpoint placed on an existing server, NIC and device; pins kept; demands within resources.

    A violation by a pinned endpoint is the job's fault (:class:`SpecError`
    naming the pin); otherwise the scheduler's (:class:`SchedulerError`)."""
    used: dict[int, dict[str, float]] = {}
    for name, ep in job.endpoints.items():
        loc = placement.locations.get(name)
        if loc is None:
            raise SchedulerError(f"placement: endpoint {name!r} was not placed")
        if ep.pin is not None and loc != ep.pin:
            raise SchedulerError(f"placement: endpoint {name!r} is pinned to {ep.pin}, placed at {loc}")
        problem = _location_problem(cluster, loc)
        if problem is None:
            problem = _demand_problem(ep.demands, cluster.servers[loc.server], used.setdefault(loc.server, {}))
        if problem is not None:
            if ep.pin is not None:
                raise SpecError(f"endpoints.{name}.pin", problem)
            raise SchedulerError(f"placement: endpoint {name!r}: {problem}")


def _location_problem(cluster: ClusterSpec, loc: Location) -> str | None:
    if not isinstance(loc.server, int) or not 0 <= loc.server < len(cluster.servers):
        return f"server {loc.server!r} does not exist (the cluster has {len(cluster.servers)})"
    server = cluster.servers[loc.server]
    if not isinstance(loc.nic, int) or not 0 <= loc.nic < server.nics:
        return f"NIC {loc.nic!r} does not exist on server {loc.server} ({server.nics} NICs)"
    devices = server_devices(server)
    if loc.device not in devices:
        shown = ", ".join(devices[:6]) + (", ..." if len(devices) > 6 else "")
        return f"device {loc.device!r} does not exist on server {loc.server} (it has {shown})"
    return None


def _demand_problem(demands, server: Server, used: dict[str, float]) -> str | None:
    """Add ``demands`` to the server's ``used`` and say what overflows (resources a server does not list are free)."""
    offered = server_resources(server)
    for res, amount in demands.items():
        used[res] = used.get(res, 0.0) + float(amount)
        if res in offered and used[res] > offered[res] * (1 + 1e-9):
            return f"{res} on server {server.name}: {used[res]:g} used, {offered[res]:g} available"
    return None


class Dispatcher:
    """See the module docstring. ``now`` arguments are model seconds."""

    def __init__(
        self,
        job: Job,
        scheduler: Scheduler,
        cluster: ClusterSpec,
        topology: Topology | None = None,
        placement: Placement | None = None,
        snapshot: bool = False,
    ):
        """``placement``: use it instead of asking ``place`` (the network-free run reuses its
        run's placement, :func:`railbed.analysis.network_free_makespan`). ``snapshot``: keep a
        copy of the scheduler as ``place`` left it (``placed_scheduler``), for that run."""
        self.job = job.validate()
        self.scheduler = scheduler
        self.cluster = cluster
        self.topology = topology if topology is not None else Topology(cluster)
        public = job.public()
        if placement is None:
            placement = scheduler.place(public, cluster)
        check_placement(job, cluster, placement)
        self.placement = placement
        crowding = crowding_note(job, placement, cluster)
        self.placed_scheduler: Scheduler | None = None
        self.snapshot_problem: str | None = None  # why there is no copy, when one was asked for
        if snapshot:
            self.placed_scheduler, self.snapshot_problem = _snapshot(scheduler, public, job, cluster, placement)
        # the job's items; a copy with the sub-flows once a scheduler splits (a copy of millions
        # of ids costs memory and cache at 8192 GPUs, bench/bench_dispatch.py)
        self.items: dict[str, Item] = job.items
        self.order = {i: k for k, i in enumerate(job.items)}
        self.dependents = job.dependents()
        self.missing = {i: len(it.deps) for i, it in job.items.items()}
        self.view = RunView(job.public(), cluster, self.topology, placement)
        self.records = {i: self._record(it) for i, it in job.items.items()}
        self.view.records = DoneRecords(self.records, self.view.done)
        self.events: list[tuple[float, str, str]] = []
        self.notes: list[str] = [f"placement: {crowding}"] if crowding else []
        self.progress_source: ProgressSource | None = None
        self._held: dict[str, int] = {}  # held item -> its rank in ready order (the dict keeps that order)
        self._ranks = 0  # the next rank
        self._due: dict[str, None] = {}  # held items to offer at the next round: not waiting for an event
        self._queues: dict[tuple[int, str], deque[str]] = {}
        self._busy: dict[tuple[int, str], int] = {}
        self._phase: dict[str, str] = {}  # flow id -> "src" | "net" | "dst" | "local" | "split"
        self._net: dict[str, StartFlow] = {}
        self._flows_changed = False
        self._next_index = 0
        self._done = 0  # items of the job (not sub-flows) finished
        self._host_models: dict[int, HostModel | None] = {}  # server -> its model for this run
        self._legs: dict[tuple[str, str], tuple[float, float]] = {}
        self._local_no_model = 0
        self._sub: dict[str, SubFlow] = {}  # sub-flow id -> how the scheduler made it
        self._children_left: dict[str, int] = {}  # split original -> sub-flows not yet done
        self._shares: dict[str, dict[str, int]] = {}  # sub-flow id -> {original: its bytes in the sub-flow}
        self._local_batch: list[tuple[Flow, int, str, str]] = []  # same-server flows started in this batch
        self._wakes: dict[str, float] = {}
        self._releases: dict[str, tuple[str, float]] = {}  # release wait key -> (item id, release time)
        self._job_left: dict[str, int] = {}  # job -> its items not done (a run of several jobs)
        for it in job.items.values():
            if it.job is not None:
                self._job_left[it.job] = self._job_left.get(it.job, 0) + 1
        self._job_start: dict[str, float] = {}  # job -> when its items may start: arrival + the scheduler's shift
        self._waiting: dict[str, tuple[Wake, ...]] = {}  # held item -> the events it waits for
        self._waiters: dict[Wake, set[str]] = {}  # event -> the held items waiting for it
        self._timers: dict[str, float] = {}  # OnTime waits: wait key -> model time
        self._woken: list[str] | None = None  # during an offer round: the items events woke
        self._calls_on_done = type(scheduler).on_done is not Scheduler.on_done

    # ----------------------------------------------------------------- API
    @property
    def finished(self) -> bool:
        return self._done == len(self.job.items)

    @property
    def remaining(self) -> int:
        return len(self.job.items) - self._done

    def begin(self, now: float = 0.0) -> list[Action]:
        self.view.now = now
        ready = [i for i, n in self.missing.items() if n == 0]
        return self._settle(now, ready)

    def wait_done(self, key: str, now: float) -> list[Action]:
        """A :class:`StartWait` finished (a task, a leg of a flow, or a wake-up)."""
        self.view.now = now
        if key in self._wakes:  # never before the time asked for (real clocks round)
            self.view.now = now = max(now, self._wakes.pop(key))
            self._flows_changed = True  # the scheduler asked to look again
            return self._settle(now, [])
        if key in self._releases:  # an item's release time came
            item_id, at = self._releases.pop(key)
            self.view.now = now = max(now, at)
            return self._settle(now, [item_id])
        if key in self._timers:  # an OnTime hold: wakes its items only
            t = self._timers.pop(key)
            self.view.now = now = max(now, t)
            self._wake(OnTime(t))
            return self._settle(now, [])
        item_id, _, phase = key.partition("/")
        item = self.items[item_id]
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            dev = (loc.server, loc.device)
            self._busy[dev] -= 1
            self.view.running.pop(item_id, None)
            if self._waiters:
                self._wake(OnSlot(*dev))
            ready = self._finish(item_id, now)
            return self._settle(now, ready, freed=[dev])
        if phase == "src":
            return self._settle(now, [], start_net=[item_id])
        if phase == "local":
            self.records[item_id].received = self.records[item_id].size  # the host model moved every byte
        ready = self._finish(item_id, now)  # "dst" leg or a local (same-server) flow
        return self._settle(now, ready)

    def flow_done(self, flow_id: str, now: float, received: int | None = None) -> list[Action]:
        """The network part of a flow finished: the receiver has every byte."""
        self.view.now = now
        self.view.active.pop(flow_id, None)
        net = self._net.pop(flow_id, None)
        if net is not None:
            self._nic_event(net, -1)
        self._flows_changed = True
        rec = self.records[flow_id]
        rec.received = received if received is not None else rec.size
        flow = self.items[flow_id]
        assert isinstance(flow, Flow)
        opt = self._option(flow)
        if opt is not None and (opt.dst_leg is not None or opt.extra > 0):
            self._phase[flow_id] = "dst"
            seconds = opt.extra + (self._leg_time(flow, opt.dst_leg, "dst", now)[0] if opt.dst_leg else 0.0)
            return [StartWait(f"{flow_id}/dst", self.placement[flow.dst].server, seconds), *self._settle(now, [])]
        ready = self._finish(flow_id, now)
        return self._settle(now, ready)

    def active_flow(self, flow_id: str) -> StartFlow | None:
        return self._net.get(flow_id)

    def result(self, backend: str, scale: float = 1.0) -> RunResult:
        res = RunResult(
            backend,
            self.job.name,
            run_label(self.scheduler),
            self.cluster.name,
            scale,
            items=self.records,
            events=list(self.events),
            notes=[*self.notes, *self.scheduler.notes()],
        )
        ends = [r.end for r in self.records.values() if r.end is not None]
        res.makespan = max(ends) if ends else 0.0
        res.compute_iterations()
        if self._local_no_model:
            res.notes.append(f"{self._local_no_model} same-server flows took 0 s: their server has no host model")
        return res

    # ----------------------------------------------------------- internals
    def _record(self, item: Item) -> ItemRecord:
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            return ItemRecord(item.id, "task", server=loc.server, device=loc.device, attrs=attrs_of(item))
        src, dst = self.placement[item.src], self.placement[item.dst]
        return ItemRecord(
            item.id,
            "flow",
            server=src.server,
            device=src.device,
            dst_server=dst.server,
            src_nic=src.nic,
            dst_nic=dst.nic,
            size=item.size,
            attrs=attrs_of(item),
            parent=item.parent,
        )

    def _log(self, now: float, what: str, item_id: str) -> None:
        self.events.append((now, what, item_id))
        rec = self.records[item_id]
        setattr(rec, what, now)

    def _finish(self, item_id: str, now: float) -> list[str]:
        self._log(now, "end", item_id)
        self.view.done.add(item_id)
        if self._waiters:
            self._wake(OnDone(item_id))
        rec = self.records[item_id]
        if self._calls_on_done:
            self.scheduler.on_done(self._public(item_id), rec, self.view)
        ready = []
        missing = self.missing
        for j in self.dependents[item_id]:
            missing[j] -= 1
            if missing[j] == 0:
                ready.append(j)
        sub = self._sub.get(item_id) if self._sub else None
        if sub is None:
            self._done += 1
            if self._job_left and self.items[item_id].job is not None:
                self._job_item_done(self.items[item_id].job, now)
        else:
            for parent in self._shares[item_id]:
                ready += self._child_done(parent, now)
        return ready

    def _child_done(self, parent_id: str, now: float) -> list[str]:
        self._children_left[parent_id] -= 1
        if self._children_left[parent_id]:
            return []
        parent = self.items[parent_id]
        rec = self.records[parent_id]
        rec.received = sum(
            _share_received(self._shares[c][parent_id], self.records[c])
            for c in rec.children
            if self.items[c].dst == parent.dst
        )
        if rec.received != rec.size:
            raise SchedulerError(f"{parent_id}: its sub-flows delivered {rec.received} bytes of {rec.size}")
        return self._finish(parent_id, now)

    def _public(self, item_id: str) -> Item:
        """The item as the scheduler may see it (a hidden size stays ``None``)."""
        return self.view.job.items.get(item_id) or self.items[item_id]

    def _option(self, flow: Flow):
        name = self.records[flow.id].option
        if name is None:
            return None
        return next(o for o in flow.options if o.name == name)

    def _host_model(self, server: int) -> HostModel | None:
        """The server's model for this run (made by its kind on first use), ``None`` without one."""
        if server not in self._host_models:
            host = self.cluster.servers[server].host
            self._host_models[server] = None if host is None else host.definition().model(host.spec, server)
        return self._host_models[server]

    def _leg_time(self, flow: Flow, leg, side: str, now: float) -> tuple[float, float]:
        """(seconds, inject rate bit/s) of an option's leg on the ``side`` server, asked once,
        when the leg starts (``now``): a datapath model queues it behind earlier legs."""
        key = (flow.id, side)
        if key not in self._legs:
            self._legs[key] = self._compute_leg(flow, leg, side, now)
            rec = self.records[flow.id]
            rec.intra = (rec.intra or 0.0) + self._legs[key][0]
        return self._legs[key]

    def _compute_leg(self, flow: Flow, leg, side: str, now: float) -> tuple[float, float]:
        if leg.duration is not None:
            return float(leg.duration), float("inf")
        server = self.placement[flow.src if side == "src" else flow.dst].server
        model = self._host_model(server)
        where = f"items.{flow.id}.options.{self.records[flow.id].option}.{side}_leg"
        if model is None:
            kinds = ", ".join(KINDS.names())
            raise SpecError(where, f"no duration and server h{server} has no host model ({kinds})")
        try:
            timing = model.leg(HostLeg(leg.src, leg.dst, float(flow.size or 0), now, leg.work))
        except KeyError as exc:  # a function the server's datapath does not time
            raise SpecError(f"{where}.work", f"on server h{server}: {exc.args[0]}") from None
        except ValueError as exc:
            raise SpecError(where, f"on server h{server}: {exc}") from None
        return float(timing.duration), float(timing.inject_rate)

    def _jitter(self, flow: Flow) -> float:
        """The delay a flow with path options meets at the NICs it crosses: each endpoint's host
        model's ``nic_delay`` (LEO's datapath: §6.4's 3-9 us), asked in the order flows start."""
        total = 0.0
        for ep in (flow.src, flow.dst):
            delay = getattr(self._host_model(self.placement[ep].server), "nic_delay", None)
            if delay is not None:
                total += delay()
        return total

    def _offer(self, item_id: str) -> Decision | Split:
        decision = self.scheduler.on_ready(self.view.job.items[item_id], self.view)
        if type(decision) is not Decision:  # the common case first: this runs once per item
            if isinstance(decision, Split):
                return decision
            if not isinstance(decision, Decision):
                raise SchedulerError(f"{self.scheduler.name}.on_ready({item_id}) returned {decision!r}, not a Decision")
        if decision.start and isinstance(self.items[item_id], Flow):
            dscp, rate = decision.dscp, decision.rate
            if type(dscp) is not int or not 0 <= dscp <= 63:
                self._check_dscp(dscp, item_id)
            if rate is not None and not rate > 0:
                self._check_rate(rate, item_id)
        return decision

    def _check_dscp(self, dscp, item_id: str) -> None:
        if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
            raise SchedulerError(f"{self.scheduler.name}: DSCP {dscp!r} for {item_id} is not in 0..63")

    def _check_rate(self, rate, item_id: str) -> None:
        if rate is not None and not rate > 0:
            raise SchedulerError(f"{self.scheduler.name}: rate {rate!r} for {item_id} must be positive")

    def _became_ready(self, item_id: str, now: float) -> None:
        self._log(now, "ready", item_id)
        self.view.ready_at[item_id] = now
        item = self.items[item_id]
        if isinstance(item, Flow):
            if item.reveal == "on_ready":
                self.view.job.items[item_id] = item  # the size is revealed now
            if item.options:
                k = self.scheduler.choose_path(self._public(item_id), self.view)
                if not isinstance(k, int) or not 0 <= k < len(item.options):
                    raise SchedulerError(f"{self.scheduler.name}.choose_path({item_id}) returned {k!r}")
                self.records[item_id].option = item.options[k].name

    def _settle(
        self, now: float, ready: list[str], freed: list | None = None, start_net: list[str] | None = None
    ) -> list[Action]:
        actions: list[Action] = []
        subs = [i for i in ready if i in self._sub] if self._sub else ()
        if subs:
            ready = [i for i in ready if i not in self._sub]
        for i in sorted(ready, key=self.order.__getitem__):
            item = self.items[i]
            at = item.at
            if item.job is not None and (at is None or at <= now):
                at = self._job_begins(item.job, now)
            if at is not None and at > now:  # not ready before its release time
                key = f"{RELEASE_PREFIX}{i}-{len(self.events)}"
                self._releases[key] = (i, at)
                actions.append(StartWait(key, 0, at - now))
                continue
            self._became_ready(i, now)
            self._hold(i)
        for fid in start_net or ():
            actions.append(self._start_net(fid, now))
        for i in subs:
            actions.extend(self._start_sub(i, now))
        touched = set(freed or ())
        if self._held:
            actions.extend(self._offer_held(now, touched))
        for dev in sorted(touched):
            actions.extend(self._run_queue(dev, now))
        self.view.held = list(self._held)
        if self._local_batch:
            actions.extend(self._time_local())
        if self._flows_changed:
            self._flows_changed = False
            actions.extend(self._rerate())
        if self.view.wakes:
            actions.extend(self._take_wakes(now))
        if self._held and not actions and not self._in_flight():
            raise RunStalled(
                f"{self.scheduler.name} holds {len(self._held)} ready items ({', '.join(list(self._held)[:3])}...) "
                "and nothing is running"
            )
        return actions

    def _job_begins(self, job: str, now: float) -> float:
        """When ``job``'s items may be ready: at its arrival (now, the first time one would be) the
        scheduler's ``on_job_arrived`` is asked for a shift."""
        start = self._job_start.get(job)
        if start is None:
            self.view.jobs[job] = now
            shift = self.scheduler.on_job_arrived(job, part(self.view.job, job), self.view) or 0.0
            if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not 0 <= shift < float("inf"):
                who = f"{self.scheduler.name}.on_job_arrived({job})"
                raise SchedulerError(f"{who} returned {shift!r}, not a shift >= 0")
            start = self._job_start[job] = now + shift
        return start

    def _job_item_done(self, job: str, now: float) -> None:
        self._job_left[job] -= 1
        if not self._job_left[job]:
            self.view.jobs_done[job] = now
            self.scheduler.on_job_finished(job, self.view)
    def _hold(self, item_id: str) -> None:
        """A newly ready item joins the held items, last in ready order, to be offered."""
        self._held[item_id] = self._ranks
        self._ranks += 1
        self._due[item_id] = None

    def _offer_held(self, now: float, touched: set) -> list[Action]:
        """Offer every held item (new ones included) in ready order, but those waiting for events
        that have not happened (:func:`railbed.scheduler.hold`); start what the scheduler lets go."""
        actions: list[Action] = []
        due, held = self._due, self._held
        if not due:  # every held item waits for an event still to come
            return actions
        self.view.held = list(held)  # while offering, the scheduler sees every held item, this one included
        order = [(r, i) for i, r in held.items()] if len(due) == len(held) else sorted((held[i], i) for i in due)
        self._due, self._woken = {}, (woken := [])
        later: list[tuple[int, str]] = []  # a heap: items woken during the round, after their place
        k = 0
        while k < len(order) or later:
            if later and (k == len(order) or later[0] < order[k]):
                rank, i = heapq.heappop(later)
            else:
                rank, i = order[k]
                k += 1
            if i in held:  # not started or split away earlier in this round
                actions.extend(self._offer_one(i, now, touched))
            for w in woken:  # an event of this offer woke them: those after it join this round
                if held[w] > rank:
                    heapq.heappush(later, (held[w], w))
                else:
                    self._due[w] = None
            woken.clear()
        self._woken = None
        return actions

    def _offer_one(self, i: str, now: float, touched: set) -> list[Action]:
        """Offer held item ``i``: start it, split it (and the others a split takes), or keep it held."""
        decision = self._offer(i)
        if isinstance(decision, Split):  # may take this item and any still held (not started above)
            for h in self._check_split(decision, i, set(self._held)):
                del self._held[h]
                self._due.pop(h, None)
                self._unwait(h)
            return self._split(decision, now)
        if not decision.start:
            if decision.until is None:
                self._due[i] = None
                return []
            return self._wait_for(i, decision.until, now)
        del self._held[i]
        item = self.items[i]
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            dev = (loc.server, loc.device)
            self._queues.setdefault(dev, deque()).append(i)
            touched.add(dev)
            return []
        return self._start_flow(item, decision, now)

    def _wait_for(self, item_id: str, until: tuple[Wake, ...], now: float) -> list[Action]:
        """Register a held item's wake-up events; a wait for each model time not yet asked for."""
        if not isinstance(until, tuple) or not until:
            raise SchedulerError(f"{self.scheduler.name}.on_ready({item_id}) held until {until!r}: use hold(...)")
        out: list[Action] = []
        self._waiting[item_id] = until
        for w in until:
            if isinstance(w, OnTime) and w not in self._waiters:
                if not isinstance(w.t, (int, float)) or not math.isfinite(w.t):
                    raise SchedulerError(f"{self.scheduler.name}: {item_id} held until {w!r}, not a finite time")
                key = f"{WAKE_PREFIX}t{len(self._timers)}-{w.t!r}"
                self._timers[key] = w.t
                out.append(StartWait(key, 0, max(w.t - now, 0.0)))
            self._waiters.setdefault(w, set()).add(item_id)
        return out

    def _unwait(self, item_id: str) -> None:
        for w in self._waiting.pop(item_id, ()):
            self._waiters[w].discard(item_id)

    def _wake(self, event: Wake) -> None:
        """``event`` happened: the items waiting for it are offered at the next settling."""
        for i in self._waiters.pop(event, ()):
            keys = self._waiting.pop(i, ())
            if len(keys) > 1:
                for w in keys:
                    if w != event:
                        self._waiters[w].discard(i)
            if self._woken is not None:  # during an offer round: placed by the round
                self._woken.append(i)
            else:
                self._due[i] = None

    def _nic_event(self, flow: StartFlow, delta: int) -> None:
        """A network flow started (``delta`` 1) or ended (-1): count it at its source NIC
        (``view.sending``) and wake the items waiting for either of its NICs."""
        sending = self.view.sending
        sending[flow.src] = sending.get(flow.src, 0) + delta
        if self._waiters:
            self._wake(OnNic(*flow.src, "src"))
            self._wake(OnNic(*flow.dst, "dst"))

    def _in_flight(self) -> bool:
        return (
            bool(self.view.active)
            or bool(self._wakes)
            or bool(self._releases)
            or bool(self._timers)
            or any(self._busy.values())
            or any(p in ("src", "dst", "local") for i, p in self._phase.items() if i not in self.view.done)
        )

    def _take_wakes(self, now: float) -> list[Action]:
        out: list[Action] = []
        for t in sorted(set(self.view.wakes)):
            key = f"{WAKE_PREFIX}{len(self._wakes)}-{t!r}"
            if key not in self._wakes:
                self._wakes[key] = t
                out.append(StartWait(key, 0, t - now))
        self.view.wakes.clear()
        return out

    def _run_queue(self, dev: tuple[int, str], now: float) -> list[Action]:
        out: list[Action] = []
        queue = self._queues.get(dev)
        cap = self.job.capacity_of(dev[1])
        while queue and self._busy.get(dev, 0) < cap:
            i = queue.popleft()
            self._busy[dev] = self._busy.get(dev, 0) + 1
            task = self.items[i]
            assert isinstance(task, Task)
            self.view.running[i] = task
            if self._waiters:
                self._wake(OnSlot(*dev))
            self._log(now, "start", i)
            out.append(StartWait(i, dev[0], task.duration))
        return out

    # ------------------------------------------------------------ sub-flows
    def _check_split(self, split: Split, offered: str, held: set[str]) -> set[str]:
        """Validate a :class:`Split` (see its docstring); return the originals it replaces."""
        who = f"{self.scheduler.name}: split of {offered}"
        if not isinstance(split.parts, Mapping) or offered not in split.parts:
            raise SchedulerError(f"{who}: its parts must include the offered flow")
        new_ids: set[str] = set()
        ends: dict[str, list[tuple[str, str, int]]] = {orig: [] for orig in split.parts}
        carried_by: list[tuple[SubFlow, dict[str, int]]] = []
        for orig, subs in split.parts.items():
            item = self.items.get(orig)
            if orig not in held or not isinstance(item, Flow):
                raise SchedulerError(f"{who}: {orig!r} is not a ready, held flow")
            if item.options:
                raise SchedulerError(f"{who}: {orig} offers path options; a flow with options cannot be split")
            for sub in subs:
                self._check_sub(sub, who, new_ids)
                src, dst, _ = self._sub_ends(sub, item)
                carried_by.append((sub, _shares_of(sub, orig, split, who)))
                for carried, share in carried_by[-1][1].items():
                    ends[carried].append((src, dst, share))
        for orig, carried_ends in ends.items():
            if not carried_ends:
                raise SchedulerError(f"{who}: {orig} gets no sub-flows: none listed under it or carrying it")
            check_conservation(self.items[orig], carried_ends, who)
        for sub, shares in carried_by:
            self._check_copies(sub, shares, who)
        for subs in split.parts.values():
            for sub in subs:
                for d in sub.deps:
                    if d not in new_ids and d not in self.view.done:
                        raise SchedulerError(f"{who}: sub-flow {sub.id} depends on {d!r}: not in the split, not done")
        check_acyclic(split, who)
        return set(split.parts)

    def _check_sub(self, sub: SubFlow, who: str, new_ids: set[str]) -> None:
        if not isinstance(sub, SubFlow):
            raise SchedulerError(f"{who}: {sub!r} is not a SubFlow")
        if not isinstance(sub.id, str) or "/" in sub.id or sub.id in self.items or sub.id in new_ids:
            raise SchedulerError(f"{who}: sub-flow id {sub.id!r} is not new in the run (or contains '/')")
        new_ids.add(sub.id)
        if isinstance(sub.size, bool) or not isinstance(sub.size, int) or sub.size < 0:
            raise SchedulerError(f"{who}: sub-flow {sub.id} size {sub.size!r} is not a byte count")
        for end in (sub.src, sub.dst):
            if end is not None and end not in self.job.endpoints:
                raise SchedulerError(f"{who}: sub-flow {sub.id} names unknown endpoint {end!r}")
        self._check_dscp(sub.dscp, sub.id)
        self._check_rate(sub.rate, sub.id)

    def _check_copies(self, sub: SubFlow, shares: dict[str, int], who: str) -> None:
        """One copy serves the originals of one source (multicast) or of one destination (a
        reduction: gradients summed at a relay); others need bytes of their own. So the largest
        share per source, summed, or per destination, summed, fits in the sub-flow's size."""
        need = min(self._copies(shares, "src"), self._copies(shares, "dst"))
        if need > sub.size:
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries at least {need} distinct bytes in {sub.size}")

    def _copies(self, shares: dict[str, int], end: str) -> int:
        largest: dict[str, int] = {}
        for carried, share in shares.items():
            key = getattr(self.items[carried], end)
            largest[key] = max(largest.get(key, 0), share)
        return sum(largest.values())

    @staticmethod
    def _sub_ends(sub: SubFlow, orig: Flow) -> tuple[str, str, int]:
        return (sub.src or orig.src, sub.dst or orig.dst, sub.size)

    def _split(self, split: Split, now: float) -> list[Action]:
        """Replace the originals by their sub-flows; start those without pending deps."""
        actions: list[Action] = []
        if self.items is self.job.items:
            self.items = dict(self.job.items)
        for orig_id in split.parts:
            self._log(now, "start", orig_id)
            self._phase[orig_id] = "split"
            self._children_left[orig_id] = 0
            self.records[orig_id].children = []
        for orig_id, subs in split.parts.items():
            orig = self.items[orig_id]
            assert isinstance(orig, Flow)
            for sub in subs:
                self._shares[sub.id] = shares = _shares_of(sub, orig_id, split, "")
                for carried in shares:
                    self._children_left[carried] += 1
                    self.records[carried].children.append(sub.id)
                src, dst, size = self._sub_ends(sub, orig)
                flow = replace(orig, id=sub.id, src=src, dst=dst, size=size, deps=tuple(sub.deps), parent=orig_id)
                flow = replace(flow, reveal="upfront")
                self.items[sub.id] = flow
                self._sub[sub.id] = sub
                self.records[sub.id] = self._record(flow)
                self.dependents.setdefault(sub.id, [])  # a sub-flow listed earlier may already wait for it
                self.missing[sub.id] = sum(1 for d in sub.deps if d not in self.view.done)
                for d in sub.deps:
                    if d not in self.view.done:
                        self.dependents.setdefault(d, []).append(sub.id)
        for subs in split.parts.values():
            for sub in subs:
                if self.missing[sub.id] == 0:
                    actions.extend(self._start_sub(sub.id, now))
        return actions

    def _start_sub(self, sub_id: str, now: float) -> list[Action]:
        self._log(now, "ready", sub_id)
        sub = self._sub[sub_id]
        flow = self.items[sub_id]
        assert isinstance(flow, Flow)
        return self._start_flow(flow, Decision(dscp=sub.dscp, rate=sub.rate), now)

    # ---------------------------------------------------------------- flows
    def _start_flow(self, flow: Flow, decision: Decision, now: float) -> list[Action]:
        rec = self.records[flow.id]
        rec.dscp, rec.rate = decision.dscp, decision.rate
        self._log(now, "start", flow.id)
        src, dst = self.placement[flow.src], self.placement[flow.dst]
        if src.server == dst.server:  # timed with the other same-server flows of this batch
            self._phase[flow.id] = "local"
            self._local_batch.append((flow, src.server, src.device, dst.device))
            return []
        opt = self._option(flow)
        jitter = self._jitter(flow) if opt is not None else 0.0
        if jitter:
            rec.jitter = jitter
        if opt is not None and (opt.src_leg is not None or jitter):
            self._phase[flow.id] = "src"
            seconds = self._leg_time(flow, opt.src_leg, "src", now)[0] if opt.src_leg is not None else 0.0
            return [StartWait(f"{flow.id}/src", src.server, seconds + jitter)]
        return [self._start_net(flow.id, now)]

    def _time_local(self) -> list[Action]:
        """Waits for the same-server flows started in this batch: the flows of one server that start
        together are concurrent legs of its intra-host model (they share its links)."""
        batch, self._local_batch = self._local_batch, []
        seconds = [0.0] * len(batch)
        for server in sorted({b[1] for b in batch}):
            model = self._host_model(server)
            mine = [k for k, b in enumerate(batch) if b[1] == server]
            if model is None:
                self._local_no_model += len(mine)
                continue
            legs = [k for k in mine if batch[k][2] != batch[k][3]]
            if legs:
                now = self.view.now
                try:
                    timings = model.legs(
                        [HostLeg(batch[k][2], batch[k][3], float(batch[k][0].size or 0), now) for k in legs]
                    )
                except ValueError as exc:  # a datapath server has no device-to-device leg
                    raise SpecError(f"items.{batch[legs[0]][0].id}", f"same-server flow on h{server}: {exc}") from None
                for k, t in zip(legs, timings):
                    seconds[k] = float(t.duration)
        return [StartWait(f"{flow.id}/local", server, seconds[k]) for k, (flow, server, _, _) in enumerate(batch)]

    def _start_net(self, flow_id: str, now: float) -> StartFlow:
        flow = self.items[flow_id]
        assert isinstance(flow, Flow)
        rec = self.records[flow_id]
        src, dst = self.placement[flow.src], self.placement[flow.dst]
        opt = self._option(flow)
        src_nic = opt.src_nic if opt is not None and opt.src_nic is not None else src.nic
        dst_nic = opt.dst_nic if opt is not None and opt.dst_nic is not None else dst.nic
        rate = rec.rate
        if opt is not None and opt.src_leg is not None:
            inject = self._leg_time(flow, opt.src_leg, "src", now)[1]
            if inject != float("inf"):
                rate = inject if rate is None else min(rate, inject)
        rec.src_nic, rec.dst_nic = src_nic, dst_nic
        self._phase[flow_id] = "net"
        action = StartFlow(
            flow_id,
            self._next_index,
            (src.server, src_nic),
            (dst.server, dst_nic),
            int(flow.size or 0),
            rec.dscp or 0,
            rate,
            self.topology.ecmp_spine((src.server, src_nic), (dst.server, dst_nic), flow_id),
        )
        rec.spine = action.spine
        self._next_index += 1
        self._net[flow_id] = action
        self._nic_event(action, 1)
        self.view.active[flow_id] = ActiveFlow(
            self._public(flow_id),
            Location(src.server, src.device, src_nic),
            Location(dst.server, dst.device, dst_nic),
            action.dscp,
            rate,
            now,
            self._progress,
        )
        self._flows_changed = True
        return action

    def _progress(self, flow_id: str) -> tuple[int, float, float]:
        if self.progress_source is None:
            return 0, 0.0, self.view.now
        return self.progress_source(flow_id)

    def _rerate(self) -> list[Action]:
        answer = self.scheduler.on_flows_changed(self.view) or {}
        out: list[Action] = []
        for fid, value in answer.items():
            if fid not in self.view.active:
                raise SchedulerError(f"{self.scheduler.name}.on_flows_changed re-rated {fid!r}, which is not active")
            change = value if isinstance(value, Change) else Change(rate=value)
            af = self.view.active[fid]
            if change.rate is not KEEP:
                self._check_rate(change.rate, fid)
                if af.rate != change.rate:
                    af.rate = change.rate
                    out.append(SetRate(fid, change.rate))
            if change.dscp is not KEEP:
                self._check_dscp(change.dscp, fid)
                if af.dscp != change.dscp:
                    af.dscp = change.dscp
                    self.records[fid].remarked = True
                    out.append(SetDscp(fid, change.dscp))
        return out


def _snapshot(scheduler: Scheduler, *shared) -> tuple[Scheduler | None, str | None]:
    """A deep copy of ``scheduler`` that shares ``shared`` objects (the jobs, their items, the
    cluster, the placement: read-only during a run, and millions of items at 8192 GPUs), or
    ``None`` and why it cannot be copied."""
    import copy

    memo: dict[int, object] = {}
    for obj in shared:
        memo[id(obj)] = obj
        if isinstance(obj, Job):
            memo[id(obj.items)] = obj.items  # a dict the scheduler may keep; its items are frozen
            memo.update((id(it), it) for it in obj.items.values())
    try:
        return copy.deepcopy(scheduler, memo), None
    except Exception as exc:  # noqa: BLE001 - any object a scheduler holds may refuse to be copied
        return None, f"{scheduler.name} cannot be copied after place ({type(exc).__name__}: {exc})"


def run_label(scheduler: Scheduler) -> str:
    """The name a run goes by in results: the scenario's ``label``, else the scheduler's name."""
    return getattr(scheduler, "label", None) or getattr(scheduler, "name", type(scheduler).__name__)


def _shares_of(sub: SubFlow, listed_under: str, split: Split, who: str) -> dict[str, int]:
    """{original: bytes of it in ``sub``}: its whole size for the original it is listed under, unless
    ``carries`` names the originals it serves (a multicast hop)."""
    if not sub.carries:
        return {listed_under: sub.size}
    shares: dict[str, int] = {}
    for entry in sub.carries:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {entry!r}, not (original id, bytes)")
        orig, share = entry
        if orig not in split.parts or orig in shares:
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {orig!r}: not an original of the split, or twice")
        if isinstance(share, bool) or not isinstance(share, int) or not 0 <= share <= sub.size:
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {share!r} bytes of {orig}, not in 0..{sub.size}")
        shares[orig] = share
    return shares


def _share_received(share: int, rec: ItemRecord) -> int:
    """The bytes of an original's ``share`` that a sub-flow delivered: all of them when it delivered
    its size, else in proportion (a hop that lost bytes cannot count whole for a smaller share)."""
    received = rec.received or 0
    return share if received >= rec.size else share * received // rec.size


def check_conservation(orig: Flow, ends: list[tuple[str, str, int]], who: str) -> None:
    """The sub-flows carry ``orig.size`` bytes out of its source, into its destination, and relays forward all."""
    net: dict[str, int] = {}
    for src, dst, size in ends:
        if src == dst:
            raise SchedulerError(f"{who}: a sub-flow of {orig.id} goes from {src} to itself")
        net[src] = net.get(src, 0) - size
        net[dst] = net.get(dst, 0) + size
    want = {orig.src: -(orig.size or 0), orig.dst: orig.size or 0}
    for ep in [orig.src, orig.dst, *sorted(set(net) - set(want))]:
        if net.get(ep, 0) != want.get(ep, 0):
            raise SchedulerError(
                f"{who}: the sub-flows of {orig.id} leave {ep} with {net.get(ep, 0):+d} bytes, "
                f"expected {want.get(ep, 0):+d} (sizes must carry {orig.size} bytes from {orig.src} to {orig.dst})"
            )


def check_acyclic(split: Split, who: str) -> None:
    """The sub-flows' dependencies among themselves form no cycle (:class:`SchedulerError` naming one)."""
    deps = {sub.id: [d for d in sub.deps] for subs in split.parts.values() for sub in subs}
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        stack = [(node, iter(deps.get(node, ())))]
        state[node] = 1
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[cur] = 2
                stack.pop()
            elif nxt in deps and state.get(nxt) == 1:
                raise SchedulerError(f"{who}: sub-flow dependencies form a cycle through {nxt}")
            elif nxt in deps and nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))

    for node in deps:
        if node not in state:
            visit(node)
