"""A scenario's ``jobs:`` (issue 45): several jobs on one cluster, each with its arrival,
placement and optionally its own scheduler (docs/multi-job.md)::

    jobs:
      - {name: a, generator: hybrid_parallel, args: {dp: 4}, iterations: 2, placement: rail}
      - {name: b, file: job-b.json, arrival: 5ms, placement: {random: 7}, scheduler: delay}

``name`` prefixes the job's ids (``a.<id>``); ``generator``/``args`` or ``file`` make the job
(``iterations`` is passed to a generator that takes it); ``arrival`` is the job's release
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
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job
from railbed.jobmetrics import job_results
from railbed.jobs import JobEntry, PerJob, alone, check_name, merge, parse_placement
from railbed.results import RunResult
from railbed.safeload import describe, key_name
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import parse_duration
from schedulers import SchedulerSpec, make, scheduler_spec
from workloads import GENERATORS, generate

ENTRY_KEYS = {"name", "generator", "args", "file", "arrival", "iterations", "placement", "scheduler"}
MAX_JOBS = 256


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
    return MultiJob(entries, own, merge(entries, cluster), cluster)


def _entry_job(raw: dict, base: Path, where: str) -> Job:
    if ("file" in raw) == ("generator" in raw):
        raise SpecError(where, "give either generator (with args) or file")
    if "file" in raw:
        if "args" in raw or "iterations" in raw:
            raise SpecError(f"{where}.{'args' if 'args' in raw else 'iterations'}", "a job file takes no arguments")
        path = raw["file"]
        if not isinstance(path, str) or not path or not path.isprintable():
            raise SpecError(f"{where}.file", f"expected a file path, got {describe(path)}")
        try:
            return Job.load(base / path)
        except SpecError as exc:
            raise SpecError(f"{where}.{exc.field}" if exc.field != "job" else f"{where}.file", exc.message) from None
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        raise SpecError(f"{where}.args", f"expected a mapping of argument to value, got {describe(args)}")
    if "iterations" in raw:
        gen = GENERATORS.get(raw["generator"]) if isinstance(raw["generator"], str) else None
        if gen is not None and "iterations" not in inspect.signature(gen).parameters:
            raise SpecError(f"{where}.iterations", f"generator {raw['generator']} takes no iterations")
        args = {**args, "iterations": raw["iterations"]}
    return generate(raw["generator"], args, where)
