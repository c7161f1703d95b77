"""A copy of a scheduler as ``place`` left it, for a second run of the same placement (the
network-free bound, :func:`railbed.analysis.network_free_makespan`)."""

from __future__ import annotations

import copy

from railbed.job import Job
from railbed.scheduler import Scheduler


def placed_copy(scheduler: Scheduler, *shared) -> tuple[Scheduler | None, str | None]:
    """A deep copy of ``scheduler`` that shares ``shared`` objects (the jobs, their items, the
    cluster, the placement: read-only during a run, and millions of items at 8192 GPUs), or
    ``None`` and why it cannot be copied."""
    memo: dict[int, object] = {}
    for obj in shared:
        memo[id(obj)] = obj
        if isinstance(obj, Job):
            memo[id(obj.items)] = obj.items  # a dict the scheduler may keep; its items are frozen
            memo.update((id(it), it) for it in obj.items.values())
    try:
        return copy.deepcopy(scheduler, memo), None
    except Exception as exc:  # noqa: BLE001 - any object a scheduler holds may refuse to be copied
        return None, f"{scheduler.name} cannot be copied after place ({type(exc).__name__}: {exc})"
