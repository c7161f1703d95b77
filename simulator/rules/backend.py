"""The ``fluid-rules`` backend (:mod:`railbed.backend`): :mod:`simulator.rules`, the whole run in
one numba kernel over the schedulers' rules (``Scheduler.rule``, ``gate_split``), equal item for
item to ``fluid`` where it runs; it also takes a job built as arrays
(:class:`workloads.arrays.ArrayJob`), returning a result without per-item records and writing the
items to ``run_dir/items.npz``.
"""

from __future__ import annotations

import time

from railbed.backend import Capabilities, ModelBackend, RunOptions
from railbed.dispatch import run_label
from railbed.job import Job
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from simulator.rules.build import compact, compact_arrays
from simulator.rules.model import CompactJob
from simulator.rules.run import run_compact


class FluidRules(ModelBackend):
    """One numba kernel over the schedulers' rules (:mod:`simulator.rules`)."""

    name = "fluid-rules"
    summary = "one numba kernel over the schedulers' rules (Scheduler.rule); jobs as arrays, thousands of GPUs"
    capabilities = Capabilities(hooks=False, host_models=False, array_jobs=True, max_gpus=8192)

    def prepare(self, job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> CompactJob:
        """What :meth:`run` makes before its kernel runs: the job (a ``Job`` or arrays) compacted under
        ``scheduler``, the run's largest stage in memory (a full-size row's size probe measures it,
        :mod:`scenarios.sizeprobe`)."""
        if isinstance(job, Job):
            return compact(job, scheduler, cluster, options.policy)
        return compact_arrays(job, scheduler, cluster, options.policy)

    def run(self, job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        if isinstance(job, Job):
            run = run_compact(self.prepare(job, scheduler, cluster, options), analysis=options.analysis)
            result = run.to_run_result(job, run_label(scheduler))
            result.cluster = cluster.name
            result.notes += scheduler.notes()  # the Dispatcher adds them on the other backends
            result.backend = self.name
            return result
        t0 = time.perf_counter()
        cj = self.prepare(job, scheduler, cluster, options)
        seconds = time.perf_counter() - t0
        del job  # the arrays and a run do not both fit in 8 GB at 8192 GPUs (the caller drops its own)
        run = run_compact(cj, analysis=options.analysis)
        if options.run_dir is not None:
            options.run_dir.mkdir(parents=True, exist_ok=True)
            run.save_items(options.run_dir / "items.npz")
        result = run.summary_result(run_label(scheduler), cluster.name)
        result.notes.append(f"compacted in {seconds:.1f} s, run in {run.wall_seconds:.1f} s")
        result.notes += scheduler.notes()
        result.backend = self.name
        return result


FLUID_RULES = FluidRules()
