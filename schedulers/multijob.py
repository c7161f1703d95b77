"""Multi-job baselines and building blocks (issue 45): per-job strict priority in arrival order,
and a fixed time shift of a job's start.

``job-priority``
    The issue's baseline "per-job strict priority in arrival order": the jobs of a run
    (:mod:`railbed.jobs`), ordered by arrival (ties: their order in the scenario), take the
    class levels from the top, level *r* the class selector ``(7 - r) << 3``
    (:func:`schedulers.crux_alg.dscp_of_level`, the ``dscp-priority`` policy's classes); beyond
    ``levels`` classes (default 8) the later jobs share the lowest. Tasks start at once; no caps.
    The ranks are fixed once, from every job's arrival, when the run is placed: its decisions
    are then a pure function of the flow (``rule``), so the compact engine runs it too. A
    variant that ranks the jobs again when one finishes (the survivors move up) cannot be a
    ``rule`` (a rule sees no time): it is not provided; with ``levels`` >= the number of jobs
    the two agree, since a strict order of classes is the same order whatever their numbers.
``delay``
    Job ``job``'s start (every job's when ``job`` is empty) shifted by ``shift`` model seconds
    after its arrival (``on_job_arrived``), otherwise FIFO: it places one job's iterations
    between another's, the mechanism CASSINI's time shifts use (the two-job mechanism,
    ``scenarios/mechanisms/two-jobs.yaml``). As a job's own scheduler (``jobs[i].scheduler``) it
    shifts that job.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow, Job, Placement
from railbed.jobs import arrivals
from railbed.scheduler import Rule, RunView, Scheduler, default_placement
from railbed.spec import ClusterSpec
from schedulers.crux_alg import dscp_of_level


class JobPriority(Scheduler):
    """Per-job strict priority in arrival order (module docstring)."""

    name = "job-priority"

    def __init__(self, levels: int = 8) -> None:
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= 8:
            raise SpecError("levels", f"expected 1..8 priority classes, got {levels!r}")
        self.levels = levels
        self.rank: dict[str, int] = {}

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        order = sorted(arrivals(job).items(), key=lambda kv: kv[1])  # stable: the scenario's order at ties
        self.rank = {name: k for k, (name, _) in enumerate(order)}
        return default_placement(job, cluster)

    def dscp(self, job: str | None) -> int:
        rank = self.rank.get(job, self.levels - 1) if job is not None else self.levels - 1
        return dscp_of_level(min(rank, self.levels - 1), self.levels)

    def rule(self, flow: Flow, placement: Placement, cluster: ClusterSpec) -> Rule:
        """Its job's DSCP, no cap, no waits (its only decision, read on every backend)."""
        return Rule(dscp=self.dscp(flow.job))

    def notes(self) -> list[str]:
        return [f"job-priority: DSCP {self.dscp(j)} for job {j}" for j in self.rank]


class Delay(Scheduler):
    """Job ``job``'s start (every job's if empty) ``shift`` model seconds after its arrival; FIFO."""

    name = "delay"

    def __init__(self, shift: float = 0.0, job: str = "") -> None:
        if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not 0 <= shift < float("inf"):
            raise SpecError("shift", f"must be a time shift >= 0 (model seconds), got {shift!r}")
        self.shift, self.job = float(shift), job

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> float:
        return self.shift if not self.job or job_name == self.job else 0.0


SCHEDULERS = (JobPriority, Delay)
