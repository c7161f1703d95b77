"""Crux (SIGCOMM'24) as a cluster-wide scheduler, registered ``crux``: thin glue over
:mod:`schedulers.crux_alg`.

What it uses of the multi-job core: ``item.job``; ``on_job_arrived`` / ``on_job_finished``
(Crux "reassigns paths and priorities for all existing jobs" at every arrival and completion,
§5); a profile per job (:class:`CruxProfile`), which Crux measures in its first iterations with
the job alone at the highest priority (§5, "Job information measurement"). Here ``place``
(before the shared run) runs each job alone on its placement through the ``fluid`` backend
(:func:`schedulers.multijob_profile.alone_run`, cached) and reads the profile from it
(:func:`~schedulers.multijob_profile.crux_profile`: GPU-seconds of the job's own tasks per
iteration, bytes per link per iteration, the bottleneck link's transfer and compute time);
:meth:`Crux.set_profile` gives one by hand (tests).

What it decides (docs/multi-job-schedulers.md, "Crux"): intensities (Eq. 2) with GPU work in
GPU-seconds (equal GPUs; FLOPs when the job gives them), correction factors against the
reference job (the most traffic) over ``horizon`` seconds of the two-job link model (§4.2),
``P = k I``, the contention DAG of jobs sharing a link, compressed onto ``levels`` classes by
Algorithm 1 (``samples`` random topological orders, ``seed``), each class a DSCP class
selector from the top (:func:`~schedulers.crux_alg.dscp_of_level`); every flow of a job gets
its job's DSCP (``on_ready``). Not for ``fluid-rules`` (the classes change as jobs come and go).

Path choice (§4.1): on a fabric of several spines a profile read from a run gives, per pair of
NICs between leaves, the pair's bytes per iteration and one candidate path per spine
(:func:`~schedulers.multijob_profile.transfer_pairs`); :func:`assign` picks a path per pair,
jobs from the most GPU-intensive, and :meth:`Crux.choose_spine` pins every flow of that job
between those NICs to the chosen spine (the contract's ``choose_spine``, which every backend
follows). Choices: a transfer is a (job, NIC pair), as Crux pins a connection by its UDP source
port (§5); the intensity stays the one measured alone (on ECMP's spines); a flow of a pair the
profile did not see takes ECMP's spine. With one spine there is nothing to choose (no ``paths``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railbed.errors import SpecError
from railbed.job import Flow, Item, Job, Location, Placement
from railbed.jobs import arrivals
from railbed.scheduler import Decision, RunView, Scheduler, default_placement
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers import crux_alg as alg
from schedulers.crux_alg import CruxProfile
from schedulers.multijob_profile import alone_run, byte_rates, crux_profile, profiled_iteration, transfer_pairs


@dataclass
class Assignment:
    """Crux's decision for the active jobs: per job its intensity, correction factor, priority,
    class level (0 highest), DSCP and chosen path per transfer; the compression's cut weight."""

    intensity: dict[str, float]
    k: dict[str, float]
    priority: dict[str, float]
    level: dict[str, int]
    dscp: dict[str, int]
    paths: dict[str, list[int]]
    cut: float


def assign(
    profiles: Sequence[CruxProfile],
    bandwidth: Mapping[str, float],
    levels: int,
    horizon: float,
    samples: int = 10,
    seed: int = 0,
) -> Assignment:
    """Crux's three steps over ``profiles`` (pure; ``bandwidth`` bytes/s per link)."""
    names = [p.name for p in profiles]
    intensity = [alg.gpu_intensity(p.work, p.traffic, bandwidth) for p in profiles]
    ref = max(range(len(profiles)), key=lambda j: (sum(profiles[j].traffic.values()), -j)) if profiles else 0
    k = [alg.correction_factor(p.link, profiles[ref].link, horizon) for p in profiles]
    priority = [kj * ij for kj, ij in zip(k, intensity, strict=True)]
    order = alg.priority_order(priority)
    chosen = alg.select_paths(order, [p.paths for p in profiles], bandwidth)
    links = [_links_of(p, c) for p, c in zip(profiles, chosen, strict=True)]
    share = {(a, b) for a in range(len(profiles)) for b in range(a + 1, len(profiles)) if links[a] & links[b]}
    finite = [min(i, 1e300) for i in intensity]
    edges = alg.contention_dag(priority, finite, share)
    cut, level = alg.compress(len(profiles), edges, min(levels, max(1, len(profiles))), samples, seed)
    return Assignment(
        intensity=dict(zip(names, intensity, strict=True)),
        k=dict(zip(names, k, strict=True)),
        priority=dict(zip(names, priority, strict=True)),
        level=dict(zip(names, level, strict=True)),
        dscp={n: alg.dscp_of_level(lv, levels) for n, lv in zip(names, level, strict=True)},
        paths=dict(zip(names, chosen, strict=True)),
        cut=cut,
    )


def _links_of(profile: CruxProfile, chosen: Sequence[int]) -> set[str]:
    """The links a job crosses: its profile's traffic, less the links of candidate paths it was
    not given (the profile crossed ECMP's), with those of the paths chosen for it."""
    offered = {e for _, paths in profile.paths for p in paths for e in p}
    picked = {e for (_, paths), pick in zip(profile.paths, chosen, strict=True) for e in paths[pick]}
    return (set(profile.traffic) - offered) | picked


class Crux(Scheduler):
    name = "crux"

    def __init__(self, levels: int = 4, horizon: float = 10.0, samples: int = 10, seed: int = 0) -> None:
        if not 1 <= levels <= 8:
            raise SpecError("levels", f"expected 1..8 priority classes, got {levels}")
        if not horizon > 0:
            raise SpecError("horizon", f"must be > 0 seconds, got {horizon}")
        self.levels, self.horizon, self.samples, self.seed = levels, horizon, samples, seed
        self.bandwidth: dict[str, float] = {}
        self.profiles: dict[str, CruxProfile] = {}
        self.active: set[str] = set()
        self.pairs: dict[str, list[tuple]] = {}  # job -> its profile's NIC pairs, in ``paths`` order
        self.last: Assignment | None = None
        self._log: list[str] = []

    def set_profile(self, profile: CruxProfile, bandwidth: Mapping[str, float]) -> None:
        self.profiles[profile.name] = profile
        self.bandwidth.update(bandwidth)

    def reassign(self, now: float) -> Assignment:
        jobs = [self.profiles[j] for j in sorted(self.active) if j in self.profiles]
        self.last = assign(jobs, self.bandwidth, self.levels, self.horizon, self.samples, self.seed)
        a = self.last
        self._log.append(
            f"t={now:.6g}: " + ", ".join(f"{n} P={a.priority[n]:.3g} class {a.level[n]}" for n in sorted(a.level))
        )
        return self.last

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        topo = Topology(cluster)
        for name in arrivals(job):
            if name not in self.profiles:
                sub, result = alone_run(job, name, cluster)
                self.set_profile(crux_profile(name, sub, result, topo, profiled_iteration(sub)), byte_rates(topo))
                self.pairs[name] = list(transfer_pairs(sub, result, topo, profiled_iteration(sub)))
        return default_placement(job, cluster)

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> None:
        self.active.add(job_name)
        self.reassign(view.now)

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        self.active.discard(job_name)
        if self.active:
            self.reassign(view.now)

    def spine_for(self, job_name: str, transfer: int) -> int | None:
        """The path index §4.1 chose for the job's ``transfer``-th transfer (None: ECMP's)."""
        chosen = self.last.paths.get(job_name) if self.last else None
        return chosen[transfer] if chosen and transfer < len(chosen) else None

    def choose_spine(self, flow: Flow, src: Location, dst: Location, view: RunView) -> int | None:
        """The spine §4.1 chose for the flow's job and NIC pair (None: ECMP's)."""
        pairs = self.pairs.get(flow.job) or ()
        key = (src.server, src.nic, dst.server, dst.nic)
        return self.spine_for(flow.job, pairs.index(key)) if key in pairs else None

    def on_ready(self, item: Item, view: RunView) -> Decision:
        job = getattr(item, "job", None)
        if item.kind != "flow" or self.last is None or job not in self.last.dscp:
            return Decision()
        return Decision(dscp=self.last.dscp[job])

    def notes(self) -> list[str]:
        return list(self._log)
