"""Flow traces with arrivals: the coflow-benchmark format and a plain CSV flow list (issue 44, item 4).

Each importer reads a file into a :class:`railbed.job.Job` of flows only: every flow has its
release time (``at``, model seconds) and its coflow id, and there are no compute tasks (the
run's analysis then says "no compute", :mod:`railbed.analysis`). Endpoints are pinned to
servers by the rule each importer states. A scenario names a trace as
``job: {trace: PATH, format: coflow-benchmark | csv, args: {...}}`` (:data:`IMPORTERS`;
``format`` defaults to ``csv`` for a ``.csv`` file, ``coflow-benchmark`` else);
``railbed import-trace`` writes the job as JSON (and, with ``--cluster``, a cluster for it:
:func:`trace_cluster`). Bad input ends in one :class:`~railbed.errors.SpecError` whose field
is ``<file>:<line>.<field>``.

coflow-benchmark
    The format of ``FB2010-1Hr-150-0.txt`` (github.com/coflow/coflow-benchmark, README "Trace
    Format"), read by CoflowSim's ``CoflowBenchmarkTraceProducer`` (github.com/coflow/coflowsim)
    and used by Varys, Aalo and Sincronia. Line 1: ``<racks> <coflows>``; then one line per
    coflow: ``<id> <arrival ms> <mappers> <mapper rack>... <reducers> <rack:MB>...``, racks
    numbered from 0. As CoflowSim does (``Job.coalesceMappers/coalesceReducers``,
    ``ReduceTask.createFlows``): mappers in one rack are one mapper, reducers in one rack one
    reducer (their MB summed), every mapper sends to every reducer, and a reducer's bytes are
    split equally over the coflow's mappers ("reduce-side skew is intact, map-side skew is
    lost", CoflowSim's class comment). A MB is 2^20 bytes (CoflowSim: ``* 1048576.0``).
    ``sizes: exact`` (default): the reducer's ``round(MB * 2^20)`` bytes split in whole bytes,
    the remainder one byte each to the first mappers, so the trace's bytes are kept exactly.
    ``sizes: coflowsim``: CoflowSim's own rounding (``roundToNearestNMB(numMappers)``): the
    reducer's bytes rounded up to a multiple of ``mappers`` MiB, each flow then a whole number
    of MiB (at least 1). On FB2010 the two agree wherever a reducer's MB are a multiple of its
    coflow's mapper count (the synthesised trace mostly is).

    Racks to servers, ``layout: split`` (default): rack ``i`` sends from server ``i`` and
    receives on server ``R + i`` (``R`` racks in the header), each server with one NIC at the
    rack's port rate on one switch. This is CoflowSim's model (a non-blocking fabric whose
    ports have an uplink and a downlink of ``RACK_BITS_PER_SEC`` each, 2^30 bit/s): every flow,
    including a rack's flows to itself (FB2010 has many: a mapper and a reducer in one rack),
    uses its sending rack's uplink and its receiving rack's downlink, and none takes 0 s.
    ``layout: rack``: rack ``i`` on server ``i`` alone (half the servers); a trace with a flow
    from a rack to itself is then refused, naming its line (a same-server flow skips the
    network). A cluster with fewer servers than the layout needs (the highest server a used rack
    lands on, plus one) is refused, never folded: folding racks onto fewer servers would change
    the contention the trace describes.

csv
    A header line naming the columns ``src,dst,bytes,start,coflow`` (in any order, all five,
    no others), then one flow per line. ``src``/``dst``: a server index (its ``gpu0`` and NIC
    0) or ``server:gpu`` (that GPU and, with a cluster, NIC ``gpu % nics``: a rail-optimized
    server's GPU ``g`` on NIC ``g``; without one, NIC ``g``). ``bytes``: a count or a size
    (``8MB``); ``start``: seconds or a duration (``2ms``); ``coflow``: any id, empty for none.
    A flow from an endpoint to itself is refused; so is a flow between two GPUs of one server
    when the cluster is known and the server has no host model (it would take 0 s: the
    Dispatcher times same-server flows by the host model alone).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.safeload import describe
from railbed.spec import ClusterSpec
from railbed.units import parse_duration, parse_size

MIB = 1 << 20  # CoflowSim's MB: 1048576 bytes
RACK_RATE = float(1 << 30)  # CoflowSim's Constants.RACK_BITS_PER_SEC (1024 * 1048576 bit/s)
LAYOUTS = ("split", "rack")
SIZES = ("exact", "coflowsim")
MAX_TRACE_BYTES = 256 << 20  # a trace file larger than this is refused before it is read
CSV_COLUMNS = ("src", "dst", "bytes", "start", "coflow")


@dataclass(frozen=True)
class Coflow:
    """One line of a coflow-benchmark trace, mappers and reducers coalesced per rack."""

    id: str
    arrival: float  # s
    mappers: tuple[int, ...]  # distinct racks, in the order first listed
    reducers: tuple[tuple[int, float], ...]  # (rack, MB), MB summed per rack, in the order first listed
    line: int


# ------------------------------------------------------------------ coflow-benchmark
def parse_coflow_benchmark(text: str, where: str = "trace") -> tuple[int, list[Coflow]]:
    """``(racks, coflows)`` of a coflow-benchmark trace (module docstring); errors name
    ``<where>:<line>.<field>``."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 2:
        raise SpecError(f"{where}:1", f"expected '<racks> <coflows>', got {describe(lines[0] if lines else '')}")
    racks = _int(head[0], f"{where}:1.racks", 1)
    count = _int(head[1], f"{where}:1.coflows", 0)
    body = [(n, line.split()) for n, line in enumerate(lines[1:], 2) if line.strip()]
    if len(body) != count:
        raise SpecError(
            f"{where}:1.coflows", f"the header says {count} coflows, the file has {len(body)} lines after it"
        )
    out, seen = [], set()
    for n, fields in body:
        cf = _coflow_line(fields, racks, f"{where}:{n}", n)
        if cf.id in seen:
            raise SpecError(f"{where}:{n}.id", f"coflow {cf.id!r} is listed twice")
        seen.add(cf.id)
        out.append(cf)
    return racks, out


def _coflow_line(fields: list[str], racks: int, where: str, line: int) -> Coflow:
    def take(name: str) -> str:
        if not fields_left:
            raise SpecError(f"{where}.{name}", "missing: the line ends early")
        return fields_left.pop(0)

    fields_left = list(fields)
    cid = take("id")
    arrival = _number(take("arrival"), f"{where}.arrival") / 1000.0  # ms
    mappers: dict[int, None] = {}
    for k in range(_int(take("mappers"), f"{where}.mappers", 1)):
        mappers[_rack(take(f"mappers[{k}]"), racks, f"{where}.mappers[{k}]")] = None
    reducers: dict[int, float] = {}
    for k in range(_int(take("reducers"), f"{where}.reducers", 1)):
        rack, _, mb = take(f"reducers[{k}]").partition(":")
        r = _rack(rack, racks, f"{where}.reducers[{k}]")
        reducers[r] = reducers.get(r, 0.0) + _number(mb, f"{where}.reducers[{k}].MB")
    if fields_left:
        raise SpecError(f"{where}", f"{len(fields_left)} fields after the last reducer ({describe(fields_left[0])})")
    return Coflow(cid, arrival, tuple(mappers), tuple(reducers.items()), line)


def split_bytes(mb: float, mappers: int, sizes: str = "exact") -> list[int]:
    """A reducer's ``mb`` MB split over ``mappers`` flows (module docstring: ``exact`` keeps
    ``round(mb * 2^20)`` bytes, remainder to the first; ``coflowsim`` rounds up to a multiple
    of ``mappers`` MiB first, as CoflowSim's ``roundToNearestNMB(numMappers)``)."""
    total = round(mb * MIB)
    if sizes == "coflowsim":
        unit = mappers * MIB
        total = max(1, -(-total // unit)) * unit
    each, extra = divmod(total, mappers)
    return [each + (1 if k < extra else 0) for k in range(mappers)]


def coflow_benchmark(
    path: str | Path, cluster: ClusterSpec | None = None, layout: str = "split", sizes: str = "exact"
) -> Job:
    """The job of a coflow-benchmark trace (module docstring): one flow per (mapper rack,
    reducer rack) of each coflow, released at its arrival, pinned by ``layout``."""
    _choice(layout, "layout", LAYOUTS)
    _choice(sizes, "sizes", SIZES)
    where = Path(path).name
    racks, coflows = parse_coflow_benchmark(_read(path), where)
    job = Job(where)
    for cf in coflows:
        for rack, mb in cf.reducers:
            if layout == "rack" and rack in cf.mappers:
                raise SpecError(
                    f"{where}:{cf.line}.reducers",
                    f"coflow {cf.id}: rack {rack} sends to itself, which takes 0 s with one server per rack "
                    "(layout: split gives each rack a sending and a receiving server)",
                )
            for m, size in zip(cf.mappers, split_bytes(mb, len(cf.mappers), sizes)):
                src, dst = _rack_endpoint(job, m, layout, racks, "up"), _rack_endpoint(job, rack, layout, racks, "down")
                job.flow(f"c{cf.id}.m{m}.r{rack}", src, dst, size, coflow=cf.id, at=cf.arrival)
    need = servers_needed(job)
    if cluster is not None and len(cluster.servers) < need:
        raise SpecError(
            "job.trace",
            f"the trace's {racks} racks need {need} servers with layout {layout} (the highest rack it uses is on "
            f"server {need - 1}), the cluster has {len(cluster.servers)} (railbed import-trace --cluster writes one)",
        )
    return job.validate()


def _rack_endpoint(job: Job, rack: int, layout: str, racks: int, side: str) -> str:
    """Rack ``rack``'s endpoint on ``side`` (``up``: it sends, ``down``: it receives) by ``layout``."""
    if layout == "rack":
        name, server = f"rack{rack}", rack
    else:
        name, server = f"rack{rack}.{side}", rack if side == "up" else racks + rack
    if name not in job.endpoints:
        job.endpoint(name, Location(server, "gpu0", 0), role="rack" if layout == "rack" else f"rack-{side}")
    return name


# ------------------------------------------------------------------ CSV flow list
def flow_csv(path: str | Path, cluster: ClusterSpec | None = None) -> Job:
    """The job of a CSV flow list (module docstring), flows in file order."""
    where = Path(path).name
    rows = csv.reader(io.StringIO(_read(path)))
    header = [h.strip() for h in next(rows, [])]
    for col in header:
        if col not in CSV_COLUMNS:
            raise SpecError(f"{where}:1", f"unknown column {describe(col)} (the header names {', '.join(CSV_COLUMNS)})")
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing or len(set(header)) != len(header):
        raise SpecError(f"{where}:1", f"the header must name {', '.join(CSV_COLUMNS)} once each (missing: {missing})")
    col = {c: header.index(c) for c in CSV_COLUMNS}
    job = Job(where)
    for n, row in enumerate(rows, 2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise SpecError(f"{where}:{n}", f"{len(row)} fields, the header has {len(header)}")
        cell = {c: row[k].strip() for c, k in col.items()}
        src = _host_endpoint(job, cell["src"], cluster, f"{where}:{n}.src")
        dst = _host_endpoint(job, cell["dst"], cluster, f"{where}:{n}.dst")
        _check_pair(job, src, dst, cluster, f"{where}:{n}.dst")
        size = parse_size(_numeric(cell["bytes"]), f"{where}:{n}.bytes")
        at = parse_duration(_numeric(cell["start"]), f"{where}:{n}.start")
        job.flow(f"f{n - 1}", src, dst, size, coflow=cell["coflow"] or None, at=at)
    return job.validate()


def _host_endpoint(job: Job, text: str, cluster: ClusterSpec | None, where: str) -> str:
    server_text, colon, gpu_text = text.partition(":")
    server = _int(server_text, where, 0)
    gpu = _int(gpu_text, where, 0) if colon else 0
    nic = gpu if colon else 0
    if cluster is not None:
        if server >= len(cluster.servers):
            raise SpecError(where, f"server {server}, but the cluster has {len(cluster.servers)}")
        s = cluster.servers[server]
        if gpu >= max(1, s.gpus):
            raise SpecError(where, f"GPU {gpu}, but server {server} has {s.gpus}")
        nic = gpu % s.nics
    name = f"h{server}.gpu{gpu}"
    if name not in job.endpoints:
        job.endpoint(name, Location(server, f"gpu{gpu}", nic))
    return name


def _check_pair(job: Job, src: str, dst: str, cluster: ClusterSpec | None, where: str) -> None:
    if src == dst:
        raise SpecError(where, f"a flow from {src} to itself")
    server = job.endpoints[src].pin.server
    if cluster is not None and server == job.endpoints[dst].pin.server and cluster.servers[server].host is None:
        raise SpecError(where, f"{src} to {dst} stays on server {server}, which has no host model: it would take 0 s")


# ------------------------------------------------------------------ registry and helpers
IMPORTERS: dict[str, Callable[..., Job]] = {"coflow-benchmark": coflow_benchmark, "csv": flow_csv}
OPTIONS: dict[str, tuple[str, ...]] = {"coflow-benchmark": ("layout", "sizes"), "csv": ()}


def trace_format(path: str | Path, format: str | None = None, where: str = "job.format") -> str:
    """The importer's name: ``format`` if given, else by the file's suffix (``.csv``: csv)."""
    if format is None:
        return "csv" if Path(path).suffix.lower() == ".csv" else "coflow-benchmark"
    return _choice(format, where, tuple(IMPORTERS))


def import_trace(
    path: str | Path,
    format: str | None = None,
    args: Mapping[str, Any] | None = None,
    cluster: ClusterSpec | None = None,
    where: str = "job",
) -> Job:
    """The job of the trace at ``path`` by the importer ``format`` with its ``args``; a missing
    file, unknown option or bad value names ``<where>.<field>`` or the file's line."""
    name = trace_format(path, format, f"{where}.format")
    for key in args or {}:
        if key not in OPTIONS[name]:
            known = ", ".join(OPTIONS[name]) or "none"
            raise SpecError(f"{where}.args.{key}", f"the {name} importer takes no option {key!r} (known: {known})")
    try:
        return IMPORTERS[name](path, cluster, **dict(args or {}))
    except SpecError as exc:
        if exc.field in OPTIONS[name]:
            raise SpecError(f"{where}.args.{exc.field}", exc.message) from None
        raise


def trace_cluster(servers: int, rate: float = RACK_RATE, name: str = "trace") -> dict:
    """A cluster (as :meth:`ClusterSpec.from_dict` reads it) for a trace: ``servers`` servers of
    one GPU and one NIC at ``rate`` bit/s on one switch (CoflowSim's non-blocking fabric)."""
    return {
        "name": name,
        "servers": [{"count": servers, "gpus": 1, "nic_rate": rate}],
        "fabric": {"type": "single_switch"},
    }


def servers_needed(job: Job) -> int:
    """The servers the job's pins name (the highest index + 1)."""
    return 1 + max((ep.pin.server for ep in job.endpoints.values() if ep.pin is not None), default=-1)


def _read(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise SpecError("job.trace", f"no trace file at {describe(str(p))}")
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise SpecError("job.trace", f"{describe(str(p))} is over {MAX_TRACE_BYTES >> 20} MiB")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError("job.trace", f"cannot read {describe(str(p))}: {exc}") from None


def _choice(value: object, where: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SpecError(where, f"expected one of {', '.join(choices)}, got {describe(value)}")
    return value  # type: ignore[return-value]


def _int(text: str, where: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SpecError(where, f"expected a whole number, got {describe(text)}") from None
    if value < minimum:
        raise SpecError(where, f"must be at least {minimum}, got {value}")
    return value


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(where, f"expected a number, got {describe(text)}") from None
    if not math.isfinite(value) or value < 0:
        raise SpecError(where, f"expected a finite number >= 0, got {describe(text)}")
    return value


def _rack(text: str, racks: int, where: str) -> int:
    rack = _int(text, where, 0)
    if rack >= racks:
        raise SpecError(where, f"rack {rack}, but the header gives {racks} racks (0..{racks - 1})")
    return rack


def _numeric(text: str) -> str | float:
    """A CSV cell as a number when it is one (``parse_size``/``parse_duration`` read both)."""
    try:
        return float(text)
    except ValueError:
        return text
