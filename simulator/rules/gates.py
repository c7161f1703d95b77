"""Gates (:class:`~railbed.scheduler.Rule` ``gate``): the sub-flows of every gate, split by the
scheduler, checked as the Dispatcher checks a split, and appended to a :class:`CompactJob`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from railbed.dispatch import SchedulerError, check_acyclic, check_conservation
from railbed.errors import SpecError
from railbed.job import Flow, Placement
from railbed.rulebook import as_offered
from railbed.scheduler import Scheduler, Split, SplitArrays, SubFlow
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from simulator.fabric import Fabric
from simulator.rules.model import NET, CompactJob, route_table, wire_bits
from workloads.arrays import Ids


def gate_arrays(gates: dict[str, list[int]], parent: np.ndarray, gate_of: np.ndarray, n_job: int) -> tuple:
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
    new ids are checked with every gate's, :func:`add_gates`). Sub-flows in the split's order
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


GATE_CHUNK = 1 << 17  # gated flows per call of gate_split_arrays (and per batch of the checks)


@dataclass
class _Gating:
    """What the batches of one :func:`add_gates` call share: the job, its gated flows and their
    gates, the scheduler's placement and cluster, and what the batches grow (routes first used
    by sub-flows, the sub-flows' id suffixes)."""

    cj: CompactJob
    flows: Mapping  # item index -> Flow of every gated flow, in item order
    gates: dict[str, list[int]]  # gate name -> its flows' item indices, in order of its first flow
    scheduler: Scheduler
    placement: Placement
    cluster: ClusterSpec
    topology: Topology
    fabric: Fabric
    classes: np.ndarray  # DSCP -> its class under the tc policy
    route_of: dict[int, int]  # route key -> route index (grown by the batches)
    gated: list[int] = field(init=False)  # the gated flows' item indices, in item order
    pos: dict[int, int] = field(init=False)  # item index -> its position in gated
    names: list[str] = field(init=False)
    mems: list[list[int]] = field(init=False)  # each gate's flows
    g_off: np.ndarray = field(init=False)  # gate g's flows: g_off[g]..g_off[g + 1] in gate order
    base: int = field(init=False)  # the job's routes: a new route's index is base + its place in new_routes
    new_routes: list = field(init=False)  # fabric routes first used by sub-flows, in order
    table: dict[bytes, int] = field(init=False)  # id suffixes of all batches -> index
    p_crc: np.ndarray = field(init=False)  # per gated flow (position + 1; 0: no prefix), its id's CRC-32
    p_len: np.ndarray = field(init=False)  # and length in bytes
    p_slash: np.ndarray = field(init=False)  # and whether it has a "/"

    def __post_init__(self) -> None:
        self.gated = list(self.flows)
        self.pos = {k: x for x, k in enumerate(self.gated)}
        self.names = list(self.gates)
        self.mems = list(self.gates.values())
        self.g_off = np.cumsum([0] + [len(mem) for mem in self.mems])
        self.base, self.new_routes, self.table = len(self.route_of), [], {}
        self.p_crc = np.zeros(len(self.gated) + 1, np.int64)
        self.p_len = np.zeros(len(self.gated) + 1, np.int64)
        self.p_slash = np.zeros(len(self.gated) + 1, np.bool_)
        flows = self.flows  # _GatedFlows (build.py) gives an id's bytes without making its Flow
        self.raw_id = getattr(flows, "raw_id", None) or (lambda k: flows[k].id.encode())
        for x, k in enumerate(self.gated):
            raw = self.raw_id(k)
            self.p_crc[x + 1], self.p_len[x + 1], self.p_slash[x + 1] = zlib.crc32(raw), len(raw), b"/" in raw

    def who(self, g) -> str:
        return f"{self.scheduler.name}: gate_split of {self.names[int(g)]}"


def add_gates(cj, flows, gates, taken, scheduler, placement, cluster, topology, fabric, classes, route_of,
              chunk: int | None = None) -> None:  # fmt: skip
    """Append to ``cj`` the sub-flows of every gate (``gates``: name -> its flows' item indices,
    in order of its first flow; ``flows``: item index -> Flow of every gated flow, in item order):
    the scheduler's :meth:`~railbed.scheduler.Scheduler.gate_split_arrays`, else its
    ``gate_split`` per gate checked as a :class:`Split` (:func:`_checked_split`); then, with numpy
    over the sub-flows, the Dispatcher's checks (every original split, its bytes conserved, ids
    new in the run, no cycle; :class:`SchedulerError` naming the gate), the ids, ECMP spines
    (CRC-32 of the id), routes (new ones after the job's; ``route_of``: route key -> index) and
    columns, as :func:`~simulator.rules.build.compact` of the job with these sub-flows as items
    would make them. ``taken``: the ids a sub-flow's must differ from besides each other's
    (``None``: the gated flows'). The gates go in batches of about ``chunk`` flows
    (:data:`GATE_CHUNK`) (a split is a pure function of its gate): what a batch needs while it
    is checked is freed before the next, and only the sub-flows' columns, in their final types,
    are kept until they join ``cj`` (at 8192 GPUs, 33 million sub-flows: the whole batch at once
    took about 300 bytes a sub-flow). A batch's checks run in the order above; the ids' newness
    is checked over all batches at the end."""
    chunk = chunk or GATE_CHUNK
    n_job = cj.items
    gr = _Gating(cj, flows, gates, scheduler, placement, cluster, topology, fabric, classes, route_of)
    parts: list[dict] = []
    g0 = 0
    while g0 < len(gr.mems):
        g1 = int(np.searchsorted(gr.g_off, gr.g_off[g0] + chunk, side="right")) - 1
        g1 = max(g1, g0 + 1)
        parts.append(_gate_batch(gr, g0, g1))
        g0 = g1
    m = sum(len(p["orig"]) for p in parts)

    def cat(name, dtype=None):
        got = np.concatenate([p.pop(name) for p in parts]) if parts else np.zeros(0, dtype or np.int64)
        return got if dtype is None else got.astype(dtype, copy=False)

    s_raw = list(gr.table)
    prefix, suffix, orig, gate_of = cat("prefix", np.int32), cat("suffix"), cat("orig", np.int32), cat("gate_of")

    def sub_raw(x) -> bytes:
        return (gr.raw_id(int(orig[x])) if prefix[x] >= 0 else b"") + s_raw[int(suffix[x])]

    if taken is None:
        t_key, t_raw = (gr.p_len[1:] << 32) | gr.p_crc[1:], (lambda y: gr.raw_id(gr.gated[y]))
    else:
        t_list = [t.encode() for t in taken]
        t_key = np.array([len(r) << 32 | zlib.crc32(r) for r in t_list], np.int64)
        t_raw = t_list.__getitem__
    _check_new(cat("id_key"), sub_raw, t_key, t_raw, gate_of, gr.who)
    del t_key
    if gr.new_routes:  # after the job's routes (without the placeholder row of a job that has none)
        links, hops, latency = route_table(gr.new_routes)
        cj.route_links = np.concatenate([cj.route_links[: gr.base], links])
        cj.route_hops = np.concatenate([cj.route_hops[: gr.base], hops])
        cj.route_latency = np.concatenate([cj.route_latency[: gr.base], latency])
    # gates, parents and ids first (the columns are still the job's length), then the columns
    cj.gate, cj.gate_size, cj.gate_sub, cj.parent, cj.children = gate_arrays(gates, orig, gate_of, n_job)
    if isinstance(cj.ids, Ids):  # kept as (original, suffix): not written out
        cj.ids = cj.ids.extended(np.where(prefix >= 0, orig, -1), suffix, s_raw)
    else:
        cj.ids = list(cj.ids) + [sub_raw(x).decode() for x in range(m)]
    prefix = suffix = gate_of = None  # noqa: F841 (sub_raw's arrays go)
    _append_columns(gr, parts, cat, orig, n_job, m)


# the CompactJob columns a sub-flow has (besides dependencies, gates, parent and id)
_SUB_COLUMNS = ("kind", "device", "duration", "route", "bits", "prio", "dscp", "size", "cap", "key", "bar", "queued",
                "nic", "spine", "missing", "iteration", "ctype", "coflow")  # fmt: skip


def _append_columns(gr: _Gating, parts: list[dict], cat, orig: np.ndarray, n_job: int, m: int) -> None:
    """The sub-flows' columns and dependents (CSR) appended to the job's, one column at a time
    (the old column, the new one and the batches' parts alive); what a sub-flow shares with its
    original is read from the original here. ``cat(name, dtype)``: the batches' column ``name``."""
    cj = gr.cj
    size, dscp = cat("size", cj.size.dtype), cat("dscp", cj.dscp.dtype)
    net = cj.kind[orig] == NET
    caps = [p.pop("cap") for p in parts]
    tails = dict(
        kind=lambda: cj.kind[orig], device=lambda: -1, duration=lambda: 0.0, route=lambda: cat("route"),
        bits=lambda: np.where(net, wire_bits(size, gr.cluster.fabric.framing), 0.0),
        prio=lambda: np.where(net, gr.classes[dscp], 0),
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


def _gate_batch(gr: _Gating, g0: int, g1: int) -> dict:
    """:func:`add_gates` for gates ``g0``..``g1 - 1``: their split, checked, as the sub-flows'
    columns (in ``cj``'s types), dependencies (CSR, indices inside the batch), originals, gates,
    id prefixes (the original's item, -1: none) and suffixes (into ``gr.table``, grown) and id
    keys (length << 32 | CRC-32). New routes go to ``gr.route_of`` and ``gr.new_routes``."""
    ks = [k for g in range(g0, g1) for k in gr.mems[g]]
    many = getattr(gr.flows, "many", None)  # _GatedFlows (build.py) makes a batch's Flows in one pass
    flows = many(ks) if many is not None else {k: gr.flows[k] for k in ks}  # the batch's, each made once
    arr, whole = _batch_split(gr, g0, g1, flows)
    orig_pos, gate_of, size, dscp, rate, lens, ptr, dependents = _checked_batch(gr, g0, g1, flows, arr)
    orig = np.array(gr.gated, np.int64)[orig_pos]
    prefix, suffix, s_raw, crc, key = _batch_ids(gr, flows, arr, whole, orig_pos, orig, gate_of)
    route, spine, net = _batch_routes(gr, flows, orig_pos, orig, crc)
    del crc
    remap = np.array([gr.table.setdefault(r, len(gr.table)) for r in s_raw] or [0], np.int64)
    kept = dict(route=route, dscp=dscp, size=size, spine=np.where(net, spine, -1))  # the rest: from orig at the end
    out = {name: col.astype(getattr(gr.cj, name).dtype, copy=False) for name, col in kept.items()}
    out.update(cap=None if np.isinf(rate).all() else rate, lens=lens.astype(np.int32),
               nout=np.diff(ptr).astype(np.int32), dependents=dependents.astype(np.int32), orig=orig.astype(np.int32),
               gate_of=gate_of.astype(np.int32),
               prefix=np.where(prefix > 0, orig, -1).astype(np.int32), suffix=remap[suffix].astype(np.int32),
               id_key=key)  # fmt: skip
    return out


def _batch_split(gr: _Gating, g0: int, g1: int, flows: dict) -> tuple[SplitArrays, bool]:
    """The split of gates ``g0``..``g1 - 1`` as :class:`SplitArrays` (the scheduler's
    ``gate_split_arrays``, else its ``gate_split`` per gate, checked and joined), its columns'
    lengths checked, and whether its suffixes are whole ids (a :class:`Split`'s)."""
    f_off = gr.g_off[g0 : g1 + 1] - gr.g_off[g0]
    offered = [[as_offered(flows[k]) for k in gr.mems[g]] for g in range(g0, g1)]
    scheduler, placement, cluster = gr.scheduler, gr.placement, gr.cluster
    arr = scheduler.gate_split_arrays(offered, placement, cluster)
    whole = arr is None  # then the suffixes are whole ids (a Split's)
    if whole:
        arr = _joined([_checked_split(scheduler.gate_split(o, placement, cluster), [flows[k] for k in gr.mems[g0 + j]],
                                      gr.who(g0 + j)) for j, o in enumerate(offered)], f_off)  # fmt: skip
    elif not isinstance(arr, SplitArrays):
        raise SchedulerError(
            f"{gr.who(0)}: gate_split_arrays must return SplitArrays or None, got {type(arr).__name__}"
        )
    del offered
    m = len(arr.flow)
    if any(len(c) != m for c in (arr.size, arr.suffix, arr.dscp)) or (arr.rate is not None and len(arr.rate) != m):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: SplitArrays columns of different lengths")
    if len(arr.dep_ptr) != m + 1 or arr.dep_ptr[0] != 0 or arr.dep_ptr[-1] != len(arr.dep):
        raise SchedulerError(f"{scheduler.name}: gate_split_arrays: dep_ptr is not {m + 1} offsets into dep")
    return arr, whole


def _checked_batch(gr: _Gating, g0: int, g1: int, flows: dict, arr: SplitArrays) -> tuple:
    """The Dispatcher's checks of a batch's split (each original's sub-flows together, every
    original split; sizes, DSCPs and rates in range; dependencies inside the gate; bytes
    conserved; no cycle), in that order. Returns each sub-flow's original (its position in
    ``gr.gated``), gate, size, DSCP, rate, and its dependencies' count, dependents (CSR)."""
    who, name = gr.who, gr.scheduler.name
    m = len(arr.flow)
    f_off = gr.g_off[g0 : g1 + 1] - gr.g_off[g0]
    member = np.array([gr.pos[k] for g in range(g0, g1) for k in gr.mems[g]], np.int64)  # place -> position in gated
    # each original's sub-flows together, every original split
    rank = np.asarray(arr.flow, np.int64)  # the original's place among the batch's gates' flows
    bad = np.flatnonzero((rank < 0) | (rank >= len(member)))
    if len(bad):
        raise SchedulerError(f"{name}: gate_split_arrays: sub-flow {bad[0]}'s original is not a gated flow")
    gate_of = g0 + np.searchsorted(f_off, rank, side="right") - 1
    starts = np.concatenate([[0], np.flatnonzero(np.diff(rank)) + 1]) if m else np.zeros(0, np.int64)
    runs = np.bincount(rank[starts], minlength=len(member))  # runs of sub-flows per original: 1 each
    if (runs != 1).any():
        x = int(np.flatnonzero(runs == 0)[0]) if (runs == 0).any() else int(np.flatnonzero(runs > 1)[0])
        g = g0 + int(np.searchsorted(f_off, x, side="right") - 1)  # the gate of the batch's x-th flow
        if runs[x] == 0:
            raise SchedulerError(f"{who(g)}: {flows[gr.gated[member[x]]].id} gets no sub-flows")
        raise SchedulerError(f"{who(g)}: SplitArrays must list each original's sub-flows together")
    orig_pos = member[rank]
    del member, rank
    orig = np.array(gr.gated, np.int64)[orig_pos]
    # sizes, DSCPs, caps
    if not np.issubdtype(np.asarray(arr.size).dtype, np.integer):
        raise SchedulerError(f"{name}: gate_split_arrays: sub-flow sizes are not byte counts")
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
    wrong = np.flatnonzero(carried != gr.cj.size[firsts]).tolist()
    wrong += [x for x, k in enumerate(firsts.tolist()) if flows[k].src == flows[k].dst]
    for x in wrong:
        f, g = flows[int(firsts[x])], gate_of[starts[x]]
        end = starts[x + 1] if x + 1 < len(starts) else m
        check_conservation(f, [(f.src, f.dst, int(b)) for b in size[starts[x] : end]], who(g))
        raise SchedulerError(f"{who(g)}: the sub-flows of {f.id} do not carry its bytes")
    del carried, firsts, starts, orig
    # dependents (CSR) and no cycle (check_acyclic names one)
    dependents = owner[np.argsort(dep, kind="stable")]
    del owner
    ptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(dep, minlength=m), out=ptr[1:])
    stuck = _acyclic(lens, ptr, dependents)
    if stuck >= 0:
        _name_the_cycle(gr, g0, int(gate_of[stuck]), flows, arr, gate_of, size, dscp, rate, lens, dep)
    return orig_pos, gate_of, size, dscp, rate, lens, ptr, dependents


def _name_the_cycle(gr: _Gating, g0: int, g: int, flows: dict, arr: SplitArrays, gate_of, size, dscp, rate, lens,
                    dep) -> None:  # fmt: skip
    """Raise the error that names a cycle of gate ``g``'s sub-flows: its split as a :class:`Split`,
    for ``check_acyclic`` to name the cycle."""
    m = len(arr.flow)
    xs = np.flatnonzero(gate_of == g)
    local = np.full(m, -1, np.int64)
    local[xs] = np.arange(len(xs))
    mine = np.concatenate([dep[arr.dep_ptr[x] : arr.dep_ptr[x + 1]] for x in xs] + [np.zeros(0, np.int64)])
    rank = np.asarray(arr.flow, np.int64)
    part = SplitArrays(rank[xs] - (gr.g_off[g] - gr.g_off[g0]), size[xs], np.asarray(arr.suffix, np.int64)[xs],
                       arr.suffixes, np.concatenate([[0], np.cumsum(lens[xs])]), local[mine], dscp[xs],
                       rate[xs])  # fmt: skip
    check_acyclic(part.split([as_offered(flows[k]) for k in gr.mems[g]]), gr.who(g))
    raise SchedulerError(f"{gr.who(g)}: sub-flow dependencies form a cycle")


def _batch_ids(gr: _Gating, flows: dict, arr: SplitArrays, whole: bool, orig_pos, orig, gate_of) -> tuple:
    """The sub-flows' ids: the original's id + its suffix (a checked Split's: no prefix, the
    suffix is the whole id), checked (suffix in range, no "/"), as prefixes (into ``gr.p_crc``,
    0: none), suffixes, the suffixes' bytes, and CRC-32s and keys (length << 32 | CRC-32)
    computed without joining the bytes."""
    m = len(arr.flow)
    suffix = np.asarray(arr.suffix, np.int64)
    if m and (suffix.min() < 0 or suffix.max() >= len(arr.suffixes)):
        x = int(np.flatnonzero((suffix < 0) | (suffix >= len(arr.suffixes)))[0])
        raise SchedulerError(f"{gr.who(gate_of[x])}: SplitArrays suffix outside its suffixes")
    prefix = np.zeros(m, np.int64) if whole else orig_pos + 1  # into p_crc, p_len, p_slash
    s_raw = [s.encode() for s in arr.suffixes]
    s_len = np.array([len(r) for r in s_raw] or [0], np.int64)
    s_crc = np.array([zlib.crc32(r) for r in s_raw] or [0], np.int64)
    lengths = sorted(set(s_len.tolist()))
    tables = _crc_tables(lengths)
    li = np.searchsorted(np.array(lengths, np.int64), s_len)[suffix]
    v = gr.p_crc[prefix]
    crc = (tables[li, 0, v & 255] ^ tables[li, 1, v >> 8 & 255] ^ tables[li, 2, v >> 16 & 255]
           ^ tables[li, 3, v >> 24 & 255]).astype(np.int64) ^ s_crc[suffix]  # fmt: skip
    del li, v
    id_len = gr.p_len[prefix] + s_len[suffix]
    slash_s = [i for i, r in enumerate(s_raw) if b"/" in r]
    slashed = np.isin(suffix, slash_s) | gr.p_slash[prefix]
    if slashed.any():
        x = int(np.flatnonzero(slashed)[0])
        raw = (flows[int(orig[x])].id.encode() if prefix[x] else b"") + s_raw[suffix[x]]
        raise SchedulerError(f"{gr.who(gate_of[x])}: sub-flow id {raw.decode()!r} is not new in the run")
    del slashed
    key = (id_len << 32) | crc
    return prefix, suffix, s_raw, crc, key


def _batch_routes(gr: _Gating, flows: dict, orig_pos, orig, crc) -> tuple:
    """The sub-flows' ECMP spines (by the CRC-32 of the id) and routes (in order of first use,
    new ones after the job's: ``gr.route_of``, ``gr.new_routes``), and which cross servers."""
    cj, cluster, topology = gr.cj, gr.cluster, gr.topology
    m = len(orig)
    net = cj.kind[orig] == NET
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    nic_of: dict[str, int] = {}  # endpoint -> its NIC numbered over the cluster
    in_batch = np.unique(orig_pos)
    batch = [flows[gr.gated[x]] for x in in_batch.tolist()]
    for e in {f.dst for f in batch}:
        nic_of[e] = int(nic_base[gr.placement[e].server]) + gr.placement[e].nic
    dst_nic = np.array([nic_of[f.dst] for f in batch], np.int64)
    a_nic, b_nic = cj.nic[orig].astype(np.int64), dst_nic[np.searchsorted(in_batch, orig_pos)]
    del dst_nic, batch
    nic_leaf = np.array([topology.nics[sv][k].leaf for sv in range(len(cluster.servers))
                         for k in range(cluster.servers[sv].nics)], np.int64)  # fmt: skip
    nspines, total = len(topology.spines), cj.nics
    cross = net & (nic_leaf[a_nic] != nic_leaf[b_nic])
    spine = np.where(cross, crc % max(nspines, 1), -1) if nspines else np.full(m, -1, np.int64)
    del cross
    rkey = (a_nic * total + b_nic) * (nspines + 1) + (spine + 1)
    route = np.full(m, -1, np.int64)
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
            r = gr.route_of.get(rk)
            if r is None:
                r = gr.route_of[rk] = gr.base + len(gr.new_routes)
                gr.new_routes.append(gr.fabric.route(a, b, None if spn < 0 else spn))
            got.append(r)
        r_of = np.empty(len(uniq), np.int64)
        r_of[order] = got
        route[net] = r_of[inverse.ravel()]
    return route, spine, net


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
