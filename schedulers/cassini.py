"""CASSINI (NSDI'24) as a cluster-wide scheduler, registered ``cassini``: thin glue over
:mod:`schedulers.cassini_alg`.

Profiles: at ``place`` (before the shared run) each job of the run is run alone on its
placement through the ``fluid`` backend (:func:`schedulers.multijob_profile.alone_run`, cached),
and its demand per link over one iteration (:func:`~schedulers.multijob_profile.cassini_traffic`,
the second iteration when there is one) is its :class:`~schedulers.cassini_alg.JobTraffic`;
CASSINI measures the same in a job's first iterations. :meth:`Cassini.set_profile` gives one
by hand (tests).

Shifts: when a job arrives (``on_job_arrived``) :func:`~schedulers.cassini_alg.plan` is
computed over the active jobs with profiles, and the arriving job's start is delayed so that
its phase against a running job it shares links with (the one sharing most, ties by name)
is the plan's: its start ≡ ``start_r - s_r + s_j`` (mod its period ``p_j``), the smallest such
time from now. Choice (the public text re-shifts running jobs too, by pausing them): running
jobs keep their phase, so the answer is the plan's for every pair the arriving job is anchored
through (exact for two jobs; with more, only where the earlier plans agree). Flows keep DSCP 0:
CASSINI interleaves in time, it does not prioritise. Placement is the core's (CASSINI ranks the
candidates its host scheduler offers, :func:`~schedulers.cassini_alg.rank_candidates`; the core
offers none). Not for ``fluid-rules`` (it calls no hooks).

Arguments: ``tick`` (seconds, the unified circle's bin), ``exact_limit`` (a link's shift
combinations searched exactly, above it greedy).
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Job, Placement
from railbed.jobs import arrivals
from railbed.scheduler import RunView, Scheduler, default_placement
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers.cassini_alg import JobTraffic, Plan, plan


class Cassini(Scheduler):
    name = "cassini"

    def __init__(self, tick: float = 1e-4, exact_limit: int = 20_000) -> None:
        if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not tick > 0:
            raise SpecError("tick", f"must be > 0 seconds, got {tick!r}")
        if isinstance(exact_limit, bool) or not isinstance(exact_limit, int) or exact_limit < 1:
            raise SpecError("exact_limit", f"must be a whole number >= 1, got {exact_limit!r}")
        self.tick, self.exact_limit = float(tick), exact_limit
        self.capacity: dict[str, float] = {}  # link -> bit/s, for the links profiles name
        self.profiles: dict[str, JobTraffic] = {}
        self.start: dict[str, float] = {}  # active job -> when its first iteration was let start
        self.last: Plan | None = None
        self._log: list[str] = []

    def set_profile(self, traffic: JobTraffic, capacity: dict[str, float]) -> None:
        """A job's traffic alone (one iteration's per-link phases) and its links' capacities."""
        self.profiles[traffic.name] = traffic
        self.capacity.update(capacity)

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        from schedulers.multijob_profile import alone_run, capacities, cassini_traffic, profiled_iteration

        topo = Topology(cluster)
        for name in arrivals(job):
            if name not in self.profiles:
                sub, result = alone_run(job, name, cluster)
                traffic = cassini_traffic(name, sub, result, topo, self.tick, profiled_iteration(sub))
                self.set_profile(traffic, capacities(topo))
        return default_placement(job, cluster)

    def shift_for(self, job_name: str, now: float) -> float:
        """The arriving job's delay (module docstring); 0 without a profile or a running partner."""
        me = self.profiles.get(job_name)
        running = [j for j in sorted(self.start) if j in self.profiles]
        if me is None or not running:
            return 0.0
        self.last = plan([*(self.profiles[j] for j in running), me], self.capacity, self.tick, self.exact_limit)
        shared = {r: len(set(self.profiles[r].links) & set(me.links)) for r in running}
        anchor = max(running, key=lambda r: shared[r])  # the first by name among equals
        if not shared[anchor]:
            return 0.0
        s = self.last.shifts
        shift = (self.start[anchor] - s[anchor] + s[job_name] - now) % me.period
        shift = 0.0 if me.period - shift < self.tick / 2 else shift
        self._log.append(
            f"t={now:.6g}: {job_name} shifted {shift:.4g}s against {anchor} "
            f"(plan: {', '.join(f'{n} {v:.4g}s' for n, v in sorted(s.items()))}; score {self.last.score:.3f}"
            f"{'' if self.last.consistent else ', a loop left a link below its optimum'})"
        )
        return shift

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> float:
        shift = self.shift_for(job_name, view.now)
        self.start[job_name] = view.now + shift
        return shift

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        self.start.pop(job_name, None)

    def notes(self) -> list[str]:
        return list(self._log)
