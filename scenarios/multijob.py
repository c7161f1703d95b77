"""A scenario's ``jobs:`` (issue 45): several jobs on one cluster, each with its arrival,
placement and optionally its own scheduler (docs/multi-job.md)::

    jobs:
      - {name: a, generator: hybrid_parallel, args: {dp: 4}, iterations: 2, placement: rail}
      - {name: b, file: job-b.json, arrival: 5ms, placement: {random: 7}, scheduler: delay}

``name`` prefixes the job's ids (``a.<id>``); ``generator``/``args`` or ``file`` make the job
(``iterations`` is passed to a generator that takes it; ``duration`` instead asks for the
iterations the job completes alone in that time, :func:`iterations_within`); ``arrival`` is the job's release
(default 0); ``placement`` one of :data:`railbed.jobs.POLICIES` (default ``packed``);
``scheduler`` a name or ``{name, args, label}``: the job's own (the scenario's ``schedulers``
then serve the other jobs), via :class:`railbed.jobs.PerJob`. ``job:`` is a list of one job.

After each run, :meth:`MultiJob.add_results` runs every job alone on the same placement (once
per job and scheduler: cached for the scenario's runs) and fills ``result.jobs``
(:func:`railbed.jobmetrics.job_results`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job
from railbed.jobmetrics import job_results
from railbed.jobs import JobEntry, PerJob, alone, check_name, merge, parse_placement, place_jobs
from railbed.results import RunResult
from railbed.safeload import describe, key_name
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import parse_duration
from schedulers import SchedulerSpec, make, scheduler_spec
from schedulers.multijob_profile import alone_run
from workloads import GENERATORS, generate

ENTRY_KEYS = {"name", "generator", "args", "file", "arrival", "iterations", "duration", "placement", "scheduler"}
MAX_JOBS = 256
MAX_ITERATIONS = 100_000  # a duration asking for more is refused (each candidate count is a fluid run)


@dataclass
class MultiJob:
    """The jobs of a scenario: their entries, own schedulers, the merged job, the alone runs."""

    entries: list[JobEntry]
    own: dict[str, SchedulerSpec]
    job: Job
    cluster: ClusterSpec
    alone_runs: dict[tuple[str, str, str], RunResult] = field(default_factory=dict)

    def scheduler(self, spec: SchedulerSpec):
        """The run's scheduler: ``spec``'s, with the jobs' own routed by :class:`PerJob`."""
        default = make(spec)
        if not self.own:
            return default
        return PerJob(default, {name: make(s, f"{self._where(name)}.scheduler") for name, s in self.own.items()})

    def _where(self, name: str) -> str:
        return next(e.where for e in self.entries if e.name == name)

    def alone(self, session, name: str, spec: SchedulerSpec, options) -> RunResult:
        """Job ``name`` alone on its placement under the scheduler that serves it in ``spec``'s run
        (its own, else ``spec``'s): run once per (backend, job, scheduler) and kept."""
        serving = self.own.get(name, spec)
        be = getattr(getattr(session, "backend", None), "name", None) or type(session).__name__
        key = (be, name, serving.run_label)
        if key not in self.alone_runs:
            sched = make(serving, f"{self._where(name)}.scheduler" if name in self.own else "scheduler")
            run_dir = options.run_dir / f"alone-{name}" if options.run_dir is not None else None
            self.alone_runs[key] = session.run(alone(self.job, name), sched, replace(options, run_dir=run_dir))
        return self.alone_runs[key]

    def add_results(self, result: RunResult, session, spec: SchedulerSpec, options) -> None:
        """Fill ``result.jobs``: per job and for the cluster (:func:`railbed.jobmetrics.job_results`)."""
        solo = {e.name: self.alone(session, e.name, spec, options) for e in self.entries}
        result.jobs = job_results(result, self.job, solo, Topology(self.cluster), self.cluster)


def parse_jobs(value: Any, base: Path, cluster: ClusterSpec) -> MultiJob:
    """``jobs:`` of a scenario (module docstring); errors name ``jobs[i].<field>``."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_JOBS:
        raise SpecError("jobs", f"expected a list of 1..{MAX_JOBS} jobs, got {describe(value)}")
    entries, own = [], {}
    for i, raw in enumerate(value):
        where = f"jobs[{i}]"
        if not isinstance(raw, dict):
            raise SpecError(where, f"expected a mapping, got {describe(raw)}")
        for key in raw:
            if key not in ENTRY_KEYS:
                raise SpecError(f"{where}.{key_name(key)}", f"unknown key (known: {', '.join(sorted(ENTRY_KEYS))})")
        name = check_name(raw.get("name", f"job{i}"), f"{where}.name")
        job = _entry_job(raw, base, where)
        arrival = parse_duration(raw.get("arrival", 0), f"{where}.arrival")
        placement = parse_placement(raw.get("placement", "packed"), f"{where}.placement")
        if "scheduler" in raw:
            own[name] = scheduler_spec(raw["scheduler"], f"{where}.scheduler")
            make(own[name], f"{where}.scheduler")  # checked now, made per run
        entries.append(JobEntry(name, job, arrival, placement, where))
    timed = {i: raw for i, raw in enumerate(value) if "duration" in raw}
    if timed:
        locs = place_jobs(entries, cluster)  # a job's endpoints do not depend on its iterations
        for i, raw in timed.items():
            e, seconds = entries[i], parse_duration(raw["duration"], f"{entries[i].where}.duration")
            make_job = partial(_generated, raw, where=e.where)  # iterations -> Job
            n = iterations_within(make_job, e, locs[i], seconds, cluster)
            entries[i] = replace(e, job=make_job(n))
    return MultiJob(entries, own, merge(entries, cluster), cluster)


def iterations_within(make_job, entry: JobEntry, locs, duration: float, cluster: ClusterSpec) -> int:
    """The iterations a job given ``duration:`` runs: the largest ``n`` whose makespan alone on its
    placement (``locs``, where the policy put it among the scenario's jobs) is at most ``duration``.

    The rule is ours (issue 45 item 1 says only "a number of iterations or a duration"). A
    duration becomes an iteration count *before* the run, so the scenario's job is the same on
    every backend and under every scheduler, and no backend needs a way to stop a job at a time:
    the makespan is the job's alone run under ``fifo`` on the ``fluid`` backend
    (:func:`schedulers.multijob_profile.alone_run`, cached per job and cluster: the profile
    CASSINI and Crux read of the same job). Not "iterations finished by ``duration`` in the
    shared run": that depends on the backend and the scheduler, and a job cannot stop
    mid-iteration. Search: ``m(1)``, ``m(2)``, the periodic estimate
    ``n = 2 + floor((duration - m(2)) / (m(2) - m(1)))``, then one iteration down while
    ``m(n) > duration`` and up while ``m(n + 1) <= duration`` (a makespan never shrinks as
    iterations are added); a relative 1e-9 absorbs rounding. Refused (``SpecError`` naming
    ``jobs[i].duration``) when one iteration alone is longer, or the count would pass
    :data:`MAX_ITERATIONS`."""
    where, memo = f"{entry.where}.duration", {}

    def makespan(n: int) -> float:
        if n not in memo:
            pinned = merge([JobEntry(entry.name, make_job(n), 0.0, ("explicit", dict(locs)), entry.where)], cluster)
            memo[n] = alone_run(pinned, entry.name, cluster)[1].makespan
        return memo[n]

    def fits(n: int) -> bool:
        return makespan(n) <= duration * (1 + 1e-9)

    if not fits(1):
        raise SpecError(where, f"job {entry.name} takes {makespan(1):.6g} s for one iteration alone on its "
                        f"placement, longer than its duration {duration:.6g} s")  # fmt: skip
    if not fits(2):
        return 1
    period = makespan(2) - makespan(1)
    n = MAX_ITERATIONS + 1 if period <= 0 else 2 + int((duration * (1 + 1e-9) - makespan(2)) // period)
    if n > MAX_ITERATIONS:
        raise SpecError(where, f"job {entry.name} would run over {MAX_ITERATIONS} iterations in {duration:.6g} s")
    while n > 1 and not fits(n):
        n -= 1
    while n < MAX_ITERATIONS and fits(n + 1):
        n += 1
    return n


def _entry_job(raw: dict, base: Path, where: str) -> Job:
    if ("file" in raw) == ("generator" in raw):
        raise SpecError(where, "give either generator (with args) or file")
    if "file" in raw:
        for key in ("args", "iterations", "duration"):
            if key in raw:
                raise SpecError(f"{where}.{key}", "a job file takes no arguments")
        path = raw["file"]
        if not isinstance(path, str) or not path or not path.isprintable():
            raise SpecError(f"{where}.file", f"expected a file path, got {describe(path)}")
        try:
            return Job.load(base / path)
        except SpecError as exc:
            raise SpecError(f"{where}.{exc.field}" if exc.field != "job" else f"{where}.file", exc.message) from None
    if "duration" in raw and "iterations" in raw:
        raise SpecError(f"{where}.duration", "give iterations or duration, not both")
    return _generated(raw, 1 if "duration" in raw else raw.get("iterations"), where)


def _generated(raw: dict, iterations: Any, where: str) -> Job:
    """The entry's generator with its args (and ``iterations`` when not None)."""
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        raise SpecError(f"{where}.args", f"expected a mapping of argument to value, got {describe(args)}")
    if iterations is not None:
        field = "duration" if "duration" in raw else "iterations"
        gen = GENERATORS.find(raw["generator"])
        if gen is not None and "iterations" not in inspect.signature(gen).parameters:
            raise SpecError(f"{where}.{field}", f"generator {raw['generator']} takes no iterations")
        args = {**args, "iterations": iterations}
    return generate(raw["generator"], args, where)
