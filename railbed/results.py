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
``traces``     optional per-flow ``[(time, bytes received)]``.
``link_series`` per egress port ``[(t_start, t_end, utilisation)]``: the
               share of the port's configured rate it carried in each
               interval (emulator: between tc counter samples; simulator:
               the fluid rates, binned; see ``simulator/fluid/series.py``).
``counters``   backend name -> that backend's own counters, e.g. ``counters["packet"]``
               (``simulator/packet``): per port drops, ECN marks and queue peaks, TCP
               retransmissions and timeouts, its settings. A backend puts what only it
               measures here, under its registered name, never in a field of its own.
               Two keys any backend's counters may hold, read by :meth:`RunResult.summary`
               and the comparison: ``fidelity`` (:data:`FIDELITY`, the report of a backend
               that checks its run against its model: the emulator's per-link rates,
               priority leakage, drops, CPU saturation, with ``ok`` and its ``problems``;
               ``emulator/fidelity.py``) and ``congestion`` (:data:`CONGESTION`, the TCP a
               packet-level run used). ``result.json`` also carries ``counters["packet"]``
               as ``packet``, its key before (docs/packet.md reads it; ``{}`` on the other
               backends), and reads a result written before ``counters`` existed (also its
               top-level ``fidelity`` and ``tcp``, moved into the backend's counters).
``analysis``   whether the network matters in this run: the network-free
               makespan and ``max_speedup``, the critical path and the
               share of it spent on communication, coflow overlap per
               port, contention (``railbed/analysis.py``,
               ``docs/analysis.md``); empty when the run was made without.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from railbed.jsonout import Pairs, read_object, write_json
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


_OLD_PACKET = "packet"  # result.json's key of the packet backend's counters before ``RunResult.counters``
FIDELITY = "fidelity"  # the key of a backend's counters holding its fidelity report (the emulator's)
CONGESTION = "congestion"  # the key of a backend's counters naming the TCP congestion control it ran
_OLD_OWN = {"fidelity": FIDELITY, "tcp": CONGESTION}  # result.json's keys before they were counters


def _old_keys(result: RunResult) -> dict[str, Any]:
    """The keys a result.json had before ``counters`` that a reader still reads (docs/packet.md:
    ``packet``), so files written now read as they did."""
    return {_OLD_PACKET: result.counters.get("packet", {})}


@dataclass
class RunResult:
    backend: str  # the registered name of the backend that ran it (railbed.backend.BACKENDS: fluid, emulate, ...)
    job: str
    scheduler: str
    cluster: str
    scale: float = 1.0
    makespan: float = 0.0
    items: dict[str, ItemRecord] = field(default_factory=dict)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    iterations: dict[int, float] = field(default_factory=dict)
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    traces: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    wall_seconds: float = 0.0
    link_series: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)  # backend name -> its own counters
    jobs: dict[str, Any] = field(default_factory=dict)  # several jobs: per job and cluster (railbed.jobmetrics)

    # ----------------------------------------------------------- derived
    @property
    def own(self) -> dict[str, Any]:
        """The counters of the backend that ran it, ``counters[self.backend]`` ({} when it kept none)."""
        return self.counters.get(self.backend, {})

    @property
    def fidelity_report(self) -> dict[str, Any]:
        """Its backend's fidelity report (``own["fidelity"]``, the emulator's: ``ok``, ``problems``,
        ``warnings``, ...); {} from a backend that makes none (a model: nothing to check)."""
        return self.own.get(FIDELITY, {})

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
        return d | _old_keys(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        d = dict(d)
        old = d.pop(_OLD_PACKET, None)  # a result.json of before ``counters`` (or its copy beside them)
        if old and "packet" not in d.get("counters", {}):
            d["counters"] = {**d.get("counters", {}), "packet": old}
        moved = {new: value for key, new in _OLD_OWN.items() if (value := d.pop(key, None))}
        if moved:  # a result.json of before: fidelity and tcp beside counters ({} and "" from a model)
            counters = d.get("counters", {})
            d["counters"] = {**counters, d["backend"]: moved | counters.get(d["backend"], {})}
        d["items"] = {i: r if isinstance(r, ItemRecord) else ItemRecord(**r) for i, r in d.get("items", {}).items()}
        d["events"] = [tuple(e) for e in d.get("events", [])]  # a tuple already: itself
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
        write_json(path, d | _old_keys(self), default=_json_default)

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        """A saved result (:meth:`save`), its records and events decoded one at a time
        (:func:`~railbed.jsonout.read_object`): Table 5.2's five results of 0.6-2.8 GB took 17.6 GB
        read whole with ``json.loads``."""
        return cls.from_dict(read_object(path, {"items": lambda r: ItemRecord(**r), "events": tuple}))

    def summary(self) -> str:
        """A short human summary: makespan, iterations, flow completion times, fidelity."""
        tcp = f", TCP {self.own[CONGESTION]}" if self.own.get(CONGESTION) else ""
        fidelity = self.fidelity_report
        scale = f"k = {self.scale:g}" if fidelity else "model time"  # only the emulator has k (and fidelity)
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
        lines += analysis_lines(self.analysis)
        if self.jobs:
            lines += job_lines(self.jobs)
        if fidelity:
            verdict = "ok" if fidelity.get("ok", True) else "BROKEN: " + "; ".join(fidelity["problems"])
            lines.append(f"  fidelity        {verdict}")
            for warning in fidelity.get("warnings", []):
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


def load_runs(results_dir: Path, have: dict[str, RunResult] | None = None) -> dict[str, RunResult]:
    """Run name (its directory) -> result, in ``index.json``'s order where it has one. ``have``:
    results already in memory (the run that wrote the directory), taken instead of their
    ``result.json``: a second copy of a run's records is 3-4 KB per record while it loads."""
    results_dir = Path(results_dir)
    have = have or {}
    dirs = {p.parent.name: p for p in sorted(results_dir.glob("*/result.json"))}
    order: list[str] = []
    index = results_dir / "index.json"
    if index.exists():
        for run in json.loads(index.read_text()).get("runs", []):
            name = str(run.get("label", run.get("scheduler", "")))
            if name in dirs and name not in order:
                order.append(name)
    order += [n for n in dirs if n not in order]
    return {n: have[n] if n in have else RunResult.load(dirs[n]) for n in order}


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


def comparison_table(results: list[RunResult], exact: Callable[[RunResult], bool] | None = None) -> str:
    """One line per run: scheduler, makespan, makespan against the first run's (``vs first``, in %),
    mean iteration, median and p99 FCT of the flows between servers (:func:`crosses_network`; a
    footnote says so), fidelity: ``n/a (simulated)`` for a run of an exact backend (``exact(run)``, its
    :class:`~railbed.backend.Capabilities`, which the caller asks: the seam imports this module;
    without ``exact``, a run without a fidelity report counts as one)."""
    head = (
        f"{'scheduler':<16} {'makespan':>12} {'vs first':>9} {'iteration':>12} {'FCT p50':>12} {'FCT p99':>12}"
        "  fidelity"
    )
    out = [head, "-" * len(head)]
    for r in results:
        its = list(r.iterations.values()) or [r.makespan]
        if exact(r) if exact is not None else not r.fidelity_report:
            fid = "n/a (simulated)"
        else:
            fid = "ok" if r.fidelity_report.get("ok", True) else "BROKEN"
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
    """algbw and busbw of the run's collectives (:func:`collective_bandwidths`), in GB/s
    as nccl-tests prints them; the first ``most`` of them and a count of the rest."""
    rows = collective_bandwidths(result)
    lines = [
        f"  collective      {c['operation']} by {c['algorithm']}, {c['ranks']} ranks, {c['bytes']} bytes: "
        f"{fmt_time(c['time'])}, algbw {c['algbw'] / 1e9:.3f} GB/s, busbw {c['busbw'] / 1e9:.3f} GB/s"
        for c in rows[:most]
    ]
    return lines + (
        [f"  collectives     {len(rows) - most} more (railbed.results.collective_bandwidths)"]
        if len(rows) > most
        else []
    )


# ----------------------------------- what summary() shows of the metrics, the analysis and the jobs
# here, below railbed.metrics, railbed.analysis and railbed.jobmetrics (each imports this module)
def coflow_completion_times(result: RunResult) -> dict[str, float]:
    """Coflow id -> last end minus first ready of its flows (coflows with an unfinished flow are left out)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    unfinished = set()
    for r in result.items.values():
        coflow = r.attrs.get("coflow")
        if r.kind != "flow" or coflow is None:
            continue
        coflow = str(coflow)
        arrived = r.ready if r.ready is not None else r.start
        if r.end is None or arrived is None:
            unfinished.add(coflow)
            continue
        first[coflow] = min(first.get(coflow, math.inf), arrived)
        last[coflow] = max(last.get(coflow, -math.inf), r.end)
    return {c: last[c] - first[c] for c in first if c not in unfinished}


def collective_bandwidths(result: RunResult) -> list[dict]:
    """Per coflow whose flows carry ``workloads.collectives.collective_tags`` (the ``collective``
    generator, a Chakra trace's collectives): its time (first ready to last end, as the coflow
    completion time), nccl-tests' algbw (``bytes`` / time) and busbw (algbw x the operation's bus
    factor: all-reduce 2 (n - 1) / n, all-gather, reduce-scatter and all-to-all (n - 1) / n,
    broadcast 1), in bytes per model second, in coflow order."""
    seen: dict[str, dict] = {}
    for r in result.items.values():
        tags, coflow = r.attrs.get("tags") or {}, r.attrs.get("coflow")
        if r.kind == "flow" and coflow is not None and "bus_factor" in tags and coflow not in seen:
            seen[str(coflow)] = tags
    times = coflow_completion_times(result)
    out = []
    for coflow, tags in seen.items():
        t = times.get(coflow)
        if not t:
            continue
        algbw = tags["bytes"] / t
        out.append({"coflow": coflow, "operation": tags["collective"], "algorithm": tags["algorithm"],
                    "ranks": tags["ranks"], "bytes": tags["bytes"], "time": t, "algbw": algbw,
                    "busbw": algbw * tags["bus_factor"]})  # fmt: skip
    return out


def analysis_lines(analysis: Mapping) -> list[str]:
    """summary.txt's lines for ``RunResult.analysis`` (:mod:`railbed.analysis`; empty when there is none)."""
    if not analysis:
        return []
    lines = []
    free, speedup = analysis.get("network_free_makespan"), analysis.get("max_speedup")
    if free is not None and analysis.get("compute") is False:
        lines.append(f"  network-free    {fmt_time(free)}: no compute, bound n/a (flows only: their last release)")
    elif free is not None:
        bound = f"max speedup {speedup:.4g}x" if speedup is not None else "max speedup n/a"
        lines.append(f"  network-free    {fmt_time(free)}: {bound} (every flow, leg and host model 0 s)")
    port, rm = analysis.get("busiest_port"), analysis.get("room")
    if port:
        share = f" ({100 * port['share']:.1f}% of the makespan)" if port.get("share") is not None else ""
        tail = f": room {rm:.4g}x for a scheduler keeping placement, routes and bytes" if rm is not None else ""
        label = port_label(str(port["port"]))
        lines.append(f"  busiest port    {port['port']} ({label}): busy {fmt_time(port['seconds'])}{share}{tail}")
    exposed = analysis.get("exposed_comm_fraction")
    cp = analysis.get("critical_path")
    if exposed is not None and cp:
        parts = [f"{k} {100 * v / cp['length']:.1f}%" for k, v in cp["time"].items() if v > 0 and cp["length"] > 0]
        lines.append(f"  exposed comm    {100 * exposed:.1f}% of the critical path ({', '.join(parts)})")
    ov = analysis.get("overlap")
    if ov and ov.get("types"):
        pairs = sorted(
            ((v, f"{a}/{b}") for i, a in enumerate(ov["types"]) for b, v in list(ov["share"][a].items())[i:]),
            key=lambda x: -x[0],
        )
        shown = ", ".join(f"{p} {100 * v:.1f}%" for v, p in pairs[:4])
        lines.append(f"  coflow overlap  {shown} of the makespan (on a common port)")
    ct = analysis.get("contention")
    if ct and ct.get("share") is not None:
        share = 100 * ct["share"]
        lines.append(f"  contention      {share:.1f}% of flow time limited by a port shared with another type")
    for note in analysis.get("notes", []):
        lines.append(f"  note            {note}")
    return lines


def job_lines(jobs: Mapping) -> list[str]:
    """summary.txt's lines for ``RunResult.jobs`` (:mod:`railbed.jobmetrics`; none when the run had one job)."""
    if not jobs:
        return []
    lines = []
    for name, j in jobs.get("per_job", {}).items():
        slow = f", slowdown {j['slowdown']:.3f}x (alone {fmt_time(j['alone'])})" if j.get("slowdown") else ""
        its = list(j.get("iterations", {}).values())
        mean = f", {len(its)} iterations of {fmt_time(sum(its) / len(its))} mean" if its else ""
        exp = j.get("exposed_comm_fraction")
        comm = f", exposed comm {100 * exp:.1f}%" if exp is not None else ""
        lines.append(f"  job {name:<11} arrives {fmt_time(j['arrival'])}, JCT {fmt_time(j['jct'])}{slow}{mean}{comm}")
    cl = jobs.get("cluster", {})
    if cl.get("gpu_busy_share") is not None:
        lines.append(f"  cluster         GPUs busy {100 * cl['gpu_busy_share']:.1f}% of {cl['gpus']} x the makespan")
    inter = cl.get("interference") or {}
    for a in inter.get("jobs", []):
        for b in inter["jobs"]:
            s = inter["shared_seconds"][a][b]
            if a < b and s > 0:
                ab, ba = fmt_time(inter["caused"][a][b]), fmt_time(inter["caused"][b][a])
                lines.append(
                    f"  interference    {a}/{b} shared a port {fmt_time(s)}; {a} cost {b} {ab}, {b} cost {a} {ba}"
                )
    return lines
