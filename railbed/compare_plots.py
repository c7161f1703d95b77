"""Figures beside the standard ones of :mod:`railbed.plots` (called from its ``plot_results``),
each with its CSV, drawn from the rows of the CSV:

``speedup.png``         each run's makespan against the first run's (the baseline): bars from
                        1x to the run's speedup (baseline makespan / the run's), labelled with
                        the makespan; written when a directory has two runs or more
``sweep-<metric>.png``  a sweep's first metric against its first axis with several values, one
                        line per run and per value of the other varying axes (``railbed sweep``
                        writes it beside ``sweep.csv``)
``packet-<run>.png``    a packet-level run's ports (its ``RunResult.own["ports"]``, ``simulator/packet``):
                        drops and queue peaks of the :data:`PORTS` ports with the most drops
                        (then the highest peaks); written when the result has them
"""

from __future__ import annotations

from pathlib import Path

from railbed.figure import Rows, new_figure, save_figure, time_unit, write_csv
from railbed.results import RunResult

PORTS = 12


def speedup_rows(runs: dict[str, RunResult]) -> Rows:
    """``[run, makespan s, speedup against the first run]`` (speedup: first makespan / the run's)."""
    names = list(runs)
    base = runs[names[0]].makespan if names else 0.0
    return [[n, r.makespan, base / r.makespan if r.makespan > 0 else float("nan")] for n, r in runs.items()]


def draw_speedup(rows: Rows, png: Path) -> Path:
    fig, ax = new_figure(7.0, 1.2 + 0.45 * max(2, len(rows)))
    unit, factor = time_unit(max((row[1] for row in rows), default=1.0))
    for y, (_run, makespan, speedup) in enumerate(rows):
        color = "0.5" if y == 0 else ("C2" if speedup >= 1 else "C3")
        ax.barh(y, speedup - 1, left=1.0, color=color, height=0.6)
        ax.text(max(1.0, speedup), y, f"  {speedup:.3f}x ({makespan * factor:.4g} {unit})", va="center", fontsize=8)
    spread = max((abs(row[2] - 1) for row in rows if row[2] == row[2]), default=0.0)
    pad = max(spread * 2.2, 0.01)  # room for the labels
    ax.set_xlim(1 - pad, 1 + pad)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), [row[0] for row in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(f"speedup against {rows[0][0]} (its makespan / the run's)")
    ax.set_title("makespan against the baseline", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, png)


def speedup(runs: dict[str, RunResult], base: Path) -> Path | None:
    if len(runs) < 2:
        return None
    rows = speedup_rows(runs)
    write_csv(base.with_suffix(".csv"), ["run", "makespan_s", "speedup"], rows)
    return draw_speedup(rows, base.with_suffix(".png"))


PACKET_HEADER = ["port", "packets", "drops", "marks", "queue_peak_packets", "queue_peak_bytes"]


def packet_rows(result: RunResult, n: int = PORTS) -> Rows:
    """The ``n`` ports of its backend's counters' ``ports`` (``RunResult.own``: the packet backend's) with
    the most drops, then the highest queue peaks."""
    ports = result.own.get("ports") or {}
    order = sorted(ports, key=lambda p: (-ports[p].get("drops", 0), -ports[p].get("queue_peak_bytes", 0), p))
    return [[p, *(ports[p].get(k, 0) for k in PACKET_HEADER[1:])] for p in order[:n]]


def draw_packet(rows: Rows, png: Path, title: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 1.5 + 0.3 * max(2, len(rows))), dpi=100)
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, sharey=True)
    ys = range(len(rows))
    left.barh(ys, [row[2] for row in rows], color="C3")
    left.set_xlabel("packets dropped")
    right.barh(ys, [row[5] / 1e3 for row in rows], color="C0")
    right.set_xlabel("queue peak (kB)")
    left.set_yticks(list(ys), [row[0] for row in rows], fontsize=7)
    left.set_ylim(len(rows) - 0.5, -0.5)
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, png)


def packet_ports(result: RunResult, base: Path, name: str = "") -> Path | None:
    rows = packet_rows(result)
    if not rows:
        return None
    write_csv(base.with_suffix(".csv"), PACKET_HEADER, rows)
    total = result.own.get("drops", sum(row[2] for row in rows))
    title = f"ports: {name or result.scheduler}, {result.backend} ({total} drops in all; top {len(rows)} ports)"
    return draw_packet(rows, base.with_suffix(".png"), title)


SWEEP_LINES = 12


def sweep_rows(table: list[dict], axes: list[str], metric: str) -> Rows:
    """From a sweep's table (``scenarios.sweep.table_rows``: a dict per point and run): ``[series, x
    label, x position, value]`` of the points that ran, x the first axis with several values (in
    the order the sweep lists them), a series per run and per value of the other varying axes."""
    ok = [r for r in table if r.get("status") == "ok" and r.get(metric) is not None]
    varying = [a for a in axes if len({str(r.get(a)) for r in ok}) > 1]
    if not varying:
        return []
    x, rest = varying[0], varying[1:]
    order = list(dict.fromkeys(str(r.get(x)) for r in table))
    rows = []
    for r in ok:
        series = ", ".join([str(r.get("run"))] + [f"{a.split('.')[-1]}={r.get(a)}" for a in rest])
        rows.append([series, str(r.get(x)), order.index(str(r.get(x))), float(r[metric])])
    return sorted(rows, key=lambda row: (row[0], row[2]))


def draw_sweep(rows: Rows, png: Path, axis: str, metric: str) -> Path:
    fig, ax = new_figure()
    timed = metric not in ("flows", "bytes", "remote_bytes", "fidelity_ok") and not metric.endswith("throughput")
    unit, factor = time_unit(max((row[3] for row in rows), default=1.0)) if timed else ("", 1.0)
    series = list(dict.fromkeys(row[0] for row in rows))
    for i, name in enumerate(series[:SWEEP_LINES]):
        mine = [row for row in rows if row[0] == name]
        ax.plot([row[2] for row in mine], [row[3] * factor for row in mine], "o-", color=f"C{i % 10}", label=name)
    ticks = sorted({(row[2], row[1]) for row in rows})
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=8)
    ax.set_xlabel(axis)
    ax.set_ylabel(f"{metric} ({unit}, model)" if timed else metric)
    more = f" (first {SWEEP_LINES} of {len(series)} lines)" if len(series) > SWEEP_LINES else ""
    ax.set_title(f"{metric} against {axis}{more}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, png)


def sweep_figure(table: list[dict], axes: list[str], metric: str, base: Path) -> Path | None:
    """``sweep-<metric>.png`` and its CSV, or None when no axis varies among the points that ran."""
    rows = sweep_rows(table, axes, metric)
    if not rows:
        return None
    axis = next(a for a in axes if len({str(r.get(a)) for r in table if r.get("status") == "ok"}) > 1)
    write_csv(base.with_suffix(".csv"), ["series", axis, "position", metric], rows)
    return draw_sweep(rows, base.with_suffix(".png"), axis, metric)
