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
from railbed.units import format_rate

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


def cluster_doubts(spec, prefix: str = "") -> list[Doubt]:
    """A NIC or uplink rate below :data:`MIN_RATE` (``nic_rate: 400`` is 400 bit/s), a link
    latency of :data:`MAX_SECONDS` or more. ``prefix``: where the cluster sits in the user's file
    (``cluster.`` for a scenario's inline cluster)."""
    out, seen = [], set()
    for s in spec.servers:
        slow = [r for r in s.nic_rates if r < MIN_RATE]
        if slow and s.group not in seen:
            seen.add(s.group)
            out.append(Doubt(f"{prefix}servers[{s.group}].nic_rate", _slow(slow[0])))
    f = spec.fabric
    if f.uplink_rate is not None and f.uplink_rate < MIN_RATE and f.kind != "single_switch":
        out.append(Doubt(f"{prefix}fabric.uplink_rate", _slow(f.uplink_rate)))
    if f.latency >= MAX_SECONDS:
        out.append(Doubt(f"{prefix}fabric.latency", f"{f.latency:g} s per link (a bare number is seconds: 2us)"))
    return out


def _slow(rate: float) -> str:
    return f"{format_rate(rate)}, below 1 Mbit/s (a bare number is bit/s: write 400Gbit)"


def task_doubts(tasks, where: str) -> list[Doubt]:
    """The longest task of a job if it computes :data:`MAX_SECONDS` or more (``fwd: 1`` is a second)."""
    longest = max(tasks, key=lambda t: t.duration or 0.0, default=None)
    if longest is None or (longest.duration or 0.0) < MAX_SECONDS:
        return []
    n = sum(1 for t in tasks if (t.duration or 0.0) >= MAX_SECONDS)
    return [Doubt(where, f"{n} tasks compute 1 s or more (task {longest.id}: {longest.duration:g} s)")]


def result_doubts(result, cluster, where: str) -> list[Doubt]:
    """A makespan over :data:`MAX_STRETCH` times its lower bound: the flows' bytes between servers
    over the cluster's summed NIC rates, the longest task, the network-free makespan of the run's
    analysis (whichever is largest; nothing to say when all are 0)."""
    from railbed.metrics import remote_bytes

    rates = sum(sum(s.nic_rates) for s in cluster.servers)
    bound = max(
        8 * remote_bytes(result) / rates if rates else 0.0,
        max((r.duration or 0.0 for r in result.items.values() if r.kind == "task"), default=0.0),
        float((result.analysis or {}).get("network_free_makespan") or 0.0),
    )
    if bound <= 0 or result.makespan <= MAX_STRETCH * bound:
        return []
    why = f"{result.makespan:.4g} s, {result.makespan / bound:.3g} times the job's bytes over the cluster's rates"
    return [Doubt(where, f"{why} (and its longest task): a rate, a latency or a size off by a unit?")]
