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
    server's intra-host model (0 s when the server has no ``intra_host``
    preset; the run notes it).

After every batch of changes to the set of network flows the dispatcher calls
``on_flows_changed`` and turns its answer into :class:`SetRate` actions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.job import Flow, Item, Job, Location, Placement, Task, attrs_of
from railbed.results import ItemRecord, RunResult
from railbed.scheduler import ActiveFlow, Decision, RunView, Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology


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
    id: str
    rate: float | None


Action = StartWait | StartFlow | SetRate


def check_placement(job: Job, cluster: ClusterSpec, placement: Placement) -> None:
    for name, ep in job.endpoints.items():
        loc = placement.locations.get(name)
        if loc is None:
            raise SchedulerError(f"placement: endpoint {name!r} was not placed")
        if ep.pin is not None and loc != ep.pin:
            raise SchedulerError(f"placement: endpoint {name!r} is pinned to {ep.pin}, placed at {loc}")
        if not 0 <= loc.server < len(cluster.servers):
            raise SchedulerError(
                f"placement: endpoint {name!r} on server {loc.server}, cluster has {len(cluster.servers)}"
            )
        if not 0 <= loc.nic < cluster.servers[loc.server].nics:
            raise SchedulerError(f"placement: endpoint {name!r} uses NIC {loc.nic} of a server with fewer NICs")


class Dispatcher:
    """See the module docstring. ``now`` arguments are model seconds."""

    def __init__(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, topology: Topology | None = None):
        self.job = job.validate()
        self.scheduler = scheduler
        self.cluster = cluster
        self.topology = topology if topology is not None else Topology(cluster)
        placement = scheduler.place(job.public(), cluster)
        check_placement(job, cluster, placement)
        self.placement = placement
        self.order = {i: k for k, i in enumerate(job.items)}
        self.dependents = job.dependents()
        self.missing = {i: len(it.deps) for i, it in job.items.items()}
        self.view = RunView(job.public(), cluster, self.topology, placement)
        self.records = {i: self._record(it) for i, it in job.items.items()}
        self.events: list[tuple[float, str, str]] = []
        self.notes: list[str] = []
        self._held: list[str] = []
        self._queues: dict[tuple[int, str], deque[str]] = {}
        self._busy: dict[tuple[int, str], int] = {}
        self._phase: dict[str, str] = {}  # flow id -> "src" | "net" | "dst" | "local"
        self._net: dict[str, StartFlow] = {}
        self._flows_changed = False
        self._next_index = 0
        self._done = 0
        self._host_models: dict[str, object] = {}
        self._legs: dict[tuple[str, str], tuple[float, float]] = {}
        self._local_no_model = 0

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
        """A :class:`StartWait` finished (a task, or a leg of a flow)."""
        self.view.now = now
        item_id, _, phase = key.partition("/")
        item = self.job.items[item_id]
        if isinstance(item, Task):
            loc = self.placement[item.endpoint]
            dev = (loc.server, loc.device)
            self._busy[dev] -= 1
            self.view.running.pop(item_id, None)
            ready = self._finish(item_id, now)
            return self._settle(now, ready, freed=[dev])
        if phase == "src":
            return self._settle(now, [], start_net=[item_id])
        ready = self._finish(item_id, now)  # "dst" leg or a local (same-server) flow
        return self._settle(now, ready)

    def flow_done(self, flow_id: str, now: float, received: int | None = None) -> list[Action]:
        """The network part of a flow finished: the receiver has every byte."""
        self.view.now = now
        self.view.active.pop(flow_id, None)
        self._net.pop(flow_id, None)
        self._flows_changed = True
        rec = self.records[flow_id]
        rec.received = received if received is not None else rec.size
        flow = self.job.items[flow_id]
        assert isinstance(flow, Flow)
        opt = self._option(flow)
        if opt is not None and (opt.dst_leg is not None or opt.extra > 0):
            self._phase[flow_id] = "dst"
            seconds = opt.extra + (self._leg_time(flow, opt.dst_leg, "dst")[0] if opt.dst_leg else 0.0)
            return [StartWait(f"{flow_id}/dst", self.placement[flow.dst].server, seconds), *self._settle(now, [])]
        ready = self._finish(flow_id, now)
        return self._settle(now, ready)

    def active_flow(self, flow_id: str) -> StartFlow | None:
        return self._net.get(flow_id)

    def result(self, backend: str, scale: float = 1.0) -> RunResult:
        res = RunResult(
            backend,
            self.job.name,
            getattr(self.scheduler, "name", type(self.scheduler).__name__),
            self.cluster.name,
            scale,
            items=self.records,
            events=list(self.events),
            notes=list(self.notes),
        )
        ends = [r.end for r in self.records.values() if r.end is not None]
        res.makespan = max(ends) if ends else 0.0
        res.compute_iterations()
        if self._local_no_model:
            res.notes.append(f"{self._local_no_model} same-server flows took 0 s: their server has no intra_host model")
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
        )

    def _log(self, now: float, what: str, item_id: str) -> None:
        self.events.append((now, what, item_id))
        rec = self.records[item_id]
        setattr(rec, what, now)

    def _finish(self, item_id: str, now: float) -> list[str]:
        self._log(now, "end", item_id)
        self._done += 1
        self.view.done.add(item_id)
        ready = []
        for j in self.dependents[item_id]:
            self.missing[j] -= 1
            if self.missing[j] == 0:
                ready.append(j)
        return ready

    def _option(self, flow: Flow):
        name = self.records[flow.id].option
        if name is None:
            return None
        return next(o for o in flow.options if o.name == name)

    def _host_model(self, server: int):
        preset = self.cluster.servers[server].intra_host
        if preset is None:
            return None
        if preset not in self._host_models:
            from hwmodels.plugin import host_model

            self._host_models[preset] = host_model(preset)
        return self._host_models[preset]

    def _leg_time(self, flow: Flow, leg, side: str) -> tuple[float, float]:
        """(seconds, inject rate bit/s) of an option's leg on the ``side`` server (computed once)."""
        key = (flow.id, side)
        if key not in self._legs:
            self._legs[key] = self._compute_leg(flow, leg, side)
        return self._legs[key]

    def _compute_leg(self, flow: Flow, leg, side: str) -> tuple[float, float]:
        if leg.duration is not None:
            return float(leg.duration), float("inf")
        server = self.placement[flow.src if side == "src" else flow.dst].server
        model = self._host_model(server)
        if model is None:
            raise SpecError(
                f"items.{flow.id}.options.{self.records[flow.id].option}.{side}_leg",
                f"no duration and server h{server} has no intra_host model",
            )
        from hwmodels.plugin import Leg as HwLeg

        timing = model.leg(HwLeg(leg.src, leg.dst, float(flow.size or 0)))
        return float(timing.duration), float(timing.inject_rate)

    def _offer(self, item_id: str) -> Decision:
        item = self.job.items[item_id]
        decision = self.scheduler.on_ready(item, self.view)
        if not isinstance(decision, Decision):
            raise SchedulerError(f"{self.scheduler.name}.on_ready({item_id}) returned {decision!r}, not a Decision")
        if decision.start and isinstance(item, Flow):
            if isinstance(decision.dscp, bool) or not isinstance(decision.dscp, int) or not 0 <= decision.dscp <= 63:
                raise SchedulerError(f"{self.scheduler.name}: DSCP {decision.dscp!r} for {item_id} is not in 0..63")
            if decision.rate is not None and not decision.rate > 0:
                raise SchedulerError(f"{self.scheduler.name}: rate {decision.rate!r} for {item_id} must be positive")
        return decision

    def _became_ready(self, item_id: str, now: float) -> None:
        self._log(now, "ready", item_id)
        self.view.ready_at[item_id] = now
        item = self.job.items[item_id]
        if isinstance(item, Flow):
            self.view.job.items[item_id] = item  # the size is revealed now
            if item.options:
                k = self.scheduler.choose_path(item, self.view)
                if not isinstance(k, int) or not 0 <= k < len(item.options):
                    raise SchedulerError(f"{self.scheduler.name}.choose_path({item_id}) returned {k!r}")
                self.records[item_id].option = item.options[k].name

    def _settle(
        self, now: float, ready: list[str], freed: list | None = None, start_net: list[str] | None = None
    ) -> list[Action]:
        actions: list[Action] = []
        for i in sorted(ready, key=self.order.__getitem__):
            self._became_ready(i, now)
            self._held.append(i)
        for fid in start_net or []:
            actions.append(self._start_net(fid, now))
        # offer every held item (new ones included) in ready order
        held, self._held = self._held, []
        touched = set(freed or [])
        for i in held:
            decision = self._offer(i)
            if not decision.start:
                self._held.append(i)
                continue
            item = self.job.items[i]
            if isinstance(item, Task):
                loc = self.placement[item.endpoint]
                dev = (loc.server, loc.device)
                self._queues.setdefault(dev, deque()).append(i)
                touched.add(dev)
            else:
                actions.extend(self._start_flow(item, decision, now))
        for dev in sorted(touched):
            actions.extend(self._run_queue(dev, now))
        self.view.held = list(self._held)
        if self._flows_changed:
            self._flows_changed = False
            actions.extend(self._rerate())
        if self._held and not actions and not self._in_flight():
            raise RunStalled(
                f"{self.scheduler.name} holds {len(self._held)} ready items ({', '.join(self._held[:3])}...) "
                "and nothing is running"
            )
        return actions

    def _in_flight(self) -> bool:
        return (
            bool(self.view.active)
            or any(self._busy.values())
            or any(p in ("src", "dst", "local") for i, p in self._phase.items() if i not in self.view.done)
        )

    def _run_queue(self, dev: tuple[int, str], now: float) -> list[Action]:
        out: list[Action] = []
        queue = self._queues.get(dev)
        cap = self.job.capacity_of(dev[1])
        while queue and self._busy.get(dev, 0) < cap:
            i = queue.popleft()
            self._busy[dev] = self._busy.get(dev, 0) + 1
            task = self.job.items[i]
            assert isinstance(task, Task)
            self.view.running[i] = task
            self._log(now, "start", i)
            out.append(StartWait(i, dev[0], task.duration))
        return out

    def _start_flow(self, flow: Flow, decision: Decision, now: float) -> list[Action]:
        rec = self.records[flow.id]
        rec.dscp, rec.rate = decision.dscp, decision.rate
        self._log(now, "start", flow.id)
        src, dst = self.placement[flow.src], self.placement[flow.dst]
        if src.server == dst.server:
            self._phase[flow.id] = "local"
            model = self._host_model(src.server)
            if model is None or src.device == dst.device:
                self._local_no_model += model is None
                seconds = 0.0
            else:
                from hwmodels.plugin import Leg as HwLeg

                seconds = float(model.leg(HwLeg(src.device, dst.device, float(flow.size or 0))).duration)
            return [StartWait(f"{flow.id}/local", src.server, seconds)]
        opt = self._option(flow)
        if opt is not None and opt.src_leg is not None:
            self._phase[flow.id] = "src"
            return [StartWait(f"{flow.id}/src", src.server, self._leg_time(flow, opt.src_leg, "src")[0])]
        return [self._start_net(flow.id, now)]

    def _start_net(self, flow_id: str, now: float) -> StartFlow:
        flow = self.job.items[flow_id]
        assert isinstance(flow, Flow)
        rec = self.records[flow_id]
        src, dst = self.placement[flow.src], self.placement[flow.dst]
        opt = self._option(flow)
        src_nic = opt.src_nic if opt is not None and opt.src_nic is not None else src.nic
        dst_nic = opt.dst_nic if opt is not None and opt.dst_nic is not None else dst.nic
        rate = rec.rate
        if opt is not None and opt.src_leg is not None:
            inject = self._leg_time(flow, opt.src_leg, "src")[1]
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
        self._next_index += 1
        self._net[flow_id] = action
        self.view.active[flow_id] = ActiveFlow(
            flow,
            Location(src.server, src.device, src_nic),
            Location(dst.server, dst.device, dst_nic),
            action.dscp,
            rate,
            now,
        )
        self._flows_changed = True
        return action

    def _rerate(self) -> list[Action]:
        answer = self.scheduler.on_flows_changed(self.view) or {}
        out: list[Action] = []
        for fid, rate in answer.items():
            if fid not in self.view.active:
                raise SchedulerError(f"{self.scheduler.name}.on_flows_changed re-rated {fid!r}, which is not active")
            if rate is not None and not rate > 0:
                raise SchedulerError(f"{self.scheduler.name}: rate {rate!r} for {fid} must be positive")
            af = self.view.active[fid]
            if af.rate != rate:
                self.view.active[fid] = ActiveFlow(af.flow, af.src, af.dst, af.dscp, rate, af.started)
                out.append(SetRate(fid, rate))
        return out
