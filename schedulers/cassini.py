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
time from now. The anchor keeps its phase; every other running job connected to the arriving one
through shared links (the plan's component) whose phase disagrees with the plan is **re-shifted**
(``reshift``, default on): its next iteration is paused by ``d = (start_r' - start_r) mod p_r``,
``start_r' = start_anchor - s_anchor + s_r``. The pause is the contract's own hold: the job's
items of every iteration after the last one offered wait (``hold(OnTime(until))``) until the
first of them was offered plus ``d`` (:meth:`on_ready`), so every backend driving the Dispatcher
applies it. The abstract (NSDI'24, arXiv:2308.00852) says the affinity graph "finds a series of
time-shift values to adjust the communication phases of a subset of jobs"; how a shift reaches a
running job is not in any text read (the secondary readings say it is paused); the pause at an
iteration boundary, the anchor kept and the smallest delay mod the period are our choices. Jobs
in other components keep their phases. Flows keep DSCP 0:
CASSINI interleaves in time, it does not prioritise. Placement is the core's (CASSINI ranks the
candidates its host scheduler offers, :func:`~schedulers.cassini_alg.rank_candidates`; the core
offers none). Not for ``fluid-rules`` (it calls no hooks).

Arguments: ``tick`` (seconds, the unified circle's bin), ``exact_limit`` (a link's shift
combinations searched exactly, above it greedy), ``reshift`` (pause running jobs into the plan).
"""

from __future__ import annotations

from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.job import Job, Placement
from railbed.jobs import arrivals
from railbed.scheduler import Decision, OnTime, RunView, Scheduler, default_placement, hold
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers.cassini_alg import JobTraffic, Plan, plan, shared_links


@dataclass
class Pause:
    """A running job's next iteration delayed: items of iteration ``after`` or later wait until the
    first of them was offered plus ``delay`` (``until``, set then)."""

    after: int
    delay: float
    until: float | None = None


class Cassini(Scheduler):
    name = "cassini"

    def __init__(self, tick: float = 1e-4, exact_limit: int = 20_000, reshift: bool = True) -> None:
        if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not tick > 0:
            raise SpecError("tick", f"must be > 0 seconds, got {tick!r}")
        if isinstance(exact_limit, bool) or not isinstance(exact_limit, int) or exact_limit < 1:
            raise SpecError("exact_limit", f"must be a whole number >= 1, got {exact_limit!r}")
        self.tick, self.exact_limit, self.reshift = float(tick), exact_limit, bool(reshift)
        self.capacity: dict[str, float] = {}  # link -> bit/s, for the links profiles name
        self.profiles: dict[str, JobTraffic] = {}
        self.start: dict[str, float] = {}  # active job -> when its first iteration was let start
        self.last: Plan | None = None
        self.offered: dict[str, int] = {}  # job -> the latest iteration of its items offered so far
        self.pauses: dict[str, Pause] = {}
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
        if self.reshift:
            for r in sorted(self._component(job_name, running) - {anchor, job_name}):
                self._pause(r, (self.start[anchor] - s[anchor] + s[r] - self.start[r]) % self.profiles[r].period, now)
        self._log.append(
            f"t={now:.6g}: {job_name} shifted {shift:.4g}s against {anchor} "
            f"(plan: {', '.join(f'{n} {v:.4g}s' for n, v in sorted(s.items()))}; score {self.last.score:.3f}"
            f"{'' if self.last.consistent else ', a loop left a link below its optimum'})"
        )
        return shift

    def _component(self, job_name: str, running: list[str]) -> set[str]:
        """The jobs linked to ``job_name`` through links they share (the affinity graph's component)."""
        links = shared_links([self.profiles[j] for j in (*running, job_name)])
        seen, todo = {job_name}, [job_name]
        while todo:
            j = todo.pop()
            for names in links.values():
                if j in names:
                    todo += [n for n in names if n not in seen]
                    seen.update(names)
        return seen

    def _pause(self, job: str, delay: float, now: float) -> None:
        """Delay running ``job``'s next iteration by ``delay`` (mod its period; none within tick/2)."""
        period = self.profiles[job].period
        if delay < self.tick / 2 or period - delay < self.tick / 2:
            return
        p = self.pauses.get(job)
        if p is not None and (p.until is None or p.until > now):  # one not applied yet: it grows
            p.delay += delay
            p.until = None if p.until is None else p.until + delay
        else:
            self.pauses[job] = Pause(self.offered.get(job, -1) + 1, delay)
        self.start[job] += delay
        self._log.append(f"t={now:.6g}: {job} paused {delay:.4g}s before its next iteration (re-shift)")

    def on_ready(self, item, view: RunView) -> Decision:
        p = self.pauses.get(item.job) if self.pauses else None
        if p is not None and item.iteration >= p.after:
            if p.until is None:
                p.until = view.now + p.delay
            if view.now < p.until:
                return hold(OnTime(p.until))
        if item.job is not None and item.iteration > self.offered.get(item.job, -1):
            self.offered[item.job] = item.iteration
        return Decision()

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> float:
        shift = self.shift_for(job_name, view.now)
        self.start[job_name] = view.now + shift
        return shift

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        self.start.pop(job_name, None)
        self.pauses.pop(job_name, None)

    def notes(self) -> list[str]:
        return list(self._log)
