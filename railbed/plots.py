"""Figures of runs, as PNG, each with its data as CSV beside it.

Every figure is made in two steps: a ``*_rows`` function turns results into
the rows of a table (the CSV, numbers in model seconds or utilisation
shares), then a drawing function plots exactly those rows. A figure and its
CSV therefore always agree, and a test can check the CSV against the
result JSON. Axes are in model units: times scaled to s, ms or us with the
unit in the label, utilisation as % of the link's configured rate.

The standard figures of a results directory (:func:`plot_results`, called
by ``railbed run``, ``simulate`` and ``crosscheck`` and by ``railbed plot
RESULTS_DIR``), written to ``RESULTS_DIR/figures/``:

``timeline-<run>.png``   Gantt chart per device and NIC: tasks on their
                         device, flows on their source NIC, coloured by
                         coflow type (or DSCP; ``--color-by dscp``)
``critical-<run>.png``   the critical path on the timeline: the lanes it
                         crosses, its items coloured by kind and coflow
                         type and joined in time order, the others grey
                         (``RunResult.analysis``, ``railbed/analysis.py``)
``overlap-<run>.png``    heat map of the share of the makespan each pair of
                         coflow types is active on a common port (Fig. 5.2)
``links-<run>.png``      utilisation over time of the busiest links
                         (``RunResult.link_series``: tc counter samples or
                         the simulator's rates)
``fct-cdf.png``          CDF of the completion times of the flows between
                         servers, one line per run (flows inside a server
                         apart, dashed, when their host model timed them;
                         left out and counted in the title when 0 s)
``cct-cdf.png``          CDF of coflow completion times (if any coflows)
``iterations.png``       time of each iteration per run, points on an axis
                         that fills with the values (1-3 % differences show)
``speedup.png``          each run's makespan against the first run's, and
``packet-<run>.png``     a packet-level run's drops and queue peaks per port
                         (both in ``railbed/compare_plots.py``)
``crosscheck-fct.png``   emulated against simulated flow completion times
                         (a crosscheck directory)

A run of several jobs (``RunResult.jobs``, :mod:`railbed.jobmetrics`) also gets:

``timeline-jobs-<run>.png`` the timeline coloured by job
``slowdown.png``         per-job slowdown (JCT over the job alone), bars per run (``jobs.csv``;
                         ``interference.csv``: per pair of jobs the port time shared, the excess caused)
``jct-cdf.png``          CDF of job completion times, one line per run

An offered-load sweep (runs labelled ``<scheduler>@<load>``: a scenario's
``loads``, LEO's request streams) gets instead of per-run timelines:

``latency-load.png``     request latency (median, p99) against offered load
``throughput-load.png``  requests completed per second against offered load

Drawing uses matplotlib's object API with the Agg canvas (no pyplot state,
no display needed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from railbed.compare_plots import packet_ports, speedup
from railbed.figure import DPI, Rows, new_figure, save_figure, time_unit, write_csv
from railbed.metrics import iteration_times, load_curve
from railbed.results import RunResult, coflow_completion_times, load_runs

MAX_LANES = 48
TIMELINE_EDGES = 2000  # bars up to which a timeline's bars get white edges
BUSIEST_LINKS = 6


# One colour per coflow type in every figure of every run (the timeline, the critical path, ...):
# the types the generators write, fixed; any other type (or a DSCP class, ``--color-by dscp``) a
# tab20b colour chosen by its name's CRC-32, so it too keeps its colour from figure to figure.
COFLOW_COLORS = {
    "DP": "C0", "PP": "C1", "EP": "C2", "TP": "C3", "graph-data": "C4", "gradient": "C5",
    "parameter": "C6", "mini-batch": "C8", "probability": "C9",
}  # fmt: skip
GREYS = {"task": "0.5", "compute": "0.5", "other": "0.3"}  # compute (a timeline's tasks), untyped flows


def category_color(key: str):
    """The colour of a coflow type, compute, or a DSCP class (``DSCP 46``) in every figure."""
    if key in GREYS or key in COFLOW_COLORS:
        return GREYS.get(key) or COFLOW_COLORS[key]
    import zlib

    from matplotlib import colormaps

    return colormaps["tab20b"](zlib.crc32(key.encode()) % 20)


def _colors(keys: Sequence[str]) -> dict:
    return {k: category_color(k) for k in keys}


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


# ---------------------------------------------------------------- timeline
TIMELINE_HEADER = ["lane", "id", "kind", "start_s", "end_s", "color", "dscp", "coflow_type", "size_bytes"]


def _lane(r) -> tuple[tuple, str]:
    """(sort key, name) of an item's lane: devices of a server first, then its NICs."""
    if r.kind == "task":
        device = r.device or ""
        return (r.server, 0, len(device), device), f"h{r.server} {device}"
    return (r.server, 1, r.src_nic or 0, ""), f"h{r.server} nic{r.src_nic}"


def timeline_rows(result: RunResult, color_by: str = "coflow_type", max_lanes: int = MAX_LANES) -> tuple[Rows, int]:
    """One row per task (lane: its device) and flow (lane: its source NIC) that ran,
    in the first ``max_lanes`` lanes; also the number of lanes in all."""
    lanes: dict[tuple, str] = {}
    items = []
    for r in result.items.values():
        if r.start is None or r.end is None or r.server is None:
            continue
        key, name = _lane(r)
        lanes[key] = name
        items.append((key, name, r))
    keep = set(sorted(lanes)[:max_lanes])
    rows = []
    for key, name, r in sorted(items, key=lambda x: (x[0], x[2].start, x[2].id)):
        if key not in keep:
            continue
        ctype = r.attrs.get("coflow_type", "")
        if r.kind == "task":
            color = "task"
        elif color_by == "dscp":
            color = f"DSCP {r.dscp}"
        else:
            color = ctype or f"DSCP {r.dscp}"
        rows.append([name, r.id, r.kind, r.start, r.end, color, "" if r.dscp is None else r.dscp, ctype, r.size or ""])
    return rows, len(lanes)


def draw_timeline(rows: Rows, png: Path, title: str) -> Path:
    lanes = list(dict.fromkeys(row[0] for row in rows))
    span = max((row[4] for row in rows), default=1.0)
    unit, factor = time_unit(span)
    fig, ax = new_figure(9.0, 1.2 + 0.28 * max(1, len(lanes)))
    keys = sorted({row[5] for row in rows}, key=lambda k: (k != "task", k))
    colors = _colors(keys)
    bars: dict[tuple[str, str], list] = {}
    for row in rows:
        bars.setdefault((row[5], row[0]), []).append((row[3] * factor, (row[4] - row[3]) * factor))
    count = {k: sum(len(v) for (key, _), v in bars.items() if key == k) for k in keys}
    # the most numerous class first, the rarer on top (EP's 20,000 flows hid DP and PP); white edges
    # only while bars are few (at thousands a lane's edges painted it white)
    edge = {"edgecolor": "white", "linewidth": 0.4} if len(rows) <= TIMELINE_EDGES else {"edgecolor": "none"}
    y = {lane: i for i, lane in enumerate(lanes)}
    for key in sorted(keys, key=lambda k: (k != "task", -count[k], k)):
        for (k, lane), spans in bars.items():
            if k == key:
                ax.broken_barh(spans, (y[lane] - 0.4, 0.8), facecolors=colors[key], **edge)
    for key in keys:
        ax.bar(0, 0, color=colors[key], label=key)  # legend entry
    ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel(f"time ({unit}, model)")
    ax.set_ylabel("device / source NIC")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, png)


def timeline(result: RunResult, base: Path, name: str = "", color_by: str = "coflow_type") -> Path:
    rows, nlanes = timeline_rows(result, color_by)
    write_csv(base.with_suffix(".csv"), TIMELINE_HEADER, rows)
    shown = len({row[0] for row in rows})
    more = ""
    if shown < nlanes:
        more = f" (first {shown} of {nlanes} lanes; {_missing(result, {row[0] for row in rows})} not shown)"
    return draw_timeline(
        rows, base.with_suffix(".png"), f"timeline: {name or result.scheduler}, {result.backend}{more}"
    )


def job_timeline(result: RunResult, base: Path, name: str = "") -> Path | None:
    """The timeline with every task and flow coloured by its job (a run of several jobs), or None."""
    if not result.jobs:
        return None
    rows, nlanes = timeline_rows(result)
    for row in rows:
        row[5] = result.items[row[1]].attrs.get("job") or "other"
    write_csv(base.with_suffix(".csv"), TIMELINE_HEADER, rows)
    return draw_timeline(
        rows, base.with_suffix(".png"), f"timeline by job: {name or result.scheduler}, {result.backend}"
    )


# ------------------------------------------------------------ several jobs
JOBS_HEADER = ["run", "job", "arrival_s", "jct_s", "alone_s", "slowdown", "iterations", "network_free_s",
               "exposed_comm_fraction"]  # fmt: skip


def job_rows(runs: dict[str, RunResult]) -> Rows:
    """Per run and job its results (``RunResult.jobs``, :mod:`railbed.jobmetrics`)."""
    return [[n, j, v["arrival"], v["jct"], v.get("alone") or "", v.get("slowdown") or "", len(v["iterations"]),
             "" if v.get("network_free") is None else v["network_free"],
             "" if v.get("exposed_comm_fraction") is None else v["exposed_comm_fraction"]]
            for n, r in runs.items() for j, v in (r.jobs or {}).get("per_job", {}).items()]  # fmt: skip


def draw_slowdowns(rows: Rows, png: Path) -> Path:
    fig, ax = new_figure()
    runs, jobs = list(dict.fromkeys(r[0] for r in rows)), list(dict.fromkeys(r[1] for r in rows))
    width = 0.8 / max(1, len(runs))
    colors = _colors(runs)
    for k, run in enumerate(runs):
        got = {r[1]: r[5] for r in rows if r[0] == run and r[5] != ""}
        xs = [x + k * width for x, j in enumerate(jobs) if j in got]
        ax.bar(xs, [got[j] for j in jobs if j in got], width, label=run, color=colors[run])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(jobs))], jobs, fontsize=8)
    ax.set_ylabel("slowdown (JCT / alone on the same placement)")
    ax.set_title("per-job slowdown", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, png)


def job_figures(runs: dict[str, RunResult], out: Path) -> list[Path | None]:
    """Per-job slowdown bars and the JCT CDF, with ``jobs.csv``; nothing for runs of one job."""
    rows = job_rows(runs)
    if not rows:
        return []
    write_csv(out / "jobs.csv", JOBS_HEADER, rows)
    pairs = [[n, a, b, inter["shared_seconds"][a][b], inter["caused"][a][b]]
             for n, r in runs.items() if r.jobs for inter in [r.jobs["cluster"]["interference"]]
             for a in inter["jobs"] for b in inter["jobs"] if a != b]  # fmt: skip
    write_csv(out / "interference.csv", ["run", "job", "other", "shared_port_s", "caused_s"], pairs)
    cdf = cdf_rows({n: [v["jct"] for v in r.jobs["per_job"].values()] for n, r in runs.items() if r.jobs})
    write_csv(out / "jct-cdf.csv", ["run", "jct_s", "cdf"], cdf)
    return [draw_slowdowns(rows, out / "slowdown.png"),
            draw_cdf(cdf, out / "jct-cdf.png", "job completion time", "job completion times")]  # fmt: skip


def _missing(result: RunResult, shown: set[str]) -> str:
    """The lanes a cut timeline leaves out, by server: ``h12-h15`` (or ``h3 nic2, ...`` within one)."""
    gone = {}
    for r in result.items.values():
        if r.start is not None and r.end is not None and r.server is not None:
            key, name = _lane(r)
            if name not in shown:
                gone[key] = name
    servers = sorted({k[0] for k in gone})
    if len(servers) == 1:
        names = [gone[k] for k in sorted(gone)]
        return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    runs, start = [], servers[0]
    for a, b in zip(servers, servers[1:] + [None]):
        if b != a + 1:
            runs.append(f"h{start}" if start == a else f"h{start}-h{a}")
            start = b
    return f"{len(gone)} lanes of " + ", ".join(runs[:4]) + (" ..." if len(runs) > 4 else "")


# ----------------------------------------------------------- critical path
CRITICAL_HEADER = ["lane", "id", "kind", "start_s", "end_s", "on_path", "category"]


def critical_rows(result: RunResult, max_lanes: int = MAX_LANES) -> Rows:
    """The items of the lanes (devices, source NICs) the critical path crosses, in the first
    ``max_lanes`` of them: ``on_path`` 1 for the path's items (in path order first), with
    their ``category`` (``compute`` or the coflow type); empty without an analysis."""
    path = (result.analysis.get("critical_path") or {}).get("items") or []
    on = {i: k for k, i in enumerate(path) if i in result.items}
    lanes: dict[tuple, str] = {}
    for i in on:
        key, name = _lane(result.items[i])
        lanes.setdefault(key, name)
    keep = set(sorted(lanes)[:max_lanes])
    rows = []
    for r in result.items.values():
        if r.start is None or r.end is None or r.server is None or r.parent is not None:
            continue
        key, name = _lane(r)
        if key in keep:
            category = "compute" if r.kind == "task" else r.attrs.get("coflow_type") or "other"
            rows.append([name, r.id, r.kind, r.start, r.end, int(r.id in on), category])
    rows.sort(key=lambda row: (-row[5], on.get(row[1], 0), row[3], row[1]))
    return rows


def draw_critical(rows: Rows, png: Path, title: str) -> Path:
    """One artist per lane for the items off the path and one per lane and category on it (as
    :func:`draw_timeline`), so the figure's cost grows with its items, not per item in matplotlib."""
    lanes = sorted(dict.fromkeys(row[0] for row in rows), key=lambda name: _lane_key(name))
    y = {lane: k for k, lane in enumerate(lanes)}
    unit, factor = time_unit(max((row[4] for row in rows), default=1.0))
    fig, ax = new_figure(9.0, 1.4 + 0.28 * max(1, len(lanes)))
    off: dict[str, list[tuple[float, float]]] = {}
    on: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in rows:
        bar = (row[3] * factor, (row[4] - row[3]) * factor)
        (on.setdefault((row[0], row[6]), []) if row[5] else off.setdefault(row[0], [])).append(bar)
    for lane, bars in off.items():
        _bars(ax, bars, y[lane], facecolors="0.88")
    cats = list(dict.fromkeys(row[6] for row in rows if row[5]))
    colors = _colors(cats)
    path = [row for row in rows if row[5]]
    for (lane, cat), bars in on.items():
        _bars(ax, bars, y[lane], facecolors=colors[cat], edgecolors="black", linewidths=0.6)
    xs = [v for row in path for v in (row[3] * factor, row[4] * factor)]
    ys = [y[row[0]] for row in path for _ in (0, 1)]
    ax.plot(xs, ys, color="black", lw=0.7)
    for c in cats:
        ax.bar(0, 0, color=colors[c], label=c)
    ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel(f"time ({unit}, model)")
    ax.set_ylabel("device / source NIC")
    ax.set_title(title, fontsize=10)
    if cats:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, png)


def _bars(ax, bars: list[tuple[float, float]], y: float, **style) -> None:
    """``ax.broken_barh(bars, (y - 0.4, 0.8), **style)`` with the rectangles' corners made by
    numpy: one collection, without matplotlib's per-bar Python (10 s for 100,000 bars)."""
    import numpy as np
    from matplotlib.collections import PolyCollection

    xw = np.asarray(bars, dtype=float).reshape(-1, 2)
    x0, x1 = xw[:, 0], xw[:, 0] + xw[:, 1]
    lo, hi = np.full(len(xw), y - 0.4), np.full(len(xw), y + 0.4)
    corners = np.stack([np.column_stack(c) for c in ((x0, lo), (x0, hi), (x1, hi), (x1, lo))], axis=1)
    ax.add_collection(PolyCollection(corners, **style))
    ax.update_datalim([(x0.min(), y - 0.4), (x1.max(), y + 0.4)])
    ax.autoscale_view()


def _lane_key(name: str) -> tuple:
    """Sort lanes as :func:`_lane` does, from their names (``h<s> <device>``, ``h<s> nic<n>``)."""
    host, _, rest = name.partition(" ")
    server = int(host[1:]) if host[1:].isdigit() else 0
    if rest.startswith("nic") and rest[3:].isdigit():
        return (server, 1, int(rest[3:]), "")
    return (server, 0, len(rest), rest)


def critical_path(result: RunResult, base: Path, name: str = "") -> Path | None:
    rows = critical_rows(result)
    if not rows:
        return None
    write_csv(base.with_suffix(".csv"), CRITICAL_HEADER, rows)
    a = result.analysis
    cp = a["critical_path"]
    parts = ", ".join(f"{k} {100 * v / cp['length']:.0f}%" for k, v in cp["time"].items() if v > 0)
    bound = f"; max speedup {a['max_speedup']:.3g}x" if a.get("max_speedup") else ""
    title = f"critical path: {name or result.scheduler}, {result.backend} ({parts}{bound})"
    return draw_critical(rows, base.with_suffix(".png"), title)


# ----------------------------------------------------------------- overlap
def overlap_rows(result: RunResult) -> Rows:
    """``[type a, type b, share]`` for every ordered pair of the analysis's coflow types."""
    ov = result.analysis.get("overlap") or {}
    return [[a, b, ov["share"][a][b]] for a in ov.get("types", []) for b in ov["types"]]


def draw_overlap(rows: Rows, png: Path, title: str) -> Path:
    types = list(dict.fromkeys(row[0] for row in rows))
    grid = [[100 * next(row[2] for row in rows if row[0] == a and row[1] == b) for b in types] for a in types]
    fig, ax = new_figure(1.6 + 0.9 * len(types), 1.2 + 0.8 * len(types))
    im = ax.imshow(grid, cmap="Blues", vmin=0, vmax=100.0)  # one scale for every run: 0-100 % of the makespan
    for i in range(len(types)):
        for j in range(len(types)):
            dark = grid[i][j] > 0.6 * im.norm.vmax
            ax.text(j, i, f"{grid[i][j]:.1f}", ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(types)), types, fontsize=8)
    ax.set_yticks(range(len(types)), types, fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="% of the makespan")
    return save_figure(fig, png)


def overlap_heatmap(result: RunResult, base: Path, name: str = "") -> Path | None:
    rows = overlap_rows(result)
    if not rows:
        return None
    write_csv(base.with_suffix(".csv"), ["type_a", "type_b", "share"], rows)
    return draw_overlap(rows, base.with_suffix(".png"), f"coflow overlap on a port: {name or result.scheduler}")


# --------------------------------------------------------------------- CDFs
def cdf_rows(values_by_run: dict[str, Sequence[float]]) -> Rows:
    """Per run the sorted values with their empirical CDF (i / n, i = 1..n)."""
    rows = []
    for run, values in values_by_run.items():
        ordered = sorted(values)
        rows += [[run, v, (i + 1) / len(ordered)] for i, v in enumerate(ordered)]
    return rows


def draw_cdf(rows: Rows, png: Path, what: str, title: str) -> Path:
    fig, ax = new_figure()
    unit, factor = time_unit(max((row[1] for row in rows), default=1.0))
    for run in dict.fromkeys(row[0] for row in rows):
        xs = [row[1] * factor for row in rows if row[0] == run]
        ys = [row[2] for row in rows if row[0] == run]
        local = any(len(row) > 3 and row[3] == "local" for row in rows if row[0] == run)
        ax.step(xs, ys, where="post", label=run, linestyle="--" if local else "-")
    positive = [row[1] for row in rows if row[1] > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(f"{what} ({unit}, model)")
    ax.set_ylabel("fraction")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, png)


def fct_rows(runs: dict[str, RunResult]) -> Rows:
    """:func:`cdf_rows` of the flows between servers (run ``<run>``) and, apart, of those inside
    one server (run ``<run> (in server)``), each with its scope (``network``, ``local``) last.
    Same-server flows that all took 0 s (no host model) are left out of the rows: a step at 0
    would hide the network's flows, and the title counts them instead."""
    rows = []
    for n, r in runs.items():
        rows += [row + ["network"] for row in cdf_rows({n: list(r.flow_completion_times("network").values())})]
        local = list(r.flow_completion_times("local").values())
        if any(v > 0 for v in local):
            rows += [row + ["local"] for row in cdf_rows({f"{n} (in server)": local})]
    return rows


def fct_cdf(runs: dict[str, RunResult], base: Path) -> Path:
    rows = fct_rows(runs)
    write_csv(base.with_suffix(".csv"), ["run", "fct_s", "cdf", "scope"], rows)
    free = sum(1 for r in runs.values() for v in r.flow_completion_times("local").values() if v == 0)
    left = f"; {free} same-server flows of 0 s (no host model) left out" if free else ""
    title = f"flow completion times: flows between servers{left}"
    return draw_cdf(rows, base.with_suffix(".png"), "flow completion time", title)


def cct_cdf(runs: dict[str, RunResult], base: Path) -> Path | None:
    values = {n: list(coflow_completion_times(r).values()) for n, r in runs.items()}
    if not any(values.values()):
        return None
    rows = cdf_rows(values)
    write_csv(base.with_suffix(".csv"), ["run", "cct_s", "cdf"], rows)
    return draw_cdf(rows, base.with_suffix(".png"), "coflow completion time", "coflow completion times")


# -------------------------------------------------------------- iterations
def iteration_rows(runs: dict[str, RunResult]) -> Rows:
    return [[n, it, t] for n, r in runs.items() for it, t in sorted(iteration_times(r).items())]


def iteration_limits(rows: Rows) -> tuple[float, float]:
    """The y range of ``iterations.png`` (s): the values with 15 % of their spread around them
    (at least 0.5 % of the largest), so differences of 1-3 % between runs fill the axis; from 0
    only when the spread is over half the largest (then a range from 0 hides nothing)."""
    values = [row[2] for row in rows] or [1.0]
    lo, hi = min(values), max(values)
    if hi - lo > 0.5 * hi:
        return 0.0, 1.05 * hi
    pad = max(0.15 * (hi - lo), 0.005 * hi)
    return lo - pad, hi + pad


def draw_iterations(rows: Rows, png: Path) -> Path:
    """Points joined per run (bars from a cut axis would lie about their ratios), the first run the
    baseline: the legend gives each other run's mean against it."""
    fig, ax = new_figure()
    runs = list(dict.fromkeys(row[0] for row in rows))
    its = sorted({row[1] for row in rows})
    unit, factor = time_unit(max((row[2] for row in rows), default=1.0))
    mean = {run: sum(r[2] for r in rows if r[0] == run) / max(1, sum(1 for r in rows if r[0] == run)) for run in runs}
    for i, run in enumerate(runs):
        got = sorted((its.index(row[1]), row[2] * factor) for row in rows if row[0] == run)
        vs = f" ({100 * (mean[run] / mean[runs[0]] - 1):+.1f} % vs {runs[0]})" if i and mean[runs[0]] > 0 else ""
        ax.plot([x for x, _ in got], [y for _, y in got], "o-", color=f"C{i % 10}", label=f"{run}{vs}")
    lo, hi = iteration_limits(rows)
    ax.set_ylim(lo * factor, hi * factor)
    ax.set_xticks(range(len(its)), [str(it) for it in its])
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"iteration time ({unit}, model)")
    ax.set_title("time per iteration", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, png)


def iterations(runs: dict[str, RunResult], base: Path) -> Path:
    rows = iteration_rows(runs)
    write_csv(base.with_suffix(".csv"), ["run", "iteration", "time_s"], rows)
    return draw_iterations(rows, base.with_suffix(".png"))


# ------------------------------------------------------------ utilisation
def busiest_links(result: RunResult, n: int = BUSIEST_LINKS) -> list[str]:
    """The ``n`` links of ``link_series`` that carried the most (utilisation x time x rate)."""

    def carried(name: str) -> float:
        rate = result.links.get(name, {}).get("rate", 1.0)
        return sum(u * (b - a) for a, b, u in result.link_series[name]) * rate

    return sorted(result.link_series, key=lambda name: (-carried(name), name))[:n]


def link_rows(result: RunResult, n: int = BUSIEST_LINKS) -> Rows:
    return [[name, a, b, u] for name in busiest_links(result, n) for a, b, u in result.link_series[name]]


def draw_links(rows: Rows, png: Path, title: str) -> Path:
    """One panel per link, stacked, sharing the time axis (lines on one panel hide each other)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(dict.fromkeys(row[0] for row in rows))
    unit, factor = time_unit(max((row[2] for row in rows), default=1.0))
    fig = Figure(figsize=(8.0, 1.0 + 1.1 * max(1, len(names))), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(max(1, len(names)), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, name) in enumerate(zip(axes, names)):
        mine = [row for row in rows if row[0] == name]
        xs = [mine[0][1] * factor] + [row[2] * factor for row in mine]
        ys = [100 * mine[0][3]] + [100 * row[3] for row in mine]
        ax.step(xs, ys, where="pre", color=f"C{i % 10}")
        ax.set_ylim(0, 110)
        ax.set_yticks([0, 50, 100])
        ax.grid(alpha=0.3)
        ax.text(0.005, 0.8, name, transform=ax.transAxes, fontsize=8)
    axes[len(axes) // 2].set_ylabel("utilisation (% of link rate)")
    axes[-1].set_xlabel(f"time ({unit}, model)")
    axes[0].set_title(title, fontsize=10)
    return save_figure(fig, png)


def link_utilisation(result: RunResult, base: Path, name: str = "") -> Path | None:
    if not result.link_series:
        return None
    rows = link_rows(result)
    write_csv(base.with_suffix(".csv"), ["link", "t_start_s", "t_end_s", "utilisation"], rows)
    title = f"busiest links: {name or result.scheduler}, {result.backend}"
    return draw_links(rows, base.with_suffix(".png"), title)


# -------------------------------------------------------------- crosscheck
def crosscheck_rows(checks: list[dict]) -> Rows:
    """From ``crosscheck.json``: per scheduler and compared flow, the first and the second side's FCT
    (its keys ``emulated`` and ``simulated``, whatever the backends: ``backends`` names them)."""
    return [[c["scheduler"], f["id"], f["emulated"], f["simulated"]] for c in checks for f in c["flows"]]


def draw_crosscheck(rows: Rows, png: Path, sides: Sequence[str] = ("emulated", "simulated")) -> Path:
    """Per flow, the first side's FCT (y) against the second's (x), each side named (``sides``: its backend)."""
    one, two = sides
    fig, ax = new_figure(6.0, 5.5)
    hi = max((max(row[2], row[3]) for row in rows), default=1.0)
    unit, factor = time_unit(hi)
    for sched in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == sched]
        ax.scatter([row[3] * factor for row in mine], [row[2] * factor for row in mine], s=12, label=sched, alpha=0.7)
    lo = min((min(row[2], row[3]) for row in rows if min(row[2], row[3]) > 0), default=hi / 10)
    ax.plot([lo * factor, hi * factor], [lo * factor, hi * factor], color="0.4", lw=0.8, label=f"{one} = {two}")
    if hi / lo > 20:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"{two} flow completion time ({unit}, model)")
    ax.set_ylabel(f"{one} flow completion time ({unit}, model)")
    ax.set_title(f"{one} against {two}, per flow", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, png)


def crosscheck_scatter(crosscheck_json: Path, base: Path) -> Path:
    checks = json.loads(Path(crosscheck_json).read_text())
    rows = crosscheck_rows(checks)
    write_csv(base.with_suffix(".csv"), ["scheduler", "flow", "emulated_s", "simulated_s"], rows)
    sides = checks[0].get("backends") if checks else None  # written since the sides were named
    return draw_crosscheck(rows, base.with_suffix(".png"), sides or ("emulated", "simulated"))


# ---------------------------------------------------------- latency / load
def latency_rows(data: dict[str, Sequence[tuple[float, float, float]]]) -> Rows:
    """``{scheduler: [(offered load, p50 latency s, p99 latency s), ...]}`` -> rows sorted by load."""
    return [[s, load, p50, p99] for s, points in data.items() for load, p50, p99 in sorted(points)]


def latency_vs_load(
    data: dict[str, Sequence[tuple[float, float, float]]],
    base: Path,
    load_label: str = "offered load (requests/s)",
    knees: dict[str, float] | None = None,
) -> Path:
    """Request latency (p50 solid, p99 dashed) against offered load, one colour per scheduler.
    ``load_label`` names the load's unit (model units of the workload); ``knees`` (scheduler ->
    load, :func:`railbed.metrics.knee`) are marked with a star on the p50 line."""
    rows = latency_rows(data)
    write_csv(base.with_suffix(".csv"), ["scheduler", "load", "p50_s", "p99_s"], rows)
    fig, ax = new_figure()
    unit, factor = time_unit(max((row[3] for row in rows), default=1.0))
    for i, sched in enumerate(dict.fromkeys(row[0] for row in rows)):
        mine = [row for row in rows if row[0] == sched]
        color = f"C{i % 10}"
        ax.plot([r[1] for r in mine], [r[2] * factor for r in mine], "o-", color=color, label=f"{sched} p50")
        ax.plot([r[1] for r in mine], [r[3] * factor for r in mine], "s--", color=color, label=f"{sched} p99")
        at = [r for r in mine if knees and r[1] == knees.get(sched)]
        if at:
            ax.plot([at[0][1]], [at[0][2] * factor], "*", color=color, markersize=16, markeredgecolor="k")
    if knees:
        ax.plot([], [], "*", color="0.5", markersize=12, markeredgecolor="k", label="knee (sustainable)")
    lows = [min(r[2], r[3]) for r in rows if min(r[2], r[3]) > 0]
    if lows and max(r[3] for r in rows) / min(lows) > 20:  # the flat part and the overload both visible
        ax.set_yscale("log")
    ax.set_xlabel(load_label)
    ax.set_ylabel(f"latency ({unit}, model)")
    ax.set_title("latency against offered load", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, base.with_suffix(".png"))


def throughput_rows(curve: dict[str, list[dict[str, float]]]) -> Rows:
    return [[s, p["load"], p["throughput"]] for s, points in curve.items() for p in points]


def throughput_vs_load(curve: dict[str, list[dict[str, float]]], base: Path) -> Path:
    """Requests completed per second against offered load, one line per scheduler (y = x dotted)."""
    rows = throughput_rows(curve)
    write_csv(base.with_suffix(".csv"), ["scheduler", "load", "throughput_per_s"], rows)
    fig, ax = new_figure()
    for i, sched in enumerate(dict.fromkeys(row[0] for row in rows)):
        mine = [row for row in rows if row[0] == sched]
        ax.plot([r[1] for r in mine], [r[2] for r in mine], "o-", color=f"C{i % 10}", label=sched)
    top = max((row[1] for row in rows), default=1.0)
    ax.plot([0, top], [0, top], ":", color="0.5", label="offered")
    ax.set_xlabel("offered load (requests/s, model)")
    ax.set_ylabel("throughput (requests/s, model)")
    ax.set_title("throughput against offered load", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, base.with_suffix(".png"))


def load_figures(runs: dict[str, RunResult], out: Path) -> list[Path]:
    """``latency-load`` and ``throughput-load`` of the ``<scheduler>@<load>`` runs."""
    curve = load_curve(runs.values())
    data = {s: [(p["load"], p["p50"], p["p99"]) for p in points] for s, points in curve.items()}
    knees = {s: p["load"] for s, points in curve.items() for p in points if p.get("knee")}
    return [
        latency_vs_load(data, out / "latency-load", knees=knees),
        throughput_vs_load(curve, out / "throughput-load"),
    ]


def plot_results(
    results_dir: Path,
    color_by: str = "coflow_type",
    have: dict[str, RunResult] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the standard figures (module docstring) of a results directory; return the PNGs.
    ``have``: results in memory, as :func:`load_runs`. ``progress``: told each run's name
    before its figures are drawn, and when the comparisons are."""
    results_dir = Path(results_dir)
    runs = load_runs(results_dir, have)
    out = results_dir / "figures"
    out.mkdir(exist_ok=True)
    made: list[Path | None] = []
    swept = {n: r for n, r in runs.items() if "@" in n}
    tell = progress or (lambda line: None)
    for k, (name, result) in enumerate(runs.items()):
        if name in swept:
            continue
        tell(f"figures: {name} ({k + 1} of {len(runs)} runs, {len(result.items):,} items)")
        made.append(timeline(result, out / f"timeline-{safe_name(name)}", name, color_by))
        made.append(critical_path(result, out / f"critical-{safe_name(name)}", name))
        made.append(overlap_heatmap(result, out / f"overlap-{safe_name(name)}", name))
        made.append(link_utilisation(result, out / f"links-{safe_name(name)}", name))
        made.append(job_timeline(result, out / f"timeline-jobs-{safe_name(name)}", name))
        made.append(packet_ports(result, out / f"packet-{safe_name(name)}", name))
    if swept:
        made += load_figures(swept, out)
    if runs:
        tell("figures: the comparisons (FCT and CCT CDFs, iterations)")
        made.append(fct_cdf(runs, out / "fct-cdf"))
        made.append(cct_cdf(runs, out / "cct-cdf"))
        made.append(iterations(runs, out / "iterations"))
        made += job_figures(runs, out)
        made.append(speedup({n: r for n, r in runs.items() if n not in swept}, out / "speedup"))
    if (results_dir / "crosscheck.json").exists():
        made.append(crosscheck_scatter(results_dir / "crosscheck.json", out / "crosscheck-fct"))
    return [p for p in made if p is not None]
