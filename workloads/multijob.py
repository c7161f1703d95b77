"""A seeded generator of multi-job cluster workloads (issue 45, item 5): the ``jobs:`` list of a
scenario, for comparing multi-job schedulers (CASSINI, Crux, the baselines) on dozens of jobs.

**Synthetic.** The job sizes and the model mix below are a stated table, not a public trace: the
public traces (Microsoft Philly, SenseTime Helios, Alibaba PAI/Lingjun) were not read for their
size distributions here, so no number of theirs is claimed. A user who wants a trace's mix gives
``sizes`` and ``models`` from it.

:func:`multijob` returns one entry per job in the format the scenario loader reads::

    {name, generator, args, arrival, iterations, placement}

``generator`` and ``args`` go to :func:`workloads.generate` (with ``iterations`` added as the
generator's own ``iterations`` argument: both generators used take one); ``arrival`` is in
seconds of model time; ``placement`` is ``"packed"``, ``"spread"``, ``"rail"``, or for
``"random"`` the mapping ``{"policy": "random", "seed": N}`` (one seed per job, drawn here).

The draws, in order, from one ``numpy.random.default_rng(seed)``: the inter-arrival gaps
(exponential with mean ``1 / rate``: a Poisson process starting at ``start``, the first job
arriving one gap after it), then per job its size (``sizes``: GPU count -> weight), its model
(``models``: name -> weight, among the models whose GPU count divides the size, renormalised),
its iterations (uniform over ``iterations`` when a ``[low, high]`` pair) and, for random
placement, its seed.

Models (:data:`MODELS`), each one of railbed's generators with fixed arguments and its
data-parallel degree set from the size (``dp = gpus / gpus_per_replica``):

* ``dense-dp``: :func:`workloads.llm.hybrid_parallel`, data parallel only, a 256 MB gradient
  ring-all-reduced per iteration after 20 ms forward and 40 ms backward compute.
* ``dense-pp``: ``hybrid_parallel`` with 2 pipeline stages, 4 microbatches of 16 MB activations,
  a 128 MB gradient (5 ms / 10 ms per microbatch).
* ``moe``: :func:`workloads.moe.moe_training` at its defaults (a small MoE: 2 pipeline stages,
  expert parallel 2), ``dp = gpus / 2``.

These are shapes for contention studies (jobs alternating compute and communication, as
CASSINI's and Crux's models assume), not calibrated models of any named network.

**A trace the user gives** (:func:`from_trace`): a CSV file with a header, one job a row; the
columns holding the arrival time (seconds, any origin: the first arrival becomes ``start``) and
the GPU count are named by the caller, so an export of a public trace (Philly, Helios, PAI) can
be read once its columns are known; nothing is downloaded. Rows are sorted by arrival; each
job's model is drawn from ``models`` as above (a trace does not say which of railbed's
generators a job resembles).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from railbed.errors import SpecError
from railbed.safeload import describe, read_text


@dataclass(frozen=True)
class Model:
    """A job shape: ``generator`` with ``args``, its ``dp`` argument set to size / ``per_replica``."""

    generator: str
    per_replica: int
    args: Mapping[str, Any] = field(default_factory=dict)


MODELS: dict[str, Model] = {
    "dense-dp": Model("hybrid_parallel", 1, {"pp": 1, "fwd": "20ms", "bwd": "40ms", "gradient": "256MB"}),
    "dense-pp": Model(
        "hybrid_parallel",
        2,
        {"pp": 2, "microbatches": 4, "fwd": "5ms", "bwd": "10ms", "activation": "16MB", "gradient": "128MB"},
    ),
    "moe": Model("moe_training", 2, {}),
}
SIZES: dict[int, float] = {8: 0.5, 16: 0.3, 32: 0.2}  # GPUs -> weight (synthetic, see the docstring)
MIX: dict[str, float] = {"dense-dp": 0.4, "dense-pp": 0.4, "moe": 0.2}
PLACEMENTS = ("packed", "spread", "rail", "random")
MAX_JOBS = 100_000
MAX_TRACE_BYTES = 64 << 20  # a trace CSV (Philly's job log is ~100k jobs)


def multijob(
    jobs: int = 12,
    rate: float = 0.5,
    seed: int = 0,
    sizes: Mapping[int, float] | None = None,
    models: Mapping[str, float] | None = None,
    iterations: int | Sequence[int] = 10,
    placement: str = "packed",
    gpus_per_server: int = 8,
    max_gpus: int | None = None,
    start: float = 0.0,
) -> list[dict[str, Any]]:
    """``jobs`` entries (module docstring): Poisson arrivals at ``rate`` jobs per second from
    ``start``; sizes from ``sizes`` (default :data:`SIZES`), models from ``models`` (default
    :data:`MIX`); ``max_gpus``, when given, refuses sizes above it. Errors name the argument."""
    sizes = _weights(SIZES if sizes is None else sizes, "sizes", _size_key)
    mix = _weights(MIX if models is None else models, "models", _model_key)
    lo, hi = _iterations(iterations)
    _check(jobs, rate, placement, gpus_per_server, max_gpus, start, sizes)
    rng = np.random.default_rng(seed)
    arrivals = start + np.cumsum(rng.exponential(1.0 / rate, size=jobs))
    size_keys = list(sizes)
    size_p = np.array([sizes[s] for s in size_keys]) / sum(sizes.values())
    out = []
    for i, arrival in enumerate(arrivals):
        gpus = int(size_keys[rng.choice(len(size_keys), p=size_p)])
        out.append(_entry(i, float(arrival), gpus, rng, mix, (lo, hi), placement, gpus_per_server))
    return out


def _entry(i, arrival, gpus, rng, mix, its, placement, gpus_per_server) -> dict[str, Any]:
    """Job ``i``'s entry: its model, then its iterations, then (random placement) its seed, drawn."""
    name = _draw_model(rng, mix, gpus)
    model = MODELS[name]
    args = dict(model.args, dp=gpus // model.per_replica, gpus_per_server=gpus_per_server)
    count = int(rng.integers(its[0], its[1] + 1))
    where: str | dict[str, Any] = placement
    if placement == "random":
        where = {"policy": "random", "seed": int(rng.integers(2**31))}
    return {
        "name": f"job{i:03d}-{name}-{gpus}g",
        "generator": model.generator,
        "args": args,
        "arrival": arrival,
        "iterations": count,
        "placement": where,
    }


def from_trace(
    path: str,
    arrival: str = "arrival",
    gpus: str = "gpus",
    seed: int = 0,
    models: Mapping[str, float] | None = None,
    iterations: int | Sequence[int] = 10,
    placement: str = "packed",
    gpus_per_server: int = 8,
    start: float = 0.0,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Entries like :func:`multijob`'s from a CSV trace (module docstring): the ``arrival`` and
    ``gpus`` columns, at most ``limit`` rows (the earliest). A bad row names its line and column."""
    text = read_text(path, MAX_TRACE_BYTES, "trace")
    reader = csv.DictReader(io.StringIO(text))
    for column in (arrival, gpus):
        if column not in (reader.fieldnames or []):
            raise SpecError("trace", f"no column {column!r} (columns: {', '.join(reader.fieldnames or [])})")
    rows = []
    for line, row in enumerate(reader, start=2):
        rows.append(
            (_number(row[arrival], f"trace line {line}.{arrival}"), _count(row[gpus], f"trace line {line}.{gpus}"))
        )
    rows.sort()
    rows = rows[:limit] if limit is not None else rows
    if not rows:
        raise SpecError("trace", "no jobs")
    mix = _weights(MIX if models is None else models, "models", _model_key)
    lo, hi = _iterations(iterations)
    _check(len(rows), 1.0, placement, gpus_per_server, None, start, {})
    rng = np.random.default_rng(seed)
    origin = rows[0][0]
    return [
        _entry(i, t - origin + start, n, rng, mix, (lo, hi), placement, gpus_per_server)
        for i, (t, n) in enumerate(rows)
    ]


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise SpecError(where, f"expected seconds, got {describe(text)}") from None
    if not math.isfinite(value):
        raise SpecError(where, f"expected a finite number, got {describe(text)}")
    return value


def _count(text: str, where: str) -> int:
    value = _number(text, where)
    if value != int(value) or value < 1:
        raise SpecError(where, f"expected a GPU count >= 1, got {describe(text)}")
    return int(value)


def gpus_of(entry: Mapping[str, Any]) -> int:
    """The GPU count of an entry :func:`multijob` made (dp times the model's GPUs per replica)."""
    name = entry["name"].split("-", 1)[1].rsplit("-", 1)[0]
    return int(entry["args"]["dp"]) * MODELS[name].per_replica


def _draw_model(rng: np.random.Generator, mix: Mapping[str, float], gpus: int) -> str:
    fits = [m for m in mix if gpus % MODELS[m].per_replica == 0 and mix[m] > 0]
    if not fits:
        raise SpecError(f"sizes.{gpus}", f"no model in models fits {gpus} GPUs")
    p = np.array([mix[m] for m in fits])
    return fits[int(rng.choice(len(fits), p=p / p.sum()))]


def _weights(table: Any, where: str, key) -> dict:
    if not isinstance(table, Mapping) or not table:
        raise SpecError(where, f"expected a non-empty mapping to weights, got {describe(table)}")
    out = {}
    for k, w in table.items():
        k = key(k, where)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise SpecError(f"{where}.{k}", f"expected a weight >= 0, got {describe(w)}")
        out[k] = float(w)
    if sum(out.values()) <= 0:
        raise SpecError(where, "the weights sum to 0")
    return out


def _size_key(k: Any, where: str) -> int:
    if isinstance(k, str) and k.isdigit():
        k = int(k)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SpecError(f"{where}.{k}", "expected a GPU count >= 1")
    return k


def _model_key(k: Any, where: str) -> str:
    if k not in MODELS:
        raise SpecError(f"{where}.{k}", f"unknown model (known: {', '.join(MODELS)})")
    return k


def _iterations(value: Any) -> tuple[int, int]:
    pair = [value, value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(pair, Sequence)
        or isinstance(pair, str)
        or len(pair) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair)
        or pair[0] > pair[1]
    ):
        raise SpecError("iterations", f"expected a count >= 1 or [low, high], got {describe(value)}")
    return int(pair[0]), int(pair[1])


def _check(jobs, rate, placement, gpus_per_server, max_gpus, start, sizes) -> None:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise SpecError("jobs", f"expected a whole number in 1..{MAX_JOBS}, got {describe(jobs)}")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (math.isfinite(rate) and rate > 0):
        raise SpecError("rate", f"expected jobs per second > 0, got {describe(rate)}")
    if placement not in PLACEMENTS:
        raise SpecError("placement", f"expected one of {', '.join(PLACEMENTS)}, got {describe(placement)}")
    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise SpecError("gpus_per_server", f"expected a whole number >= 1, got {describe(gpus_per_server)}")
    if isinstance(start, bool) or not isinstance(start, (int, float)) or not (math.isfinite(start) and start >= 0):
        raise SpecError("start", f"expected seconds >= 0, got {describe(start)}")
    if max_gpus is not None:
        if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
            raise SpecError("max_gpus", f"expected a whole number >= 1, got {describe(max_gpus)}")
        for s, w in sizes.items():
            if s > max_gpus and w > 0:
                raise SpecError(f"sizes.{s}", f"{s} GPUs do not fit the cluster's {max_gpus}")
