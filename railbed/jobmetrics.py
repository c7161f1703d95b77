"""Results of a run of several jobs (issue 45), per job and for the cluster: ``RunResult.jobs``.

Per job (``per_job[name]``):

``arrival``, ``end``, ``jct``
    its release, its last item's end, and ``end - arrival`` (job completion time);
``iterations``
    seconds per iteration, the first from its arrival (items' ``iteration``);
``alone``, ``slowdown``
    the makespan of the same job run alone on the same placement under the scheduler that
    serves it (the alone run, :meth:`scenarios.multijob.MultiJob.alone`), and ``jct / alone``;
``network_free``, ``exposed_comm_fraction``
    its own analysis: the alone run's network-free makespan, and the share of its JCT that its
    critical path in this run spends communicating (:func:`railbed.analysis.critical_path` over
    its items only; the path ends at its arrival, counted as ``release``).

For the cluster (``cluster``): ``gpu_busy_share`` (task-seconds on GPUs over GPUs x makespan),
``links`` (each port's mean utilisation over the makespan, as ``RunResult.links``) and the
``interference`` between jobs: ``shared_seconds[a][b]``, how long flows of both jobs were
active on a common egress port (the union over ports, as :func:`railbed.analysis.overlap`
measures coflow types, with jobs for types), and ``caused[a][b]``, the seconds of ``b``'s
slowdown (``jct - alone``) attributed to ``a`` in proportion to the port time they shared. That
attribution is a choice: a run does not say which job's bytes delayed which; with two jobs it
gives the whole excess to the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from railbed.analysis import COMPUTE, IDLE, RELEASE, critical_path, overlap, timeline_of
from railbed.job import Job
from railbed.jobs import arrivals
from railbed.results import RunResult
from railbed.spec import ClusterSpec
from railbed.topology import Topology


def job_results(result: RunResult, job: Job, solo: Mapping[str, RunResult], topology: Topology,
                cluster: ClusterSpec) -> dict:  # fmt: skip
    """``RunResult.jobs`` of ``result``, a run of the merged ``job``, with each job's alone run."""
    arrive = arrivals(job)
    by_job: dict[str, dict] = {name: {} for name in arrive}
    for i, r in result.items.items():
        name = r.attrs.get("job")
        if name in by_job:
            by_job[name][i] = r
    per = {name: _one(name, arrive[name], by_job[name], job, solo.get(name), topology) for name in arrive}
    tl = timeline_of(result.items, job.items, topology)
    return {"per_job": per, "cluster": _cluster(result, cluster, tl, per)}


def _one(name: str, arrival: float, recs: dict, job: Job, solo: RunResult | None, topology: Topology) -> dict:
    ends = [r.end for r in recs.values() if r.end is not None]
    end = max(ends) if ends else math.nan
    jct = end - arrival
    last: dict[int, float] = {}
    for r in recs.values():
        if r.end is not None:
            it = int(r.attrs.get("iteration", 0))
            last[it] = max(last.get(it, -math.inf), r.end)
    iterations, prev = {}, arrival
    for it in sorted(last):
        iterations[it], prev = last[it] - prev, last[it]
    out = {"arrival": arrival, "end": end, "jct": jct, "iterations": iterations, "alone": None, "slowdown": None,
           "network_free": None, "exposed_comm_fraction": None, "critical_path": None}  # fmt: skip
    if solo is not None and solo.makespan > 0:
        out["alone"] = solo.makespan
        out["slowdown"] = jct / solo.makespan
        out["network_free"] = (solo.analysis or {}).get("network_free_makespan")
    if recs and jct > 0:
        cp = critical_path(timeline_of(recs, job.items, topology))
        comm = sum(v for c, v in cp["time"].items() if c not in (COMPUTE, IDLE, RELEASE))
        out["exposed_comm_fraction"] = comm / jct
        out["critical_path"] = {"time": cp["time"], "items": len(cp["items"])}
    return out


def _cluster(result: RunResult, cluster: ClusterSpec, tl, per: dict) -> dict:
    gpus = sum(s.gpus for s in cluster.servers)
    tasks = [r for r in result.items.values() if r.kind == "task" and r.start is not None and r.end is not None]
    busy = sum(r.end - r.start for r in tasks if (r.device or "").startswith("gpu"))
    span = result.makespan
    share = busy / (gpus * span) if gpus and span > 0 else None
    links = {name: float(st.get("mean_util", 0.0)) for name, st in result.links.items()}
    owner = {i: r.attrs.get("job") for i, r in result.items.items()}
    return {"gpus": gpus, "gpu_busy_share": share, "links": links, "interference": interference(tl, per, owner)}


def interference(tl, per: Mapping[str, dict], owner: Mapping[str, str | None]) -> dict:
    """``shared_seconds`` and ``caused`` between every pair of jobs (module docstring); ``owner``:
    item id -> its job."""
    names = list(per)
    index = {n: k for k, n in enumerate(names)}
    job_of = np.array([index.get(owner.get(i), -1) for i in tl.ids], np.int32)
    by_job = replace(tl, ctype=np.where(tl.is_flow, np.maximum(job_of, 0), -1).astype(np.int32), types=names)
    shares = overlap(by_job)["share"] if names else {}
    span = tl.makespan
    shared = {a: {b: (shares.get(a, {}).get(b, 0.0) * span if a != b else 0.0) for b in names} for a in names}
    caused = {a: dict.fromkeys(names, 0.0) for a in names}
    for b in names:
        alone, jct = per[b].get("alone"), per[b].get("jct")
        total = sum(shared[a][b] for a in names)
        if alone is None or total <= 0:
            continue
        excess = max(0.0, jct - alone)
        for a in names:
            caused[a][b] = excess * shared[a][b] / total
    return {"jobs": names, "shared_seconds": shared, "caused": caused}
