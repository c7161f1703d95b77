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
    Each leg is asked of its server's model once, when it starts
    (:mod:`railbed.host_legs`). A flow's record keeps ``intra`` (its legs'
    seconds) and ``jitter``: a flow with path options waits, before the
    network, the ``nic_delay`` of each endpoint's model that has one (LEO:
    a seeded uniform draw, §6.4's 3-9 us at the requester).

After every batch of changes to the set of network flows the dispatcher calls
``on_flows_changed`` and turns its answer into :class:`SetRate` and
:class:`SetDscp` actions. After every item's end it calls ``on_done``.

Rules
    A scheduler that writes :meth:`~railbed.scheduler.Scheduler.rule` and no ``on_ready``
    is answered by its rules' one reading (:class:`railbed.rulebook.RuleBook`, asked here
    in ``on_ready``'s place), the same on every backend and in the compact engine.

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
    a model time (:class:`OnTime`: a wait keyed ``/wake/t<n>``), an item becoming
    ready (:class:`OnReady`: it joins the held items, before the round). An event during
    an offer round wakes an item later in the round in time for that round, as
    a re-offer would have seen it. Offers keep the order items became ready.

Progress
    A backend sets :attr:`Dispatcher.progress_source` (flow id -> bytes
    delivered, current rate, model time of the numbers); the view's
    :class:`~railbed.scheduler.ActiveFlow` s read it on demand.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from railbed.actions import (
    HOLD_FRACTION,
    RELEASE_PREFIX,
    WAKE_PREFIX,
    Action,
    RunStalled,
    SchedulerError,
    SetDscp,
    SetRate,
    StartFlow,
    StartWait,
    check_dscp,
    check_rate,
    check_spine,
)
from railbed.held import HeldItems
from railbed.host_legs import HostLegs
from railbed.job import Flow, Item, Job, Location, Placement, Task, attrs_of
from railbed.jobs import part
from railbed.placement_check import check_placement, server_devices, server_resources
from railbed.results import ItemRecord, RunResult
from railbed.rulebook import RuleBook, as_offered, decides_by_rule
from railbed.scheduler import (
    KEEP,
    ActiveFlow,
    Change,
    Decision,
    DoneRecords,
    OnDone,
    OnNic,
    OnReady,
    OnSlot,
    OnTime,
    ProgressSource,
    RunView,
    Scheduler,
    Split,
    SubFlow,
    crowding_note,
)
from railbed.snapshot import placed_copy
from railbed.spec import ClusterSpec
from railbed.splits import check_acyclic, check_conservation, check_split, share_received, shares_of, sub_ends
from railbed.topology import Topology

# the Dispatcher's vocabulary, importable from here as before the split by concern
__all__ = [
    "HOLD_FRACTION",
    "RELEASE_PREFIX",
    "WAKE_PREFIX",
    "Action",
    "Dispatcher",
    "RunStalled",
    "SchedulerError",
    "SetDscp",
    "SetRate",
    "StartFlow",
    "StartWait",
    "check_acyclic",
    "check_conservation",
    "check_placement",
    "run_label",
    "server_devices",
    "server_resources",
]


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
            self.placed_scheduler, self.snapshot_problem = placed_copy(scheduler, public, job, cluster, placement)
        # a scheduler that writes rules and no on_ready: its offers are the rules' reading
        self._rules = (
            RuleBook(scheduler, map(as_offered, job.flows), placement, cluster) if decides_by_rule(scheduler) else None
        )
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
        self._held = HeldItems(self.view.sending)  # ready items the scheduler holds, and the events they wait for
        self._held_listed = -1  # the held items' version view.held lists
        self._queues: dict[tuple[int, str], deque[str]] = {}
        self._busy: dict[tuple[int, str], int] = {}
        self._phase: dict[str, str] = {}  # flow id -> "src" | "net" | "dst" | "local" | "split"
        self._net: dict[str, StartFlow] = {}
        self._flows_changed = False
        self._next_index = 0
        self._done = 0  # items of the job (not sub-flows) finished
        self._hosts = HostLegs(cluster, placement)  # the servers' host models and the legs they timed
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
        self._calls_on_done = type(scheduler).on_done is not Scheduler.on_done
        self._picks_spine = type(scheduler).choose_spine is not Scheduler.choose_spine

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
        if key in self._held.timers:  # an OnTime hold: wakes its items only
            t = self._held.timers.pop(key)
            self.view.now = now = max(now, t)
            self._held.wake(OnTime(t))
            return self._settle(now, [])
        item_id, _, phase = key.partition("/")
        item = self.items[item_id]
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            dev = (loc.server, loc.device)
            self._busy[dev] -= 1
            self.view.running.pop(item_id, None)
            if self._held.waiters:
                self._held.wake(OnSlot(*dev))
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
        if self._hosts.local_no_model:
            res.notes.append(f"{self._hosts.local_no_model} same-server flows took 0 s: their server has no host model")
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
        if self._held.waiters:
            self._held.wake(OnDone(item_id))
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
            share_received(self._shares[c][parent_id], self.records[c])
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

    def _leg_time(self, flow: Flow, leg, side: str, now: float) -> tuple[float, float]:
        return self._hosts.leg_time(flow, leg, side, now, self.records[flow.id])

    def _offer(self, item_id: str) -> Decision | Split:
        item = self.view.job.items[item_id]
        rules = self._rules
        decision = self.scheduler.on_ready(item, self.view) if rules is None else rules.decide(item, self.view)
        if type(decision) is not Decision:  # the common case first: this runs once per item
            if isinstance(decision, Split):
                return decision
            if not isinstance(decision, Decision):
                raise SchedulerError(f"{self.scheduler.name}.on_ready({item_id}) returned {decision!r}, not a Decision")
        if decision.start and isinstance(self.items[item_id], Flow):
            dscp, rate = decision.dscp, decision.rate
            if type(dscp) is not int or not 0 <= dscp <= 63:
                check_dscp(dscp, item_id, self.scheduler.name)
            if rate is not None and not rate > 0:
                check_rate(rate, item_id, self.scheduler.name)
        return decision

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
            self._held.add(i)
            if self._held.waiters:
                self._held.wake(OnReady(i))
        for fid in start_net or ():
            actions.append(self._start_net(fid, now))
        for i in subs:
            actions.extend(self._start_sub(i, now))
        touched = set(freed or ())
        if self._held:
            actions.extend(self._offer_held(now, touched))
        for dev in sorted(touched):
            actions.extend(self._run_queue(dev, now))
        self._list_held()
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

    def _offer_held(self, now: float, touched: set) -> list[Action]:
        """Offer every held item (new ones included) in ready order, but those waiting for events
        that have not happened (:func:`railbed.scheduler.hold`); start what the scheduler lets go."""
        actions: list[Action] = []
        if not self._held.due:  # every held item waits for an event still to come
            return actions
        self._list_held()  # while offering, the scheduler sees every held item, this one included
        self._held.offer_round(lambda i: actions.extend(self._offer_one(i, now, touched)))
        return actions

    def _list_held(self) -> None:
        """``view.held``: the held items in ready order, a new list only when items joined or left since
        the last one (it was made at every settling and offer round: a scheduler holding thousands of
        flows paid for the copy at every event; the RuleBook reads a new list as a new round)."""
        if self._held.version != self._held_listed:
            self.view.held, self._held_listed = list(self._held), self._held.version

    def _offer_one(self, i: str, now: float, touched: set) -> list[Action]:
        """Offer held item ``i``: start it, split it (and the others a split takes), or keep it held."""
        decision = self._offer(i)
        if isinstance(decision, Split):  # may take this item and any still held (not started above)
            held, name = set(self._held), self.scheduler.name
            for h in check_split(decision, i, held, self.items, self.job.endpoints, self.view.done, name):
                self._held.take(h)
            return self._split(decision, now)
        if not decision.start:
            if decision.until is None:
                self._held.keep(i)
                return []
            return self._held.wait_for(i, decision.until, now, self.scheduler.name)
        self._held.take(i)
        item = self.items[i]
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            dev = (loc.server, loc.device)
            self._queues.setdefault(dev, deque()).append(i)
            touched.add(dev)
            return []
        return self._start_flow(item, decision, now)

    def _nic_event(self, flow: StartFlow, delta: int) -> None:
        """A network flow started (``delta`` 1) or ended (-1): count it at its source NIC
        (``view.sending``) and wake the items waiting for either of its NICs."""
        sending = self.view.sending
        sending[flow.src] = sending.get(flow.src, 0) + delta
        if self._held.waiters:
            self._held.wake(OnNic(*flow.src, "src"))
            self._held.wake(OnNic(*flow.dst, "dst"))
            if delta < 0:
                self._held.freed(flow.src)

    def _in_flight(self) -> bool:
        return (
            bool(self.view.active)
            or bool(self._wakes)
            or bool(self._releases)
            or bool(self._held.timers)
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
            if self._held.waiters:
                self._held.wake(OnSlot(*dev))
            self._log(now, "start", i)
            out.append(StartWait(i, dev[0], task.duration))
        return out

    # ------------------------------------------------------------ sub-flows
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
                self._shares[sub.id] = shares = shares_of(sub, orig_id, split, "")
                for carried in shares:
                    self._children_left[carried] += 1
                    self.records[carried].children.append(sub.id)
                src, dst, size = sub_ends(sub, orig)
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
        jitter = self._hosts.jitter(flow) if opt is not None else 0.0
        if jitter:
            rec.jitter = jitter
        if opt is not None and (opt.src_leg is not None or jitter):
            self._phase[flow.id] = "src"
            seconds = self._leg_time(flow, opt.src_leg, "src", now)[0] if opt.src_leg is not None else 0.0
            return [StartWait(f"{flow.id}/src", src.server, seconds + jitter)]
        return [self._start_net(flow.id, now)]

    def _time_local(self) -> list[Action]:
        """Waits for the same-server flows started in this batch (:meth:`HostLegs.time_local`)."""
        batch, self._local_batch = self._local_batch, []
        seconds = self._hosts.time_local(batch, self.view.now)
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
        spine = self.topology.ecmp_spine((src.server, src_nic), (dst.server, dst_nic), flow_id)
        if spine is not None and self._picks_spine:
            ends = replace(src, nic=src_nic), replace(dst, nic=dst_nic)
            k = self.scheduler.choose_spine(self._public(flow_id), *ends, self.view)
            spine = check_spine(k, spine, len(self.topology.spines), flow_id, self.scheduler.name)
        action = StartFlow(
            flow_id,
            self._next_index,
            (src.server, src_nic),
            (dst.server, dst_nic),
            int(flow.size or 0),
            rec.dscp or 0,
            rate,
            spine,
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
                check_rate(change.rate, fid, self.scheduler.name)
                if af.rate != change.rate:
                    af.rate = change.rate
                    out.append(SetRate(fid, change.rate))
            if change.dscp is not KEEP:
                check_dscp(change.dscp, fid, self.scheduler.name)
                if af.dscp != change.dscp:
                    af.dscp = change.dscp
                    self.records[fid].remarked = True
                    out.append(SetDscp(fid, change.dscp))
        return out


def run_label(scheduler: Scheduler) -> str:
    """The name a run goes by in results: the scenario's ``label``, else the scheduler's name."""
    return getattr(scheduler, "label", None) or getattr(scheduler, "name", type(scheduler).__name__)
