"""Values that are almost surely mistakes: warned about, one line each, before a run.

A value that passes validation can still be a slip of the pen: ``nic_rate:
400`` is 400 bit/s (a run then takes 17 hours of model time), ``fwd: 1`` is
one second of compute. Each check here returns :class:`Doubt` s (the field
the user wrote and why it is doubtful); the command line prints them on
stderr (``railbed: warning: FIELD: ...``) and ``--strict`` makes the first
an error (:func:`report`, exit 2). Nothing here refuses a value on its own:
a slow link or a long task can be meant.

The thresholds (no source states them; chosen a factor of 1000 or more away
from every cluster and job of the papers in ``seeds/``):

* a link rate below :data:`MIN_RATE` (1 Mbit/s; the papers' slowest NIC is
  DGTP's 10 Gbit/s);
* a latency or a compute time of :data:`MAX_SECONDS` (1 s) or more (the
  papers' link latencies are microseconds, their tasks milliseconds);
* a makespan over :data:`MAX_STRETCH` (a million) times its lower bound: the
  job's bytes over the cluster's summed NIC rates, its longest task, and the
  network-free makespan where the run has its analysis.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from railbed.errors import SpecError

MIN_RATE = 1e6  # bit/s
MAX_SECONDS = 1.0
MAX_STRETCH = 1e6


@dataclass(frozen=True)
class Doubt:
    """A value that is almost surely a mistake: the ``field`` the user wrote and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def report(doubts: Iterable[Doubt], strict: bool = False, say: Callable[[str], None] | None = None) -> None:
    """Print each doubt as one warning line (stderr by default); ``strict``: raise the first as a
    :class:`SpecError` instead (after printing the others)."""
    doubts = list(doubts)
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    for d in doubts[1:] if strict else doubts:
        say(f"railbed: warning: {d}")
    if strict and doubts:
        raise SpecError(doubts[0].field, f"{doubts[0].message} (an error under --strict)")
