"""Saturating TCP flows on a running testbed, measured on the wire.

:func:`measure` starts a sink per destination and one ``blaster send`` per
flow inside the emulated hosts, lets them warm up, then reads the tc byte
counters of the watched egress ports at the start and end of a window. It
returns wire rates (headers included, what HTB shapes) per port and per
priority class, and the receivers' goodput over the same window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from emulator.netns import iproute_in
from emulator.priority import raise_priority, restore_priority
from emulator.testbed import Testbed
from tc_policies.netlink import read_counters

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Flow:
    src: tuple[int, int]  # (server, nic)
    dst: tuple[int, int]
    dscp: int = 0
    pace_bps: float | None = None


@dataclass
class PortRate:
    node: str
    ifname: str
    configured_bps: float  # real
    wire_bps: float
    class_bps: dict[int, float] = field(default_factory=dict)  # priority class -> wire bit/s
    drops: int = 0

    @property
    def error(self) -> float:
        return self.wire_bps / self.configured_bps - 1

    def share(self, cls: int) -> float:
        """Class ``cls``'s part of what the port's classes sent in the window (0 when none sent).

        Shares come from the class counters alone, which one netlink dump reads: the port's total
        (``wire_bps``, the root qdisc's) comes from a second dump, a few milliseconds earlier, and
        under qemu TCG a starved guest can stall between the two for longer at one end of the
        window than at the other. Against ``wire_bps`` the VM lane saw class 7 at 99-101 % of the
        port, and once 96.5 % with class 0 at 0.2 % (3.3 % of the window's bytes in no class)."""
        total = sum(self.class_bps.values())
        return self.class_bps.get(cls, 0.0) / total if total > 0 else 0.0


@dataclass
class Measurement:
    window: float
    ports: dict[tuple[str, str], PortRate]
    goodput_bps: list[float]  # per flow, over the window
    sent_bytes: list[int]
    # over the whole run, from before the first sender to after the last (no window to align):
    wire_bytes: dict[tuple[str, str], int] = field(default_factory=dict)  # per watched port
    received_bytes: list[int] = field(default_factory=list)  # per flow, by its sink


def python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def agent_env() -> dict[str, str]:
    """The environment of a process started in a node: this one's, with the project on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PROJECT_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _rate_between(timeline: list, slot: int, t1: float, t2: float) -> float:
    """Bytes/s of connection ``slot`` between wall times t1 and t2 (linear interpolation)."""

    def at(t: float) -> float:
        prev = None
        for ts, counts in timeline:
            value = counts[slot] if slot < len(counts) else 0
            if ts >= t:
                if prev is None:
                    return value
                (pt, pv) = prev
                return pv + (value - pv) * (t - pt) / max(ts - pt, 1e-9)
            prev = (ts, value)
        return prev[1] if prev else 0.0

    return (at(t2) - at(t1)) / (t2 - t1)


def _timed_read(tb, port: tuple[str, str]):
    """(time, counters) of one port, the time bracketing only the counter dump.

    A read takes 5-30 ms, most of it opening a netlink socket in the node's
    namespace and finding the link (the first read of a process also loads
    pyroute2's tc modules): those happen before the clock starts, so the
    time is the middle of the dump itself (under a millisecond). Timing the
    whole read put the snapshot up to half a slow first read away from its
    time stamp: a -2.5 % wire rate at 10 Mbit/s on a freshly provisioned
    machine. Every port has its own time: one time for all of them made the
    first port's window too short by the later reads (a 3 % false excess)."""
    with iproute_in(tb.netns(port[0])) as ipr:
        index = ipr.link_lookup(ifname=port[1])[0]
        t0 = time.time()
        counters = read_counters(ipr, index)
        return (t0 + time.time()) / 2, counters


def measure(
    tb: Testbed,
    flows: list[Flow],
    watch: list[tuple[str, str]],
    warmup: float = 1.5,
    window: float = 3.0,
    base_port: int = 5201,
) -> Measurement:
    """Run ``flows`` saturating for warmup + window + 0.5 s and measure (see module doc)."""
    saved = raise_priority(0)  # this thread reads the counters that bound the window
    try:
        return _measure(tb, flows, watch, warmup, window, base_port)
    finally:
        if saved is not None:
            restore_priority(saved)


def _measure(
    tb: Testbed, flows: list[Flow], watch: list[tuple[str, str]], warmup: float, window: float, base_port: int
) -> Measurement:
    topo = tb.topology
    total = warmup + window + 1.0  # senders count from their own connect; the window starts after the last
    sinks = {}
    order: dict[int, tuple[tuple[int, int], int]] = {}
    for i, f in enumerate(flows):
        port = base_port + i
        key = (f.dst, port)
        order[i] = key
        host = topo.hosts[f.dst[0]]
        sinks[key] = tb.popen(
            host,
            python_argv(
                "emulator.blaster",
                "sink",
                "--bind",
                tb.address(*f.dst),
                "--port",
                str(port),
                "--seconds",
                str(total + 5),
            ),
            stdout=subprocess.PIPE,
            text=True,
            env=agent_env(),
            start_new_session=True,  # its own autogroup (emulator.priority)
        )
        raise_priority(sinks[key].pid)
    for proc in sinks.values():
        line = proc.stdout.readline()
        if '"ready"' not in line:
            raise RuntimeError(f"traffic sink did not start: {line!r}")
    first = {w: _timed_read(tb, w)[1] for w in watch}  # also loads what a first read loads
    senders = []
    for i, f in enumerate(flows):
        argv = [
            "send",
            "--bind",
            tb.address(*f.src),
            "--to",
            tb.address(*f.dst),
            "--port",
            str(order[i][1]),
            "--dscp",
            str(f.dscp),
            "--seconds",
            str(total),
            "--tcp",
            tb.tcp,
        ]
        if f.pace_bps:
            argv += ["--pace", str(f.pace_bps)]
        senders.append(
            tb.popen(
                topo.hosts[f.src[0]],
                python_argv("emulator.blaster", *argv),
                stdout=subprocess.PIPE,
                text=True,
                env=agent_env(),
                start_new_session=True,  # its own autogroup (emulator.priority)
            )
        )
        raise_priority(senders[-1].pid)
    for proc in senders:  # a sender's start-up (a cold Python) must not eat into the window
        line = proc.stdout.readline()
        if '"connected"' not in line:
            raise RuntimeError(f"traffic sender did not connect: {line!r}")
    time.sleep(warmup)
    start = time.time()
    before = {w: _timed_read(tb, w) for w in watch}
    time.sleep(window)
    after = {w: _timed_read(tb, w) for w in watch}
    end = time.time()
    # the goodput window: the mean of the ports' read times (the whole span without ports)
    t1 = sum(t for t, _ in before.values()) / len(before) if before else start
    t2 = sum(t for t, _ in after.values()) / len(after) if after else end
    sent = []
    for proc in senders:
        out, _ = proc.communicate(timeout=total + 30)
        sent.append(json.loads(out.strip().splitlines()[-1])["bytes"] if out.strip() else 0)
    time.sleep(0.5)  # the senders closed: let what they queued (up to 0.2 s at 10 Mbit/s) leave the ports
    last = {w: _timed_read(tb, w)[1] for w in watch}
    results = {}
    for key, proc in sinks.items():
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        results[key] = json.loads(out.strip().splitlines()[-1])
    ports = {}
    policy = tb.policy
    for w in watch:
        (tb1, b), (tb2, a) = before[w], after[w]
        elapsed = tb2 - tb1
        plan = policy.compile(tb.real_rate(*w)) if policy else None
        class_bps = {}
        if plan is not None:
            for cls, cid in plan.class_ids.items():
                if cid in a.classes and cid in b.classes:
                    class_bps[cls] = (a.classes[cid].bytes - b.classes[cid].bytes) * 8 / elapsed
        ports[w] = PortRate(
            w[0], w[1], tb.real_rate(*w), (a.bytes - b.bytes) * 8 / elapsed, class_bps, a.drops - b.drops
        )
    goodput = []
    for i in range(len(flows)):
        res = results[order[i]]
        goodput.append(8 * _rate_between(res["timeline"], 0, t1, t2) if res["bytes"] else 0.0)
    received = [sum(results[order[i]]["bytes"]) if results[order[i]]["bytes"] else 0 for i in range(len(flows))]
    wire = {w: last[w].bytes - first[w].bytes for w in watch}
    return Measurement(t2 - t1, ports, goodput, sent, wire, received)
