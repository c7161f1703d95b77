"""``simulate_packets(job, scheduler, cluster)``: a run on the packet backend (ns-3).

The same :class:`~railbed.dispatch.Dispatcher` as the other backends decides what starts when;
ns-3 carries the packets (``glue.cpp``; the network: :mod:`simulator.packet.fabric`):

* a :class:`~railbed.dispatch.StartWait` (a task, a leg, a wake-up) is an ns-3 timer;
* a :class:`~railbed.dispatch.StartFlow` is a TCP connection from the source NIC's address of
  the flow's spine slot to the destination's, its socket's TOS ``dscp << 2``; the sender
  writes ``size`` bytes (as fast as the socket takes them, or paced at a cap's goodput as the
  emulator's ``SO_MAX_PACING_RATE``); the flow ends when the receiver has every byte;
* :class:`~railbed.dispatch.SetRate` re-paces the sender; a cap under ``HOLD_FRACTION`` of the
  slower NIC holds it (it stops writing), as the emulator's agents do;
  :class:`~railbed.dispatch.SetDscp` sets the socket's TOS;
* a flow's progress for the scheduler: the receiver's bytes now, and the rate since the last
  time it was asked.

The loop: ns-3 runs until a timer or a flow ends (it stops itself then), the Dispatcher is told,
its actions are carried out in ns-3, and ns-3 runs on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

from railbed.analysis import of_dispatcher
from railbed.dispatch import HOLD_FRACTION, Dispatcher, SetDscp, SetRate, StartFlow, StartWait
from railbed.job import Job
from railbed.results import CONGESTION, RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology, default_scale
from railbed.units import ETH_HEADER
from simulator.fluid.run import dscp_classes
from simulator.packet import engine
from simulator.packet.fabric import HOST, Plan, plan
from simulator.packet.options import PacketOptions

MODEL_NOTE = (
    "packet-level model (ns-3): TCP connections over point-to-point links, 8 strict-priority drop-tail "
    "bands per port (DSCP class), pure ACKs first; intra-host legs from the host models (the Dispatcher)"
)
WAIT, FLOW = 0, 1


@dataclass
class Sample:
    t: float
    delivered: int
    rate: float = 0.0


@dataclass
class Pending:
    waits: dict[int, str] = field(default_factory=dict)  # timer key -> the Dispatcher's wait key
    flows: dict[int, StartFlow] = field(default_factory=dict)  # flow index -> its StartFlow
    samples: dict[str, Sample] = field(default_factory=dict)


class PacketSimulation:
    """One run on ns-3; ``run()`` returns the :class:`RunResult` (``backend = "packet"``)."""

    def __init__(
        self,
        job: Job,
        scheduler: Scheduler,
        cluster: ClusterSpec,
        policy: str = "dscp-priority",
        options: PacketOptions | None = None,
        progress: Callable[[str], None] | None = None,
        analysis: bool = False,
    ) -> None:
        self.options = options or PacketOptions()
        self.topology = Topology(cluster)
        self.plan: Plan = plan(self.topology, self.options.buffer, self.options.host_buffer, default_scale(cluster))
        self.dispatcher = Dispatcher(job, scheduler, cluster, self.topology, snapshot=analysis)
        self.dispatcher.progress_source = self.flow_progress
        self.classes = dscp_classes(policy)
        self.progress, self.analysis = progress, analysis
        self.pending = Pending()
        self.ns, self.glue = engine.load()
        self.events = 0
        self.keys = count()

    def run(self) -> RunResult:
        wall0 = time.perf_counter()
        engine.configure(self.ns, self.options, self.plan.framing)
        engine.build(self.glue, self.plan, self.classes, self.options.ecn)
        built = time.perf_counter() - wall0
        try:
            self._loop(wall0)
            result = self._result(built)
        finally:
            self.glue.Reset()
        result.wall_seconds = time.perf_counter() - wall0
        return result

    def _loop(self, wall0: float) -> None:
        disp, glue = self.dispatcher, self.glue
        self._do(disp.begin(0.0))
        shown = time.perf_counter()
        while not disp.finished:
            n = glue.RunUntilDone()
            if n == 0:
                raise RuntimeError(f"packet: {disp.remaining} items unfinished and ns-3 has nothing left to run")
            now = glue.Now()
            done = [(glue.DoneKind(j), glue.DoneKey(j)) for j in range(n)]
            for kind, key in done:
                self.events += 1
                if kind == WAIT:
                    self._do(disp.wait_done(self.pending.waits.pop(key), now))
                else:
                    flow = self.pending.flows.pop(key)
                    self.pending.samples.pop(flow.id, None)
                    self._do(disp.flow_done(flow.id, now))
            if self.progress is not None and time.perf_counter() - shown > 2.0:
                shown = time.perf_counter()
                total = len(disp.job.items)
                done = total - disp.remaining
                self.progress(f"  {shown - wall0:6.1f} s wall, {now:.4g} s model: {done}/{total} done")

    # ------------------------------------------------------------- actions
    def _do(self, actions) -> None:
        for a in actions:
            if isinstance(a, StartWait):
                key = next(self.keys)
                self.pending.waits[key] = a.key
                self.glue.Later(WAIT, key, a.seconds)
            elif isinstance(a, StartFlow):
                self._start(a)
            elif isinstance(a, SetRate):
                flow = self.dispatcher.active_flow(a.id)
                if flow is not None and flow.size > 0:
                    self.glue.SetPace(flow.index, *self._pace(a.rate, flow))
            elif isinstance(a, SetDscp):
                flow = self.dispatcher.active_flow(a.id)
                if flow is not None and flow.size > 0:
                    self.glue.SetTos(flow.index, a.dscp << 2)

    def _start(self, a: StartFlow) -> None:
        self.pending.flows[a.index] = a
        if a.size <= 0:  # nothing to carry: it ends once a first byte could have crossed
            self.glue.Later(FLOW, a.index, self.topology.one_way_latency(a.src, a.dst))
            return
        server, nic = a.src
        port = self.plan.host_ports[a.src]
        src, dst = self.plan.nic_address(a.src, a.spine), self.plan.nic_address(a.dst, a.spine)
        pace, hold = self._pace(a.rate, a)
        self.glue.StartFlow(a.index, server, self.glue.PortIface(port), src, dst, a.size, a.dscp << 2, pace, hold)
        self.pending.samples[a.id] = Sample(self.glue.Now(), 0)

    def _pace(self, rate: float | None, flow: StartFlow) -> tuple[float, bool]:
        """(payload bytes/s to pace at, 0: no cap; hold) for a model wire rate cap."""
        if rate is None:
            return 0.0, False
        nics = self.topology.nics
        slower = min(nics[flow.src[0]][flow.src[1]].port.rate, nics[flow.dst[0]][flow.dst[1]].port.rate)
        return max(rate * self.plan.framing.goodput_fraction / 8, 1.0), rate < HOLD_FRACTION * slower

    def flow_progress(self, flow_id: str) -> tuple[int, float, float]:
        """(payload bytes the receiver has, wire bit/s since the last time asked, now)."""
        now = self.glue.Now()
        flow = self.dispatcher.active_flow(flow_id)
        sample = self.pending.samples.get(flow_id)
        if flow is None or sample is None or flow.size <= 0:
            return 0, 0.0, now
        delivered = int(self.glue.Received(flow.index))
        if now > sample.t:
            rate = 8 * (delivered - sample.delivered) / self.plan.framing.goodput_fraction / (now - sample.t)
            self.pending.samples[flow_id] = sample = Sample(now, delivered, rate)
        return delivered, sample.rate, now

    # -------------------------------------------------------------- result
    def _result(self, built: float) -> RunResult:
        disp, glue = self.dispatcher, self.glue
        result = disp.result("packet")
        result.links, ports = port_stats(glue, self.plan, result.makespan)
        result.counters["packet"] = counters = {
            "ports": ports,
            "tcp": {"retransmissions": int(glue.Retransmissions()), "timeouts": int(glue.Timeouts())},
            "drops": sum(p["drops"] for p in ports.values()),
            "marks": sum(p["marks"] for p in ports.values()),
            "settings": {**self.options.__dict__, "buffers": _buffers(self.plan)},
            "ns3_events": int(self.ns.Simulator.GetEventCount()),
            "build_seconds": built,
            CONGESTION: self.options.tcp,
        }
        problems = int(glue.Unroutable()) + int(glue.Stray())
        result.notes.append(MODEL_NOTE)
        result.notes.append(f"packet: {self.options.describe()}; {counters['ns3_events']} ns-3 events")
        result.notes.append("packet: a link's peak_util is its mean (ports are not sampled during the run)")
        if problems:
            result.notes.append(f"packet: {problems} unroutable packets or unknown connections (a bug)")
        if self.analysis:
            result.analysis = of_dispatcher(disp, result)  # contention: estimated from the records
        return result


def port_stats(glue, plan: Plan, makespan: float) -> tuple[dict, dict]:
    """(``RunResult.links``, the ``packet.ports`` entries) of every port that carried or dropped."""
    links, ports = {}, {}
    for p, (name, rate) in enumerate(zip(plan.port_names, plan.port_rates())):
        sent, packets, drops = int(glue.PortSentBytes(p)), int(glue.PortSentPackets(p)), int(glue.PortDrops(p))
        if not packets and not drops:
            continue
        wire = sent + ETH_HEADER * packets  # IP bytes + the Ethernet header: a railbed rate counts frames
        util = 8 * wire / makespan / rate if makespan > 0 else 0.0
        links[name] = {"rate": rate, "bytes": wire, "mean_util": util, "peak_util": util, "drops": drops}
        ports[name] = {
            "packets": packets,
            "drops": drops,
            "marks": int(glue.PortMarks(p)),
            "queue_peak_packets": int(glue.PortPeakPackets(p)),
            "queue_peak_bytes": int(glue.PortPeakBytes(p)),
        }
    return links, ports


def _buffers(plan: Plan) -> dict[str, list[int]]:
    """Packets per band: the distinct limits of host NICs and of switch and spine ports."""
    out: dict[str, set[int]] = {"host": set(), "switch": set()}
    for link in plan.links:
        for node, limit in zip((link.a, link.b), link.limits):
            out["host" if plan.roles[node][0] == HOST else "switch"].add(limit)
    return {kind: sorted(limits) for kind, limits in out.items()}


def simulate_packets(
    job: Job,
    scheduler: Scheduler,
    cluster: ClusterSpec,
    policy: str = "dscp-priority",
    options: PacketOptions | None = None,
    progress: Callable[[str], None] | None = None,
    analysis: bool = False,
) -> RunResult:
    """Run ``job`` under ``scheduler`` on ``cluster`` in ns-3 (see the module docstring)."""
    return PacketSimulation(job, scheduler, cluster, policy, options, progress, analysis).run()
