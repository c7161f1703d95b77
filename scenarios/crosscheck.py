"""One job under one scheduler on two backends: how far apart are they?

:func:`compare` takes two :class:`RunResult` of the same job, scheduler and
cluster (first the one checked, usually the emulator's; then the reference,
usually a simulator's) and reports, each side labelled by the registered name
of its backend (``RunResult.backend``: ``emulate``, ``packet``, ``fluid``, ...)

* the makespan of each and their relative difference;
* per network flow: completion time (end - start) on each backend and the
  relative difference (same-server flows never touch the network: the
  simulator gives them their intra-host time, the emulator adds its control
  latency of a few real milliseconds; they are counted, not compared);
* **order**: for every pair of flows whose simulated end times differ by
  more than ``margin`` (20 %: ``|a - b| > margin * max(a, b)``), does the
  emulator finish them in the same order? Closer pairs are within what the
  two models may legitimately swap (TCP's ramp-up, ACKs, queueing).

``railbed crosscheck scenario.yaml`` runs a scenario on both backends and
prints :meth:`Crosscheck.report`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from railbed.results import RunResult, fmt_time, percentile

ORDER_MARGIN = 0.2


@dataclass
class FlowDiff:
    id: str
    emulated: float  # flow completion time (s), end - start
    simulated: float

    @property
    def rel(self) -> float:
        """(emulated - simulated) / simulated completion time (0 when both are 0)."""
        if self.simulated > 0:
            return (self.emulated - self.simulated) / self.simulated
        return 0.0 if self.emulated == 0 else float("inf")


@dataclass
class Crosscheck:
    scheduler: str
    emulated_makespan: float
    simulated_makespan: float
    flows: list[FlowDiff] = field(default_factory=list)
    local_flows: int = 0  # same-server flows, not compared
    order_pairs: int = 0  # flows (as the earlier of a pair) whose order was checked
    order_violations: list[tuple[str, str]] = field(default_factory=list)  # (sim first, emu first)
    margin: float = ORDER_MARGIN
    fidelity: dict = field(default_factory=dict)  # the first run's fidelity report (emulator.fidelity), if any
    # the two sides' backends (registered names); the fields and crosscheck.json's keys keep their
    # first names, ``emulated`` for the first side and ``simulated`` for the second (railbed/plots.py reads them)
    sides: tuple[str, str] = ("emulate", "fluid")

    @property
    def makespan_rel(self) -> float:
        return (self.emulated_makespan - self.simulated_makespan) / self.simulated_makespan

    def report(self, worst: int = 10) -> str:
        one, two = self.sides
        lines = [
            f"{self.scheduler}: makespan {one} {fmt_time(self.emulated_makespan)}, "
            f"{two} {fmt_time(self.simulated_makespan)} ({100 * self.makespan_rel:+.1f} %)"
        ]
        if self.fidelity:
            f = self.fidelity
            lines.append(
                f"  {one}: {f.get('drops', 0)} packets dropped by the shapers, {f.get('tcp_retransmits', 0)} TCP "
                f"retransmits, {f.get('tcp_timeouts', 0)} timeouts; host CPU at most {100 * f.get('cpu_max', 0):.0f} %"
                + ("" if f.get("ok", True) else "; fidelity broken: " + "; ".join(f.get("problems", [])))
            )
        if self.flows:
            rels = sorted(abs(f.rel) for f in self.flows)
            median = percentile(rels, 50)
            lines.append(
                f"  flow completion times, |{one} - {two}| / {two} over {len(self.flows)} flows: "
                f"median {100 * median:.1f} %, worst {100 * rels[-1]:.1f} %"
                + (f" ({self.local_flows} same-server flows not compared)" if self.local_flows else "")
            )
            lines.append(f"  {'flow':<28} {one:>10} {two:>10} {'diff':>8}")
            for f in sorted(self.flows, key=lambda f: -abs(f.rel))[:worst]:
                lines.append(
                    f"  {f.id:<28} {fmt_time(f.emulated):>10} {fmt_time(f.simulated):>10} {100 * f.rel:+7.1f}%"
                )
        verdict = "same order" if not self.order_violations else f"{len(self.order_violations)} flows out of order"
        lines.append(
            f"  completion order of flows whose {two} ends differ by > {100 * self.margin:.0f} %: {verdict} "
            f"({self.order_pairs} flows checked)"
        )
        for a, b in self.order_violations[:worst]:
            lines.append(f"    {two}: {a} before {b}; {one}: the other way")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "scheduler": self.scheduler,
            "backends": list(self.sides),
            "emulated_makespan": self.emulated_makespan,
            "simulated_makespan": self.simulated_makespan,
            "makespan_rel": self.makespan_rel,
            "flows": [{"id": f.id, "emulated": f.emulated, "simulated": f.simulated, "rel": f.rel} for f in self.flows],
            "local_flows": self.local_flows,
            "order_margin": self.margin,
            "order_checked": self.order_pairs,
            "order_violations": [list(p) for p in self.order_violations],
            "fidelity": self.fidelity,
        }


def order_violations(ends: list[tuple[str, float, float]], margin: float) -> tuple[int, list[tuple[str, str]]]:
    """Flows (id, simulated end, emulated end) a, b with sim_a < sim_b and
    ``sim_b - sim_a > margin * sim_b`` but emulated a not before b.

    Returns (how many flows had a partner far enough apart, one violating
    pair per flow that has one). Sorting plus a suffix minimum: O(n log n)."""
    ends = sorted(ends, key=lambda e: e[1])
    sims = [e[1] for e in ends]
    n = len(ends)
    suffix_min: list[tuple[float, int]] = [(float("inf"), -1)] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix_min[i] = min((ends[i][2], i), suffix_min[i + 1])
    checked, bad = 0, []
    for fid, sim, emu in ends:
        # partners b: sim_b > sim / (1 - margin)  <=>  sim_b - sim > margin * sim_b
        j = bisect.bisect_right(sims, sim / (1 - margin)) if sim > 0 else bisect.bisect_right(sims, 0.0)
        if j >= n:
            continue
        checked += 1
        emu_b, k = suffix_min[j]
        if emu >= emu_b:
            bad.append((fid, ends[k][0]))
    return checked, bad


def compare(emulated: RunResult, simulated: RunResult, margin: float = ORDER_MARGIN) -> Crosscheck:
    """Compare two results of the same job and scheduler (see the module docstring): ``emulated``
    is the first side (the one checked), ``simulated`` the second (the reference), whatever their
    backends (:attr:`Crosscheck.sides`)."""
    if set(emulated.items) != set(simulated.items):
        raise ValueError("the two results are not of the same job")
    out = Crosscheck(
        emulated.scheduler,
        emulated.makespan,
        simulated.makespan,
        margin=margin,
        fidelity=emulated.fidelity_report,
        sides=(emulated.backend, simulated.backend),
    )
    ends = []
    for fid, e in emulated.items.items():
        s = simulated.items[fid]
        if e.kind != "flow" or e.duration is None or s.duration is None:
            continue
        if e.dst_server == e.server:
            out.local_flows += 1
            continue
        out.flows.append(FlowDiff(fid, e.duration, s.duration))
        ends.append((fid, s.end, e.end))
    out.order_pairs, out.order_violations = order_violations(ends, margin)
    return out
