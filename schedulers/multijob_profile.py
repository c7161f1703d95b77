"""Profiles for the multi-job schedulers from a job's run alone: what CASSINI and Crux measure in
a job's first iterations (CASSINI's demand on each link over an iteration; Crux's §5, "Job
information measurement": computation and communication per iteration, at the highest priority).

The multi-job core runs each job alone on its placement once (issue 45); these functions turn
that run's :class:`~railbed.results.RunResult` into :class:`~schedulers.cassini_alg.JobTraffic`
and :class:`~schedulers.crux_alg.CruxProfile`. A link is an egress queue of the fabric,
``"node:ifname"`` as :meth:`railbed.topology.Topology.path` names its hops (a flow between two
servers crosses its source NIC, the leaf's uplink to its spine and the spine's port when the
servers are under different leaves, and the destination's leaf port); flows inside a server
cross none.

Choices (docs/multi-job-schedulers.md): the profiled iteration is ``iteration`` (default 1, the
second, past any start-up), from the first start of its items to the first start of the next
iteration's (or the last end when it is the last); Crux's ``work`` is the GPU-seconds of the
iteration's tasks; its link model is the bottleneck link's transfer time ``t_j`` and the rest of
the iteration as compute, no overlap. On a fabric of several spines a profile also gives §4.1's
candidates: per pair of NICs between leaves (:func:`transfer_pairs`), its bytes per iteration and
one path per spine (:func:`crux_profile`'s ``paths``, in spine order, so a path index is a spine).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from railbed.backend import RunOptions
from railbed.backend import backend as get_backend
from railbed.errors import SpecError
from railbed.job import Job
from railbed.jobs import alone
from railbed.results import ItemRecord, RunResult
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers.cassini_alg import JobTraffic, phases_from_transfers
from schedulers.crux_alg import CruxProfile, LinkJob, gpu_intensity
from schedulers.fifo import Fifo

_ALONE: dict[str, RunResult] = {}
_ALONE_MAX = 64


def alone_run(job: Job, name: str, cluster: ClusterSpec) -> tuple[Job, RunResult]:
    """Job ``name`` of the merged ``job`` run by itself (:func:`railbed.jobs.alone`: its items
    and pins, arriving at 0) under ``fifo`` on the ``fluid`` backend, through the backend
    registry (schedulers import no simulator). This is the profile CASSINI and Crux measure
    before the shared run (they see the job's first iterations alone); kept per (job, cluster)
    for the process, so a scenario's schedulers and runs share it. Whatever backend runs the
    shared run, the profile is the fluid simulator's: the schedulers' input, not a result."""
    sub = alone(job, name)
    key = hashlib.sha1(json.dumps([sub.to_dict(), repr(cluster)], sort_keys=True, default=str).encode()).hexdigest()
    if key not in _ALONE:
        if len(_ALONE) >= _ALONE_MAX:
            _ALONE.pop(next(iter(_ALONE)))
        _ALONE[key] = get_backend("fluid").run(sub, Fifo(), cluster, RunOptions(analysis=False))
    return sub, _ALONE[key]


def links_of(record: ItemRecord, topology: Topology) -> list[str]:
    """The egress queues a flow's record says it crossed (none inside a server)."""
    if record.kind != "flow" or record.server is None or record.dst_server is None:
        return []
    if record.server == record.dst_server or record.src_nic is None or record.dst_nic is None:
        return []
    hops = topology.path((record.server, record.src_nic), (record.dst_server, record.dst_nic), record.spine)
    return [f"{h.node}:{h.ifname}" for h in hops]


def capacities(topology: Topology) -> dict[str, float]:
    """Every egress queue's rate, bit/s."""
    return {f"{node}:{ifname}": port.rate for (node, ifname), port in topology.ports.items()}


def profiled_iteration(job: Job) -> int:
    """The iteration a profile reads: the second (1, past any start-up) when the job has one."""
    return 1 if any(it.iteration >= 1 for it in job.items.values()) else 0


def iteration_window(job: Job, result: RunResult, iteration: int) -> tuple[float, float]:
    """(start, end) of ``iteration`` in the run (module docstring)."""
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for item in job.items.values():
        rec = result.items.get(item.id)
        if rec is None or rec.start is None or rec.end is None:
            continue
        starts[item.iteration] = min(starts.get(item.iteration, rec.start), rec.start)
        ends[item.iteration] = max(ends.get(item.iteration, rec.end), rec.end)
    if iteration not in starts:
        raise SpecError("iteration", f"the run has no iteration {iteration} (it has {sorted(starts)})")
    return starts[iteration], starts.get(iteration + 1, ends[iteration])


def _flows(job: Job, result: RunResult, topology: Topology, iteration: int):
    for flow in job.flows:
        rec = result.items.get(flow.id)
        if flow.iteration == iteration and rec is not None and rec.start is not None and rec.end is not None:
            yield rec, links_of(rec, topology)


def cassini_traffic(name: str, job: Job, result: RunResult, topology: Topology, tick: float, iteration: int = 1):
    """The job's :class:`JobTraffic`: its period rounded to whole ``tick`` s, its flows' phases."""
    t0, t1 = iteration_window(job, result, iteration)
    period = max(1, round((t1 - t0) / tick)) * tick
    transfers = [
        (r.start, min(r.end, r.start + period), r.size or 0, links)
        for r, links in _flows(job, result, topology, iteration)
    ]
    return JobTraffic(name, period, phases_from_transfers([t for t in transfers if t[3]], t0, period))


def transfer_pairs(job: Job, result: RunResult, topology: Topology, iteration: int = 1) -> dict[tuple, float]:
    """(src server, src NIC, dst server, dst NIC) -> bytes of the iteration's flows between leaves,
    sorted; empty on a fabric of one spine or none (nothing to choose)."""
    out: dict[tuple, float] = {}
    if len(topology.spines) > 1:
        for rec, _ in _flows(job, result, topology, iteration):
            if rec.spine is not None:
                key = (rec.server, rec.src_nic, rec.dst_server, rec.dst_nic)
                out[key] = out.get(key, 0.0) + (rec.size or 0)
    return dict(sorted(out.items()))


def crux_profile(name: str, job: Job, result: RunResult, topology: Topology, iteration: int = 1) -> CruxProfile:
    """The job's :class:`CruxProfile` (module docstring); bandwidths from :func:`capacities`."""
    t0, t1 = iteration_window(job, result, iteration)
    traffic: dict[str, float] = {}
    for rec, links in _flows(job, result, topology, iteration):
        for link in links:
            traffic[link] = traffic.get(link, 0.0) + (rec.size or 0)
    spines = range(len(topology.spines))
    paths = tuple(
        (size, [[f"{h.node}:{h.ifname}" for h in topology.path((s, sn), (d, dn), p)] for p in spines])
        for (s, sn, d, dn), size in transfer_pairs(job, result, topology, iteration).items()
    )
    work = sum(t.duration for t in job.tasks if t.iteration == iteration)
    bw = byte_rates(topology)
    comm = max((size / bw[link] for link, size in traffic.items()), default=0.0)
    return CruxProfile(name, work, traffic, LinkJob(max(comm, 1e-12), max(t1 - t0 - comm, 0.0)), paths)


def byte_rates(topology: Topology) -> dict[str, float]:
    """Every egress queue's rate in bytes/s (Crux's ``B_e``)."""
    return {link: rate / 8 for link, rate in capacities(topology).items()}


def intensity_of(profile: CruxProfile, bandwidth: Mapping[str, float]) -> float:
    """Eq. 2 for a profile (a convenience over :func:`~schedulers.crux_alg.gpu_intensity`)."""
    return gpu_intensity(profile.work, profile.traffic, bandwidth)
