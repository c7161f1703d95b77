"""Fidelity of an emulated run: did the machine deliver what the model says?

:class:`LinkSampler` reads the tc counters of every egress port (one
persistent netlink socket per node) and the host's CPU use every
``interval`` seconds in a background thread. :func:`fidelity_report` turns
the samples into per-link statistics and a verdict:

achieved vs configured
    per port: wire bytes, mean rate over the run, peak utilisation of any
    interval (above 1.05 the shaper let through more than configured).
under-delivery
    an interval whose port had packets queued at both its start and its end
    should have run the port at its configured rate; intervals where it
    carried under 90 % are the machine failing to keep up (CPU starvation).
priority leakage
    in intervals where a higher class had packets queued at both ends, the
    share of bytes lower classes still got (strict priority says ~0).
drops
    packets the shaper's queues dropped (TCP recovers; reported, not fatal).
CPU saturation
    share of intervals the host was >= 95 % busy.

The backlog tests are heuristics (a queue non-empty at both ends of an
interval was most likely non-empty throughout); thresholds are ours.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from emulator.netns import iproute_in
from tc_policies.netlink import PortCounters, read_counters

PEAK_LIMIT = 1.05
BUSY_UTIL = 0.90
UNDER_DELIVERY_LIMIT = 0.10  # share of backlogged intervals allowed under BUSY_UTIL
LEAKAGE_LIMIT = 0.05
CPU_BUSY = 0.95
CPU_SATURATION_LIMIT = 0.25


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    total = sum(parts[:8])
    return total - idle, total


@dataclass
class Sample:
    t: float
    ports: dict[tuple[str, str], PortCounters]
    cpu: tuple[int, int]


class LinkSampler:
    """Samples every port of ``ports`` ((node, ifname) -> netns path) every ``interval`` s.

    All netlink work happens in the sampler's own thread (pyroute2 sockets
    belong to the thread that opened them): a first sample when started, one
    per interval, a last one when stopped."""

    def __init__(self, ports: dict[tuple[str, str], str], interval: float = 0.5) -> None:
        self.ports = ports
        self.interval = interval
        self.samples: list[Sample] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        iprs: dict[str, object] = {}
        try:
            index = {}
            for (node, ifname), path in self.ports.items():
                if node not in iprs:
                    iprs[node] = iproute_in(path)
                index[(node, ifname)] = iprs[node].link_lookup(ifname=ifname)[0]

            def sample() -> None:
                ports = {key: read_counters(iprs[key[0]], idx) for key, idx in index.items()}
                self.samples.append(Sample(time.monotonic(), ports, cpu_times()))

            sample()
            self._ready.set()
            while not self._stop.wait(self.interval):
                sample()
            sample()
        except Exception as exc:  # noqa: BLE001 - reported in the run's notes
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._ready.set()
            for ipr in iprs.values():
                ipr.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="railbed-sampler", daemon=True)
        self._thread.start()
        self._ready.wait()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def fidelity_report(
    samples: list[Sample],
    real_rates: dict[tuple[str, str], float],
    model_rates: dict[tuple[str, str], float],
    class_ids: dict[tuple[str, str], dict[int, int]],
) -> tuple[dict[str, dict], dict]:
    """(per-link statistics keyed ``node:ifname``, fidelity dict with ``ok`` and ``problems``)."""
    links: dict[str, dict] = {}
    problems: list[str] = []
    busy_intervals = under = 0
    worst_under: tuple[float, str] = (1.0, "")
    prio_bytes = [0, 0]  # lower-class bytes, all bytes, in intervals with a backlogged higher class
    worst_leak: tuple[float, str] = (0.0, "")
    span = samples[-1].t - samples[0].t if len(samples) > 1 else 0.0
    for key, real in real_rates.items():
        name = f"{key[0]}:{key[1]}"
        first, last = samples[0].ports[key], samples[-1].ports[key]
        peak = 0.0
        port_leak = [0, 0]
        for a, b in zip(samples, samples[1:]):
            dt = b.t - a.t
            if dt <= 0:
                continue
            pa, pb = a.ports[key], b.ports[key]
            util = (pb.bytes - pa.bytes) * 8 / dt / real
            peak = max(peak, util)
            if pa.backlog > 0 and pb.backlog > 0:
                busy_intervals += 1
                if util < BUSY_UTIL:
                    under += 1
                    worst_under = min(worst_under, (util, name))
            classes = class_ids.get(key, {})
            if len(classes) > 1:
                for c in sorted(classes, reverse=True):
                    cid = classes[c]
                    ca, cb = pa.classes.get(cid), pb.classes.get(cid)
                    if ca and cb and ca.backlog > 0 and cb.backlog > 0:
                        lower = sum(
                            pb.classes[classes[x]].bytes - pa.classes[classes[x]].bytes
                            for x in classes
                            if x < c and classes[x] in pb.classes and classes[x] in pa.classes
                        )
                        total = pb.bytes - pa.bytes
                        port_leak[0] += lower
                        port_leak[1] += total
                        break
        nbytes = last.bytes - first.bytes
        links[name] = {
            "rate": model_rates[key],
            "real_rate": real,
            "bytes": nbytes,
            "mean_util": nbytes * 8 / span / real if span > 0 else 0.0,
            "peak_util": peak,
            "drops": last.drops - first.drops,
        }
        if port_leak[1]:
            links[name]["leakage"] = port_leak[0] / port_leak[1]
            worst_leak = max(worst_leak, (port_leak[0] / port_leak[1], name))
            prio_bytes[0] += port_leak[0]
            prio_bytes[1] += port_leak[1]
        if peak > PEAK_LIMIT:
            problems.append(f"{name} carried {100 * peak:.0f}% of its configured rate in one interval")
    cpu = []
    for a, b in zip(samples, samples[1:]):
        dbusy, dtotal = b.cpu[0] - a.cpu[0], b.cpu[1] - a.cpu[1]
        if dtotal > 0:
            cpu.append(dbusy / dtotal)
    saturated = sum(1 for c in cpu if c >= CPU_BUSY) / len(cpu) if cpu else 0.0
    under_share = under / busy_intervals if busy_intervals else 0.0
    leakage = prio_bytes[0] / prio_bytes[1] if prio_bytes[1] else 0.0
    if under_share > UNDER_DELIVERY_LIMIT:
        problems.append(
            f"{100 * under_share:.0f}% of backlogged port intervals ran under {100 * BUSY_UTIL:.0f}% "
            f"of the configured rate (worst {worst_under[1]} at {100 * worst_under[0]:.0f}%)"
        )
    if leakage > LEAKAGE_LIMIT:
        problems.append(f"lower DSCP classes got {100 * leakage:.1f}% of bytes while a higher class was queued")
    if saturated > CPU_SATURATION_LIMIT:
        problems.append(f"host CPU >= {100 * CPU_BUSY:.0f}% busy in {100 * saturated:.0f}% of samples")
    fidelity = {
        "ok": not problems,
        "problems": problems,
        "samples": len(samples),
        "interval": span / max(1, len(samples) - 1),
        "backlogged_intervals": busy_intervals,
        "under_delivery_share": under_share,
        "priority_leakage": leakage,
        "worst_leakage_port": worst_leak[1] or None,
        "drops": sum(v["drops"] for v in links.values()),
        "cpu_mean": sum(cpu) / len(cpu) if cpu else 0.0,
        "cpu_max": max(cpu) if cpu else 0.0,
        "cpu_saturated_share": saturated,
        "max_peak_util": max((v["peak_util"] for v in links.values()), default=0.0),
    }
    return links, fidelity
