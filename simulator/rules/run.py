"""Running a :class:`CompactJob`: :func:`run_compact` (the kernel in a worker thread, Ctrl-C
seen at once), the network-free run, and :func:`simulate_compact` (build then run).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np

from railbed.dispatch import RunStalled
from railbed.job import Job
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from simulator.contention import TYPES, Meter
from simulator.fluid.network import peak_utilisation
from simulator.rules.build import compact
from simulator.rules.kernel import run_kernel
from simulator.rules.model import CompactJob, padded
from simulator.rules.report import CompactResult, analysis_of
from tc_policies.plan import Policy


def run_compact(cj: CompactJob, analysis: bool = False, work: int = 1024) -> CompactResult:
    """Run a :class:`CompactJob` in ``run_kernel`` (see the module docstring). ``analysis``:
    measure contention during the run and fill :attr:`CompactResult.analysis` (the
    network-free run, :func:`network_free_run`, and, for jobs up to
    :data:`MAX_ANALYSIS_ITEMS`, the critical path and the coflow overlap). ``work``: the
    first length of the kernel's work lists (they double when full; the tests start at 1)."""
    t0 = time.perf_counter()
    n = cj.items
    ready = np.full(n, np.nan)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    link_bits = np.zeros(len(cj.link_cap))
    peak_load = np.zeros(len(cj.link_cap))
    stats = np.zeros(6, np.int64)  # events, steps, done, flow-steps, rate updates, flows re-rated
    meter = Meter(len(cj.link_cap))
    ftype = np.zeros(1, np.int16)  # type ids, read only when metered
    if analysis and len(cj.ctype):
        ftype = np.minimum(np.maximum(cj.ctype, 0), TYPES - 1).astype(np.int16)
    elif analysis:
        ftype = np.zeros(n, np.int16)
    hold, nholds = cj.nic, cj.nics  # what a Rule's hold looks at: its source NIC, or (NIC, dscp >> 3)
    if cj.hold_by_class:
        hold = np.where(cj.nic >= 0, cj.nic.astype(np.int64) * 8 + (cj.dscp.astype(np.int64) >> 3), -1).astype(np.int32)
        nholds = cj.nics * 8
    release = padded(cj.release, n) if len(cj.release) else cj.release  # sub-flows have none of their own
    args = (
        cj.kind, cj.device, cj.duration, cj.route, cj.bits, cj.prio, cj.cap, cj.key, cj.bar, cj.queued, hold,
        cj.missing.copy(), cj.dep_ptr, cj.dep_idx, cj.device_cap, cj.route_links, cj.route_hops, cj.route_latency,
        cj.link_cap, nholds, cj.gate, cj.gate_size, cj.gate_sub, cj.parent, cj.children, ready, start, end,
        link_bits, peak_load, stats, analysis, ftype, meter.hit, meter.total, meter.load,
        meter.mask, meter.top, meter.nhit, meter.ntot, meter.classes, work, release, ctl := np.zeros(2),
    )  # fmt: skip
    code = _interruptible(run_kernel, args, ctl, stats, n)
    if code == 1:
        raise RuntimeError(f"compact engine: {n - stats[2]} items unfinished and nothing pending (a bug)")
    if code == 2:
        raise RuntimeError(f"compact engine: active flows have no rate and nothing else is pending ({cj.name})")
    if code == 3:
        raise RunStalled(f"compact engine: the scheduler's rules hold every ready item and nothing runs ({cj.name})")
    makespan = float(np.nanmax(end)) if n else 0.0
    link_peak = peak_utilisation(peak_load, cj.link_cap)
    run = CompactResult(
        cj, ready, start, end, makespan, int(stats[0]), int(stats[1]), int(stats[3]), int(stats[4]), link_bits,
        link_peak, time.perf_counter() - t0, rerated=int(stats[5]),
    )  # fmt: skip
    if analysis:
        run.analysis = analysis_of(run, meter, network_free_run(cj).makespan)
        run.wall_seconds = time.perf_counter() - t0
    return run


def _interruptible(kernel, args: tuple, ctl: np.ndarray, stats: np.ndarray, n: int) -> int:
    """``kernel(*args)`` in a worker thread (it runs without the GIL) while this thread waits in
    slices of 20 ms, so Ctrl-C (SIGINT, handled only by the main thread between bytecodes) is
    seen at once; then the kernel is asked to stop (``ctl[0] = 1``, read once per event of its
    loop) and :class:`KeyboardInterrupt` says the model time it reached, for the results
    folder's ``PARTIAL`` marker. The kernel's result is the same as called directly: one thread
    runs it, the other only waits."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["code"] = kernel(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    threading.Thread(target=work, name="compact-kernel", daemon=True).start()
    try:  # polled, not joined: a join interrupted by Ctrl-C may return early later (CPython bpo-45274)
        while not box:
            time.sleep(0.02)
    except KeyboardInterrupt:
        ctl[0] = 1.0
        while not box:
            time.sleep(0.02)
        where = f"at model time {ctl[1]!r} s" if box.get("code") == 4 else "as its kernel ended"
        raise KeyboardInterrupt(f"compact engine stopped {where}, {int(stats[2])} of {n} items done") from None
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return int(box["code"])  # type: ignore[arg-type]


def network_free_run(cj: CompactJob) -> CompactResult:
    """The run of ``cj`` with communication taking 0 s: every flow zero bits and every route
    zero latency (same-server flows already take 0 s here). The scheduler's rules still decide
    (a flow holds while a better one is active on its NIC: that one ends in the same
    instant), in :data:`railbed.actions.EVENT_ORDER` as :func:`railbed.analysis.network_free_makespan`,
    which gives the same times for the same job (``tests/test_analysis.py``, ``tests/test_event_order.py``)."""
    return run_compact(replace(cj, bits=np.zeros_like(cj.bits), route_latency=np.zeros_like(cj.route_latency)))


def simulate_compact(
    job: Job, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority", analysis: bool = False
) -> CompactResult:
    """:func:`compact` then :func:`run_compact`."""
    return run_compact(compact(job, scheduler, cluster, policy), analysis)
