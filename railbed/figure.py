"""What every figure module shares (:mod:`railbed.plots`, :mod:`railbed.compare_plots`, the
sensitivity figures): a table's rows and their CSV, a time unit that reads well, an Agg figure
(matplotlib's object API: no pyplot state, no display) and its PNG."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

Rows = list[list]
DPI = 100


def time_unit(seconds: float) -> tuple[str, float]:
    """(unit, factor) so that ``seconds * factor`` reads well in that unit."""
    for unit, factor in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if seconds >= 1.0 / factor:
            return unit, factor
    return "ns", 1e9


def write_csv(path: Path, header: Sequence[str], rows: Rows) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def new_figure(width: float = 8.0, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def save_figure(fig, png: Path) -> Path:
    fig.tight_layout()
    fig.savefig(png, format="png")
    return png
