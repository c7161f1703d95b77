"""RunResult: what one run of a job under a scheduler produced, on either backend.

Times are model seconds from the start of the run. The schema is the same
for the emulator and the simulator so the two can be compared line by line
(``railbed crosscheck``).

``items``      one :class:`ItemRecord` per task and flow: when it became
               ready, started (a task: got its device slot; a flow: its
               sender was told to go) and ended (a flow: the receiver had
               every byte), where it ran, DSCP and rate cap, bytes received.
``events``     ``(time, "ready"|"start"|"end", id)`` in the order they happened.
``iterations`` iteration -> its time: the end of its last item minus the end
               of the previous iteration (the first counts from 0).
``links``      per egress port: configured rate, bytes, achieved average and
               peak rate, drops (emulator: tc counters).
``fidelity``   the emulator's report (per-link rates, priority leakage,
               drops, CPU saturation) with ``ok`` and its ``problems``.
``traces``     optional per-flow ``[(time, bytes received)]``.
``link_series`` per egress port ``[(t_start, t_end, utilisation)]``: the
               share of the port's configured rate it carried in each
               interval (emulator: between tc counter samples; simulator:
               the fluid rates, binned; see ``simulator/fluid/series.py``).
``packet``     the packet backend's own counters (``simulator/packet``): per port drops, ECN
               marks and queue peaks, TCP retransmissions and timeouts, its settings;
               empty on the other backends.
``analysis``   whether the network matters in this run: the network-free
               makespan and ``max_speedup``, the critical path and the
               share of it spent on communication, coflow overlap per
               port, contention (``railbed/analysis.py``,
               ``docs/analysis.md``); empty when the run was made without.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from railbed.jsonout import Pairs, write_json
from railbed.topology import port_label
from railbed.units import format_rate


@dataclass(slots=True)
class ItemRecord:
    id: str
    kind: str  # "task" | "flow"
    ready: float | None = None
    start: float | None = None
    end: float | None = None
    server: int | None = None  # task: its server; flow: the source server
    device: str | None = None
    dst_server: int | None = None
    src_nic: int | None = None
    dst_nic: int | None = None
    size: int | None = None
    received: int | None = None
    dscp: int | None = None
    rate: float | None = None  # first rate cap (model bit/s)
    option: str | None = None
    spine: int | None = None  # the ECMP spine a flow between leaves crossed
    parent: str | None = None  # a sub-flow: the flow a scheduler split
    children: list[str] | None = None  # a split flow: its sub-flows (None, not [], keeps 2 M records light)
    remarked: bool = False  # the scheduler changed the flow's DSCP while it ran (``dscp`` is the first)
    intra: float | None = None  # a flow with path legs: seconds in its host models (queues + legs), jitter excluded
    jitter: float | None = None  # a flow's delay at datapath NICs (§6.4's 3-9 us), seconds
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start


_RECORD_FIELDS = tuple(f.name for f in fields(ItemRecord))


def _record_dict(r: ItemRecord) -> dict[str, Any]:
    """A record as JSON's types (sharing its ``children`` and ``attrs``)."""
    return {name: getattr(r, name) for name in _RECORD_FIELDS}


def _json_default(value: Any) -> Any:
    """A dataclass inside a result's dicts as ``asdict`` gives it (``json.dumps``'s ``default``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def crosses_network(r: ItemRecord) -> bool:
    """A flow between two servers (or one not placed): it crosses the network. A flow inside one
    server crosses none: it takes its host model's time, 0 s without one (``intra_host``)."""
    return r.server is None or r.dst_server is None or r.server != r.dst_server


# which flows a statistic counts: all, those between servers (True), those inside one server (False)
FLOW_SCOPES: dict[str, bool | None] = {"all": None, "network": True, "local": False}


@dataclass
class RunResult:
    backend: str  # "emulator" | "simulator"
    job: str
    scheduler: str
    cluster: str
    scale: float = 1.0
    makespan: float = 0.0
    items: dict[str, ItemRecord] = field(default_factory=dict)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    iterations: dict[int, float] = field(default_factory=dict)
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    fidelity: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    traces: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    wall_seconds: float = 0.0
    link_series: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    packet: dict[str, Any] = field(default_factory=dict)
    tcp: str = ""  # the TCP congestion control a packet-level run used ("": a fluid run, or an old result)
    jobs: dict[str, Any] = field(default_factory=dict)  # several jobs: per job and cluster (railbed.jobmetrics)

    # ----------------------------------------------------------- derived
    def flow_completion_times(self, scope: str = "all") -> dict[str, float]:
        """Flow id -> end - start (model seconds) of the finished flows in ``scope`` (:data:`FLOW_SCOPES`):
        ``all``, ``network`` (between two servers: :func:`crosses_network`) or ``local`` (inside one
        server: 0 s where the server has no host model)."""
        want = FLOW_SCOPES[scope]
        return {
            i: r.duration
            for i, r in self.items.items()
            if r.kind == "flow" and r.duration is not None and (want is None or crosses_network(r) == want)
        }

    def finish_order(self, kind: str | None = None) -> list[str]:
        """Item ids in the order they ended."""
        return [i for _, what, i in self.events if what == "end" and (kind is None or self.items[i].kind == kind)]

    def compute_iterations(self) -> None:
        ends: dict[int, float] = {}
        for r in self.items.values():
            it = int(r.attrs.get("iteration", 0))
            if r.end is not None:
                ends[it] = max(ends.get(it, 0.0), r.end)
        prev = 0.0
        self.iterations = {}
        for it in sorted(ends):
            self.iterations[it] = ends[it] - prev
            prev = ends[it]

    # --------------------------------------------------------------- I/O
    def to_dict(self) -> dict[str, Any]:
        """The result as JSON's types (what :meth:`save` writes). It shares the result's lists
        and dicts instead of copying them (``dataclasses.asdict`` deep-copied every record:
        60 % of a short LEO run's wall time went there): serialise it (with ``default=`` as
        :meth:`save` does, for dataclasses a scheduler left in a note or an analysis), do not mutate it."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["items"] = {i: _record_dict(r) for i, r in self.items.items()}
        d["iterations"] = {str(k): v for k, v in self.iterations.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        d = dict(d)
        d["items"] = {i: ItemRecord(**r) for i, r in d.get("items", {}).items()}
        d["events"] = [tuple(e) for e in d.get("events", [])]
        d["iterations"] = {int(k): v for k, v in d.get("iterations", {}).items()}
        d["traces"] = {k: [tuple(x) for x in v] for k, v in d.get("traces", {}).items()}
        d["link_series"] = {k: [tuple(x) for x in v] for k, v in d.get("link_series", {}).items()}
        return cls(**d)

    def save(self, path: str | Path, records: bool = True) -> None:
        """Write :meth:`to_dict` as JSON (``indent=1``), a record's dict made as it is written
        (:func:`railbed.jsonout.write_json`: ``json.dumps`` of the whole took 7.7 KB per record).
        ``records`` False (``--results summary``): without the per-item records, the event log,
        the flow traces and the link series (a note says so); everything else is kept."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["items"] = Pairs((i, _record_dict(r)) for i, r in self.items.items())
        if not records:
            d |= {"items": {}, "events": [], "traces": {}, "link_series": {}}
            d["notes"] = [*self.notes, f"{len(self.items)} item records left out (results: summary)"]
        d["iterations"] = {str(k): v for k, v in self.iterations.items()}
        write_json(path, d, default=_json_default)

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text()))

    def summary(self) -> str:
        """A short human summary: makespan, iterations, flow completion times, fidelity."""
        tcp = f", TCP {self.tcp}" if self.tcp else ""
        scale = f"k = {self.scale:g}" if self.fidelity else "model time"  # only the emulator has k (and fidelity)
        lines = [
            f"{self.backend} run of {self.job!r} under {self.scheduler} on {self.cluster} ({scale}{tcp})",
            f"  makespan        {fmt_time(self.makespan)}",
        ]
        if len(self.iterations) > 1:
            its = list(self.iterations.values())
            lines.append(
                f"  iterations      {len(its)}, mean {fmt_time(sum(its) / len(its))}, max {fmt_time(max(its))}"
            )
        lines += self._flow_lines()
        lines += _collective_lines(self)
        tasks = sum(1 for r in self.items.values() if r.kind == "task")
        if tasks:
            lines.append(f"  tasks           {tasks}")
        if self.links:
            busiest = max(self.links.items(), key=lambda kv: kv[1].get("peak_util", 0.0))
            lines.append(
                f"  peak link       {busiest[0]} ({port_label(busiest[0])}): highest peak, "
                f"{100 * busiest[1].get('peak_util', 0):.0f}% of {format_rate(busiest[1].get('rate', 0))}"
            )
        from railbed.analysis import summary_lines

        lines += summary_lines(self.analysis)
        if self.jobs:
            from railbed.jobmetrics import summary_lines as job_lines

            lines += job_lines(self.jobs)
        if self.fidelity:
            verdict = "ok" if self.fidelity.get("ok", True) else "BROKEN: " + "; ".join(self.fidelity["problems"])
            lines.append(f"  fidelity        {verdict}")
            for warning in self.fidelity.get("warnings", []):
                lines.append(f"  warning         {warning}")
        for note in self.notes:
            lines.append(f"  note            {note}")
        return "\n".join(lines)

    def _flow_lines(self) -> list[str]:
        """The summary's flow lines: FCTs of the flows between servers and, apart, of those inside one."""
        net, local = self.flow_completion_times("network"), self.flow_completion_times("local")
        if not net and not local:
            return []
        lines = [f"  flows           {len(net) + len(local)}: {len(net)} between servers, {len(local)} inside one"]
        if net:
            p50, p99 = median_p99(net.values())
            lines.append(f"  FCT (network)   median {fmt_time(p50)}, p99 {fmt_time(p99)}")
        if local:
            p50, p99 = median_p99(local.values())
            why = " (0 s: no host model, intra_host)" if p99 == 0 else ""
            lines.append(f"  FCT (in server) median {fmt_time(p50)}, p99 {fmt_time(p99)}{why}")
        return lines


# how much of a run is written (a scenario's ``results``, ``--results``): ``summary`` result.json
# without per-item records and summary.txt; ``flows`` result.json whole and the CSVs
# (flows, tasks, links); ``all`` also trace.json and the figures (the default)
RESULT_LEVELS = ("summary", "flows", "all")
# bytes written per item record, event and link-series point, measured: a replay of 706,397 flows
# (issue 46: result.json 487 MB, trace.json 164 MB, flows.csv 80 MB) and llm-small's simulated run
_BYTES = {
    "result.json": (690, 45, 60),
    "trace.json": (232, 0, 100),
    "csv": (115, 0, 70),
}


def estimated_bytes(result: RunResult, level: str = "all") -> dict[str, int]:
    """The files a run of ``level`` (:data:`RESULT_LEVELS`) will write and about how many bytes each
    (figures not counted: under 1 MB each), from the run's counts of records, events and link-series
    points and the sizes per record in :data:`_BYTES`."""
    points = sum(len(v) for v in result.link_series.values())
    counts = (len(result.items), len(result.events), points)
    size = {name: sum(a * b for a, b in zip(per, counts)) for name, per in _BYTES.items()}
    if level == "summary":
        return {"result.json": 20_000}
    files = {"result.json": size["result.json"], "csv": size["csv"]}
    return files | ({"trace.json": size["trace.json"]} if level == "all" else {})


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in [0, 100]: ``sorted(values)[int(q / 100 * n)]`` (the last for q = 100;
    NaN when there are no values). railbed's one definition: the median of 1, 2, 3, 4 is 3."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def median_p99(values) -> tuple[float, float]:
    values = list(values)
    return percentile(values, 50), percentile(values, 99)


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"


def comparison_table(results: list[RunResult]) -> str:
    """One line per run: scheduler, makespan, makespan against the first run's (``vs first``, in %),
    mean iteration, median and p99 FCT of the flows between servers (:func:`crosses_network`; a
    footnote says so), fidelity."""
    head = (
        f"{'scheduler':<16} {'makespan':>12} {'vs first':>9} {'iteration':>12} {'FCT p50':>12} {'FCT p99':>12}"
        "  fidelity"
    )
    out = [head, "-" * len(head)]
    for r in results:
        its = list(r.iterations.values()) or [r.makespan]
        if r.backend in ("simulator", "packet"):
            fid = "n/a (simulated)"
        else:
            fid = "ok" if r.fidelity.get("ok", True) else "BROKEN"
        net = r.flow_completion_times("network").values()
        p50, p99 = median_p99(net)
        fct = f"{fmt_time(p50):>12} {fmt_time(p99):>12}" if net else f"{'none':>12} {'none':>12}"
        if not r.items:  # a run saved without records (the compact engine's arrays): FCTs are in its notes
            fct = f"{'in notes':>12} {'in notes':>12}"
        base = results[0].makespan
        vs = "baseline" if r is results[0] else f"{100 * (r.makespan / base - 1):+.1f} %" if base > 0 else "n/a"
        mean = fmt_time(sum(its) / len(its))
        out.append(f"{r.scheduler:<16} {fmt_time(r.makespan):>12} {vs:>9} {mean:>12} {fct}  {fid}")
    if len(results) > 1:
        out.append(f"vs first: makespan against {results[0].scheduler}'s (negative: shorter)")
    out.append("FCT: flows between servers only (those inside one server: each run's summary.txt)")
    return "\n".join(out)


def _collective_lines(result: RunResult, most: int = 4) -> list[str]:
    """algbw and busbw of the run's collectives (``railbed.metrics.collective_bandwidths``), in GB/s
    as nccl-tests prints them; the first ``most`` of them and a count of the rest."""
    from railbed.metrics import collective_bandwidths

    rows = collective_bandwidths(result)
    lines = [
        f"  collective      {c['operation']} by {c['algorithm']}, {c['ranks']} ranks, {c['bytes']} bytes: "
        f"{fmt_time(c['time'])}, algbw {c['algbw'] / 1e9:.3f} GB/s, busbw {c['busbw'] / 1e9:.3f} GB/s"
        for c in rows[:most]
    ]
    return lines + (
        [f"  collectives     {len(rows) - most} more (railbed.metrics.collective_bandwidths)"]
        if len(rows) > most
        else []
    )
