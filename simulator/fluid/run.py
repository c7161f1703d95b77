"""``simulate(job, scheduler, cluster)``: a run on the flow-level simulator.

The same :class:`~railbed.dispatch.Dispatcher` as the emulated run-time
decides what starts when (dependencies, scheduler hooks, device slots,
intra-host legs); the simulator only replaces the agents and the wires:

* a :class:`~railbed.dispatch.StartWait` (a task, a leg) is a timer;
* a :class:`~railbed.dispatch.StartFlow` waits its route's latency (as the
  emulator's agents do), then joins the fluid network with ``wire_bytes(size)``
  bits (the fabric's framing: its MTU, or payload only) to carry over its route, in the priority class
  the tc policy gives its DSCP, capped at its rate;
* a :class:`~railbed.dispatch.SetRate` changes a flow's cap, a
  :class:`~railbed.dispatch.SetDscp` its priority class;
* a scheduler reading a flow's progress gets it exact, at the current time
  (:meth:`Simulation.flow_progress`).

The discrete-event loop: advance the network to the earliest of its next
flow finish and the next timer; report what finished to the dispatcher;
carry out its answer. Events at one instant follow :data:`railbed.actions.EVENT_ORDER`
(flows first, then timers in the order they were set). The network's rate computation and time
advance run in numba (``network=NumbaNetwork``, the ``fluid`` backend) or in
plain Python (``network=ReferenceNetwork``, the oracle: ``fluid-reference``).
The loop itself stays in Python: every event calls the dispatcher and the
scheduler, which are Python.

Not modelled (the emulator has them): TCP's ramp-up and ACK traffic (about
2 % of a reverse link, measured in issue 3), queueing delay, drops. The
result notes say so.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable
from itertools import count

from railbed.analysis import of_dispatcher
from railbed.dispatch import Dispatcher, SetDscp, SetRate, StartFlow, StartWait
from railbed.job import Job
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from simulator.contention import result as contention_result
from simulator.contention import type_id
from simulator.fabric import Fabric, Route
from simulator.fluid.network import NumbaNetwork
from simulator.fluid.series import LinkSeries
from tc_policies.plan import Policy, policy_by_name

MODEL_NOTE = "flow-level model: max-min fair rates, strict priority classes, rate caps; no TCP dynamics, ACKs or queues"


def dscp_classes(policy: str | Policy) -> tuple[int, ...]:
    """Priority class (0..7) of each DSCP under a tc policy: ``fifo`` puts all in one class."""
    if isinstance(policy, str):
        policy = policy_by_name(policy)
    table = getattr(policy, "dscp_class", None)
    return tuple(table) if table is not None else (0,) * 64


class Simulation:
    """One simulated run. ``run()`` returns the :class:`RunResult`.

    Counters for benchmarks: ``events`` (flow finishes, timers and flows
    joining after their latency), ``steps`` (network advances: events at one
    instant share one) and ``network_seconds`` (wall time inside the
    network engine). ``network``: the fluid network's class (``NumbaNetwork``, or
    ``ReferenceNetwork``, the oracle)."""

    def __init__(
        self,
        job: Job,
        scheduler: Scheduler,
        cluster: ClusterSpec,
        policy: str | Policy = "dscp-priority",
        network: type = NumbaNetwork,
        progress: Callable[[str], None] | None = None,
        progress_every: float = 2.0,
        analysis: bool = False,
    ) -> None:
        self.classes = dscp_classes(policy)
        self.topology = Topology(cluster)
        self.fabric = Fabric(self.topology)
        self.dispatcher = Dispatcher(job, scheduler, cluster, self.topology, snapshot=analysis)
        self.network = network(self.fabric.capacity, meter=analysis)
        self.analysis = analysis
        self._types: dict[str, int] = {}  # coflow type -> its id in the contention meter
        self.series = LinkSeries(self.fabric.names, self.fabric.capacity)
        self.progress = progress
        self.progress_every = progress_every
        self.now = 0.0
        self.events = 0
        self.steps = 0
        self.network_seconds = 0.0
        self._timers: list[tuple[float, int, str | None, tuple[StartFlow, Route] | None]] = []
        self._seq = count()
        self._slot_of: dict[str, int] = {}
        self._flow_at: dict[int, StartFlow] = {}
        self._bits: dict[str, float] = {}  # flow id -> wire bits it carries
        self.dispatcher.progress_source = self.flow_progress

    # ------------------------------------------------------------------ run
    def run(self) -> RunResult:
        # The job, records and dispatcher built so far live through the run: freeze them out of
        # the cyclic GC, which otherwise re-scans them at every collection (at 8192 GPUs, 2.3 M
        # records: the run took 1.23x the time it takes with GC off, bench/bench_dispatch.py).
        gc.freeze()
        try:
            return self._run()
        finally:
            gc.unfreeze()

    def _run(self) -> RunResult:
        wall0 = time.perf_counter()
        next_progress = wall0 + self.progress_every
        disp = self.dispatcher
        total = len(disp.job.items)
        self._do(disp.begin(0.0))
        while not disp.finished:
            if self.progress is not None and time.perf_counter() >= next_progress:
                self.progress(
                    f"  {time.perf_counter() - wall0:6.1f} s wall, {self.now:.4g} s model: "
                    f"{total - disp.remaining}/{total} done, {self.network.active} flows active, {self.events} events"
                )
                next_progress = time.perf_counter() + self.progress_every
            t_limit = self._timers[0][0] if self._timers else math.inf
            if t_limit == math.inf and self.network.active == 0:
                raise RuntimeError(f"simulator: {disp.remaining} items unfinished and nothing pending (a bug)")
            t0 = time.perf_counter()
            t, finished = self.network.advance(self.now, t_limit)
            self.network_seconds += time.perf_counter() - t0
            self.steps += 1
            self.series.update(self.now, t, self.network.link_bits)
            self.now = t
            if finished:
                flows = [self._flow_at.pop(slot) for slot in finished]  # before a new flow reuses a slot
                for flow in flows:
                    del self._slot_of[flow.id]
                    del self._bits[flow.id]
                for flow in flows:
                    self.events += 1
                    self._do(disp.flow_done(flow.id, t))
                continue
            while self._timers and self._timers[0][0] <= t:
                _, _, key, flow = heapq.heappop(self._timers)
                self.events += 1
                if key is not None:
                    self._do(disp.wait_done(key, t))
                else:
                    assert flow is not None
                    self._join(*flow)
        result = disp.result("fluid")
        result.links = self.fabric.link_stats(self.network.link_bits, self.network.link_peak, result.makespan)
        result.link_series = self.series.result(result.makespan)
        result.notes.append(MODEL_NOTE)
        network = type(self.network).__name__
        result.notes.append(f"simulator: {self.events} events in {self.steps} steps, network {network}")
        if self.analysis:
            m = self.network.meter
            result.analysis = of_dispatcher(disp, result, contention_result(m.hit, m.total, self._types))
        result.wall_seconds = time.perf_counter() - wall0
        return result

    # ------------------------------------------------------------- actions
    def _do(self, actions) -> None:
        for a in actions:
            if isinstance(a, StartWait):
                heapq.heappush(self._timers, (self.now + a.seconds, next(self._seq), a.key, None))
            elif isinstance(a, StartFlow):
                route = self.fabric.route(a.src, a.dst, a.spine)
                if route.latency > 0:
                    heapq.heappush(self._timers, (self.now + route.latency, next(self._seq), None, (a, route)))
                else:
                    self._join(a, route)
            elif isinstance(a, (SetRate, SetDscp)):
                slot = self._slot_of.get(a.id)
                if slot is None:  # still in its latency: it joins with the view's current cap and DSCP
                    continue
                if isinstance(a, SetRate):
                    self.network.set_cap(slot, a.rate)
                else:
                    self.network.set_class(slot, self.classes[a.dscp])

    def _join(self, flow: StartFlow, route: Route) -> None:
        """The flow's first byte has crossed its latency: it starts taking bandwidth."""
        active = self.dispatcher.view.active.get(flow.id)
        rate, dscp = (active.rate, active.dscp) if active is not None else (flow.rate, flow.dscp)
        bits = 8.0 * self.topology.spec.fabric.framing.wire_bytes(flow.size)
        t0 = time.perf_counter()
        ftype = type_id(self._types, self.dispatcher.items[flow.id].coflow_type) if self.analysis else 0
        slot = self.network.add(route.links, self.classes[dscp], rate, bits, ftype)
        self.network_seconds += time.perf_counter() - t0
        self._slot_of[flow.id] = slot
        self._flow_at[slot] = flow
        self._bits[flow.id] = bits

    def flow_progress(self, flow_id: str) -> tuple[int, float, float]:
        """(payload bytes delivered, wire bit/s now, now) of an active flow: exact."""
        slot = self._slot_of.get(flow_id)
        if slot is None:
            return 0, 0.0, self.now  # still crossing its latency
        rem, rate = self.network.progress(slot)
        size = self.dispatcher.records[flow_id].size or 0
        bits = self._bits[flow_id]
        delivered = size if bits <= 0 else int(size * max(0.0, bits - rem) / bits)
        return delivered, rate, self.now


def simulate(
    job: Job,
    scheduler: Scheduler,
    cluster: ClusterSpec,
    policy: str | Policy = "dscp-priority",
    network: type = NumbaNetwork,
    progress: Callable[[str], None] | None = None,
    analysis: bool = False,
) -> RunResult:
    """Run ``job`` under ``scheduler`` on a simulated ``cluster`` (see the module docstring).

    ``policy`` is the tc policy the emulator would install (``dscp-priority``
    or ``fifo``): it decides which DSCPs are strict-priority classes.
    ``analysis``: fill ``result.analysis`` (:mod:`railbed.analysis`: the network-free run,
    the critical path, coflow overlap, and contention measured on the max-min rates). Off by
    default here, on by default on the command line and in :func:`scenarios.runner.run_on`
    (``RunOptions.analysis``; a scenario's ``analysis: false`` or ``--analysis off``): schedulers
    and the emulator's verdicts call this function in inner loops (docs/python-api.md)."""
    return Simulation(job, scheduler, cluster, policy, network, progress, analysis=analysis).run()
