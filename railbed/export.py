"""A run's result in other tools' formats: a Perfetto trace and flat CSVs.

:func:`export_run` writes, beside ``result.json``:

``trace.json``  Chrome trace-event JSON, which the Perfetto UI
                (https://ui.perfetto.dev, "Open trace file") and
                ``chrome://tracing`` open. One process per server (``h0``,
                ...), one thread per device (its tasks) and per NIC (the
                flows it sends); every task and flow is a complete event
                (``"ph": "X"``) with its id, DSCP, size and attributes as
                arguments; each link of ``link_series`` is a counter track
                (utilisation in %) under a ``links`` process. Timestamps
                are **model** microseconds (the trace format's unit).
``flows.csv``   one row per flow: ids, endpoints, size, DSCP, rate cap,
                ready/start/end (model s), FCT, coflow attributes, the path
                option and spine it took and its parent (a sub-flow). Columns
                are named as ``result.json``'s fields (``server``: the
                source server), times rounded to :data:`DIGITS` significant
                digits (1 ns on a 1 s run), rates to whole bit/s.
``tasks.csv``   one row per task: server, device, ready/start/end, duration.
``links.csv``   per link and interval: t_start, t_end (model s), utilisation
                (share of the configured rate), and the link's rate.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from railbed.results import RunResult, load_runs

NIC_TID = 1000  # thread ids: devices count from 1, NICs from here
# process ids: server s is s + 1 (Perfetto's UI treats pid 0, the kernel's swapper, specially)
LINKS_PID = 1_000_000

FLOW_COLUMNS = [
    "id", "server", "src_nic", "dst_server", "dst_nic", "size_bytes", "received_bytes", "dscp", "rate_bps",
    "ready_s", "start_s", "end_s", "fct_s", "iteration", "coflow", "coflow_type", "microbatch", "layer", "option",
    "spine", "parent",
]  # fmt: skip
DIGITS = 9  # significant digits of a time or a share in the CSVs (a float's repr has 17): 1 ns at 1 s
TASK_COLUMNS = ["id", "server", "device", "ready_s", "start_s", "end_s", "duration_s", "iteration", "microbatch"]
LINK_COLUMNS = ["link", "t_start_s", "t_end_s", "utilisation", "rate_bps"]


def _blank(x: Any) -> Any:
    """A cell: None empty, a float rounded to :data:`DIGITS` significant digits."""
    if x is None:
        return ""
    return float(f"{x:.{DIGITS}g}") if isinstance(x, float) else x


def _rate(x: Any) -> Any:
    return "" if x is None else round(x) if isinstance(x, float) and x == x and abs(x) != float("inf") else x


def flow_rows(result: RunResult) -> list[list]:
    rows = []
    for r in result.items.values():
        if r.kind != "flow":
            continue
        a = r.attrs
        rows.append(
            [_blank(x) for x in (r.id, r.server, r.src_nic, r.dst_server, r.dst_nic, r.size, r.received, r.dscp)]
            + [_rate(r.rate)]
            + [_blank(x) for x in (r.ready, r.start, r.end, r.duration)]
            + [_blank(a.get(k)) for k in ("iteration", "coflow", "coflow_type", "microbatch", "layer")]
            + [_blank(x) for x in (r.option, r.spine, r.parent)]
        )
    return rows


def task_rows(result: RunResult) -> list[list]:
    return [
        [_blank(x) for x in (r.id, r.server, r.device, r.ready, r.start, r.end, r.duration)]
        + [_blank(r.attrs.get(k)) for k in ("iteration", "microbatch")]
        for r in result.items.values()
        if r.kind == "task"
    ]


def link_rows(result: RunResult) -> list[list]:
    return [
        [name, _blank(a), _blank(b), _blank(u), _rate(result.links.get(name, {}).get("rate"))]
        for name, series in sorted(result.link_series.items())
        for a, b, u in series
    ]


def write_csvs(result: RunResult, run_dir: Path) -> list[Path]:
    out = []
    for name, header, rows in (
        ("flows.csv", FLOW_COLUMNS, flow_rows(result)),
        ("tasks.csv", TASK_COLUMNS, task_rows(result)),
        ("links.csv", LINK_COLUMNS, link_rows(result)),
    ):
        path = Path(run_dir) / name
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        out.append(path)
    return out


# ----------------------------------------------------------------- Perfetto
def _meta(pid: int, tid: int | None, what: str, name: str) -> dict:
    ev = {"ph": "M", "pid": pid, "name": what, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _item_event(r, tid: int) -> dict:
    args = {k: v for k, v in (("dscp", r.dscp), ("size", r.size), ("rate", r.rate), ("option", r.option)) if v}
    if r.kind == "flow":
        args["dst"] = f"h{r.dst_server} nic{r.dst_nic}"
    args.update({k: v for k, v in r.attrs.items() if isinstance(v, (str, int, float))})
    return {
        "name": r.id,
        "cat": r.attrs.get("coflow_type", r.kind) if r.kind == "flow" else "task",
        "ph": "X",
        "ts": r.start * 1e6,
        "dur": (r.end - r.start) * 1e6,
        "pid": r.server + 1,
        "tid": tid,
        "args": args,
    }


def trace_events(result: RunResult) -> dict:
    """The run as a Chrome/Perfetto trace-event document (module docstring)."""
    events: list[dict] = []
    devices: dict[tuple[int, str], int] = {}
    named: set[tuple[int, int]] = set()
    for r in result.items.values():
        if r.start is None or r.end is None or r.server is None:
            continue
        if r.kind == "task":
            tid = devices.setdefault((r.server, r.device or ""), 1 + len([d for d in devices if d[0] == r.server]))
            label = str(r.device)
        else:
            tid, label = NIC_TID + (r.src_nic or 0), f"nic{r.src_nic}"
        if (r.server, tid) not in named:
            named.add((r.server, tid))
            events.append(_meta(r.server + 1, tid, "thread_name", label))
            events.append(
                {"ph": "M", "pid": r.server + 1, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
            )
        events.append(_item_event(r, tid))
    for server in sorted({server for server, _ in named}):
        events.append(_meta(server + 1, None, "process_name", f"h{server}"))
    if result.link_series:
        events.append(_meta(LINKS_PID, None, "process_name", "links (utilisation %)"))
        for name, series in sorted(result.link_series.items()):
            for a, _, u in series:
                events.append({"name": name, "ph": "C", "ts": a * 1e6, "pid": LINKS_PID, "args": {"util": 100 * u}})
            if series:
                events.append(
                    {"name": name, "ph": "C", "ts": series[-1][1] * 1e6, "pid": LINKS_PID, "args": {"util": 0}}
                )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"job": result.job, "scheduler": result.scheduler, "backend": result.backend, "time": "model"},
    }


def write_trace(result: RunResult, path: Path) -> Path:
    Path(path).write_text(json.dumps(trace_events(result)) + "\n")
    return Path(path)


def export_run(result: RunResult, run_dir: Path, trace: bool = True) -> list[Path]:
    """``trace.json`` (unless not ``trace``), ``flows.csv``, ``tasks.csv`` and ``links.csv`` in ``run_dir``."""
    traced = [write_trace(result, Path(run_dir) / "trace.json")] if trace else []
    return [*traced, *write_csvs(result, run_dir)]


def export_results(
    results_dir: Path,
    have: dict[str, RunResult] | None = None,
    trace: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """:func:`export_run` for every run of a results directory (``have``: results in memory,
    as :func:`railbed.results.load_runs`; ``progress``: told each run's name before its export)."""
    out = []
    runs = load_runs(Path(results_dir), have)
    for k, (name, result) in enumerate(runs.items()):
        if progress is not None:
            progress(f"export: {name} ({k + 1} of {len(runs)} runs): trace.json and CSVs")
        out += export_run(result, Path(results_dir) / name, trace)
    return out
