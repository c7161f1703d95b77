"""A scenario's doubtful values (:mod:`railbed.doubts`), found before it runs.

:func:`scenario_doubts` gathers them for ``railbed check``, ``simulate``,
``run`` and ``crosscheck``: the cluster's, the job's, and GPUs that a
scheduler's default placement shares between endpoints (a job with more
unpinned endpoints than the cluster has GPUs: ``all_to_all {n: 3}`` on two
GPUs ran with a makespan of 0 s and no word).
"""

from __future__ import annotations

from railbed.doubts import Doubt
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


def scenario_doubts(sc, specs: list[SchedulerSpec] | None = None) -> list[Doubt]:
    """Every doubt of scenario ``sc`` run under ``specs`` (default: its schedulers)."""
    return placement_doubts(sc, specs if specs is not None else sc.schedulers)
