"""Link utilisation over time in a simulated run, from the fluid rates.

Between two network steps every flow keeps its rate, so a link's rate is
constant there: the bits it carried in the step divided by the step's
length. :class:`LinkSeries` spreads each step's bits over fixed-width time
bins exactly (by overlap), so a bin holds what the link carried in it.

The run's length is not known in advance: the bins start narrow and, when
time runs past the last of ``2 * points`` bins, neighbours merge pairwise
and the width doubles. Memory stays ``links x 2 * points`` floats whatever
the run's length, and a run ends with between ``points`` and ``2 * points``
bins.

:meth:`LinkSeries.result` gives ``RunResult.link_series``: per link that
carried traffic (the ``keep`` busiest ones, by bytes), ``(t_start, t_end,
utilisation)`` per bin, utilisation being the share of the link's rate.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _spread(t0, t1, link_bits, prev, bins, width):  # pragma: no cover - numba
    """Spread each link's bits moved in [t0, t1] (``link_bits - prev``) over the bins the step
    overlaps, in proportion to the overlap; then ``prev = link_bits``. One pass over the links."""
    first = int(t0 // width)
    last = min(bins.shape[1], int(math.ceil(t1 / width)))
    rate_of = 1.0 / (t1 - t0)
    for i in range(link_bits.shape[0]):
        moved = link_bits[i] - prev[i]
        prev[i] = link_bits[i]
        if moved > 0.0:
            for j in range(first, last):
                overlap = min((j + 1) * width, t1) - max(j * width, t0)
                if overlap > 0.0:
                    bins[i, j] += moved * rate_of * overlap


def spread_reference(t0, t1, link_bits, prev, bins, width) -> None:
    """:func:`_spread` in plain numpy (the twin the agreement test compares it with)."""
    moved = link_bits - prev
    prev[:] = link_bits
    busy = np.nonzero(moved > 0)[0]
    if busy.size == 0:
        return
    first, last = int(t0 // width), min(bins.shape[1], math.ceil(t1 / width))
    edges = np.arange(first, last + 1) * width
    overlap = np.minimum(edges[1:], t1) - np.maximum(edges[:-1], t0)
    bins[busy, first:last] += np.outer(moved[busy] / (t1 - t0), np.clip(overlap, 0.0, None))


class LinkSeries:
    def __init__(self, names: list[str], capacity: np.ndarray, points: int = 128, keep: int = 64) -> None:
        self.names = names
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self.points = points
        self.keep = keep
        self.width = 0.0  # seconds per bin; set by the first step that takes time
        self.bins = np.zeros((len(names), 2 * points))
        self.prev = np.zeros(len(names))

    def update(self, t0: float, t1: float, link_bits) -> None:
        """The network moved from ``t0`` to ``t1``; ``link_bits``: cumulative bits per link after it.
        (Bits a zero-length step moves, the rounding of flows ending together, are not spread.)"""
        now = np.asarray(link_bits, dtype=np.float64)
        if t1 <= t0:
            np.copyto(self.prev, now)
            return
        if self.width == 0.0:
            if not np.any(now > self.prev):
                return
            self.width = t1 / self.bins.shape[1]
        while t1 > self.width * self.bins.shape[1]:
            self._coarsen()
        _spread(t0, t1, now, self.prev, self.bins, self.width)

    def _coarsen(self) -> None:
        half = self.points
        merged = self.bins[:, 0::2] + self.bins[:, 1::2]
        self.bins[:, :half] = merged
        self.bins[:, half:] = 0.0
        self.width *= 2

    def result(self, makespan: float) -> dict[str, list[tuple[float, float, float]]]:
        if self.width == 0.0 or makespan <= 0:
            return {}
        total = self.bins.sum(axis=1)
        order = [i for i in np.argsort(-total, kind="stable") if total[i] > 0][: self.keep]
        nbins = min(self.bins.shape[1], math.ceil(makespan / self.width - 1e-9))
        out = {}
        for i in sorted(order):
            row = []
            for j in range(nbins):
                a, b = j * self.width, min((j + 1) * self.width, makespan)
                row.append((a, b, float(self.bins[i, j] / ((b - a) * self.capacity[i])) if b > a else 0.0))
            out[self.names[i]] = row
        return out
