"""Whether a claim's job fits this machine at the claims' size, and if not the largest size that does
(issue 41, item 2: "Where a size cannot run on the 24 GB machine, the row says what it needs (measured
items, GB) and shows the largest size that ran, labelled as such").

A claim's ``size_probe: {set: job.args.scale, values: [0.002, 0.004, 0.008]}`` names the override that
sets its job's size and a few smaller values that run here. At the claims' size (not ``--quick``),
before the claim's runs, :func:`probe` builds the run group's scenario only (no run) at each value, in
increasing order, each in a fresh Python process (:func:`measure_build`), and records per build the
largest job's items and dependencies and the build's memory. Memory is the child's peak resident set
growth (``VmHWM`` after the build minus ``VmRSS`` before it, the peak reset through
``/proc/self/clear_refs``), not tracemalloc: it counts what the OS must give (numpy's and numba's
buffers, allocator slack) at no slowdown, and a fresh process gives the build's own peak (the
reproduce process's high-water mark is its earlier runs') and returns the memory when it ends. The
child first builds the smallest value once, unmeasured, so that imports, compiled kernels and caches
are not counted as the job's (G3's Fig. 4.17 at scale 0.002: 174 MB without it, 41 MB with it).

:func:`decide` (pure) fits each quantity against size by a power law through the *last two* probes
(y = y2 (s / s2) ** k, k = log(y2 / y1) / log(s2 / s1); the source is silent, so this choice: two
points follow the growth of the largest sizes measured, where a constant offset such as numba's
compiled code weighs least; the sequential pipeline's dependencies grow 4x per doubling, k = 2, which
a linear fit would miss by the factor of the extrapolation). The exponent is kept >= 0 (a job does not
shrink as it grows), and memory's at most the larger of the items' and the dependencies' (a job's
memory is per item and per dependency plus a constant; a small build's growth is a few allocator
chunks, whose ratio can be any number). The estimate fits when its memory is at most the budget: half of
``MemTotal`` (/proc/meminfo), or ``RAILBED_MEMORY_BUDGET_GB``. The machine's memory, not what is free
when the probe starts: a section made beside another (two at a time on 2 cores) saw less of
``MemAvailable`` and could choose another size, so the same code gave other rows. Half, because
the probe measures the build only and the run holds the job plus the engine's state per item and
dependency on top of it (not probed), and because two points extrapolated over two decades carry an
error of the same order; the machine is also shared. If it does not fit, every point of the claim runs
at the largest probe value whose measured memory fits at all points (the smallest if none does), and
the row says so (:func:`reduced_text`) with verdict :data:`scenarios.claims.REDUCED_VERDICT`.
Probing stops before a value whose memory, extrapolated from the two before, exceeds the budget (the
probe must not exhaust the machine it measures), and after a build that fails once two succeeded.

A ``full_size`` row's job is built as arrays and compacted before its run (``workloads.generate_arrays``,
then its engine's ``prepare``: ``simulator.rules.backend``); its probe builds the arrays and prepares them
under the row's scheduler (:func:`_arrays_built`), since the compaction, not the arrays, sets the run's
memory (Hermod's Fig. 5.12 file at dp 16, 1024 GPUs, two iterations, under ``hermod``: 2.66 M items and
0.8 GB as arrays, 10.97 M items and a 4.2 GB peak compacted). Those rows (8192 GPUs, two iterations: about
80 M items, over ``MAX_ARRAY_ITEMS``) probe ``job.args.dp``. The engine is looked up by the claim's name
(``railbed.backend``), so this module imports no engine: a section's digest holds the engines its claims
name, not every engine through the probe.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.machine import meminfo

BUDGET_ENV = "RAILBED_MEMORY_BUDGET_GB"  # overrides the budget (GB of 1e9 bytes)
BUDGET_FRACTION = 0.5  # of MemTotal (the module's docstring says why)
PROBE_KEYS = ("set", "values")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SizeProbe:
    """A claims file's ``size_probe``: the dotted override setting the job's size, and smaller values."""

    set: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Build:
    """One measured build: its size, the largest job's items and dependencies, peak RSS growth (bytes)."""

    size: float
    items: int
    deps: int
    bytes: int


@dataclass(frozen=True)
class Decision:
    """What runs (``size``: the claims' ``target`` when ``fits``) and the estimate at the target."""

    target: float
    size: float
    fits: bool
    items: float
    deps: float
    bytes: float
    budget: float
    probed: tuple[float, ...]  # the probe values measured (at every point)
    size_fits: bool = True  # False: no probe value fits, the smallest runs


def parse_probe(raw: Any, where: str) -> SizeProbe:
    """``size_probe: {set: job.args.scale, values: [0.002, 0.004]}``; errors name the field."""
    if not isinstance(raw, dict):
        raise SpecError(where, "expected {set: job.args.scale, values: [0.002, 0.004, 0.008]}")
    unknown = sorted(set(raw) - set(PROBE_KEYS))
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(PROBE_KEYS)})")
    key = raw.get("set")
    if not isinstance(key, str) or "." not in key or key.startswith("scheduler_args"):
        raise SpecError(f"{where}.set", "expected the dotted override that sets the job's size (job.args.scale)")
    values = raw.get("values")
    if not isinstance(values, list) or len(values) < 2:
        raise SpecError(f"{where}.values", "expected at least two sizes that run here, smallest first")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
        raise SpecError(f"{where}.values", "expected positive numbers")
    if any(b <= a for a, b in zip(values, values[1:])):
        raise SpecError(f"{where}.values", "expected increasing sizes, smallest first")
    return SizeProbe(key, tuple(values))  # as written: an int stays one (a count of microbatches)


# ------------------------------------------------------------------ pure
def exponent(a: tuple[float, float], b: tuple[float, float]) -> float:
    """k of the power law through (s1, y1) and (s2, y2): log(y2 / y1) / log(s2 / s1), >= 0 (y <= 0 read as 1)."""
    (s1, y1), (s2, y2) = a, b
    return max(math.log(max(y2, 1.0) / max(y1, 1.0)) / math.log(s2 / s1), 0.0)


def power_law(a: tuple[float, float], b: tuple[float, float], size: float, cap: float = math.inf) -> float:
    """y at ``size`` on the power law through ``a`` and ``b`` (its exponent at most ``cap``)."""
    return max(b[1], 1.0) * (size / b[0]) ** min(exponent(a, b), cap)


def estimate(builds: list[Build], size: float) -> tuple[float, float, float]:
    """(items, deps, bytes) at ``size`` from the last two builds. Memory's exponent is at most the
    larger of the items' and the dependencies' (a job's memory is per item and per dependency, plus
    a constant): a small build's growth is a few allocator chunks, whose ratio is noise."""
    a, b = builds[-2], builds[-1]
    k = [exponent((a.size, getattr(a, q)), (b.size, getattr(b, q))) for q in ("items", "deps")]
    items, deps = (power_law((a.size, getattr(a, q)), (b.size, getattr(b, q)), size) for q in ("items", "deps"))
    return items, deps, power_law((a.size, a.bytes), (b.size, b.bytes), size, cap=max(k))


def decide(points: list[list[Build]], target: float, budget: float) -> Decision:
    """The size every point of a claim runs at: ``target`` if its estimated memory (the largest over
    the points) fits ``budget``, else the largest probe value measured at every point whose memory
    fits at all of them, else the smallest probe value. Each point's builds are in increasing size;
    memory is read as at least 1 byte (as :func:`power_law` reads it), so a budget of 0 fits nothing."""
    need = [max(q) for q in zip(*(estimate(builds, target) for builds in points))]
    if need[2] <= budget:
        return Decision(target, target, True, *need, budget, _common(points))
    ok = [v for v in _common(points) if all(max(b.bytes, 1) <= budget for bs in points for b in bs if b.size == v)]
    size = max(ok) if ok else min(b.size for builds in points for b in builds)
    return Decision(target, size, False, *need, budget, _common(points), bool(ok))


def _common(points: list[list[Build]]) -> tuple[float, ...]:
    sizes = set.intersection(*({b.size for b in builds} for builds in points))
    return tuple(sorted(sizes))


def next_fits(builds: list[Build], size: float, budget: float) -> bool:
    """Whether to build at ``size``: yes until two builds extrapolate its memory over ``budget``."""
    return len(builds) < 2 or estimate(builds, size)[2] <= budget


def reduced_text(d: Decision, key: str) -> str:
    """The row's words for a claim that cannot run here (every number from the probe)."""
    name = key.rsplit(".", 1)[-1]
    span = f"{_g(d.probed[0])}-{_g(d.probed[-1])}" if len(d.probed) > 1 else _g(d.probed[0])
    which = "the largest probed size that fits" if d.size_fits else "the smallest probed (none fits)"
    return (f"cannot run here: the claims' size ({name} {_g(d.target)}) needs about {_count(d.items)} items, "
            f"{d.deps:.2g} dependencies, ~{_gb(d.bytes)} GB to build (extrapolated from {name} {span}, "
            f"measured; budget {_gb(d.budget)} GB); ran at {name} {_g(d.size)}, {which}")  # fmt: skip


def _g(x: float) -> str:
    return f"{x:g}"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.0f}" if n >= 100e9 else f"{n / 1e9:.3g}"


def _count(n: float) -> str:
    return f"{n / 1e6:.2g} M" if n >= 1e6 else f"{n / 1e3:.3g} k" if n >= 1e3 else f"{n:.0f}"


# ------------------------------------------------------------- measuring
def budget_bytes() -> float:
    """The memory a claim's build may take: ``RAILBED_MEMORY_BUDGET_GB``, else half of MemTotal."""
    raw = os.environ.get(BUDGET_ENV)
    if raw:
        try:
            return float(raw) * 1e9
        except ValueError:
            raise SpecError(BUDGET_ENV, f"expected GB as a number, got {raw!r}") from None
    total = meminfo("MemTotal")
    if not math.isfinite(total):
        raise SpecError("size_probe", "no MemTotal in /proc/meminfo: set " + BUDGET_ENV)
    return BUDGET_FRACTION * total


def measure_build(data: dict, base: Path, size: float, warm: dict | None = None, arrays: bool | str = False,
                  scheduler: str | None = None, engine: str | None = None) -> Build:  # fmt: skip
    """Build the scenario mapping ``data`` (no run) in a fresh process, after ``warm`` (the smallest
    probe's: imports, compiled kernels and caches are then not counted); its jobs' size and peak RSS growth.
    ``arrays``: how the claim builds its job (``Claim.arrays``); a job built as arrays is also prepared
    by ``engine`` under ``scheduler`` (:func:`_arrays_built`)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    payload = json.dumps({"data": data, "base": str(base), "warm": warm, "arrays": arrays, "scheduler": scheduler,
                          "engine": engine}, default=str)  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "scenarios.sizeprobe"], input=payload, capture_output=True,
                          text=True, env=env, cwd=ROOT)  # fmt: skip
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError("size_probe", f"the build at {size:g} failed: {tail}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return Build(size, got["items"], got["deps"], got["bytes"])


def probe(key: str, values: tuple[float, ...], mapping, budget: float, echo, arrays: bool | str = False,
          scheduler: str | None = None, engine: str | None = None) -> list[Build]:  # fmt: skip
    """Builds at ``values`` (increasing) of ``mapping(value) -> (data, base)``, stopping before one
    whose extrapolated memory exceeds ``budget`` (``arrays``, ``scheduler``, ``engine``: :func:`measure_build`)."""
    builds: list[Build] = []
    for value in values:
        if not next_fits(builds, value, budget):
            echo(f"    size probe: {key} {value:g} skipped (estimated over the budget)")
            break
        try:
            builds.append(measure_build(*mapping(value), value, mapping(values[0])[0], arrays, scheduler, engine))
        except SpecError as e:  # killed (out of memory) or failed: the sizes before it are what ran
            if len(builds) < 2:
                raise
            echo(f"    size probe: {key} {value:g} failed ({e.message}): probing stops")
            break
        b = builds[-1]
        echo(f"    size probe: {key} {value:g}: {b.items:,} items, {b.deps:,} dependencies, {b.bytes / 1e9:.3g} GB")
    return builds


def sized(claim, quick: bool, mapping, cache: dict, echo) -> tuple[Any, tuple[str, str] | None]:
    """The claim as it runs: as it is (no ``size_probe``, ``--quick``, or its size fits here), or at
    the largest probe value that fits, with (the "ran" cell's words, the row's words).
    ``mapping(claim, point, quick, extra) -> (data, base)`` is the scenario a point runs; ``cache``
    keeps each point's builds by its scenario, for the claims that run the same one."""
    from dataclasses import replace

    from scenarios.sweep import get_dotted

    p = claim.size_probe
    if p is None or quick:
        return claim, None
    targets = [get_dotted(mapping(claim, point, False, None)[0], p.set) for point in claim.points()]
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in targets):
        raise SpecError("size_probe.set", f"{p.set} is not a number in the scenario of claim {claim.id}")
    budget, points = budget_bytes(), []
    for point in claim.points():
        key = json.dumps([mapping(claim, point, False, None)[0], p.set, p.values], sort_keys=True, default=str)
        if key not in cache:
            echo(f"  size probe of {claim.id}{f' {point}' if point else ''}: {p.set} {', '.join(map(_g, p.values))}")
            cache[key] = probe(p.set, p.values, lambda v, pt=point: mapping(claim, pt, False, {p.set: v}), budget, echo,
                               claim.arrays, claim.scheduler, claim.engine)  # fmt: skip
        points.append(cache[key])
    d = decide(points, max(targets), budget)
    echo(f"  size probe of {claim.id}: " + ("fits" if d.fits else reduced_text(d, p.set)))
    if d.fits:
        return claim, None
    ran = f"reduced size: {p.set} {_g(d.size)} (the claims' {_g(d.target)} does not fit here)"
    return replace(claim, set={**claim.set, p.set: d.size}), (ran, reduced_text(d, p.set))


def _status(name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _child() -> None:
    """In the fresh process: build the scenario from stdin, print its size as JSON."""
    from railbed.backend import backend
    from scenarios.runner import Scenario

    got = json.loads(sys.stdin.read())
    arrays = got.get("arrays") or False
    if got.get("warm") is not None:
        Scenario.from_dict(got["warm"], Path(got["base"]), arrays=arrays)  # a job built as arrays: not here
        if got.get("engine"):  # the engine's modules imported, not counted
            backend(got["engine"])

        gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    before = _status("VmRSS")
    sc = Scenario.from_dict(got["data"], Path(got["base"]), arrays=arrays)
    if sc.arrays is not None:
        items, deps = _arrays_built(sc, got.get("scheduler"), got.get("engine"))
    else:
        jobs = {id(j): j for j in [sc.job, *(sc.variants or {}).values()] if j is not None}.values()
        sizes = [(len(j.items), sum(len(i.deps) for i in j.items.values())) for j in jobs]
        items, deps = max(sizes, key=lambda s: s[1]) if sizes else (0, 0)
    print(json.dumps({"items": items, "deps": deps, "bytes": max(_status("VmHWM") - before, 0)}))


def _arrays_built(sc, scheduler: str | None, engine: str | None) -> tuple[int, int]:
    """A job built as arrays (``sc.arrays``: a ``full_size`` row's) as its run builds it: the arrays,
    then what ``engine`` makes of them before its run under the row's ``scheduler`` (its ``prepare``:
    the compact engine's CompactJob, Hermod's sub-flows included, beside the arrays, the run's largest
    stage), so that the memory measured is what the run needs, not the arrays' alone. Returns the
    arrays' items and dependencies."""
    from railbed.backend import backend
    from schedulers import make
    from workloads import generate_arrays

    name, args = sc.arrays
    aj = generate_arrays(name, args, "job")
    items, deps = int(aj.items), int(len(aj.deps))
    spec = next((s for s in sc.schedulers if s.run_label == scheduler), None)
    prepare = getattr(backend(engine), "prepare", None) if engine else None
    if spec is not None and prepare is not None:
        prepare(aj, make(spec), sc.cluster, sc.options())
    return items, deps


if __name__ == "__main__":
    _child()
