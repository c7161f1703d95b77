"""Run a Job under a Scheduler on a running Testbed, with real TCP traffic.

::

    with Testbed(spec) as tb:
        result = run(job, Fifo(), tb)
        print(result.summary())

The run-time owns the controller side: it starts one traffic agent per
server inside the server's namespace (:mod:`emulator.agent`), talks to the
agents over Unix sockets, and drives a :class:`railbed.dispatch.Dispatcher`
(dependencies, scheduler hooks, device slots) with the agents' completion
reports. Model time is ``(monotonic - t0) / k``.

Failure is loud and clean: an agent that dies, a flow whose receiver did not
get exactly its size, a scheduler error or a timeout raise
:class:`RunFailed` naming the server or flow; Ctrl-C raises
KeyboardInterrupt. In every case the agents are ended before the exception
leaves :func:`run` (the Testbed's ``stop`` then removes the cluster).

Link latency: when the testbed applies it with netem, flows just start;
otherwise (``tb.latency_mode == "agents"``) the sender waits the path's
one-way latency (links on the path x fabric latency, times k) before it
connects. The run records which in ``result.notes``.
"""

from __future__ import annotations

import gc
import json
import selectors
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from emulator.fidelity import LinkSampler, fidelity_report, link_series, nic_groups, tcp_counters
from emulator.loadtest import agent_env, python_argv
from emulator.nodes import RTO_MIN, SYN_TIMEOUT
from emulator.priority import raise_priority, restore_priority
from emulator.state import STATE_DIR, RunState
from emulator.testbed import Testbed
from railbed.analysis import of_dispatcher
from railbed.dispatch import HOLD_FRACTION, Action, Dispatcher, SetDscp, SetRate, StartFlow, StartWait
from railbed.errors import RunFailed
from railbed.job import Flow, Job
from railbed.results import CONGESTION, FIDELITY, RunResult
from railbed.scheduler import Scheduler
from railbed.topology import spine_mark

AGENT_START_TIMEOUT = 30.0
PROC_POLL = 0.25
DEATH_GRACE = 0.5  # s to wait for a peer's death after an agent reports a connection error


@dataclass
class Faults:
    """Fault injection, for testing the run-time's own checks: ``truncate`` sends
    that many fewer bytes of the named flows."""

    truncate: dict[str, int] = field(default_factory=dict)


@dataclass
class _AgentConn:
    server: int
    proc: subprocess.Popen
    log: Path
    sock: socket.socket | None = None
    buf: bytes = b""


def run(
    job: Job,
    scheduler: Scheduler,
    tb: Testbed,
    *,
    trace: float = 0.0,
    progress: Callable[[str], None] | None = None,
    progress_every: float = 2.0,
    timeout: float | None = None,
    strict: bool = False,
    sample_interval: float = 0.5,
    faults: Faults | None = None,
    on_agents: Callable[[dict[int, int]], None] | None = None,
    flow_progress: float = 0.01,
    analysis: bool = False,
) -> RunResult:
    """Run ``job`` under ``scheduler`` on the started testbed ``tb``.

    ``trace``: sample every flow's received bytes every ``trace`` real
    seconds (``result.traces``). ``progress``: called with a status line
    every ``progress_every`` s. ``timeout``: real seconds before
    :class:`RunFailed`. ``strict``: a broken fidelity report raises
    :class:`RunFailed`. ``on_agents``: called with ``{server: agent pid}``
    once the agents are up (tests use it to kill one). ``flow_progress``:
    model seconds between the receivers' reports of each flow's bytes (what
    schedulers read as ``ActiveFlow.delivered``; 0: never). ``analysis``: fill
    ``result.analysis`` (:mod:`railbed.analysis`: the network-free run without agents, the
    critical path, coflow overlap, and contention estimated from tc counters and records).
    """
    r = _Run(
        job, scheduler, tb, trace, progress, progress_every, timeout, sample_interval, faults, flow_progress, analysis
    )
    return r.go(strict, on_agents)


def _twin(scheduler: Scheduler) -> Scheduler | None:
    """A copy of ``scheduler`` for the fluid model's run of the same job (None if it cannot be copied)."""
    import copy

    try:
        return copy.deepcopy(scheduler)
    except Exception:  # noqa: BLE001 - a scheduler holding something uncopyable: no comparison
        return None


class _Run:
    def __init__(
        self, job, scheduler, tb, trace, progress, progress_every, timeout, sample_interval, faults, flow_progress,
        analysis=False,
    ):  # fmt: skip
        if tb.net is None:
            raise RuntimeError("the testbed is not running (use it as a context manager)")
        self.tb = tb
        self.k = tb.scale.k
        self.job = job
        self.twin = _twin(scheduler)  # before the run changes it: the fluid model's run (_fluid_makespan)
        self.dispatcher = Dispatcher(job, scheduler, tb.spec, tb.topology, snapshot=analysis)
        self.analysis = analysis
        self.trace = trace
        self.progress = progress
        self.progress_every = progress_every
        self.timeout = timeout
        self.sample_interval = sample_interval
        self.faults = faults or Faults()
        self.agents: dict[int, _AgentConn] = {}
        self.by_index: dict[int, StartFlow] = {}
        self.traces: dict[str, list[tuple[float, int]]] = {}
        self.rerated: set[str] = set()
        self.flow_progress = flow_progress
        self.reports: dict[str, tuple[int, float, float]] = {}  # flow id -> (bytes, model t, wire bit/s)
        self.dispatcher.progress_source = self._progress_of
        self.t0 = 0.0
        self.now = 0.0
        self.ctl_path = STATE_DIR / f"ctl-{tb.run_id}.sock"
        self.listener: socket.socket | None = None
        self.tcp: dict[str, int] = {}
        # LEO's request streams (every flow a tagged request message) ride persistent connections
        flows = [it for it in job.items.values() if isinstance(it, Flow)]
        self.persistent = bool(flows) and all("request" in f.tags for f in flows)
        self.answered: set[str] = set()
        # real seconds between a flow's start in model time and the controller sending it (its
        # record's duration includes this: the dispatcher logs the start at the model time)
        self.start_lags: list[tuple[float, str]] = []
        self.connections = 0
        self.zero_flows = 0  # zero-byte flows sent on persistent connections (not a request stream)
        self.holds = 0  # flows the agents held (a cap of almost nothing), and the payload already
        self.held_bytes = 0  # queued in their sockets then, which still left at the flow's last pace

    # ------------------------------------------------------------- top level
    def go(self, strict: bool, on_agents) -> RunResult:
        wall0 = time.monotonic()
        fluid, fluid_note = self._fluid_makespan()
        sampler = None
        failed = True
        niced = None
        try:
            self._start_agents()
            niced = raise_priority(0)  # the controller's thread; restored below
            if on_agents is not None:
                on_agents({s: a.proc.pid for s, a in self.agents.items()})
            ports = {key: self.tb.netns(key[0]) for key in self.tb.topology.ports}
            sampler = LinkSampler(ports, self.sample_interval)
            tcp_before = self._tcp_counters()
            sampler.start()
            # what the process built before the run (a test session's millions of objects) stays out
            # of the cyclic GC while the controller keeps real time (as Simulation.run does)
            gc.freeze()
            try:
                self._loop()
            finally:
                gc.unfreeze()
            sampler.stop()
            self.tcp = {k: v - tcp_before.get(k, 0) for k, v in self._tcp_counters().items()}
            failed = False
        finally:
            if sampler is not None and failed:
                try:
                    sampler.stop()
                except Exception:  # noqa: BLE001 - the failure in flight matters more
                    pass
            self._stop_agents()
            if niced is not None:
                restore_priority(niced)
        result = self.dispatcher.result("emulate", self.k)
        result.counters[result.backend] = {CONGESTION: self.tb.tcp}  # its own (railbed.results), with FIDELITY
        result.wall_seconds = time.monotonic() - wall0
        result.traces = self.traces
        if self.persistent:
            result.notes.append(
                f"request messages on {self.connections} persistent connections (one per server pair and class)"
            )
        elif self.zero_flows:
            result.notes.append(
                f"{self.zero_flows} zero-byte flows on {self.connections} persistent connections "
                "(one per server pair and class; no handshake each)"
            )
        mode = self.tb.latency_mode
        if mode != "none":
            how = "netem on every egress queue" if mode == "netem" else "traffic agents delay each flow's start"
            result.notes.append(f"link latency {self.tb.spec.fabric.latency:g} s applied by {how}")
        if self.holds:
            total = sum(f.size for f in self.by_index.values())
            result.notes.append(
                f"{self.holds} holds of running flows (caps under {HOLD_FRACTION:g} of a NIC): "
                f"{self.held_bytes} B ({100 * self.held_bytes / max(total, 1):.2f} % of the flows' bytes) "
                "were already queued in their sockets and left at the flow's last pace"
            )
        if fluid_note:
            result.notes.append(fluid_note)
        self._fidelity(result, sampler, fluid)
        if self.analysis:
            result.analysis = of_dispatcher(self.dispatcher, result)  # contention: estimated from tc counters
        if strict and not result.fidelity_report.get("ok", True):
            raise RunFailed("fidelity broken: " + "; ".join(result.fidelity_report["problems"]))
        return result

    def _tcp_counters(self) -> dict[str, int]:
        """The servers' TCP counters (``emulator.fidelity.tcp_counters``), summed."""
        total: dict[str, int] = {}
        for host in self.tb.topology.hosts:
            for k, v in tcp_counters(self.tb.node(host).pid).items():
                total[k] = total.get(k, 0) + v
        return total

    def _fidelity(self, result: RunResult, sampler: LinkSampler, fluid: float | None) -> None:
        topo = self.tb.topology
        policy = self.tb.policy
        real, model, classes, by_rate = {}, {}, {}, {}
        for key, port in topo.ports.items():
            real[key] = self.tb.real_rate(*key)
            model[key] = port.rate
            if policy is not None and real[key] not in by_rate:
                by_rate[real[key]] = policy.compile(real[key]).class_ids
            classes[key] = by_rate.get(real[key], {})
        if len(sampler.samples) < 2:
            result.notes.append("fidelity: fewer than two counter samples")
            return
        latency = self.tb.spec.fabric.latency if self.tb.latency_mode != "none" else 0.0
        solo = nic_groups(result, topo, self.tb.scale, latency, self.rerated)
        result.links, result.counters[result.backend][FIDELITY] = fidelity_report(
            sampler.samples, real, model, classes, solo, self.tcp, RTO_MIN / self.k, SYN_TIMEOUT / self.k,
            makespan=result.makespan, fluid_makespan=fluid,
            start_lags=[(lag / self.k, flow) for lag, flow in self.start_lags],
        )  # fmt: skip
        result.link_series = link_series(sampler.samples, real, self.t0, self.k)
        if sampler.error:
            result.notes.append(f"fidelity sampler stopped early: {sampler.error}")

    def _fluid_makespan(self) -> tuple[float | None, str | None]:
        """(the fluid model's makespan of this job under the scheduler as it was before the run, or
        None; a note saying why not, or None). The fidelity report's loss verdict compares them.

        It runs before the agents start, and so also compiles every numba kernel the scheduler's
        hooks and the hardware models call (the fluid backend drives the same Dispatcher): a
        kernel compiled mid-run holds the controller for seconds of real time. Measured on the
        DGCL emulation test with an empty numba cache (a fresh clone, as in CI): the latest flow
        was sent 3.1 s real late (6.2 ms of model time at k = 500) and the makespan was 31-78 %
        above the fluid model's (CI's run and three here); with the kernels compiled first, 2.3-2.4 %."""
        from railbed.backend import RunOptions, backend  # the fluid backend by name: no upward import

        if self.twin is None:
            return None, "fidelity: no fluid-model makespan (the scheduler cannot be copied)"
        if self.progress is not None:
            self.progress("  the fluid model's run of the same job first (the fidelity report's reference)")
        try:
            options = RunOptions(policy=self.tb.policy, analysis=False)
            return backend("fluid").run(self.job, self.twin, self.tb.spec, options).makespan, None
        except Exception as exc:  # noqa: BLE001 - the emulated run stands; the comparison is extra
            return None, f"fidelity: no fluid-model makespan ({type(exc).__name__}: {exc})"[:300]

    # ---------------------------------------------------------------- agents
    def _start_agents(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        if self.ctl_path.exists():
            self.ctl_path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.ctl_path))
        self.listener.listen(len(self.tb.topology.hosts) + 8)
        self.listener.settimeout(0.2)
        for s, host in enumerate(self.tb.topology.hosts):
            log = STATE_DIR / f"agent-{self.tb.run_id}-{host}.log"
            argv = ["--server", str(s), "--control", str(self.ctl_path), "--tcp", self.tb.tcp]
            if self.trace:
                argv += ["--trace", str(self.trace)]
            if self.flow_progress:
                argv += ["--progress", str(self.flow_progress * self.k)]
            with open(log, "w") as err:
                proc = self.tb.popen(
                    host,
                    python_argv("emulator.agent", *argv),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    env=agent_env(),
                    start_new_session=True,  # its own autogroup (emulator.priority)
                )
            raise_priority(proc.pid)
            self.agents[s] = _AgentConn(s, proc, log)
        pending = set(self.agents)
        deadline = time.monotonic() + AGENT_START_TIMEOUT
        while pending:
            self._check_agents_alive()
            if time.monotonic() > deadline:
                names = ", ".join(self.tb.topology.hosts[s] for s in sorted(pending))
                raise RunFailed(f"traffic agents on {names} did not report within {AGENT_START_TIMEOUT:.0f} s")
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(AGENT_START_TIMEOUT)
            hello = b""
            while not hello.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                hello += chunk
            msg = json.loads(hello.split(b"\n", 1)[0] or b"{}")
            agent = self.agents.get(msg.get("server", -1))
            if msg.get("ev") != "hello" or agent is None:
                conn.close()
                raise RunFailed(f"unexpected first message from a traffic agent: {hello[:200]!r}")
            if msg.get("tcp") != self.tb.tcp:
                conn.close()
                got = msg.get("tcp")
                raise RunFailed(f"the traffic agent of server {agent.server} runs TCP {got!r}, not {self.tb.tcp!r}")
            conn.settimeout(None)
            agent.sock = conn
            agent.buf = hello.split(b"\n", 1)[1]
            pending.discard(agent.server)

    def _agent_died(self, agent: _AgentConn) -> RunFailed:
        host = self.tb.topology.hosts[agent.server]
        try:
            code = agent.proc.wait(timeout=1.0)
            how = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        except subprocess.TimeoutExpired:
            how = "closed its control socket"
        tail = ""
        try:
            lines = agent.log.read_text().strip().splitlines()
            if lines:
                tail = f"; last stderr line: {lines[-1][:200]}"
        except OSError:
            pass
        return RunFailed(f"traffic agent on {host} (server {agent.server}) died ({how}){tail}")

    def _check_agents_alive(self) -> None:
        for agent in self.agents.values():
            if agent.proc.poll() is not None:
                raise self._agent_died(agent)

    def _stop_agents(self) -> None:
        for agent in self.agents.values():
            if agent.sock is not None:
                try:
                    agent.sock.sendall(b'{"op": "quit"}\n')
                except OSError:
                    pass
        deadline = time.monotonic() + 2.0
        for agent in self.agents.values():
            try:
                agent.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                agent.proc.kill()
                agent.proc.wait(timeout=5)
            if agent.sock is not None:
                agent.sock.close()
            agent.log.unlink(missing_ok=True)
        if self.listener is not None:
            self.listener.close()
        self.ctl_path.unlink(missing_ok=True)

    def _send(self, server: int, msg: dict) -> None:
        agent = self.agents[server]
        try:
            agent.sock.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            raise self._agent_died(agent) from None

    # ------------------------------------------------------------ event loop
    def _real(self, model_t: float) -> float:
        return self.t0 + model_t * self.k

    def _model(self, t: float) -> float:
        return max(self.now, (t - self.t0) / self.k)

    def _do(self, actions: list[Action]) -> None:
        topo = self.tb.topology
        agents_delay = self.tb.latency_mode == "agents"
        for a in actions:
            if isinstance(a, StartWait):
                self._send(a.server, {"op": "wait", "key": a.key, "until": self._real(self.now + a.seconds)})
            elif isinstance(a, StartFlow):
                self.by_index[a.index] = a
                self.start_lags.append((time.monotonic() - self._real(self.now), a.id))
                delay = topo.one_way_latency(a.src, a.dst) if agents_delay else 0.0
                msg = {
                    "op": "send",
                    "id": a.id,
                    "n": a.index,
                    "src": topo.nic_address(*a.src),
                    "dst": topo.nic_address(*a.dst),
                    "size": a.size,
                    "tos": a.dscp << 2,
                    "pace": self._pace(a.rate),
                    "hold": self._held(a.rate, a.src, a.dst),
                    "not_before": self._real(self.now + delay) if delay else 0,
                    "mark": spine_mark(a.spine) if a.spine is not None else 0,
                }
                if a.id in self.faults.truncate:
                    msg["short"] = self.faults.truncate[a.id]
                if not self.persistent and a.size == 0 and a.id not in self.faults.truncate:
                    self.zero_flows += 1
                if self.persistent or (a.size == 0 and a.id not in self.faults.truncate):
                    # a zero-byte flow is its 16-byte header: on the pair's persistent connection
                    # it crosses once (the other backends: one latency), without a TCP handshake
                    msg["persist"] = 1
                self._send(a.src[0], msg)
            elif isinstance(a, SetRate):
                flow = self.dispatcher.active_flow(a.id)
                if flow is not None:
                    self.rerated.add(a.id)
                    hold = self._held(a.rate, flow.src, flow.dst)
                    self._send(flow.src[0], {"op": "rate", "id": a.id, "pace": self._pace(a.rate), "hold": hold})
            elif isinstance(a, SetDscp):
                flow = self.dispatcher.active_flow(a.id)
                if flow is not None:
                    self._send(flow.src[0], {"op": "tos", "id": a.id, "tos": a.dscp << 2})

    def _held(self, model_rate: float | None, src: tuple[int, int], dst: tuple[int, int]) -> int:
        """1 when a cap is under :data:`HOLD_FRACTION` of the slower of the flow's two NICs: the
        agent then stops writing the flow (a pacing rate that low stalls a socket long after it is
        raised; see :mod:`emulator.agent`, ``rate``). The fluid model's counterpart is a rate of
        almost nothing, such as MRTF's floor for flows left with no bandwidth."""
        if model_rate is None:
            return 0
        nics = self.tb.topology.nics
        return int(model_rate < HOLD_FRACTION * min(nics[src[0]][src[1]].port.rate, nics[dst[0]][dst[1]].port.rate))

    def _pace(self, model_rate: float | None) -> int:
        """SO_MAX_PACING_RATE (bytes/s) for a model wire rate: the kernel paces payload
        (measured on this machine: goodput = pacing rate), so pace at the goodput."""
        if model_rate is None:
            return 0
        return max(1, int(self.tb.scale.real_rate(model_rate) * self.tb.spec.fabric.framing.goodput_fraction / 8))

    def _progress_of(self, flow_id: str) -> tuple[int, float, float]:
        """The receiver's last report of a flow: (bytes, wire bit/s between its last two reports, model time)."""
        nbytes, t, rate = self.reports.get(flow_id, (0, self.dispatcher.records[flow_id].start or 0.0, 0.0))
        return nbytes, rate, t

    def _report(self, flow: StartFlow, nbytes: int, t_real: float) -> None:
        t = (t_real - self.t0) / self.k
        before, t_before, _ = self.reports.get(flow.id, (0, self.dispatcher.records[flow.id].start or 0.0, 0.0))
        goodput = self.tb.spec.fabric.framing.goodput_fraction
        rate = 8 * (nbytes - before) / goodput / (t - t_before) if t > t_before else 0.0
        self.reports[flow.id] = (nbytes, t, rate)

    def _handle(self, agent: _AgentConn, msg: dict) -> None:
        ev = msg.get("ev")
        if ev == "progress":
            flow = self.by_index[msg["n"]]
            if self.dispatcher.active_flow(flow.id) is not None:
                self._report(flow, msg["bytes"], msg["t"])
        elif ev == "waited":
            self.now = self._model(msg["t"])
            self._do(self.dispatcher.wait_done(msg["key"], self.now))
        elif ev == "recv":
            flow = self.by_index.get(msg["n"])
            if flow is None or flow.id in self.answered:
                what = "an unknown message" if flow is None else f"flow {flow.id} a second time"
                raise RunFailed(f"h{agent.server} received {what} (wire id {msg['n']})")
            self.answered.add(flow.id)
            if msg["bytes"] != flow.size:
                raise RunFailed(
                    f"flow {flow.id} (h{flow.src[0]} -> h{flow.dst[0]}): the receiver got {msg['bytes']} "
                    f"bytes of {flow.size}"
                )
            self.now = self._model(msg["t"])
            if msg.get("trace"):
                self.traces[flow.id] = [((t - self.t0) / self.k, b) for t, b in msg["trace"]]
            self.reports.pop(flow.id, None)
            self._do(self.dispatcher.flow_done(flow.id, self.now, msg["bytes"]))
        elif ev == "conn":
            self.connections += 1
        elif ev == "held":
            self.holds += 1
            self.held_bytes += msg["bytes"]
        elif ev == "integrity":
            flow = self.by_index[msg["n"]]
            raise RunFailed(f"flow {flow.id}: the receiver got {msg['bytes']} bytes, more than its size {flow.size}")
        elif ev == "error":
            report = f"traffic agent on {self.tb.topology.hosts[agent.server]}: {msg.get('msg')}"
            # A peer that died resets its connections: name the dead agent, not the one that saw it.
            deadline = time.monotonic() + DEATH_GRACE
            while time.monotonic() < deadline:
                for other in self.agents.values():
                    if other.proc.poll() is not None:
                        raise RunFailed(f"{self._agent_died(other)} (seen as: {report})")
                time.sleep(0.02)
            raise RunFailed(report)

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        for agent in self.agents.values():
            sel.register(agent.sock, selectors.EVENT_READ, agent)
        total = len(self.job.items)
        self.t0 = time.monotonic()
        next_poll = next_progress = self.t0
        try:
            self._do(self.dispatcher.begin(0.0))
            while not self.dispatcher.finished:
                batch: list[tuple[float, int, _AgentConn, dict]] = []
                for key, _ in sel.select(timeout=PROC_POLL):
                    agent = key.data
                    data = agent.sock.recv(1 << 20)
                    if not data:
                        raise self._agent_died(agent)
                    agent.buf += data
                    *lines, agent.buf = agent.buf.split(b"\n")
                    for line in lines:
                        msg = json.loads(line)
                        batch.append((msg.get("t", 0.0), len(batch), agent, msg))
                for _, _, agent, msg in sorted(batch, key=lambda b: (b[0], b[1])):
                    self._handle(agent, msg)
                wall = time.monotonic()
                if wall >= next_poll:
                    self._check_agents_alive()
                    next_poll = wall + PROC_POLL
                if self.timeout is not None and wall - self.t0 > self.timeout:
                    raise RunFailed(
                        f"timed out after {self.timeout:g} s with "
                        f"{self.dispatcher.remaining} of {total} items unfinished"
                    )
                if self.progress is not None and wall >= next_progress:
                    if wall > self.t0:
                        v = self.dispatcher.view
                        self.progress(
                            f"  {wall - self.t0:6.1f} s real, {self.now:.4g} s model: "
                            f"{total - self.dispatcher.remaining}/{total} done, {len(v.active)} flows active, "
                            f"{len(v.running)} tasks running, {len(v.held)} held"
                        )
                    next_progress = wall + self.progress_every
        finally:
            sel.close()


def cleanup_stale_control_files() -> int:
    """Remove control sockets and agent logs no live run owns (used by ``railbed clean``)."""
    return RunState(STATE_DIR).remove_stale_files()
