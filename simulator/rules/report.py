"""A rules-engine run's results (:class:`CompactResult`) and how they are reported: as the
:class:`~railbed.results.RunResult` the fluid backend would return, as arrays (``items.npz``),
as a record-less summary, and the analysis (railbed/analysis.py) of a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from railbed.job import Job, Task, attrs_of
from railbed.results import ItemRecord, RunResult
from simulator.contention import Meter
from simulator.contention import result as contention_result
from simulator.fabric import link_stats
from simulator.rules.model import LOCAL, NET, TASK, CompactJob, padded
from workloads.arrays import Ids, ids_of

MAX_ANALYSIS_ITEMS = 4_000_000  # jobs up to this get a critical path and overlap (about 1 KB per item at peak)


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
    flow_steps: int  # active flows summed over the network's steps (the work when every step touched every flow)
    rate_updates: int  # steps that recomputed max-min rates
    link_bits: np.ndarray
    link_peak: np.ndarray
    wall_seconds: float
    analysis: dict = field(default_factory=dict)  # run_compact(analysis=True): railbed/analysis.py's fields
    rerated: int = 0  # flows whose rates were recomputed, summed over the steps (the changed components)

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
        from simulator.fluid.run import MODEL_NOTE

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
            f"taking 0 s); per-item times in items.npz (simulator.rules.load_items), not in this file",
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
        from simulator.fluid.run import MODEL_NOTE

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


def analysis_of(run: CompactResult, meter: Meter, free: float) -> dict:
    """:attr:`CompactResult.analysis` (:func:`simulator.rules.run.run_compact`); ``free``: the
    network-free run's makespan (:func:`simulator.rules.run.network_free_run`)."""
    from railbed.analysis import analyse, failed

    cj = run.job
    notes = []
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
        padded(cj.release, n) if len(cj.release) else None,
    )  # fmt: skip


def load_items(path) -> dict:
    """The arrays :meth:`CompactResult.save_items` wrote, with ``ids`` as :class:`~workloads.arrays.Ids`."""
    with np.load(path) as z:
        out = {k: z[k] for k in z.files}
    out["ids"] = Ids(out.pop("ids_utf8").tobytes(), out.pop("ids_offsets"))
    return out
