"""A scenario's doubtful values (:mod:`railbed.doubts`), found before it runs.

:func:`scenario_doubts` gathers them for ``railbed check``, ``simulate``,
``run`` and ``crosscheck``: the cluster's, the job's, and GPUs that a
scheduler's default placement shares between endpoints (a job with more
unpinned endpoints than the cluster has GPUs: ``all_to_all {n: 3}`` on two
GPUs ran with a makespan of 0 s and no word).
"""

from __future__ import annotations

from railbed.doubts import MAX_SECONDS, Doubt, cluster_doubts, task_doubts
from railbed.errors import SpecError
from railbed.scheduler import Scheduler, crowding_note, default_placement
from schedulers import SchedulerSpec, make


def job_field(sc) -> str:
    """The field that names the scenario's job as the user wrote it: ``job.args`` or ``job.file``."""
    raw = (sc.source or {}).get("job")
    return "job.file" if isinstance(raw, dict) and "file" in raw else "job.args"


def placement_doubts(sc, specs: list[SchedulerSpec]) -> list[Doubt]:
    """Schedulers that keep the default placement (:func:`railbed.scheduler.default_placement`) and
    would share a GPU between endpoints of the job."""
    out = []
    for spec in specs if sc.job is not None else ():
        if type(make(spec)).place is not Scheduler.place:
            continue
        job = sc.job_of(spec)
        note = crowding_note(job, default_placement(job, sc.cluster), sc.cluster)
        if note:
            out.append(Doubt(job_field(sc), f"{note}; {spec.run_label} keeps the default placement"))
            break
    return out


COMPUTE_ARGS = ("fwd", "bwd", "compute")  # generator arguments that are one task's compute time


def job_doubts(sc) -> list[Doubt]:
    """A generator's ``fwd``/``bwd``/``compute`` of a second or more (named as written), else any task
    of the job that computes that long."""
    from railbed.units import parse_duration

    raw = (sc.source or {}).get("job")
    args = raw.get("args") if isinstance(raw, dict) else None
    out = []
    for key in COMPUTE_ARGS if isinstance(args, dict) else ():
        try:
            seconds = parse_duration(args[key], key) if key in args else 0.0
        except SpecError:
            continue
        if seconds >= MAX_SECONDS:
            out.append(Doubt(f"job.args.{key}", f"{seconds:g} s of compute per task (a bare number is seconds: 1ms)"))
    if out or sc.job is None:
        return out
    return task_doubts(sc.job.tasks, job_field(sc))


def scenario_doubts(sc, specs: list[SchedulerSpec] | None = None) -> list[Doubt]:
    """Every doubt of scenario ``sc`` run under ``specs`` (default: its schedulers): the cluster's
    rates and latency, the job's compute times, GPUs shared by a default placement."""
    inline = isinstance((sc.source or {}).get("cluster"), dict)
    return [
        *cluster_doubts(sc.cluster, "cluster." if inline else ""),
        *job_doubts(sc),
        *placement_doubts(sc, specs if specs is not None else sc.schedulers),
    ]
