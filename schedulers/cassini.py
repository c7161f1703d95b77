"""CASSINI (NSDI'24) as a cluster-wide scheduler: thin glue over :mod:`schedulers.cassini_alg`.

**Not registered yet** (issue 45): it needs the multi-job core. What it uses of it, by name:

* ``item.job``: the name of the job an item belongs to (the core's per-job ids);
* ``on_job_arrived(job_name, job, view)`` and ``on_job_finished(job_name, view)``: the hooks
  the core calls when a job arrives and when its last item is done;
* a traffic profile per job: its flows in one iteration of the job run alone on the same
  placement (start, end, bytes, the links each crossed), the core's cached alone run, given
  with :meth:`Cassini.set_profile` (:func:`~schedulers.cassini_alg.phases_from_transfers`
  turns records into phases; mapping a record to its links is the topology's routing).

What it does (docs/multi-job-schedulers.md, "CASSINI"): whenever the set of jobs changes it
recomputes every job's shift with :func:`~schedulers.cassini_alg.plan` over the jobs it has
profiles for, and delays the **next iteration** of each running job so that it starts at
``t + shift`` (t the time of the decision): every item of that iteration is held until then
(today's ``HOLD`` with ``view.wake_at``). Flows keep DSCP 0: CASSINI interleaves in time,
it does not prioritise. Placement is the core's (CASSINI ranks the placement candidates its
host scheduler offers, :func:`~schedulers.cassini_alg.rank_candidates`; the core has no
candidate list yet, so this class does not place).

Arguments: ``tick`` (seconds, the unified circle's bin), ``exact_limit`` (a link's shift
combinations searched exactly, above it greedy).
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Item, Job
from railbed.scheduler import HOLD, Decision, RunView, Scheduler
from schedulers.cassini_alg import JobTraffic, Plan, plan


class Cassini(Scheduler):
    name = "cassini"

    def __init__(self, tick: float = 1e-4, exact_limit: int = 20_000) -> None:
        if not tick > 0:
            raise SpecError("tick", f"must be > 0 seconds, got {tick}")
        if exact_limit < 1:
            raise SpecError("exact_limit", f"must be >= 1, got {exact_limit}")
        self.tick, self.exact_limit = tick, exact_limit
        self.capacity: dict[str, float] = {}  # link -> bit/s, for the links profiles name
        self.profiles: dict[str, JobTraffic] = {}
        self.active: set[str] = set()
        self.release: dict[str, tuple[int, float]] = {}  # job -> (iteration held, until)
        self.next_iteration: dict[str, int] = {}  # job -> the first iteration not yet started
        self.last: Plan | None = None
        self._log: list[str] = []

    def set_profile(self, traffic: JobTraffic, capacity: dict[str, float]) -> None:
        """A job's traffic alone (one iteration's per-link phases) and its links' capacities."""
        self.profiles[traffic.name] = traffic
        self.capacity.update(capacity)

    def replan(self, now: float) -> dict[str, float]:
        """Shifts for the active profiled jobs; each job's next iteration is held until
        ``now + shift``. Returns the shifts (seconds)."""
        jobs = [self.profiles[j] for j in sorted(self.active) if j in self.profiles]
        self.last = plan(jobs, self.capacity, self.tick, self.exact_limit)
        for name, shift in self.last.shifts.items():
            self.release[name] = (self.next_iteration.get(name, 0), now + shift)
        self._log.append(
            f"t={now:.6g}: shifts {', '.join(f'{n} {s:.4g}s' for n, s in sorted(self.last.shifts.items()))}; "
            f"score {self.last.score:.3f}{'' if self.last.consistent else ' (a loop left a link below its optimum)'}"
        )
        return dict(self.last.shifts)

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> None:
        self.active.add(job_name)
        self.replan(view.now)

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        self.active.discard(job_name)
        self.release.pop(job_name, None)
        if self.active:
            self.replan(view.now)

    def on_ready(self, item: Item, view: RunView) -> Decision:
        job = getattr(item, "job", None)
        held = self.release.get(job) if job is not None else None
        if held is not None and item.iteration == held[0] and view.now < held[1]:
            view.wake_at(held[1])
            return HOLD
        if job is not None:
            self.next_iteration[job] = max(self.next_iteration.get(job, 0), item.iteration + 1)
        return Decision()

    def notes(self) -> list[str]:
        return list(self._log)
