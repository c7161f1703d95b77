"""The emulator as a backend (:mod:`railbed.backend`): ``emulate``.

A session is one :class:`~emulator.testbed.Testbed` (namespaces, bridges, routers, tc; root and
the machine's one run lock) on which each run is :func:`emulator.runtime.run` with the
scenario's packet captures around it, written into ``options.run_dir``. Its own settings (latency,
trace, timeout, strict, flow progress, captures: :class:`emulator.settings.EmulateSettings`) are
``options.own("emulate")``, parsed from its keys of the scenario (``capabilities.settings``,
:mod:`emulator.settings`).
Mininet and pyroute2 are imported when a session starts, not when this module is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from emulator.features import check_congestion
from emulator.settings import KEYS, EmulateSettings, parse
from railbed.backend import Capabilities, RunOptions
from railbed.job import Job
from railbed.machine import check_emulable
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology, default_scale
from railbed.units import RateScale


class TestbedSession:
    """A :class:`railbed.backend.Session`: the runs of one built cluster."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, tb) -> None:
        self.tb = tb
        self.scale = tb.scale.k

    def describe(self) -> str:
        tb = self.tb
        built = f"built in {tb.build_seconds:.1f} s; k = {tb.scale.k:g}"
        return f"{built}; policy {tb.policy.name}; latency {tb.latency_mode}; TCP {tb.tcp}"

    def run(self, job: Job, scheduler: Scheduler, options: RunOptions) -> RunResult:
        from emulator.capture import Capture
        from emulator.runtime import run

        own = options.own(EMULATE.name, EmulateSettings())
        capture = None
        if own.capture and options.run_dir is not None:
            capture = Capture(self.tb, own.capture, options.run_dir)
            capture.start()
        notes = []
        try:
            result = run(
                job,
                scheduler,
                self.tb,
                trace=own.trace,
                progress=options.progress,
                timeout=own.timeout,
                strict=own.strict,
                flow_progress=own.flow_progress,
                analysis=options.analysis,
            )
        finally:
            if capture:
                notes = capture.stop()
        result.notes += notes
        return result


class Emulate:
    name = "emulate"
    summary = "the emulated cluster: namespaces, tc and real TCP flows (root)"
    # max_gpus: the largest cluster bench/bench_platform.py built here (railbed.machine sets the limit)
    capabilities = Capabilities(needs_root=True, packets=True, exact=False, max_gpus=128, settings=KEYS)

    def parse_settings(self, block: dict, cluster: ClusterSpec) -> EmulateSettings:
        return parse(block, cluster)

    def check(self, cluster: ClusterSpec, options: RunOptions) -> float:
        """This machine's limits at the scale runs will use (``railbed.machine``) and the run's
        congestion control; returns k."""
        check_congestion(options.tcp)
        topo = Topology(cluster)
        k = RateScale(options.scale) if options.scale is not None else default_scale(cluster, topo)
        check_emulable(cluster, topo, k)
        return k.k

    @contextlib.contextmanager
    def session(self, cluster: ClusterSpec, options: RunOptions) -> Iterator[TestbedSession]:
        from emulator.testbed import Testbed

        latency = options.own(self.name, EmulateSettings()).latency
        with Testbed(cluster, policy=options.policy, scale=options.scale, latency=latency, tcp=options.tcp) as tb:
            yield TestbedSession(tb)

    def run(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        with self.session(cluster, options) as testbed:
            return testbed.run(job, scheduler, options)


EMULATE = Emulate()
