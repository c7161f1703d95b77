"""Figures beside the standard ones of :mod:`railbed.plots` (called from its ``plot_results``),
each with its CSV, drawn from the rows of the CSV:

``speedup.png``         each run's makespan against the first run's (the baseline): bars from
                        1x to the run's speedup (baseline makespan / the run's), labelled with
                        the makespan; written when a directory has two runs or more
``packet-<run>.png``    a packet-level run's ports (``RunResult.packet``, ``simulator/packet``):
                        drops and queue peaks of the :data:`PORTS` ports with the most drops
                        (then the highest peaks); written when the result has them
"""

from __future__ import annotations

from pathlib import Path

from railbed.plots import Rows, new_figure, save_figure, time_unit, write_csv
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
    """The ``n`` ports of ``result.packet["ports"]`` with the most drops, then the highest queue peaks."""
    ports = (result.packet or {}).get("ports") or {}
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
    total = (result.packet or {}).get("drops", sum(row[2] for row in rows))
    title = f"ports: {name or result.scheduler}, {result.backend} ({total} drops in all; top {len(rows)} ports)"
    return draw_packet(rows, base.with_suffix(".png"), title)
