"""Fidelity of an emulated run: did the machine deliver what the model says?

:class:`LinkSampler` reads the tc counters of every egress port (one
persistent netlink socket per node) and the host's CPU use every
``interval`` seconds in a background thread. :func:`fidelity_report` turns
the samples into per-link statistics and a verdict:

achieved vs configured
    per port: wire bytes, mean rate over the run, peak utilisation of any
    interval (above 1.05 the shaper let through more than configured).
solo flows
    flows that had every queue of their path to themselves must run at the
    path's configured rate (or their cap): the median ratio expected /
    achieved time under 0.90 means the machine did not keep up (CPU
    starvation, too many flows). Flows shorter than 50 ms real are left out.
priority leakage
    in intervals where a higher class had packets queued at both ends, the
    share of bytes lower classes still got (strict priority says ~0).
drops
    packets the shaper's queues dropped (TCP recovers; reported, not fatal).
CPU saturation
    share of intervals the host was >= 95 % busy.

The leakage test is a heuristic (a queue non-empty at both ends of an
interval was most likely non-empty throughout); all thresholds are ours.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from emulator.netns import iproute_in
from tc_policies.netlink import PortCounters, read_counters

PEAK_LIMIT = 1.05
SOLO_EFFICIENCY = 0.90
SOLO_MIN_SECONDS = 0.05  # real: shorter flows are dominated by connection set-up
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
    """One round of readings. Reading every port takes a while, so each port
    carries its own read time: ``ports[key] = (t, counters)``."""

    t: float
    ports: dict[tuple[str, str], tuple[float, PortCounters]]
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
                t = time.monotonic()
                cpu = cpu_times()
                ports = {}
                for key, idx in index.items():
                    counters = read_counters(iprs[key[0]], idx)
                    ports[key] = (time.monotonic(), counters)
                self.samples.append(Sample(t, ports, cpu))

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
    solo: list[tuple[str, float, float]] | None = None,
) -> tuple[dict[str, dict], dict]:
    """(per-link statistics keyed ``node:ifname``, fidelity dict with ``ok`` and ``problems``).

    ``solo``: (flow id, expected real seconds, achieved real seconds) of flows
    that had their path to themselves (:func:`solo_flows`)."""
    links: dict[str, dict] = {}
    problems: list[str] = []
    prio_bytes = [0, 0]  # lower-class bytes, all bytes, in intervals with a queued higher class
    worst_leak: tuple[float, str] = (0.0, "")
    for key, real in real_rates.items():
        name = f"{key[0]}:{key[1]}"
        (t_first, first), (t_last, last) = samples[0].ports[key], samples[-1].ports[key]
        peak = 0.0
        port_leak = [0, 0]
        for a, b in zip(samples, samples[1:]):
            (ta, pa), (tb, pb) = a.ports[key], b.ports[key]
            if tb - ta <= 0:
                continue
            peak = max(peak, (pb.bytes - pa.bytes) * 8 / (tb - ta) / real)
            classes = class_ids.get(key, {})
            for c in sorted(classes, reverse=True)[:-1] if len(classes) > 1 else ():
                ca, cb = pa.classes.get(classes[c]), pb.classes.get(classes[c])
                if ca and cb and ca.backlog > 0 and cb.backlog > 0:
                    port_leak[0] += sum(
                        pb.classes[classes[x]].bytes - pa.classes[classes[x]].bytes
                        for x in classes
                        if x < c and classes[x] in pb.classes and classes[x] in pa.classes
                    )
                    port_leak[1] += pb.bytes - pa.bytes
                    break
        nbytes = last.bytes - first.bytes
        span = t_last - t_first
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
    leakage = prio_bytes[0] / prio_bytes[1] if prio_bytes[1] else 0.0
    if leakage > LEAKAGE_LIMIT:
        problems.append(f"lower DSCP classes got {100 * leakage:.1f}% of bytes while a higher class was queued")
    if saturated > CPU_SATURATION_LIMIT:
        problems.append(f"host CPU >= {100 * CPU_BUSY:.0f}% busy in {100 * saturated:.0f}% of samples")
    eff = sorted(exp / got for _, exp, got in (solo or []) if got > 0 and exp >= SOLO_MIN_SECONDS)
    solo_median = eff[len(eff) // 2] if eff else None
    if solo_median is not None and solo_median < SOLO_EFFICIENCY:
        problems.append(
            f"flows alone on their path ran at {100 * solo_median:.0f}% (median of {len(eff)}) "
            "of the rate their links are configured for"
        )
    fidelity = {
        "ok": not problems,
        "problems": problems,
        "samples": len(samples),
        "interval": (samples[-1].t - samples[0].t) / max(1, len(samples) - 1),
        "priority_leakage": leakage,
        "worst_leakage_port": worst_leak[1] or None,
        "drops": sum(v["drops"] for v in links.values()),
        "cpu_mean": sum(cpu) / len(cpu) if cpu else 0.0,
        "cpu_max": max(cpu) if cpu else 0.0,
        "cpu_saturated_share": saturated,
        "max_peak_util": max((v["peak_util"] for v in links.values()), default=0.0),
        "solo_flows": len(eff),
        "solo_efficiency_median": solo_median,
        "solo_efficiency_min": eff[0] if eff else None,
    }
    return links, fidelity


def _overlapping(intervals: list[tuple[float, float, str]]) -> set[str]:
    """Ids of intervals that overlap another one (sorted by start; prefix max of ends)."""
    intervals = sorted(intervals)
    out = set()
    max_end = float("-inf")
    for i, (start, end, fid) in enumerate(intervals):
        if max_end > start or (i + 1 < len(intervals) and intervals[i + 1][0] < end):
            out.add(fid)
        max_end = max(max_end, end)
    return out


def solo_flows(result, topology, scale, latency: float, skip: set[str]) -> list[tuple[str, float, float]]:
    """Network flows of ``result`` that shared no egress queue with another flow while
    they ran, with (id, expected real seconds, achieved real seconds).

    Expected: wire bytes over the slowest port of the path or the flow's rate
    cap, plus ``latency`` per link when the run applied latency. Paths through
    spines are ambiguous (ECMP), so every uplink of a leaf and every spine port
    towards a leaf counts as one shared queue. ``skip``: flows whose cap
    changed while they ran."""
    from railbed.units import wire_bytes

    flows = [
        r
        for r in result.items.values()
        if r.kind == "flow" and r.dst_server is not None and r.server != r.dst_server and r.end is not None
    ]
    hops_of: dict[str, list] = {}
    by_hop: dict[object, list[tuple[float, float, str]]] = {}
    for r in flows:
        path = topology.path((r.server, r.src_nic), (r.dst_server, r.dst_nic))
        keys = []
        for hop in path:
            if hop.node in topology.spines:
                keys.append(("spines", hop.ifname.split("-eth")[-1]))
            elif "-sp" in hop.ifname:
                keys.append(("uplinks", hop.node))
            else:
                keys.append((hop.node, hop.ifname))
        hops_of[r.id] = (path, keys)
        for key in keys:
            by_hop.setdefault(key, []).append((r.start, r.end, r.id))
    shared = set()
    for intervals in by_hop.values():
        shared |= _overlapping(intervals)
    out = []
    for r in flows:
        if r.id in shared or r.id in skip or r.option is not None:
            continue
        path, _ = hops_of[r.id]
        rate = min(topology.ports[(h.node, h.ifname)].rate for h in path)
        if r.rate is not None:
            rate = min(rate, r.rate)
        expected = wire_bytes(r.size or 0) * 8 / rate + latency * len(path)
        out.append((r.id, scale.real_time(expected), scale.real_time(r.end - r.start)))
    return out
