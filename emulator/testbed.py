"""Testbed: build an emulated cluster, use it, and always tear it down.

::

    with Testbed(ClusterSpec.load("examples/rail-4x4.yaml")) as tb:
        h0 = tb.node("h0")
        ...

Lifecycle guarantees: every namespace, veth, bridge, qdisc and process the
run creates is gone after ``stop()``, which runs on normal exit, on an
exception, on Ctrl-C (KeyboardInterrupt) and on SIGTERM/SIGHUP (turned into
:class:`Interrupted`). After a SIGKILL, ``railbed clean`` removes the debris
using the run record of :mod:`emulator.state`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence

from mininet.log import setLogLevel
from mininet.net import Mininet

from emulator import features as kernel
from emulator import nodes
from emulator.features import check_congestion
from emulator.netns import iproute_in
from emulator.nodes import netns_path
from emulator.state import RunState, pids_in_netns
from emulator.topo import ClusterTopo
from railbed.backend import parse_tcp
from railbed.errors import EnvironmentProblem, Interrupted, SpecError
from railbed.machine import check_emulable
from railbed.spec import ClusterSpec
from railbed.topology import Topology, default_scale
from railbed.units import RateScale
from tc_policies.netlink import PortCounters, read_counters
from tc_policies.plan import Policy, policy_by_name

_OWNER_PID = os.getpid()
BR_STATE_FORWARDING = 3  # linux/if_bridge.h
LINKS_UP_TIMEOUT = 10.0  # seconds start() waits for every link to run (linkwatch: about 1 s)


def _raise_interrupted(signum, _frame):
    if os.getpid() != _OWNER_PID:  # a forked child inherited the handler: die as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Interrupted(signum)


def links_not_forwarding(netns: str) -> list[str]:
    """``ifname (state)`` of each interface in ``netns`` not yet running, or bridge port not forwarding."""
    out = []
    with iproute_in(netns) as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name == "lo":
                continue
            oper = link.get_attr("IFLA_OPERSTATE")
            if oper not in ("UP", "UNKNOWN"):  # a bridge without STP can say UNKNOWN
                out.append(f"{name} ({oper})")
                continue
            info = link.get_attr("IFLA_LINKINFO")
            port = info.get_attr("IFLA_INFO_SLAVE_DATA") if info is not None else None
            if port is not None and info.get_attr("IFLA_INFO_SLAVE_KIND") == "bridge":
                state = port.get_attr("IFLA_BRPORT_STATE")
                if state != BR_STATE_FORWARDING:
                    out.append(f"{name} (bridge port state {state})")
    return out


class Testbed:
    """An emulated cluster (see module docstring).

    ``policy``: ``"dscp-priority"`` (default), ``"fifo"`` or a policy object.
    ``scale``: the factor k (real rate = model rate / k); default from the
    cluster size and this machine's cores (:meth:`RateScale.default_for`).
    ``latency``: how the fabric's link latency is applied: ``"auto"`` (netem
    on every egress queue where the kernel has it, else by the traffic
    agents), ``"netem"`` (fail without netem) or ``"agents"``. After
    ``start()``, :attr:`latency_mode` is ``"netem"``, ``"agents"`` or
    ``"none"`` (the fabric has no latency). ``tcp``: the congestion control of every flow's
    socket (:data:`railbed.backend.TCP_CONGESTION`; set per socket by the traffic agents: a
    namespace inherits the host's default and may not change it).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        spec: ClusterSpec,
        policy: str | Policy = "dscp-priority",
        scale: float | RateScale | None = None,
        verbose: bool = False,
        latency: str = "auto",
        tcp: str = "cubic",
    ) -> None:
        if latency not in ("auto", "netem", "agents"):
            raise SpecError("latency", f"must be auto, netem or agents, got {latency!r}")
        self.tcp = parse_tcp(tcp)
        self.spec = spec
        self._latency_arg = latency
        self.latency_mode = "none"
        self.topology = Topology(spec)
        if scale is None:
            self.scale = default_scale(spec, self.topology)
        else:
            self.scale = scale if isinstance(scale, RateScale) else RateScale(float(scale))
        self._policy_arg = policy
        self.policy: Policy | None = None if isinstance(policy, str) else policy
        self.verbose = verbose
        self.net: Mininet | None = None
        self.state = RunState()
        self.run_id = uuid.uuid4().hex[:12]
        self._procs: list[subprocess.Popen] = []
        self._old_handlers: dict[int, object] = {}
        self.build_seconds = 0.0
        self.teardown_seconds = 0.0

    # -------------------------------------------------------------- lifecycle
    def start(self) -> Testbed:
        check_emulable(self.spec, self.topology, self.scale)  # before anything exists
        if os.geteuid() != 0:
            raise EnvironmentProblem("building an emulated cluster needs root (use sudo)")
        check_congestion(self.tcp)
        t0 = time.monotonic()
        feats = kernel.probe()
        if self.policy is None:
            self.policy = policy_by_name(self._policy_arg)
        if getattr(self.policy, "use_prio_qdisc", False) and not feats.has("prio"):
            raise EnvironmentProblem("policy: this kernel has no prio qdisc (use dscp-priority: HTB prio classes)")
        self.latency_mode = self._choose_latency_mode(feats.has("netem"))
        # validates rates before anything is created
        topo = ClusterTopo(
            spec=self.spec,
            policy=self.policy,
            scale=self.scale,
            topology=self.topology,
            netem_latency=self.latency_mode == "netem",
        )
        planned = [p.ifname for p in self.topology.ports.values()]
        self.state.acquire(self.run_id, planned)
        global _OWNER_PID
        _OWNER_PID = os.getpid()
        self._install_signal_handlers()
        nodes.on_node_started = self.state.add_node
        try:
            setLogLevel("info" if self.verbose else "warning")
            self.net = Mininet(
                topo=topo, controller=None, build=False, autoSetMacs=False, autoStaticArp=False, waitConnected=False
            )
            self.net.build()
            self.net.start()
            self._wait_forwarding()
        except BaseException:
            self.stop()
            raise
        finally:
            nodes.on_node_started = None
        self.build_seconds = time.monotonic() - t0
        return self

    def _wait_forwarding(self, timeout: float = LINKS_UP_TIMEOUT) -> None:
        """Return once every interface of every node is running and every bridge port forwards.

        Mininet's start returns with links that have carrier but that the kernel's linkwatch
        has not yet marked running (it batches such events, up to 1 s apart): until it does, a
        bridge port stays ``disabled`` and drops what arrives. A run's (or a test's) first
        packets are ARP requests; one dropped costs ARP's 1 s retransmission. Measured in the
        VM lane: a ping right after start waited 1.1 s for ARP (a median RTT of 666 ms against
        100 ms configured), and ``bridge link`` showed the port towards the pinging host
        ``disabled`` right after start. Only the nodes not yet ready are read again."""
        deadline = time.monotonic() + timeout
        pending = list(self.net.hosts + self.net.switches)
        while True:
            waiting = {node: links_not_forwarding(netns_path(node)) for node in pending}
            pending = [node for node, links in waiting.items() if links]
            if not pending:
                return
            if time.monotonic() > deadline:
                names = [f"{node.name}:{link}" for node in pending for link in waiting[node]]
                raise EnvironmentProblem(
                    f"links not up {timeout:g} s after the testbed started: {', '.join(names[:8])}"
                )
            time.sleep(0.05)

    def _choose_latency_mode(self, has_netem: bool) -> str:
        if self.spec.fabric.latency <= 0:
            return "none"
        if self._latency_arg == "netem" and not has_netem:
            raise EnvironmentProblem("latency: this kernel has no netem qdisc (use latency 'auto' or 'agents')")
        if self._latency_arg == "agents" or not has_netem:
            return "agents"
        return "netem"

    def stop(self) -> None:
        """Tear everything down; safe to call twice and from a failed start.

        Only a testbed that holds the run lock acts: one that never started
        must not read, let alone end, another run's processes."""
        if not self.state.held:
            return
        t0 = time.monotonic()
        try:
            inodes = {n["netns"] for n in self.state.nodes() if n.get("netns")}
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
            if self.net is not None:
                for node in self.net.hosts + self.net.switches:
                    try:
                        node.terminate()
                    except Exception:  # noqa: BLE001 - keep tearing down the rest
                        pass
            # Anything else still inside our namespaces (a process a test started
            # by hand, a shell that ignored SIGHUP) keeps them alive: end it.
            deadline = time.monotonic() + 10
            while inodes and time.monotonic() < deadline:
                left = pids_in_netns(inodes)
                if not left:
                    break
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)
            for proc in self._procs:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            debris = self.state.leftovers()
            for ifname in debris.get("interfaces", []):
                subprocess.run(["ip", "link", "del", ifname], capture_output=True, check=False)
            self.state.release()
        finally:
            self.net = None
            self._procs = []
            self._restore_signal_handlers()
            self.teardown_seconds = time.monotonic() - t0

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, _raise_interrupted)
            except ValueError:  # not the main thread: the caller handles signals
                pass

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()

    # ------------------------------------------------------------------ using
    def node(self, name: str):
        if self.net is None:
            raise RuntimeError("testbed is not running")
        return self.net[name]

    def netns(self, name: str) -> str:
        return netns_path(self.node(name))

    def address(self, server: int, nic: int = 0) -> str:
        return self.topology.nic_address(server, nic)

    def popen(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside node ``name``'s namespace; killed at ``stop()``."""
        node = self.node(name)
        proc = subprocess.Popen(["mnexec", "-a", str(node.pid), *argv], **kwargs)
        self._procs.append(proc)
        self.state.add_pid(proc.pid, f"{name}: {argv[0]}")
        return proc

    def counters(self, name: str, ifname: str) -> PortCounters:
        """tc counters of the egress port ``ifname`` of node ``name``."""
        with iproute_in(self.netns(name)) as ipr:
            return read_counters(ipr, ipr.link_lookup(ifname=ifname)[0])

    def real_rate(self, node: str, ifname: str) -> float:
        """The configured real (shaped) rate of a port, bit/s (the fabric's framing's
        :meth:`~railbed.units.Framing.shaped_rate`: above the declared rate for payload-only links)."""
        return self.spec.fabric.framing.shaped_rate(self.scale.real_rate(self.topology.ports[(node, ifname)].rate))
