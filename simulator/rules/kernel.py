"""The compact engine: a whole simulated run in one numba kernel, for schedulers whose decisions
are pure functions of the flow.

:func:`simulator.simulate` calls the :class:`~railbed.dispatch.Dispatcher`
and the scheduler at every event: about 80 us of Python per item, minutes
at 1024 GPUs (issue 14, ``bench/bench_compact.py``). When a scheduler can
say up front what ``on_ready`` answers for every flow
(:meth:`railbed.scheduler.Scheduler.rule`: DSCP, cap, and when a flow
waits for a better one on its source NIC), the run needs no Python per
event. :func:`compact` turns a :class:`~railbed.job.Job` after placement
into a :class:`CompactJob` (arrays in the job's item order: devices and
durations of tasks; routes, wire bits, class, cap and wait rule of flows;
the dependency graph as CSR), and :func:`run_compact` runs it in
``_run_kernel``, which reproduces :class:`simulator.run.Simulation` over
the Dispatcher step by step:

* events in the same order: the network advances to the earliest of its
  next finish and the next timer (:func:`simulator.network.advance_kernel`, the
  same kernel); finished flows are reported one by one in the network's
  order, then timers in (time, order set);
* each report settles like ``Dispatcher._settle``: newly ready items join
  the held list in item order; the held list is offered in order (tasks
  queue on their device FIFO, flows start unless their :class:`Rule` holds
  them); device queues start tasks in device order; the flows started
  join the network after their route's latency; same-server flows are one
  wait of 0 s (the compact engine refuses servers with a hardware model,
  ``intra_host``, ``datapath`` or any kind of :mod:`railbed.hosts`);
* a :class:`Rule` holds a flow while a network flow active on its source
  NIC has a smaller key than its bar, or (``queued``) while a held queued
  flow there had one when the offer round began: exactly Hermod's and
  Lina's ``on_ready`` (with the scheduler's ``hold_by_class``, "its source
  NIC" is its source NIC and class-selector, ``dscp >> 3``).

* **gates** (:class:`Rule` ``gate``): a flow is held until every flow of its
  gate is held when a round begins; at the first of them in the held list
  (the list keeps only that one, and members whose key counts for a NIC's
  best, so a settling looks at a gate once, not at each of its flows)
  the gate is split (``Dispatcher._split``): the originals start, the
  sub-flows without dependencies start (after the sub-flows made ready by
  this report and before the next held item), the rest start when their
  dependencies end, without rules; an original ends with its last sub-flow,
  and then its dependents become ready. The sub-flows are
  :meth:`Scheduler.gate_split_arrays`' (every gate at once, as arrays) or
  else :meth:`Scheduler.gate_split`'s per gate, checked and appended with
  numpy by :func:`_add_gates` (for :func:`compact` and
  :func:`compact_arrays` alike) before the run, as items after the job's.
  Hermod's EP coflows between servers are gates and its split is Alg. 3
  (seed 004, §5.3.2: Hungarian matchings of the coflow's byte matrix as
  sub-phases, each sub-flow after its sender's and receiver's previous
  one), a pure function of the coflow once it is ready.

Its slow twin is :func:`simulator.simulate` itself: ``tests/test_compact.py``
runs random jobs and the MoE generator's under ``megatron``, ``lina``,
``hermod`` (with its Alg. 3 splits), ``hermod-intra`` and more on both and
requires every item's (and sub-flow's) ready, start and end times to be
equal; ``tests/test_differential.py`` runs random jobs on random clusters of every
fabric under every registered scheduler it supports against ``fluid-reference`` (the
Dispatcher over the plain-Python network). ``rule`` and ``gate_split`` get each flow as
``on_ready`` would see it (a ``hidden`` size stays ``None``). What it does not do (those
runs need :func:`simulator.simulate`): splits other than gated ones of sub-flows between the
original's ends, wake-ups, path options and intra-host models, the per-link time series
(``link_series``); a scheduler with its own ``on_flows_changed`` (re-rating), ``on_done``,
``choose_path`` or job hooks (:data:`UNCALLED_HOOKS`), or without a rule, is refused before ``place``.
Release times (items' ``at``) are honoured: an item is ready at the later of its dependencies'
ends and its release (a timer, as the Dispatcher's release wait).

**Jobs as arrays** (issue 14: Mixtral-8x22B at 8192 GPUs is 27 million items,
about 22 GB as a :class:`Job`): :func:`compact_arrays` makes the same
:class:`CompactJob` from a :class:`workloads.arrays.ArrayJob`
(:func:`workloads.moe.moe_arrays`), with numpy; its results are arrays
(:meth:`CompactResult.save_items`, :func:`load_items`) and a record-less
:class:`RunResult` (:meth:`CompactResult.summary_result`). Item indices are
int32 in the kernel's work arrays (about 16 bytes per item there: the work lists grow as needed).
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit

from railbed.dispatch import RunStalled, SchedulerError, check_acyclic, check_conservation, check_placement
from railbed.errors import SpecError
from railbed.job import Flow, Job, Placement, Task, attrs_of
from railbed.results import ItemRecord, RunResult
from railbed.scheduler import Rule, Scheduler, Split, SplitArrays, SubFlow
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from railbed.units import Framing
from simulator.contention import TYPES, Meter, meter_step
from simulator.contention import result as contention_result
from simulator.fabric import Fabric, link_stats
from simulator.network import advance_kernel, peak_utilisation
from simulator.run import dscp_classes
from tc_policies.plan import Policy
from workloads.arrays import ArrayJob, Ids, ids_of

TASK, LOCAL, NET = 0, 1, 2  # kinds of item
MAX_HOPS = 4
MAX_ANALYSIS_ITEMS = 4_000_000  # jobs up to this get a critical path and overlap (about 1 KB per item at peak)


@dataclass
class CompactJob:
    """A placed job as arrays, item ``i`` being the job's ``i``-th item (``ids[i]``).

    It is :class:`railbed.job.Job` after ``place`` and the scheduler's
    :class:`~railbed.scheduler.Rule` s, with everything the run needs and
    nothing a scheduler reads: names become indices, flows their route and
    wire bits. ``dep_ptr``/``dep_idx`` list each item's dependents (CSR);
    ``missing`` counts its dependencies."""

    name: str
    ids: list[str]
    kind: np.ndarray  # int8: TASK, LOCAL (same-server flow), NET
    device: np.ndarray  # int32: a task's device (-1 for flows); devices numbered in (server, name) order
    duration: np.ndarray  # float64: a task's model seconds
    route: np.ndarray  # int32: a network flow's route (-1 else)
    bits: np.ndarray  # float64: a network flow's wire bits
    prio: np.ndarray  # int8: the class its DSCP gets under the tc policy
    cap: np.ndarray  # float64: its rate cap (inf: none)
    key: np.ndarray  # int64: its Rule's key, bar, queued
    bar: np.ndarray
    queued: np.ndarray  # bool
    nic: np.ndarray  # int32: a flow's source NIC, numbered over the cluster
    dscp: np.ndarray  # int8
    size: np.ndarray  # int64: payload bytes of flows
    missing: np.ndarray  # int32
    dep_ptr: np.ndarray  # int64
    dep_idx: np.ndarray  # int32
    device_cap: np.ndarray  # int32: parallel tasks per device
    route_links: np.ndarray  # int64 [route, hop], -1 past the last hop
    route_hops: np.ndarray  # int64
    route_latency: np.ndarray  # float64
    link_cap: np.ndarray  # float64 per fabric link
    link_names: list[str]
    nics: int
    spine: np.ndarray  # int16: a network flow's ECMP spine (-1: none)
    placement: Placement
    # gated flows (Rule.gate) and their sub-flows, items n_job.. (all four empty without gates)
    gate: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # int32: a gated flow's gate, -1
    gate_size: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # flows per gate
    gate_sub: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # gate g's sub-flows: [g], [g + 1]
    parent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # int32: a sub-flow's original, -1
    children: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # sub-flows per original
    iteration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))  # per item, for results (or empty)
    # for the analysis (railbed/analysis.py): a flow's coflow type (index into types; -1 tasks), its coflow (-1)
    ctype: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    types: list[str] = field(default_factory=list)
    coflow: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    hold_by_class: bool = False  # the scheduler's: Rule holds per (NIC, dscp >> 3), not per NIC
    release: np.ndarray = field(default_factory=lambda: np.zeros(0))  # float64: an item's `at` (0: none; or empty)

    @property
    def items(self) -> int:
        return len(self.kind)

    def nbytes(self) -> int:
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


@dataclass
class CompactResult:
    """Ready, start and end model times per item (``ids`` order), the makespan, link totals."""

    job: CompactJob
    ready: np.ndarray
    start: np.ndarray
    end: np.ndarray
    makespan: float
    events: int
    steps: int
    flow_steps: int  # active flows summed over the network's steps: the network's work
    rate_updates: int  # steps that recomputed max-min rates
    link_bits: np.ndarray
    link_peak: np.ndarray
    wall_seconds: float
    analysis: dict = field(default_factory=dict)  # run_compact(analysis=True): railbed/analysis.py's fields

    def times(self) -> dict[str, tuple[float, float, float]]:
        """Item id -> (ready, start, end), the shape the tests compare with a RunResult's records."""
        return {i: (self.ready[k], self.start[k], self.end[k]) for k, i in enumerate(self.job.ids)}

    def iterations(self) -> dict[int, float]:
        """Seconds per iteration (``RunResult.compute_iterations``), from the items' iteration
        numbers when the CompactJob has them, else the whole run as iteration 0."""
        it = self.job.iteration
        if not len(it):
            return {0: self.makespan}
        last = np.full(int(it.max()) + 1, -np.inf)
        np.maximum.at(last, it, self.end)
        out, prev = {}, 0.0
        for k, t in enumerate(last):
            if t > -np.inf:
                out[k], prev = float(t) - prev, float(t)
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-item results as arrays (the compact results format, ``save_items``): ids as
        UTF-8 bytes and offsets, kind (0 task, 1 same-server flow, 2 network flow), ready, start,
        end, size, DSCP, source NIC (numbered over the cluster), ECMP spine, parent (-1)."""
        cj = self.job
        ids = cj.ids.flat() if isinstance(cj.ids, Ids) else ids_of(cj.ids)
        parent = cj.parent if len(cj.parent) else np.full(cj.items, -1, np.int32)
        return dict(
            ids_utf8=np.frombuffer(ids.blob, np.uint8), ids_offsets=ids.offsets, kind=cj.kind, ready=self.ready,
            start=self.start, end=self.end, size=cj.size, dscp=cj.dscp, nic=cj.nic, spine=cj.spine, parent=parent,
        )  # fmt: skip

    def save_items(self, path) -> None:
        """Write :meth:`arrays` to ``path`` (``.npz``, uncompressed: 27 million items in seconds)."""
        np.savez(path, **self.arrays())

    def summary_result(self, scheduler: str, cluster: str) -> RunResult:
        """A :class:`RunResult` without per-item records, for runs too large for them (the items
        are in :meth:`save_items`' file): makespan, iterations, link totals, and notes with the
        item counts and flow completion times (end - start; p50 / p99 over the flows)."""
        from simulator.run import MODEL_NOTE

        cj = self.job
        res = RunResult("simulator", cj.name, scheduler, cluster, 1.0)
        res.makespan = self.makespan
        res.iterations = self.iterations()
        res.links = link_stats(cj.link_names, cj.link_cap, self.link_bits, self.link_peak, self.makespan)
        flows = cj.kind != TASK
        fct = self.end[flows] - self.start[flows]
        p50, p99 = np.percentile(fct, [50, 99]) if len(fct) else (0.0, 0.0)
        res.notes += [
            MODEL_NOTE,
            f"compact engine, arrays only: {cj.items:,} items ({int((~flows).sum()):,} tasks, "
            f"{int((cj.kind == NET).sum()):,} network flows, {int((cj.kind == LOCAL).sum()):,} same-server flows "
            f"taking 0 s); per-item times in items.npz (simulator.compact.load_items), not in this file",
            f"flow completion times (end - start): median {p50:.6g} s, p99 {p99:.6g} s",
            f"simulator: {self.events} events in {self.steps} steps, {self.wall_seconds:.1f} s",
        ]
        res.wall_seconds = self.wall_seconds
        res.analysis = self.analysis
        return res

    def to_run_result(self, job: Job, scheduler: str) -> RunResult:
        """The :class:`RunResult` :func:`simulator.simulate` would return for the same run: the
        same records; ``events`` sorted by time (ties: ready, start, end, then item order, where
        the Dispatcher logs in the order it handled them); no ``link_series``. A sub-flow's
        record shares its original's ``attrs`` dict, and an event its record's times (the
        same float objects): a record costs about 600 bytes, not 900 (Hermod's sub-flows at
        128 GPUs: 2.7 million records)."""
        from simulator.run import MODEL_NOTE

        cj, pl = self.job, self.job.placement
        records = {}
        gated = len(cj.gate_size) > 0
        items = list(job.items.values())
        n_job = len(items)
        ids = cj.ids
        ready, start, end = self.ready.tolist(), self.start.tolist(), self.end.tolist()
        attrs: dict[int, dict] = {}  # an original's attrs, for its sub-flows
        for k in range(cj.items):
            item = items[k] if k < n_job else items[cj.parent[k]]  # a sub-flow: its original's attributes
            times = dict(ready=ready[k], start=start[k], end=end[k])
            if isinstance(item, Task):
                loc = pl[item.endpoint]
                rec = ItemRecord(item.id, "task", server=loc.server, device=loc.device, attrs=attrs_of(item), **times)
                records[item.id] = rec
                continue
            src, dst = pl[item.src], pl[item.dst]
            split = gated and k < n_job and cj.gate[k] >= 0
            if k < n_job:
                at, size, parent = attrs_of(item), item.size, item.parent
                if split:
                    attrs[k] = at
            else:
                o = int(cj.parent[k])
                at, size, parent = attrs[o] if o in attrs else attrs_of(item), int(cj.size[k]), item.id
            rec = ItemRecord(
                ids[k], "flow", server=src.server, device=src.device, dst_server=dst.server, src_nic=src.nic,
                dst_nic=dst.nic, size=size, received=size, dscp=None if split else int(cj.dscp[k]),
                rate=None if split or math.isinf(cj.cap[k]) else float(cj.cap[k]),
                spine=None if cj.spine[k] < 0 else int(cj.spine[k]), attrs=at, parent=parent, **times,
            )  # fmt: skip
            if split:
                rec.children = []
            records[rec.id] = rec
        del attrs
        for k in range(n_job, cj.items):
            records[ids[cj.parent[k]]].children.append(ids[k])
        res = RunResult("simulator", job.name, scheduler, "", 1.0, items=records)
        n = cj.items  # events by (time, ready/start/end, item) as sorting those tuples would: stable by time
        order = np.argsort(np.concatenate((self.ready, self.start, self.end)), kind="stable")
        whats, times = ("ready", "start", "end"), (ready, start, end)
        res.events = [(times[w][k], whats[w], ids[k]) for w, k in zip((order // n).tolist(), (order % n).tolist())]
        del order
        res.makespan = self.makespan
        res.compute_iterations()
        res.links = link_stats(cj.link_names, cj.link_cap, self.link_bits, self.link_peak, self.makespan)
        res.notes.append(MODEL_NOTE)
        local = int((cj.kind == LOCAL).sum())
        if local:
            res.notes.append(f"{local} same-server flows took 0 s: their server has no host model")
        res.notes.append(
            f"simulator: {self.events} events in {self.steps} steps, engine compact (no link_series; events "
            "sorted by time)"
        )
        res.wall_seconds = self.wall_seconds
        res.analysis = self.analysis
        return res


def compact(job: Job, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority") -> CompactJob:
    """Place ``job`` with ``scheduler`` and turn it into a :class:`CompactJob` (see module doc).

    Raises :class:`SpecError` for what the compact engine does not model (path
    options, intra-host models) and when the scheduler has no rule for a flow."""
    job = job.validate()
    _refuse_host_models(cluster)
    _refuse_without_rules(scheduler, job, cluster)
    topology = Topology(cluster)
    fabric = Fabric(topology)
    placement = scheduler.place(job.public(), cluster)
    check_placement(job, cluster, placement)
    classes = np.array(dscp_classes(policy), dtype=np.int64)
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    devices = sorted({(placement[t.endpoint].server, placement[t.endpoint].device) for t in job.tasks})
    dev_id = {d: k for k, d in enumerate(devices)}
    rules: dict[int, Rule] = {}
    gates: dict[str, list[int]] = {}
    for k, item in enumerate(job.items.values()):
        if isinstance(item, Flow):
            if item.options:
                raise SpecError(f"items.{item.id}.options", "the compact engine has no path options")
            rule = _checked_rule(scheduler, scheduler.rule(_as_offered(item), placement, cluster), item.id)
            rules[k] = rule
            if rule.gate is not None:
                gates.setdefault(rule.gate, []).append(k)
    items: list = list(job.items.values())
    ids = list(job.items)
    n = len(items)
    index = {i: k for k, i in enumerate(ids)}
    kind = np.zeros(n, np.int8)
    device = np.full(n, -1, np.int32)
    duration = np.zeros(n)
    route = np.full(n, -1, np.int32)
    bits = np.zeros(n)
    prio = np.zeros(n, np.int8)
    cap = np.full(n, math.inf)
    key = np.zeros(n, np.int64)
    bar = np.zeros(n, np.int64)
    queued = np.zeros(n, np.bool_)
    nic = np.full(n, -1, np.int32)
    dscp = np.zeros(n, np.int8)
    size = np.zeros(n, np.int64)
    spine_of = np.full(n, -1, np.int16)
    routes: dict[tuple, int] = {}
    route_list = []
    for k, item in enumerate(items):
        if isinstance(item, Task):
            loc = placement[item.endpoint]
            kind[k], device[k], duration[k] = TASK, dev_id[(loc.server, loc.device)], item.duration
            continue
        assert isinstance(item, Flow)
        src, dst = placement[item.src], placement[item.dst]
        nic[k] = nic_base[src.server] + src.nic
        size[k] = item.size or 0
        kind[k] = LOCAL if src.server == dst.server else NET
        rule = rules[k]
        key[k] = rule.key
        if rule.gate is not None:  # split at run time: never starts itself (its sub-flows: _add_gates)
            continue
        dscp[k], bar[k], queued[k] = rule.dscp, rule.bar, rule.queued
        cap[k] = math.inf if rule.rate is None else rule.rate
        if kind[k] == LOCAL:
            continue
        a, b = (src.server, src.nic), (dst.server, dst.nic)
        spine = topology.ecmp_spine(a, b, item.id)
        spine_of[k] = -1 if spine is None else spine
        rkey = (a, b, spine)
        r = routes.get(rkey)
        if r is None:
            r = routes[rkey] = len(route_list)
            route_list.append(fabric.route(a, b, spine))
        route[k] = r
        bits[k] = 8.0 * cluster.fabric.framing.wire_bytes(item.size or 0)
        prio[k] = classes[dscp[k]]
    route_links, route_hops, route_latency = _route_table(route_list)
    missing = np.array([len(it.deps) for it in items], np.int32)
    dependents = job.dependents()
    counts = np.array([len(dependents[i]) for i in ids], np.int64)
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=dep_ptr[1:])
    dep_idx = np.fromiter((index[j] for i in ids for j in dependents[i]), np.int32, count=int(dep_ptr[-1]))
    device_cap = np.array([job.capacity_of(d) for _, d in devices], np.int32)
    cj = CompactJob(
        job.name, ids, kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, dscp, size,
        missing, dep_ptr, dep_idx, device_cap, route_links, route_hops, route_latency,
        fabric.capacity.copy(), list(fabric.names), int(nic_base[-1]), spine_of, placement,
        *_gate_arrays({}, np.zeros(0, np.int32), np.zeros(0, np.int64), n),
        np.array([getattr(it, "iteration", 0) or 0 for it in items], np.int16),
        *_types_and_coflows(items),
        bool(getattr(scheduler, "hold_by_class", False)),
        _releases(items),
    )  # fmt: skip
    if gates:  # the sub-flows, items after the job's, as compact_arrays appends them
        nspines, total = len(topology.spines), cj.nics
        route_of = {}  # compact_arrays' route keys: (source NIC, destination NIC, spine + 1)
        for (a, b, sp), r in routes.items():
            ends = (int(nic_base[a[0]]) + a[1]) * total + int(nic_base[b[0]]) + b[1]
            route_of[ends * (nspines + 1) + (0 if sp is None else sp + 1)] = r
        flows = {k: items[k] for k in sorted(k for members in gates.values() for k in members)}
        _add_gates(cj, flows, gates, ids, scheduler, placement, cluster, topology, fabric, classes, route_of)
    return cj


def _releases(items: list) -> np.ndarray:
    """Each item's release time (``at``, 0 without), or an empty array when none has one."""
    at = np.array([it.at or 0.0 for it in items], np.float64)
    return at if at.any() else np.zeros(0)


def _types_and_coflows(items: list) -> tuple[np.ndarray, list[str], np.ndarray]:
    """CompactJob's ``ctype``, ``types`` and ``coflow`` of a job's items (sub-flows included)."""
    from railbed.analysis import UNTYPED, type_order

    types = type_order(it.coflow_type or UNTYPED for it in items if isinstance(it, Flow))
    tix = {t: k for k, t in enumerate(types)}
    coflows: dict[str, int] = {}
    ctype = np.array([tix[it.coflow_type or UNTYPED] if isinstance(it, Flow) else -1 for it in items], np.int16)
    coflow = np.array(
        [coflows.setdefault(it.coflow, len(coflows)) if it.coflow is not None else -1 for it in items], np.int32
    )
    return ctype, types, coflow


def _as_offered(flow: Flow) -> Flow:
    """The flow as ``on_ready`` sees it in the Dispatcher (its view's job, :meth:`Job.public`,
    with ``on_ready`` sizes revealed by then): a ``hidden`` size stays ``None``. ``rule`` and
    ``gate_split`` stand for ``on_ready``, so they get this, never a size it could not read."""
    return replace(flow, size=None) if flow.reveal == "hidden" else flow


def _refuse_host_models(cluster: ClusterSpec) -> None:
    for s in cluster.servers:
        if s.host is not None:
            why = f"server {s.name} has a hardware model ({s.host.kind}); the compact engine has none"
            raise SpecError("servers", why)


# hooks the compact engine never calls
UNCALLED_HOOKS = ("on_flows_changed", "on_done", "choose_path", "on_job_arrived", "on_job_finished")


def _refuse_without_rules(scheduler: Scheduler, job: Job, cluster: ClusterSpec) -> None:
    """Before ``place`` (which may be long, or fail on a job the scheduler was not made for):
    a scheduler that decides in a hook the engine never calls (a ``rule`` stands for
    ``on_ready`` only), or keeps the base ``rule``, which is ``None`` exactly when it decides
    in its hooks (the base tells without a placement)."""
    mine = type(scheduler)
    for hook in UNCALLED_HOOKS:
        if getattr(mine, hook) is not getattr(Scheduler, hook):
            why = f"{scheduler.name} has its own {hook}, which the compact engine never calls"
            raise SpecError("scheduler", f"{why}: run it on the fluid backend")
    if mine.rule is Scheduler.rule:
        flow = next((it for it in job.items.values() if isinstance(it, Flow)), None)
        if flow is not None:
            _checked_rule(scheduler, Scheduler.rule(scheduler, flow, None, cluster), flow.id)


def _checked_rule(scheduler: Scheduler, rule: Rule | None, what: str) -> Rule:
    """``rule`` (the scheduler's for flow ``what``), or a one-line error: none, or out of range."""
    if rule is None:
        raise SpecError("scheduler", f"{scheduler.name} has no rule for flow {what}: run it on the fluid backend")
    if not 0 <= rule.dscp <= 63 or (rule.rate is not None and not rule.rate > 0):
        raise SpecError("scheduler", f"{scheduler.name}: rule {rule} for {what} out of range")
    return rule


def _route_table(routes: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Links (padded with -1 to ``MAX_HOPS``), hop counts and latencies of fabric routes, one
    row each (one placeholder row when there are none)."""
    nr = max(1, len(routes))
    links, hops, latency = np.full((nr, MAX_HOPS), -1, np.int64), np.zeros(nr, np.int64), np.zeros(nr)
    if not routes:
        return links, hops, latency
    n = np.array([len(rt.links) for rt in routes], np.int64)
    if n.max() > MAX_HOPS:
        raise SpecError("fabric", f"a route of {int(n.max())} hops; the compact engine takes {MAX_HOPS}")
    row = np.repeat(np.arange(len(routes)), n)
    links[row, np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)] = [h for rt in routes for h in rt.links]
    hops[:] = n
    latency[:] = [rt.latency for rt in routes]
    return links, hops, latency


def _wire_bits(payload: np.ndarray, framing: Framing) -> np.ndarray:
    """``8 * framing.wire_bytes`` over an array of payloads (>= 0)."""
    if framing.payload_only:
        return 8.0 * payload
    return 8.0 * (payload + (-(-payload // framing.mss)) * (framing.frame - framing.mss))


def _gate_arrays(gates: dict[str, list[int]], parent: np.ndarray, gate_of: np.ndarray, n_job: int) -> tuple:
    """CompactJob's ``gate``, ``gate_size``, ``gate_sub``, ``parent``, ``children`` (all empty
    without gates) for the gated flows and their sub-flows (items ``n_job`` on; ``parent`` and
    ``gate_of``: each sub-flow's original and gate, in item order)."""
    m = len(parent)
    n = n_job + m if gates else 0
    gate = np.full(n, -1, np.int32)
    for g, members in enumerate(gates.values()):
        gate[members] = g
    gate_size = np.array([len(mm) for mm in gates.values()], np.int32)
    gate_sub = np.full(len(gates) + 1, n_job if gates else 0, np.int64)
    if gates:
        gate_sub[1:] = n_job + np.cumsum(np.bincount(gate_of, minlength=len(gates)))
    full_parent = np.full(n, -1, np.int32)
    full_parent[n_job:] = parent
    children = np.zeros(n if gates else 0, np.int32)
    if gates:
        have, count = np.unique(parent, return_counts=True)
        children[have] = count
    return gate, gate_size, gate_sub, full_parent, children


def _checked_split(split, flows: list[Flow], who: str) -> SplitArrays:
    """A :class:`Split` of a gate's ``flows`` (``gate_split``'s), checked as the Dispatcher
    checks one (sub-flows of the gate's own flows, bytes conserved, no cycle) plus what the
    compact engine needs (sub-flows between their original's ends, depending only on sub-flows
    of the split), as :class:`SplitArrays` whose suffixes are the sub-flows' whole ids (the
    new ids are checked with every gate's, :func:`_add_gates`). Sub-flows in the split's order
    (originals, then their sub-flows), the order in which the Dispatcher makes and starts them."""
    where = {f.id: n for n, f in enumerate(flows)}
    if not isinstance(split, Split) or set(split.parts) != set(where):
        raise SchedulerError(f"{who}: must be a Split of exactly the gate's flows")
    mine = {sub.id: x for x, sub in enumerate(s for subs in split.parts.values() for s in subs)}
    subs: list[SubFlow] = []
    of: list[int] = []
    for orig_id, parts in split.parts.items():
        orig = flows[where[orig_id]]
        if not parts:
            raise SchedulerError(f"{who}: {orig_id} gets no sub-flows")
        for sub in parts:
            if not isinstance(sub, SubFlow) or sub.carries or (sub.src or orig.src, sub.dst or orig.dst) != (
                orig.src, orig.dst
            ):  # fmt: skip
                raise SpecError("scheduler", f"{who}: sub-flow {sub!r}: the compact engine takes sub-flows "
                                "between their original's ends only")  # fmt: skip
            if isinstance(sub.size, bool) or not isinstance(sub.size, int) or sub.size < 0:
                raise SchedulerError(f"{who}: sub-flow {sub.id} size {sub.size!r} is not a byte count")
            if not 0 <= sub.dscp <= 63 or (sub.rate is not None and not sub.rate > 0):
                raise SchedulerError(f"{who}: sub-flow {sub.id}: DSCP or rate out of range")
            if any(d not in mine for d in sub.deps):
                raise SpecError("scheduler", f"{who}: sub-flow {sub.id} depends on items outside the split")
            subs.append(sub)
            of.append(where[orig_id])
        check_conservation(orig, [(orig.src, orig.dst, sub.size) for sub in parts], who)
    check_acyclic(split, who)
    if len(mine) != len(subs):
        raise SchedulerError(f"{who}: a sub-flow id is not new in the run")
    flow = np.array(of, np.int64)
    lens = np.array([len(sub.deps) for sub in subs], np.int64)
    dep_ptr = np.zeros(len(subs) + 1, np.int64)
    np.cumsum(lens, out=dep_ptr[1:])
    return SplitArrays(
        flow, np.array([sub.size for sub in subs], np.int64), np.arange(len(subs)), [sub.id for sub in subs],
        dep_ptr, np.array([mine[d] for sub in subs for d in sub.deps], np.int64),
        np.array([sub.dscp for sub in subs], np.int64),
        np.array([math.inf if sub.rate is None else sub.rate for sub in subs], np.float64),
    )  # fmt: skip


def _joined(splits: list[SplitArrays], f_off) -> SplitArrays:
    """One :class:`SplitArrays` over all gates' flows of per-gate ones (``f_off[g]``: gate ``g``'s
    first flow among all), sub-flow indices and suffixes shifted."""
    m_off = np.cumsum([0] + [len(a.flow) for a in splits])
    s_off = np.cumsum([0] + [len(a.suffixes) for a in splits])
    d_off = np.cumsum([0] + [len(a.dep) for a in splits])

    def cat(parts, dtype):
        return np.concatenate(list(parts) + [np.zeros(0, dtype)]).astype(dtype, copy=False)

    return SplitArrays(
        cat((a.flow + f_off[g] for g, a in enumerate(splits)), np.int64),
        cat((a.size for a in splits), np.int64),
        cat((a.suffix + s_off[g] for g, a in enumerate(splits)), np.int64),
        [s for a in splits for s in a.suffixes],
        np.concatenate([[0]] + [a.dep_ptr[1:] + d_off[g] for g, a in enumerate(splits)]).astype(np.int64),
        cat((a.dep + m_off[g] for g, a in enumerate(splits)), np.int64),
        cat((a.dscp for a in splits), np.int64),
        cat((a.rate for a in splits), np.float64),
    )


def _crc_tables(lengths: list[int]) -> np.ndarray:
    """Per length ``l``, the linear map ``v -> crc32(s, v) ^ crc32(s, 0)`` (the same for every
    ``s`` of ``l`` bytes: CRC-32 is affine in its start value) as 4 tables of 256 (one per byte
    of ``v``): ``crc32(p + s) = map(crc32(p)) ^ crc32(s)``."""
    out = np.zeros((len(lengths), 4, 256), np.uint32)
    for li, n in enumerate(lengths):
        z = bytes(n)
        base = zlib.crc32(z)
        for b in range(4):
            out[li, b] = [zlib.crc32(z, y << (8 * b)) ^ base for y in range(256)]
    return out


@njit(cache=True)
def _acyclic(ndeps, ptr, dependents):  # pragma: no cover - numba
    """Kahn's order over the sub-flows (``ndeps[x]`` dependencies each, dependents as CSR):
    -1 if every sub-flow gets ordered, else one left in or behind a cycle."""
    m = ndeps.shape[0]
    left = ndeps.copy()
    queue = np.empty(m, np.int64)
    head = tail = 0
    for x in range(m):
        if left[x] == 0:
            queue[tail] = x
            tail += 1
    while head < tail:
        d = queue[head]
        head += 1
        for e in range(ptr[d], ptr[d + 1]):
            x = dependents[e]
            left[x] -= 1
            if left[x] == 0:
                queue[tail] = x
                tail += 1
    if tail == m:
        return -1
    for x in range(m):
        if left[x] > 0:
            return x
    return -1


def acyclic_reference(ndeps, ptr, dependents) -> int:
    """:func:`_acyclic`'s twin: repeatedly order every sub-flow whose dependencies are all ordered;
    -1 if all get ordered, else the first one left (in or behind a cycle)."""
    deps: dict[int, list[int]] = {x: [] for x in range(len(ndeps))}
    for d in range(len(ndeps)):
        for x in dependents[ptr[d] : ptr[d + 1]]:
            deps[int(x)].append(d)
    done: set[int] = set()
    while True:
        ready = [x for x in deps if x not in done and all(d in done for d in deps[x])]
        if not ready:
            left = [x for x in deps if x not in done]
            return left[0] if left else -1
        done.update(ready)


def compact_arrays(
    aj: ArrayJob, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority"
) -> CompactJob:
    """:func:`compact` for an :class:`~workloads.arrays.ArrayJob`, with numpy over its columns.

    The same :class:`CompactJob`, array for array, as ``compact`` of the equal :class:`Job`
    (``tests/test_compact.py``), under the assumption the rule classes rest on
    (:mod:`workloads.arrays`): ``place`` and ``rule`` read the endpoints and, of the flows,
    only what a class shares (attributes, source, whether it crosses servers). ``place``
    gets a skeleton job of the endpoints and one representative flow per class; ``rule``
    is asked once per class. When a class is gated (:class:`~railbed.scheduler.Rule` ``gate``:
    Hermod's EP coflows between servers, Alg. 3), every flow of the gated classes joins the
    skeleton, ``place`` and the class rules are asked again (Hermod learns its coflows'
    members there), ``rule`` is asked per gated flow (its gate) and ``gate_split`` per gate
    (:func:`_add_gates`). The 8192-GPU Mixtral-8x22B job has no gates (EP 8 = TP 8 is one
    server); Qwen-MoE-24L's EP 32 spans four."""
    aj.finish()
    _refuse_host_models(cluster)
    topology = Topology(cluster)
    fabric = Fabric(topology)
    in_skeleton = {aj.reps[c][0]: aj.rep_flow(c) for c in range(len(aj.reps))}
    placement = _place_skeleton(aj, in_skeleton, scheduler, cluster)
    rules = [scheduler.rule(_as_offered(in_skeleton[h]), placement, cluster) for h, _ in aj.reps]
    gated_classes = [c for c, r in enumerate(rules) if r is not None and r.gate is not None]
    members = np.zeros(0, np.int64)
    if gated_classes:  # their flows join the skeleton: the scheduler learns the gates' members
        members = np.flatnonzero((aj.kind == 1) & np.isin(aj.rclass, gated_classes))
        for k in members:
            in_skeleton[int(k)] = _member_flow(aj, int(k))
        again = _place_skeleton(aj, in_skeleton, scheduler, cluster)
        if again.locations != placement.locations:
            raise SpecError("scheduler", f"{scheduler.name} places the skeleton with the gated flows differently")
        rules = [scheduler.rule(_as_offered(in_skeleton[h]), placement, cluster) for h, _ in aj.reps]
        gates: dict[str, list[int]] = {}
        for k in members.tolist():  # each gated flow's gate from rule on the flow itself (its coflow)
            f = in_skeleton[k]
            rule = scheduler.rule(_as_offered(f), placement, cluster)
            if rule is None or rule.gate is None:
                raise SpecError("scheduler", f"{scheduler.name}: flow {f.id} is not gated like its rule class")
            gates.setdefault(rule.gate, []).append(k)
        # the gated flows as Flows only while asked: made again per batch of gates (_GatedFlows)
        in_skeleton = {h: in_skeleton[h] for h, _ in aj.reps}
    classes = np.array(dscp_classes(policy), dtype=np.int64)
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    locs = [placement[e] for e in aj.endpoints]
    ep_server = np.array([loc.server for loc in locs], np.int64)
    ep_nic = np.array([nic_base[loc.server] + loc.nic for loc in locs], np.int64)
    n = aj.items
    is_task = aj.kind == 0
    is_flow = ~is_task
    # devices: the tasks' (server, device) in sorted order, as compact()
    task_eps = np.unique(aj.a[is_task])
    devices = sorted({(locs[e].server, locs[e].device) for e in task_eps})
    dev_id = {d: k for k, d in enumerate(devices)}
    ep_dev = np.full(len(locs), -1, np.int32)
    for e in task_eps:
        ep_dev[e] = dev_id[(locs[e].server, locs[e].device)]
    device = np.where(is_task, ep_dev[aj.a], -1).astype(np.int32)
    duration = np.where(is_task, aj.value, 0.0)
    # rules, once per class
    nrep = len(aj.reps)
    r_dscp = np.zeros(nrep, np.int8)
    r_cap = np.full(nrep, math.inf)
    r_key = np.zeros(nrep, np.int64)
    r_bar = np.zeros(nrep, np.int64)
    r_queued = np.zeros(nrep, np.bool_)
    r_gated = np.zeros(nrep, np.bool_)
    for c in range(nrep):
        rule = _checked_rule(scheduler, rules[c], f"{in_skeleton[aj.reps[c][0]].id} (its class)")
        r_gated[c] = rule.gate is not None
        r_dscp[c], r_key[c], r_bar[c], r_queued[c] = rule.dscp, rule.key, rule.bar, rule.queued
        r_cap[c] = math.inf if rule.rate is None else rule.rate
    rc = np.where(is_flow, aj.rclass, 0)
    gated = is_flow & r_gated[rc] if r_gated.any() else np.zeros(n, np.bool_)
    ruled = is_flow & ~gated  # a gated flow never starts itself: no DSCP, cap or wait (compact())
    dscp = np.where(ruled, r_dscp[rc], 0).astype(np.int8)
    key = np.where(is_flow, r_key[rc], 0)
    bar = np.where(ruled, r_bar[rc], 0)
    queued = np.where(ruled, r_queued[rc], False)
    cap = np.where(ruled, r_cap[rc], math.inf)
    del rc, ruled
    src = np.where(is_flow, aj.a, 0)
    dst = np.where(is_flow, aj.b, 0)
    nic = np.where(is_flow, ep_nic[src], -1).astype(np.int32)
    size = np.where(is_flow, aj.value, 0).astype(np.int64)
    net = is_flow & (ep_server[src] != ep_server[dst])
    kind = np.full(n, TASK, np.int8)
    kind[is_flow] = LOCAL
    kind[net] = NET
    net &= ~gated  # the flows routed: a gated one's sub-flows are
    # spines (ECMP by CRC-32 of the id, Topology.ecmp_spine) and routes in order of first use
    nic_leaf = np.array([topology.nics[sv][k].leaf for sv in range(len(cluster.servers))
                         for k in range(cluster.servers[sv].nics)], np.int64)  # fmt: skip
    a_nic, b_nic = ep_nic[src[net]], ep_nic[dst[net]]
    nspines = len(topology.spines)
    cross_leaf = nic_leaf[a_nic] != nic_leaf[b_nic]
    sp = np.where(cross_leaf, aj.crc[net].astype(np.int64) % max(nspines, 1), -1) if nspines else np.full(
        len(a_nic), -1, np.int64)  # fmt: skip
    spine_of = np.full(n, -1, np.int16)
    spine_of[net] = sp
    total_nics = int(nic_base[-1])
    rkey = (a_nic * total_nics + b_nic) * (nspines + 1) + (sp + 1)
    uniq, first, inverse = np.unique(rkey, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    route = np.full(n, -1, np.int32)
    route[net] = rank[inverse]
    server_of_nic = np.repeat(np.arange(len(cluster.servers)), [s.nics for s in cluster.servers])
    route_list = []
    for u in order:
        i = first[u]
        a, b, spn = int(a_nic[i]), int(b_nic[i]), int(sp[i])
        route_list.append(
            fabric.route(
                (int(server_of_nic[a]), a - int(nic_base[server_of_nic[a]])),
                (int(server_of_nic[b]), b - int(nic_base[server_of_nic[b]])),
                None if spn < 0 else spn,
            )
        )
    route_links, route_hops, route_latency = _route_table(route_list)
    del route_list
    del a_nic, b_nic, sp, rkey, inverse, cross_leaf
    payload = np.where(net, size, 0)
    bits = _wire_bits(payload, cluster.fabric.framing)
    prio = np.where(net, classes[dscp.astype(np.int64)], 0).astype(np.int8)
    del payload, src, dst
    iteration = aj.iteration.astype(np.int16)
    ids = aj.ids
    missing = aj.dep_count.copy()
    owner = np.repeat(np.arange(n, dtype=np.int32), aj.dep_count)
    by_dep = np.argsort(aj.deps, kind="stable")
    dep_idx = owner[by_dep]
    del owner, by_dep
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(aj.deps, minlength=n), out=dep_ptr[1:])
    device_cap = np.array([aj.skeleton.capacity_of(d) for _, d in devices], np.int32)
    cj = CompactJob(
        aj.name, ids, kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, dscp, size,
        missing, dep_ptr, dep_idx, device_cap, route_links, route_hops, route_latency,
        fabric.capacity.copy(), list(fabric.names), total_nics, spine_of, placement, iteration=iteration,
        **_array_types(aj, is_flow),
        hold_by_class=bool(getattr(scheduler, "hold_by_class", False)),
    )  # fmt: skip
    if gated.any():
        flows = _GatedFlows(aj, members)
        route_of = {int(u): int(r) for u, r in zip(uniq, rank)}
        _add_gates(cj, flows, gates, None, scheduler, placement, cluster, topology, fabric, classes, route_of)
    _trim_heap()
    return cj


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing): a compaction frees a million small objects and numpy buffers below glibc's mmap
    threshold, whose pages would otherwise stay in the process through the run (1.4 GB of RSS
    after the 1024-GPU hermod compaction)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _array_types(aj: ArrayJob, is_flow: np.ndarray) -> dict:
    """CompactJob's ``ctype``, ``types`` and ``coflow`` from an ArrayJob's rule classes (a
    class shares its coflow type) and its ``coflow`` column."""
    from railbed.analysis import UNTYPED, type_order

    names = [fields.get("coflow_type") or UNTYPED for _, fields in aj.reps]
    types = type_order(names)
    of_class = np.array([types.index(t) for t in names] or [0], np.int16)
    ctype = np.where(is_flow, of_class[np.where(is_flow, aj.rclass, 0)], -1).astype(np.int16)
    return {"ctype": ctype, "types": types, "coflow": np.asarray(aj.coflow, np.int32).copy()}


def _place_skeleton(aj: ArrayJob, flows: dict[int, Flow], scheduler: Scheduler, cluster: ClusterSpec) -> Placement:
    """``place`` on a job of the ArrayJob's endpoints and ``flows`` (item index -> Flow, in item order)."""
    skeleton = Job(aj.name, aj.skeleton.capacity, aj.skeleton.default_capacity)
    skeleton.endpoints = dict(aj.skeleton.endpoints)
    for k in sorted(flows):
        skeleton.items[flows[k].id] = flows[k]
    placement = scheduler.place(skeleton.public(), cluster)
    check_placement(skeleton, cluster, placement)
    return placement


def _member_flow(aj: ArrayJob, k: int) -> Flow:
    """Item ``k`` of an ArrayJob as a :class:`Flow` (its class's attributes, its own ends, size, coflow)."""
    _, fields = aj.reps[aj.rclass[k]]
    co = aj.coflow[k]
    return Flow(
        aj.ids[k], **dict(fields, src=aj.endpoints[aj.a[k]], dst=aj.endpoints[aj.b[k]], size=int(aj.value[k]),
                          coflow=aj.coflow_names[co] if co >= 0 else None),
    )  # fmt: skip


GATE_CHUNK = 1 << 17  # gated flows per call of gate_split_arrays (and per batch of the checks)


class _GatedFlows(Mapping):
    """Item index -> :class:`Flow` of an ArrayJob's gated flows (``members``, in item order),
    each made when asked (:func:`_member_flow`): 7 million gated flows at 8192 GPUs, about
    350 bytes each as Flows, are not kept while :func:`_add_gates` runs (it asks a batch's once)."""

    def __init__(self, aj: ArrayJob, members: np.ndarray) -> None:
        self.aj, self.members = aj, members.tolist()
        self.index = dict.fromkeys(self.members)

    def __getitem__(self, k: int) -> Flow:
        if k not in self.index:
            raise KeyError(k)
        return _member_flow(self.aj, k)

    def __iter__(self):
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def raw_id(self, k: int) -> bytes:
        ids = self.aj.ids
        return ids.blob[ids.offsets[k] : ids.offsets[k + 1]]


def _add_gates(cj, flows, gates, taken, scheduler, placement, cluster, topology, fabric, classes, route_of,
               chunk: int | None = None) -> None:  # fmt: skip
    """Append to ``cj`` the sub-flows of every gate (``gates``: name -> its flows' item indices,
    in order of its first flow; ``flows``: item index -> Flow of every gated flow, in item order):
    the scheduler's :meth:`~railbed.scheduler.Scheduler.gate_split_arrays`, else its
    ``gate_split`` per gate checked as a :class:`Split` (:func:`_checked_split`); then, with numpy
    over the sub-flows, the Dispatcher's checks (every original split, its bytes conserved, ids
    new in the run, no cycle; :class:`SchedulerError` naming the gate), the ids, ECMP spines
    (CRC-32 of the id), routes (new ones after the job's; ``route_of``: route key -> index) and
    columns, as :func:`compact` of the job with these sub-flows as items would make them.
    ``taken``: the ids a sub-flow's must differ from besides each other's (``None``: the gated
    flows'). The gates go in batches of about ``chunk`` flows (:data:`GATE_CHUNK`) (a split is a pure function of
    its gate): what a batch needs while it is checked is freed before the next, and only the
    sub-flows' columns, in their final types, are kept until they join ``cj`` (at 8192 GPUs,
    33 million sub-flows: the whole batch at once took about 300 bytes a sub-flow). A batch's
    checks run in the order above; the ids' newness is checked over all batches at the end."""
    chunk = chunk or GATE_CHUNK
    n_job = cj.items
    gated = list(flows)
    pos = {k: x for x, k in enumerate(gated)}
    names = list(gates)
    mems = list(gates.values())
    g_off = np.cumsum([0] + [len(mem) for mem in mems])  # gate g's flows: g_off[g]..g_off[g + 1] in gate order
    p_crc = np.zeros(len(gated) + 1, np.int64)  # per gated flow (position + 1; 0: no prefix), its id's CRC-32
    p_len = np.zeros(len(gated) + 1, np.int64)  # and length in bytes
    p_slash = np.zeros(len(gated) + 1, np.bool_)
    raw_id = flows.raw_id if isinstance(flows, _GatedFlows) else (lambda k: flows[k].id.encode())
    for x, k in enumerate(gated):
        raw = raw_id(k)
        p_crc[x + 1], p_len[x + 1], p_slash[x + 1] = zlib.crc32(raw), len(raw), b"/" in raw

    def who(g) -> str:
        return f"{scheduler.name}: gate_split of {names[int(g)]}"

    table: dict[bytes, int] = {}  # suffixes of all batches
    state = dict(base=len(route_of), new_routes=[])
    parts: list[dict] = []
    g0 = 0
    while g0 < len(mems):
        g1 = int(np.searchsorted(g_off, g_off[g0] + chunk, side="right")) - 1
        g1 = max(g1, g0 + 1)
        parts.append(_gate_batch(cj, flows, gated, pos, mems, g_off, g0, g1, scheduler, placement, cluster, topology,
                                 fabric, classes, route_of, state, table, p_crc, p_len, p_slash, who))  # fmt: skip
        g0 = g1
    m = sum(len(p["orig"]) for p in parts)

    def cat(name, dtype=None):
        got = np.concatenate([p.pop(name) for p in parts]) if parts else np.zeros(0, dtype or np.int64)
        return got if dtype is None else got.astype(dtype, copy=False)

    s_raw = list(table)
    prefix, suffix, orig, gate_of = cat("prefix", np.int32), cat("suffix"), cat("orig", np.int32), cat("gate_of")

    def sub_raw(x) -> bytes:
        return (raw_id(int(orig[x])) if prefix[x] >= 0 else b"") + s_raw[int(suffix[x])]

    if taken is None:
        t_key, t_raw = (p_len[1:] << 32) | p_crc[1:], (lambda y: raw_id(gated[y]))
    else:
        t_list = [t.encode() for t in taken]
        t_key = np.array([len(r) << 32 | zlib.crc32(r) for r in t_list], np.int64)
        t_raw = t_list.__getitem__
    _check_new(cat("id_key"), sub_raw, t_key, t_raw, gate_of, who)
    del t_key
    new_routes = state["new_routes"]
    base = state["base"]
    if new_routes:  # after the job's routes (without the placeholder row of a job that has none)
        links, hops, latency = _route_table(new_routes)
        cj.route_links = np.concatenate([cj.route_links[:base], links])
        cj.route_hops = np.concatenate([cj.route_hops[:base], hops])
        cj.route_latency = np.concatenate([cj.route_latency[:base], latency])
    # gates, parents and ids first (the columns are still the job's length), then the columns
    cj.gate, cj.gate_size, cj.gate_sub, cj.parent, cj.children = _gate_arrays(gates, orig, gate_of, n_job)
    if isinstance(cj.ids, Ids):  # kept as (original, suffix): not written out
        cj.ids = cj.ids.extended(np.where(prefix >= 0, orig, -1), suffix, s_raw)
    else:
        cj.ids = list(cj.ids) + [sub_raw(x).decode() for x in range(m)]
    prefix = suffix = gate_of = None  # noqa: F841 (sub_raw's arrays go)
    # the sub-flows' columns, one at a time (the old column, the new one and the batches' parts
    # alive); what a sub-flow shares with its original is read from the original here
    size, dscp = cat("size", cj.size.dtype), cat("dscp", cj.dscp.dtype)
    net = cj.kind[orig] == NET
    caps = [p.pop("cap") for p in parts]
    tails = dict(
        kind=lambda: cj.kind[orig], device=lambda: -1, duration=lambda: 0.0, route=lambda: cat("route"),
        bits=lambda: np.where(net, _wire_bits(size, cluster.fabric.framing), 0.0),
        prio=lambda: np.where(net, classes[dscp], 0),
        dscp=lambda: dscp, size=lambda: size, key=lambda: cj.key[orig], bar=lambda: 0, queued=lambda: False,
        nic=lambda: cj.nic[orig], spine=lambda: cat("spine"), iteration=lambda: cj.iteration[orig],
        ctype=lambda: cj.ctype[orig], coflow=lambda: cj.coflow[orig],
        cap=lambda: np.concatenate([np.full(len(p["lens"]), math.inf) if c is None else c
                                    for p, c in zip(parts, caps)]),
        missing=lambda: np.concatenate([p["lens"] for p in parts]) + 1,
    )  # fmt: skip
    for name in _SUB_COLUMNS:
        old = getattr(cj, name)
        col = np.empty(n_job + m, old.dtype)
        col[:n_job] = old
        del old
        col[n_job:] = tails[name]()
        setattr(cj, name, col)
        del col
    tails.clear()
    size = dscp = net = caps = None  # noqa: F841 (the closures' arrays go)
    m_off = np.cumsum([0] + [len(p["lens"]) for p in parts])
    ptr = np.zeros(m + 1, np.int64)
    if m:
        np.cumsum(np.concatenate([p.pop("nout") for p in parts]), out=ptr[1:])  # dependents per sub-flow
    cj.dep_ptr = np.concatenate([cj.dep_ptr, cj.dep_ptr[-1] + ptr[1:]])
    del ptr
    cj.dep_idx = np.concatenate([cj.dep_idx] + [(n_job + m_off[b] + p.pop("dependents")).astype(np.int32)
                                                for b, p in enumerate(parts)])  # fmt: skip
    parts.clear()


# the CompactJob columns a sub-flow has (besides dependencies, gates, parent and id)
_SUB_COLUMNS = ("kind", "device", "duration", "route", "bits", "prio", "dscp", "size", "cap", "key", "bar", "queued",
                "nic", "spine", "missing", "iteration", "ctype", "coflow")  # fmt: skip


def _gate_batch(cj, flows, gated, pos, mems, g_off, g0, g1, scheduler, placement, cluster, topology, fabric, classes,
                route_of, state, table, p_crc, p_len, p_slash, who) -> dict:  # fmt: skip
    """:func:`_add_gates` for gates ``g0``..``g1 - 1``: their split, checked, as the sub-flows'
    columns (in ``cj``'s types), dependencies (CSR, indices inside the batch), originals, gates,
    id prefixes (the original's item, -1: none) and suffixes (into ``table``, grown) and id keys
    (length << 32 | CRC-32). New routes go to ``route_of`` and ``state["new_routes"]``."""
    flows = {k: flows[k] for g in range(g0, g1) for k in mems[g]}  # the batch's, each made once
    member = np.array([pos[k] for g in range(g0, g1) for k in mems[g]], np.int64)  # place -> position in gated
    f_off = g_off[g0 : g1 + 1] - g_off[g0]
    offered = [[_as_offered(flows[k]) for k in mems[g]] for g in range(g0, g1)]

    def gate_at(x):  # the gate of the batch's x-th flow
        return g0 + int(np.searchsorted(f_off, x, side="right") - 1)

    arr = scheduler.gate_split_arrays(offered, placement, cluster)
    whole = arr is None  # then the suffixes are whole ids (a Split's)
    if whole:
        arr = _joined([_checked_split(scheduler.gate_split(o, placement, cluster), [flows[k] for k in mems[g0 + j]],
                                      who(g0 + j)) for j, o in enumerate(offered)], f_off)  # fmt: skip
    elif not isinstance(arr, SplitArrays):
        raise SchedulerError(f"{who(0)}: gate_split_arrays must return SplitArrays or None, got {type(arr).__name__}")
    del offered
    m = len(arr.flow)
    if any(len(c) != m for c in (arr.size, arr.suffix, arr.dscp)) or (arr.rate is not None and len(arr.rate) != m):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: SplitArrays columns of different lengths")
    if len(arr.dep_ptr) != m + 1 or arr.dep_ptr[0] != 0 or arr.dep_ptr[-1] != len(arr.dep):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: dep_ptr is not {m + 1} offsets into dep")
    # each original's sub-flows together, every original split
    rank = np.asarray(arr.flow, np.int64)  # the original's place among the batch's gates' flows
    bad = np.flatnonzero((rank < 0) | (rank >= len(member)))
    if len(bad):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: sub-flow {bad[0]}'s original is not a gated flow")
    gate_of = g0 + np.searchsorted(f_off, rank, side="right") - 1
    starts = np.concatenate([[0], np.flatnonzero(np.diff(rank)) + 1]) if m else np.zeros(0, np.int64)
    runs = np.bincount(rank[starts], minlength=len(member))  # runs of sub-flows per original: 1 each
    if (runs != 1).any():
        x = int(np.flatnonzero(runs == 0)[0]) if (runs == 0).any() else int(np.flatnonzero(runs > 1)[0])
        if runs[x] == 0:
            raise SchedulerError(f"{who(gate_at(x))}: {flows[gated[member[x]]].id} gets no sub-flows")
        raise SchedulerError(f"{who(gate_at(x))}: SplitArrays must list each original's sub-flows together")
    orig_pos = member[rank]
    del member, rank
    orig = np.array(gated, np.int64)[orig_pos]
    # sizes, DSCPs, caps
    if not np.issubdtype(np.asarray(arr.size).dtype, np.integer):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: sub-flow sizes are not byte counts")
    size = np.asarray(arr.size, np.int64)
    dscp = np.asarray(arr.dscp, np.int64)
    rate = np.full(m, math.inf) if arr.rate is None else np.asarray(arr.rate, np.float64)
    bad = np.flatnonzero((size < 0) | (dscp < 0) | (dscp > 63) | ~(rate > 0))
    if len(bad):
        raise SchedulerError(f"{who(gate_of[bad[0]])}: a sub-flow's size, DSCP or rate is out of range")
    # dependencies: sub-flows of the same gate
    lens = np.diff(np.asarray(arr.dep_ptr, np.int64))
    if (lens < 0).any():
        raise SchedulerError(f"{who(gate_of[np.flatnonzero(lens < 0)[0]])}: SplitArrays dep_ptr decreases")
    dep = np.asarray(arr.dep, np.int64)
    owner = np.repeat(np.arange(m), lens)
    bad = (dep < 0) | (dep >= m)
    bad[~bad] = gate_of[dep[~bad]] != gate_of[owner[~bad]]
    if bad.any():
        x = owner[np.flatnonzero(bad)[0]]
        raise SpecError("scheduler", f"{who(gate_of[x])}: a sub-flow depends on items outside the split")
    del bad
    # bytes conserved: each original's sub-flows carry its size (check_conservation says how not)
    carried = np.add.reduceat(size, starts) if m else np.zeros(0, np.int64)
    firsts = orig[starts]
    wrong = np.flatnonzero(carried != cj.size[firsts]).tolist()
    wrong += [x for x, k in enumerate(firsts.tolist()) if flows[k].src == flows[k].dst]
    for x in wrong:
        f, g = flows[int(firsts[x])], gate_of[starts[x]]
        end = starts[x + 1] if x + 1 < len(starts) else m
        check_conservation(f, [(f.src, f.dst, int(b)) for b in size[starts[x] : end]], who(g))
        raise SchedulerError(f"{who(g)}: the sub-flows of {f.id} do not carry its bytes")
    del carried, firsts, starts
    # dependents (CSR) and no cycle (check_acyclic names one)
    dependents = owner[np.argsort(dep, kind="stable")]
    del owner
    ptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(dep, minlength=m), out=ptr[1:])
    stuck = _acyclic(lens, ptr, dependents)
    if stuck >= 0:
        g = int(gate_of[stuck])  # its gate's split as a Split, for check_acyclic to name the cycle
        xs = np.flatnonzero(gate_of == g)
        local = np.full(m, -1, np.int64)
        local[xs] = np.arange(len(xs))
        mine = np.concatenate([dep[arr.dep_ptr[x] : arr.dep_ptr[x + 1]] for x in xs] + [np.zeros(0, np.int64)])
        rank = np.asarray(arr.flow, np.int64)
        part = SplitArrays(rank[xs] - (g_off[g] - g_off[g0]), size[xs], np.asarray(arr.suffix, np.int64)[xs],
                           arr.suffixes, np.concatenate([[0], np.cumsum(lens[xs])]), local[mine], dscp[xs],
                           rate[xs])  # fmt: skip
        check_acyclic(part.split([_as_offered(flows[k]) for k in mems[g]]), who(g))
        raise SchedulerError(f"{who(g)}: sub-flow dependencies form a cycle")
    del dep
    # ids: the original's id + its suffix (a checked Split's: no prefix, the suffix is the whole id)
    suffix = np.asarray(arr.suffix, np.int64)
    if m and (suffix.min() < 0 or suffix.max() >= len(arr.suffixes)):
        x = int(np.flatnonzero((suffix < 0) | (suffix >= len(arr.suffixes)))[0])
        raise SchedulerError(f"{who(gate_of[x])}: SplitArrays suffix outside its suffixes")
    prefix = np.zeros(m, np.int64) if whole else orig_pos + 1  # into p_crc, p_len, p_slash
    s_raw = [s.encode() for s in arr.suffixes]
    s_len = np.array([len(r) for r in s_raw] or [0], np.int64)
    s_crc = np.array([zlib.crc32(r) for r in s_raw] or [0], np.int64)
    lengths = sorted(set(s_len.tolist()))
    tables = _crc_tables(lengths)
    li = np.searchsorted(np.array(lengths, np.int64), s_len)[suffix]
    v = p_crc[prefix]
    crc = (tables[li, 0, v & 255] ^ tables[li, 1, v >> 8 & 255] ^ tables[li, 2, v >> 16 & 255]
           ^ tables[li, 3, v >> 24 & 255]).astype(np.int64) ^ s_crc[suffix]  # fmt: skip
    del li, v
    id_len = p_len[prefix] + s_len[suffix]
    slash_s = [i for i, r in enumerate(s_raw) if b"/" in r]
    slashed = np.isin(suffix, slash_s) | p_slash[prefix]
    if slashed.any():
        x = int(np.flatnonzero(slashed)[0])
        raw = (flows[int(orig[x])].id.encode() if prefix[x] else b"") + s_raw[suffix[x]]
        raise SchedulerError(f"{who(gate_of[x])}: sub-flow id {raw.decode()!r} is not new in the run")
    del slashed
    key = (id_len << 32) | crc
    del id_len
    # routes: ECMP spine by the CRC-32, routes in order of first use after the job's
    net = cj.kind[orig] == NET
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    nic_of: dict[str, int] = {}  # endpoint -> its NIC numbered over the cluster
    in_batch = np.unique(orig_pos)
    batch = [flows[gated[x]] for x in in_batch.tolist()]
    for e in {f.dst for f in batch}:
        nic_of[e] = int(nic_base[placement[e].server]) + placement[e].nic
    dst_nic = np.array([nic_of[f.dst] for f in batch], np.int64)
    a_nic, b_nic = cj.nic[orig].astype(np.int64), dst_nic[np.searchsorted(in_batch, orig_pos)]
    del dst_nic, batch
    nic_leaf = np.array([topology.nics[sv][k].leaf for sv in range(len(cluster.servers))
                         for k in range(cluster.servers[sv].nics)], np.int64)  # fmt: skip
    nspines, total = len(topology.spines), cj.nics
    cross = net & (nic_leaf[a_nic] != nic_leaf[b_nic])
    spine = np.where(cross, crc % max(nspines, 1), -1) if nspines else np.full(m, -1, np.int64)
    del crc, cross
    rkey = (a_nic * total + b_nic) * (nspines + 1) + (spine + 1)
    route = np.full(m, -1, np.int64)
    base, new_routes = state["base"], state["new_routes"]
    if net.any():
        uniq, first, inverse = np.unique(rkey[net], return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # route keys in order of first use
        at = np.flatnonzero(net)[first[order]]
        server_of_nic = np.repeat(np.arange(len(cluster.servers)), [s.nics for s in cluster.servers])
        ends = []
        for nics in (a_nic[at], b_nic[at]):
            ends.append(zip(server_of_nic[nics].tolist(), (nics - nic_base[server_of_nic[nics]]).tolist()))
        got = []
        for rk, a, b, spn in zip(uniq[order].tolist(), ends[0], ends[1], spine[at].tolist()):
            r = route_of.get(rk)
            if r is None:
                r = route_of[rk] = base + len(new_routes)
                new_routes.append(fabric.route(a, b, None if spn < 0 else spn))
            got.append(r)
        r_of = np.empty(len(uniq), np.int64)
        r_of[order] = got
        route[net] = r_of[inverse.ravel()]
    del rkey, a_nic, b_nic
    remap = np.array([table.setdefault(r, len(table)) for r in s_raw] or [0], np.int64)
    kept = dict(route=route, dscp=dscp, size=size, spine=np.where(net, spine, -1))  # the rest: from orig at the end
    out = {name: col.astype(getattr(cj, name).dtype, copy=False) for name, col in kept.items()}
    out.update(cap=None if np.isinf(rate).all() else rate, lens=lens.astype(np.int32),
               nout=np.diff(ptr).astype(np.int32), dependents=dependents.astype(np.int32), orig=orig.astype(np.int32),
               gate_of=gate_of.astype(np.int32),
               prefix=np.where(prefix > 0, orig, -1).astype(np.int32), suffix=remap[suffix].astype(np.int32),
               id_key=key)  # fmt: skip
    return out


def _check_new(sub_key, sub_raw, t_key, t_raw, gate_of, who) -> None:
    """Sub-flow ids differ from each other and from the ids ``taken`` (keys ``t_key``, bytes
    ``t_raw(y)``): ids of equal key (length << 32 | CRC-32) are compared as strings (a
    sub-flow's bytes: ``sub_raw(x)``)."""
    key = np.concatenate([t_key, sub_key])
    key.sort()
    if not (key[1:] == key[:-1]).any():
        return
    key = np.concatenate([t_key, sub_key])
    order = np.argsort(key, kind="stable")
    same = np.flatnonzero(key[order][1:] == key[order][:-1])
    del key
    seen: dict[bytes, int] = {}
    nt = len(t_key)
    for y in sorted(set(order[same].tolist()) | set(order[same + 1].tolist())):  # taken first, then sub-flows in order
        raw = t_raw(y) if y < nt else sub_raw(y - nt)
        if raw in seen and y >= nt:
            raise SchedulerError(f"{who(gate_of[y - nt])}: sub-flow id {raw.decode()!r} is not new in the run")
        seen[raw] = y


def run_compact(cj: CompactJob, analysis: bool = False, work: int = 1024) -> CompactResult:
    """Run a :class:`CompactJob` in ``_run_kernel`` (see the module docstring). ``analysis``:
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
    stats = np.zeros(5, np.int64)
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
    release = _padded(cj.release, n) if len(cj.release) else cj.release  # sub-flows have none of their own
    args = (
        cj.kind, cj.device, cj.duration, cj.route, cj.bits, cj.prio, cj.cap, cj.key, cj.bar, cj.queued, hold,
        cj.missing.copy(), cj.dep_ptr, cj.dep_idx, cj.device_cap, cj.route_links, cj.route_hops, cj.route_latency,
        cj.link_cap, nholds, cj.gate, cj.gate_size, cj.gate_sub, cj.parent, cj.children, ready, start, end,
        link_bits, peak_load, stats, analysis, ftype, meter.hit, meter.total, meter.load,
        meter.mask, meter.top, meter.nhit, meter.ntot, meter.classes, work, release, ctl := np.zeros(2),
    )  # fmt: skip
    code = _interruptible(_run_kernel, args, ctl, stats, n)
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
        link_peak, time.perf_counter() - t0,
    )  # fmt: skip
    if analysis:
        run.analysis = _analysis(run, meter)
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
    instant), in the event order of :func:`railbed.analysis.network_free_makespan`, which
    gives the same times for the same job (``tests/test_analysis.py``)."""
    return run_compact(replace(cj, bits=np.zeros_like(cj.bits), route_latency=np.zeros_like(cj.route_latency)))


def _analysis(run: CompactResult, meter: Meter) -> dict:
    """:attr:`CompactResult.analysis` (:func:`run_compact`)."""
    from railbed.analysis import analyse, failed

    cj = run.job
    notes = []
    free = network_free_run(cj).makespan
    types = {t: k for k, t in enumerate(cj.types)}
    tl = None
    if cj.items <= MAX_ANALYSIS_ITEMS:
        tl = timeline_of_compact(run)
    else:
        notes.append(
            f"critical path and overlap not computed: {cj.items:,} items (over {MAX_ANALYSIS_ITEMS:,}; their "
            "arrays would not fit beside the run's)"
        )
    try:
        return analyse(tl, run.makespan, free, contention_result(meter.hit, meter.total, types), notes)
    except Exception as exc:  # noqa: BLE001 - the run's results stand without their analysis; say why
        return failed(run.makespan, free, exc, notes)


def timeline_of_compact(run: CompactResult):
    """The :class:`railbed.analysis.Timeline` of a compact run (its arrays, dependencies from
    the dependents' CSR, each network flow's egress ports from its route)."""
    from railbed.analysis import Timeline

    cj = run.job
    n = cj.items
    is_flow = cj.kind != TASK
    ctype = cj.ctype.astype(np.int32) if len(cj.ctype) else np.where(is_flow, 0, -1).astype(np.int32)
    types = list(cj.types) or ["other"]
    coflow = cj.coflow.astype(np.int64) if len(cj.coflow) else np.full(n, -1, np.int64)
    named = int(coflow.max()) + 1 if n else 0
    coflow = np.where(is_flow & (coflow < 0), named + np.arange(n), coflow)  # a flow without a coflow: its own
    parent = cj.parent.astype(np.int64) if len(cj.parent) else np.full(n, -1, np.int64)
    coflow = np.where(parent >= 0, coflow[np.maximum(parent, 0)], coflow)  # a sub-flow: its original's
    counts = np.diff(cj.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    order = np.argsort(cj.dep_idx, kind="stable")
    pred_idx = owner[order]
    pred_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(cj.dep_idx, minlength=n), out=pred_ptr[1:])
    routed = cj.route >= 0
    hops = np.where(routed, cj.route_hops[np.maximum(cj.route, 0)], 0)
    path_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(hops, out=path_ptr[1:])
    rows = np.repeat(np.maximum(cj.route, 0), hops)
    cols = np.arange(int(path_ptr[-1])) - np.repeat(path_ptr[:-1], hops)
    path_idx = cj.route_links[rows, cols].astype(np.int64)
    return Timeline(
        cj.ids, is_flow, cj.kind == NET, run.ready, run.start, run.end, ctype, types, coflow,
        np.where(is_flow, -1, cj.device).astype(np.int64), np.where(is_flow, cj.nic, -1).astype(np.int64), parent,
        pred_ptr, pred_idx, path_ptr, path_idx, list(cj.link_names), cj.link_cap, cj.bits, cj.cap,
        _padded(cj.release, n) if len(cj.release) else None,
    )  # fmt: skip


def _padded(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` followed by zeros up to ``n`` (a column of the job's items, for every item)."""
    out = np.zeros(n, values.dtype)
    out[: len(values)] = values
    return out


def load_items(path) -> dict:
    """The arrays :meth:`CompactResult.save_items` wrote, with ``ids`` as :class:`~workloads.arrays.Ids`."""
    with np.load(path) as z:
        out = {k: z[k] for k in z.files}
    out["ids"] = Ids(out.pop("ids_utf8").tobytes(), out.pop("ids_offsets"))
    return out


def simulate_compact(
    job: Job, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority", analysis: bool = False
) -> CompactResult:
    """:func:`compact` then :func:`run_compact`."""
    return run_compact(compact(job, scheduler, cluster, policy), analysis)


# ---------------------------------------------------------------- kernel helpers
# Timers: a binary heap on arrays ordered by (time, sequence number), as simulator.run's heapq.


@njit(cache=True)
def _heap_push(ht, hs, hi, size, t, seq, item):  # pragma: no cover - numba
    k = size
    ht[k], hs[k], hi[k] = t, seq, item
    while k > 0:
        p = (k - 1) >> 1
        if ht[p] < ht[k] or (ht[p] == ht[k] and hs[p] < hs[k]):
            break
        ht[p], ht[k] = ht[k], ht[p]
        hs[p], hs[k] = hs[k], hs[p]
        hi[p], hi[k] = hi[k], hi[p]
        k = p
    return size + 1


@njit(cache=True)
def _heap_pop(ht, hs, hi, size):  # pragma: no cover - numba
    """Remove the top (the caller read it at index 0); returns the new size."""
    size -= 1
    ht[0], hs[0], hi[0] = ht[size], hs[size], hi[size]
    k = 0
    while True:
        a = 2 * k + 1
        if a >= size:
            break
        b = a + 1
        c = a
        if b < size and (ht[b] < ht[a] or (ht[b] == ht[a] and hs[b] < hs[a])):
            c = b
        if ht[k] < ht[c] or (ht[k] == ht[c] and hs[k] < hs[c]):
            break
        ht[c], ht[k] = ht[k], ht[c]
        hs[c], hs[k] = hs[k], hs[c]
        hi[c], hi[k] = hi[k], hi[c]
        k = c
    return size


@njit(cache=True)
def _grow2(a, fill):  # pragma: no cover - numba
    new = np.full((2 * a.shape[0], a.shape[1]), fill, a.dtype)
    new[: a.shape[0]] = a
    return new


@njit(cache=True)
def _grow1(a, fill):  # pragma: no cover - numba
    new = np.full(2 * a.shape[0], fill, a.dtype)
    new[: a.shape[0]] = a
    return new


@njit(cache=True)
def _room(a, need):  # pragma: no cover - numba
    """``a``, or a copy at least twice as long if it is shorter than ``need``."""
    if need <= a.shape[0]:
        return a
    new = np.zeros(max(need, 2 * a.shape[0]), a.dtype)
    new[: a.shape[0]] = a
    return new


@njit(cache=True)
def _grow_net(flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items):
    """Twice the network's slots (as NumbaNetwork._alloc); the new slots are free."""  # pragma: no cover
    old = rem.shape[0]
    out = (
        _grow2(flow_links, -1), _grow1(nhops, 0), _grow1(sprio, 0), _grow1(scap, np.inf), _grow1(rem, 0.0),
        _grow1(rates, 0.0), _grow1(act, 0), _grow1(state, 0), _grow1(finished, 0), _grow1(slot_item, -1),
        _grow1(free, 0), _grow1(fin_items, 0),
    )  # fmt: skip
    for k in range(old):
        out[10][k] = 2 * old - 1 - k
    return out


@njit(cache=True)
def _fill_slot(sl, i, r, flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops, prio, cap, bits):
    """Network slot ``sl`` takes flow item ``i`` on route ``r`` (its links, class, cap and bits)."""
    flow_links[sl, :] = route_links[r]
    nhops[sl] = route_hops[r]
    sprio[sl] = prio[i]
    scap[sl] = cap[i]
    rem[sl] = bits[i]
    slot_item[sl] = i


@njit(cache=True)
def _start_flow(i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev):
    """Start flow ``i`` (Dispatcher._start_flow): a same-server one joins this batch's 0 s waits,
    a network one the flows started (and, when rules hold flows, its NIC's active list).
    Returns the new ``nlocal``, ``nstarted``."""  # pragma: no cover - numba
    start_t[i] = now
    if kind[i] == LOCAL:
        local[nlocal] = i
        return nlocal + 1, nstarted
    started[nstarted] = i
    if any_rule:
        m = nic[i]
        a_prev[i] = -1
        a_next[i] = a_head[m]
        if a_head[m] >= 0:
            a_prev[a_head[m]] = i
        a_head[m] = i
    return nlocal, nstarted + 1


@njit(cache=True, nogil=True)
def _run_kernel(
    kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, missing, dep_ptr, dep_idx, device_cap,
    route_links, route_hops, route_latency, link_cap, nnics, gate, gate_size, gate_sub, parent, children, ready_t,
    start_t, end_t, link_bits, peak_load, stats, metered, ftype, m_hit, m_total, m_load, m_mask, m_top, m_nhit,
    m_ntot, m_classes, work, release, ctl,
):  # fmt: skip  # pragma: no cover - numba
    """The whole run (module docstring). Returns 0, or 1 (nothing pending), 2 (no progress), 3 (stalled),
    4 (stopped: ``ctl[0]`` was set by another thread, :func:`_interruptible`; ``ctl[1]`` is the model
    time reached). ``metered``: measure contention (simulator.contention.meter_step) by the items'
    type ids ``ftype``. ``release``: items' release times (empty: none); an item whose deps are done
    before its release gets a timer then (Dispatcher's ``/release/`` wait), and is ready when it pops.
    Runs without the GIL."""
    n = kind.shape[0]
    ndev = device_cap.shape[0]
    nlinks = link_cap.shape[0]
    big = np.iinfo(np.int64).max
    # item indices in int32 (27 million items at 8192 GPUs: 4 bytes less per item and array)
    # timers: (time, seq) -> item; an item has at most one timer at a time
    # work lists start small and double when full (_room): at 8192 GPUs, sized per item, they
    # were 1.2 GB (27 million items) where a few thousand entries are in use at a time
    n0 = 0
    ntasks = 0
    for i in range(n):
        if missing[i] == 0:
            n0 += 1
        if kind[i] == TASK:
            ntasks += 1
    w0 = max(n0, work, 1)
    ht = np.zeros(w0)
    hs = np.zeros(w0, np.int64)
    hi = np.zeros(w0, np.int32)
    hsize = 0
    seq = 0
    # device FIFO queues as linked lists
    q_head = np.full(max(ndev, 1), -1, np.int64)
    q_tail = np.full(max(ndev, 1), -1, np.int64)
    q_next = np.full(max(n, 1), -1, np.int32)
    busy = np.zeros(max(ndev, 1), np.int64)
    # network flows active (started, to their flow_done) per source NIC, doubly linked
    a_head = np.full(max(nnics, 1), -1, np.int64)
    a_next = np.full(max(n, 1), -1, np.int32)
    a_prev = np.full(max(n, 1), -1, np.int32)
    best = np.full(max(nnics, 1), big, np.int64)  # per NIC: the best queued key held at round start
    best_set = np.zeros(max(nnics, 1), np.int32)  # the NICs best[] was set for in this round
    # gates (Rule.gate): members held per gate, split yet, sub-flows left per original
    has_gates = gate_size.shape[0] > 0
    gcount = np.zeros(gate_size.shape[0], np.int32)
    gsplit = np.zeros(gate_size.shape[0], np.bool_)
    kids_left = children.copy()
    nsubs = n - gate_sub[0] if has_gates else 0  # sub-flows (items gate_sub[0]..)
    subready = np.zeros(max(nsubs, 1), np.int32)
    nsub = 0
    any_rule = False
    any_queued = False
    for i in range(n):
        if bar[i] > 0:
            any_rule = True
            if queued[i]:
                any_queued = True
    # the fluid network, as simulator.network.NumbaNetwork
    slots = 1024
    flow_links = np.full((slots, route_links.shape[1]), -1, np.int64)
    nhops = np.zeros(slots, np.int64)
    sprio = np.zeros(slots, np.int64)
    scap = np.full(slots, np.inf)
    rem = np.zeros(slots)
    rates = np.zeros(slots)
    act = np.zeros(slots, np.int64)
    state = np.zeros(slots, np.int8)
    finished = np.zeros(slots, np.int64)
    slot_item = np.full(slots, -1, np.int64)
    free = np.zeros(slots, np.int64)
    fin_items = np.zeros(slots, np.int64)
    sftype = np.zeros(slots, np.int64)  # the contention meter: a slot's type id and whether it is contended
    scont = np.zeros(slots, np.bool_)
    for k in range(slots):
        free[k] = slots - 1 - k
    nfree = slots
    nact = 0
    dirty = False
    left = np.zeros(nlinks)
    lcount = np.zeros(nlinks, np.int64)
    link_load = np.zeros(nlinks)
    # work lists
    held = np.zeros(w0, np.int32)
    held2 = np.zeros(w0, np.int32)
    nheld = 0
    readyl = np.zeros(w0, np.int32)
    started = np.zeros(w0, np.int32)
    local = np.zeros(w0, np.int32)
    waits = np.zeros(max(ntasks, 1), np.int32)  # tasks started in one settling: at most all
    touched = np.zeros(max(ndev, 1), np.int64)
    done = 0
    events = 0
    steps = 0
    now = 0.0
    fin_pos = 0
    fin_n = 0
    timers = False  # popping the timers due at `now`
    report = -1  # the item whose end is reported; -1: the run's beginning
    nready = 0
    for i in range(n):
        if missing[i] == 0:
            readyl[nready] = i
            nready += 1
    first = True
    while True:
        if ctl[0] != 0.0:  # asked to stop (Ctrl-C in the calling thread)
            ctl[1] = now
            stats[0], stats[1], stats[2] = events, steps, done
            return 4
        # ------------------------------------------------ the next report (Simulation._run)
        if first:
            first = False
        elif fin_pos < fin_n:
            report = fin_items[fin_pos]
            fin_pos += 1
        elif timers and hsize > 0 and ht[0] <= now:
            i = hi[0]
            hsize = _heap_pop(ht, hs, hi, hsize)
            events += 1
            if release.shape[0] > 0 and np.isnan(ready_t[i]):  # its release time came
                now = max(now, release[i])
                readyl = _room(readyl, nready + 1)
                readyl[nready] = i
                nready += 1
                report = -1
            elif kind[i] != NET:
                report = i
            else:  # a flow's first byte crossed its latency: it joins the network
                if nfree == 0:
                    slots *= 2
                    flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items = (
                        _grow_net(
                            flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free,
                            fin_items,
                        )
                    )  # fmt: skip
                    nfree = slots // 2
                    sftype, scont = _grow1(sftype, 0), _grow1(scont, False)
                nfree -= 1
                sl = free[nfree]
                _fill_slot(sl, i, route[i], flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops,
                           prio, cap, bits)  # fmt: skip
                if metered:
                    sftype[sl] = ftype[i]
                act[nact] = sl
                nact += 1
                dirty = True
                continue
        else:
            timers = False
            if done == n:
                break
            t_limit = ht[0] if hsize > 0 else np.inf
            if t_limit == np.inf and nact == 0:
                stats[0], stats[1], stats[2] = events, steps, done
                return 1
            nfin = 0
            t = t_limit
            if nact > 0:
                stats[3] += nact
                if dirty:
                    stats[4] += 1
                t, nfin, nact = advance_kernel(
                    now, t_limit, dirty, link_cap, flow_links, nhops, sprio, scap, rem, rates, act, nact,
                    left, lcount, state, link_load, link_bits, peak_load, finished,
                )  # fmt: skip
                if t == np.inf:
                    stats[0], stats[1], stats[2] = events, steps, done
                    return 2
                if metered:
                    meter_step(
                        link_cap, flow_links, nhops, sprio, scap, rates, act, nact, finished, nfin, sftype, dirty,
                        scont, t - now, m_hit, m_total, m_load, m_mask, m_top, m_nhit, m_ntot,
                        m_classes,
                    )  # fmt: skip
                dirty = nfin > 0
            steps += 1
            now = t
            if nfin > 0:
                for k in range(nfin):
                    sl = finished[k]
                    fin_items[k] = slot_item[sl]
                    slot_item[sl] = -1
                    free[nfree] = sl
                    nfree += 1
                fin_pos, fin_n = 0, nfin
            else:
                timers = True
            continue
        # ------------------------------------------------ the report: an item ended (Dispatcher._finish)
        freed = -1
        if report >= 0:
            i = report
            if kind[i] == NET:
                events += 1
                if any_rule:
                    m = nic[i]
                    if a_prev[i] >= 0:
                        a_next[a_prev[i]] = a_next[i]
                    else:
                        a_head[m] = a_next[i]
                    if a_next[i] >= 0:
                        a_prev[a_next[i]] = a_prev[i]
            elif kind[i] == TASK:
                freed = device[i]
                busy[freed] -= 1
            end_t[i] = now
            done += 1
            while True:  # i's dependents; then, if i was its original's last sub-flow, the original's
                readyl = _room(readyl, nready + dep_ptr[i + 1] - dep_ptr[i])
                for e in range(dep_ptr[i], dep_ptr[i + 1]):
                    j = dep_idx[e]
                    missing[j] -= 1
                    if missing[j] == 0:
                        if has_gates and parent[j] >= 0:
                            subready[nsub] = j
                            nsub += 1
                        else:
                            readyl[nready] = j
                            nready += 1
                if not has_gates or parent[i] < 0:
                    break
                i = parent[i]
                kids_left[i] -= 1
                if kids_left[i] > 0:
                    break
                end_t[i] = now
                done += 1
        # ------------------------------------------------ Dispatcher._settle(now, ready, freed)
        if nready > 1:
            readyl[:nready] = np.sort(readyl[:nready])
        held = _room(held, nheld + nready)
        held2 = _room(held2, nheld + nready)
        # flows started in this settling: the held ones, the sub-flows ready, those of gates split
        started = _room(started, nheld + nready + nsub + nsubs)
        local = _room(local, nheld + nready + nsub + nsubs)
        if release.shape[0] > 0 and hsize + nready > ht.shape[0]:
            ht, hs, hi = _room(ht, hsize + nready), _room(hs, hsize + nready), _room(hi, hsize + nready)
        for x in range(nready):
            i = readyl[x]
            if release.shape[0] > 0 and release[i] > now:  # not ready before its release time
                hsize = _heap_push(ht, hs, hi, hsize, now + (release[i] - now), seq, i)
                seq += 1
                continue
            ready_t[i] = now
            if has_gates and gate[i] >= 0:
                gcount[gate[i]] += 1
                if gcount[gate[i]] > 1 and not queued[i]:
                    # a gate's first member holds its place in the held order (where the gate
                    # splits); the others only count, unless their keys count for a NIC's best
                    continue
            held[nheld] = i
            nheld += 1
        nready = 0
        ntouched = 0
        if freed >= 0:
            touched[0] = freed
            ntouched = 1
        nstarted = 0
        nlocal = 0
        for x in range(nsub):  # sub-flows whose deps are done start at once (Dispatcher._start_sub)
            i = subready[x]
            ready_t[i] = now
            nlocal, nstarted = _start_flow(
                i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
            )
        nsub = 0
        if nheld:
            nb = 0  # _offer_held: every held item in order; the rules decide with best[] of the round
            if any_queued:
                for h in range(nheld):
                    i = held[h]
                    if kind[i] != TASK and queued[i]:
                        m = nic[i]
                        if best[m] == big:
                            best_set[nb] = m
                            nb += 1
                        if key[i] < best[m]:
                            best[m] = key[i]
            keep = 0
            for h in range(nheld):
                i = held[h]
                if kind[i] == TASK:
                    d = device[i]
                    if q_tail[d] < 0:
                        q_head[d] = i
                    else:
                        q_next[q_tail[d]] = i
                    q_tail[d] = i
                    q_next[i] = -1
                    seen = False
                    for x in range(ntouched):
                        if touched[x] == d:
                            seen = True
                    if not seen:
                        touched[ntouched] = d
                        ntouched += 1
                    continue
                if has_gates and gate[i] >= 0:
                    g = gate[i]
                    if gsplit[g]:  # split earlier in this round: no longer held
                        continue
                    if gcount[g] < gate_size[g]:
                        held2[keep] = i
                        keep += 1
                        continue
                    gsplit[g] = True  # the split (Dispatcher._split): originals start, free sub-flows start
                    for x in range(gate_sub[g], gate_sub[g + 1]):
                        start_t[parent[x]] = now
                    for x in range(gate_sub[g], gate_sub[g + 1]):
                        missing[x] -= 1
                        if missing[x] == 0:
                            ready_t[x] = now
                            nlocal, nstarted = _start_flow(
                                x, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head,
                                a_next, a_prev,
                            )  # fmt: skip
                    continue
                hold = False
                if bar[i] > 0:
                    m = nic[i]
                    if queued[i] and best[m] < bar[i]:
                        hold = True
                    else:
                        f = a_head[m]
                        while f >= 0:
                            if key[f] < bar[i]:
                                hold = True
                                break
                            f = a_next[f]
                if hold:
                    held2[keep] = i
                    keep += 1
                    continue
                nlocal, nstarted = _start_flow(
                    i, now, kind, start_t, local, nlocal, started, nstarted, any_rule, nic, a_head, a_next, a_prev
                )
            for b in range(nb):
                best[best_set[b]] = big
            held, held2 = held2, held
            nheld = keep
        if ntouched > 1:
            touched[:ntouched] = np.sort(touched[:ntouched])
        nwaits = 0
        for x in range(ntouched):  # _run_queue, devices in order
            d = touched[x]
            while q_head[d] >= 0 and busy[d] < device_cap[d]:
                i = q_head[d]
                q_head[d] = q_next[i]
                if q_head[d] < 0:
                    q_tail[d] = -1
                busy[d] += 1
                start_t[i] = now
                waits[nwaits] = i
                nwaits += 1
        if nheld and nstarted == 0 and nwaits == 0 and nlocal == 0 and hsize == 0 and nact == 0 and fin_pos >= fin_n:
            # (flows that finished in this network step and are not reported yet are still in flight)
            stats[0], stats[1], stats[2] = events, steps, done
            return 3
        # ------------------------------------------------ its actions, in order (Simulation._do)
        if hsize + nstarted + nwaits + nlocal > ht.shape[0]:
            need = hsize + nstarted + nwaits + nlocal
            ht, hs, hi = _room(ht, need), _room(hs, need), _room(hi, need)
        for x in range(nstarted):
            i = started[x]
            r = route[i]
            if route_latency[r] > 0:
                hsize = _heap_push(ht, hs, hi, hsize, now + route_latency[r], seq, i)
                seq += 1
                continue
            if nfree == 0:
                slots *= 2
                flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items = (
                    _grow_net(
                        flow_links, nhops, sprio, scap, rem, rates, act, state, finished, slot_item, free, fin_items
                    )
                )  # fmt: skip
                nfree = slots // 2
                sftype, scont = _grow1(sftype, 0), _grow1(scont, False)
            nfree -= 1
            sl = free[nfree]
            _fill_slot(sl, i, r, flow_links, nhops, sprio, scap, rem, slot_item, route_links, route_hops,
                       prio, cap, bits)  # fmt: skip
            if metered:
                sftype[sl] = ftype[i]
            act[nact] = sl
            nact += 1
            dirty = True
        for x in range(nwaits):
            i = waits[x]
            hsize = _heap_push(ht, hs, hi, hsize, now + duration[i], seq, i)
            seq += 1
        for x in range(nlocal):
            hsize = _heap_push(ht, hs, hi, hsize, now, seq, local[x])
            seq += 1
    stats[0], stats[1], stats[2] = events, steps, done
    return 0
