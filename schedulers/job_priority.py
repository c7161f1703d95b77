"""Per-job strict priority in arrival order: issue 45's second multi-job baseline (the first is
``fifo``, every job's flows in one class, sharing fairly).

**Not registered yet**: it needs the multi-job core's ``item.job`` and
``on_job_arrived(job_name, job, view)`` / ``on_job_finished(job_name, view)`` (the same hooks as
:mod:`schedulers.cassini` and :mod:`schedulers.crux`).

The active jobs, oldest first, take the DSCP classes from the top (class selector 7 down, as
:func:`schedulers.crux_alg.dscp_of_level`); beyond ``levels`` classes the later jobs share the
lowest. When a job finishes, the remaining jobs are ranked again (an older job never falls below
a younger one). Every flow of a job carries its job's DSCP; tasks are untouched.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Item, Job
from railbed.scheduler import Decision, RunView, Scheduler
from schedulers.crux_alg import dscp_of_level


class ArrivalPriority(Scheduler):
    name = "job-priority"

    def __init__(self, levels: int = 8) -> None:
        if not 1 <= levels <= 8:
            raise SpecError("levels", f"expected 1..8 priority classes, got {levels}")
        self.levels = levels
        self.order: list[str] = []  # active jobs, oldest first
        self.dscp: dict[str, int] = {}

    def _rank(self) -> None:
        self.dscp = {j: dscp_of_level(min(r, self.levels - 1), self.levels) for r, j in enumerate(self.order)}

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> None:
        if job_name not in self.order:
            self.order.append(job_name)
        self._rank()

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        if job_name in self.order:
            self.order.remove(job_name)
        self._rank()

    def on_ready(self, item: Item, view: RunView) -> Decision:
        job = getattr(item, "job", None)
        if item.kind != "flow" or job not in self.dscp:
            return Decision()
        return Decision(dscp=self.dscp[job])
