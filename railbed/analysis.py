"""Does the network matter in this run? The analysis every run writes (issue 22).

A scheduler can only gain what the network costs. Every run therefore says,
under ``"analysis"`` in its ``result.json`` (``docs/analysis.md`` explains
each field for users):

``network_free_makespan`` and ``max_speedup``
    The makespan of the same job, placement and scheduler with every flow,
    leg and host model taking 0 s (:func:`network_free_makespan`), and the
    run's makespan divided by it: the most any network scheduler could gain.
``busiest_port`` and ``room``
    The egress port whose flows' wire bits take longest at its rate
    (:func:`busiest_port`): no schedule of these flows on these routes ends
    before that. ``room`` = the makespan over the larger of this and the
    network-free makespan: the most a scheduler that keeps the run's
    placement, routes and bytes (orders, priorities, rates, splits) could gain.
``critical_path`` and ``exposed_comm_fraction``
    The chain of items that decided the makespan, found backwards from the
    last item through what made each one start when it did
    (:func:`critical_path`), its time by item kind and coflow type, and the
    share of it that is communication.
``overlap``
    Per pair of coflow types, the share of the makespan during which flows
    of both are active on a common egress port (:func:`overlap`): the
    thesis's Fig. 5.2 (seed 004, §5.1.2).
``contention``
    The time-weighted share of flows rate-limited by a link they share with
    a flow of another coflow type: exact on the simulator (its max-min
    rates, ``simulator/contention.py``), estimated on the emulator
    (:func:`contention_estimate`).

The computations are pure functions over a :class:`Timeline` (the run's
items as columns: times, kinds, coflow types, devices, NICs, dependencies,
each network flow's egress ports), built from a Dispatcher's records
(:func:`timeline_of`) or by the compact engine from its arrays. They read
no backend: ``simulator`` and ``emulator`` hand in what only they know
(the network-free makespan of a run without a Dispatcher, the contention
they measured).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import count

import numpy as np

from railbed.dispatch import Dispatcher, StartFlow, StartWait
from railbed.job import Item, Job, Placement
from railbed.results import ItemRecord, RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology

STANDARD_TYPES = ("PP", "DP", "EP", "TP")
UNTYPED = "other"  # flows without a coflow type
COMPUTE = "compute"
IDLE = "idle"
RELEASE = "release"  # waiting for a release time (an item's `at`): neither compute nor communication
LEG_PHASES = ("src", "dst", "local")  # a flow's host-model waits (Dispatcher): 0 s without a network
MAX_LINKS = 64  # per-link overlap kept for the links with the most
SLOW = 0.9  # the emulator's estimate: a flow under 90 % of its rate alone was slowed
MAX_ESTIMATE_PAIRS = 200_000  # (flow, port) pairs the emulator's per-flow estimate walks in Python


# ------------------------------------------------------------------ the timeline
@dataclass
class Timeline:
    """A run's items as columns (item ``k`` is ``ids[k]``); times are model seconds, ``nan``
    for an item that never started or ended.

    ``ctype`` indexes ``types`` (a flow's coflow type; ``"other"`` without one; -1 for tasks);
    ``coflow`` numbers a flow's coflow (a flow without one is a coflow of its own; -1 for
    tasks); ``device`` numbers a task's (server, device), ``nic`` a flow's source NIC;
    ``parent`` is a sub-flow's original (-1); ``pred_ptr``/``pred_idx`` list each item's
    dependencies (CSR; a sub-flow's may be missing: it is never on a critical path, its
    original stands for it); ``path_ptr``/``path_idx`` each network flow's egress ports
    (indices into ``link_names``, rates ``link_rate``; empty for other items); ``bits`` a
    network flow's wire bits and ``cap`` its first rate cap (for the emulator's estimate)."""

    ids: Sequence[str]
    is_flow: np.ndarray
    net: np.ndarray
    ready: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ctype: np.ndarray
    types: list[str]
    coflow: np.ndarray
    device: np.ndarray
    nic: np.ndarray
    parent: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    path_ptr: np.ndarray
    path_idx: np.ndarray
    link_names: list[str]
    link_rate: np.ndarray  # bit/s per port
    bits: np.ndarray  # a network flow's wire bits (0 else)
    cap: np.ndarray  # a flow's first rate cap (inf: none)
    release: np.ndarray | None = None  # an item's release time (`at`; 0: none), or None when no item has one

    @property
    def n(self) -> int:
        return len(self.end)

    @property
    def makespan(self) -> float:
        done = self.end[np.isfinite(self.end)]
        return float(done.max()) if len(done) else 0.0

    def category(self, k: int) -> str:
        """``compute`` for a task, else the flow's coflow type."""
        return self.types[self.ctype[k]] if self.is_flow[k] else COMPUTE


def type_order(names) -> list[str]:
    """Coflow types in report order: PP, DP, EP, TP, the others sorted, ``other`` last."""
    names = set(names)
    rest = sorted(n for n in names if n not in STANDARD_TYPES and n != UNTYPED)
    return [t for t in STANDARD_TYPES if t in names] + rest + ([UNTYPED] if UNTYPED in names else [])


def timeline_of(records: Mapping[str, ItemRecord], items: Mapping[str, Item], topology: Topology) -> Timeline:
    """The :class:`Timeline` of a Dispatcher's ``records`` (a RunResult's ``items``), with the
    dependencies of ``items`` (the job's, or the Dispatcher's with its sub-flows) and each
    network flow's egress ports from ``topology`` (its NICs and ECMP spine)."""
    ids = list(records)
    index = {i: k for k, i in enumerate(ids)}
    n = len(ids)
    recs = [records[i] for i in ids]

    def col(get, dtype=float):
        return np.array([get(r) for r in recs], dtype=dtype) if n else np.zeros(0, dtype)

    is_flow = col(lambda r: r.kind == "flow", bool)
    net = col(lambda r: r.kind == "flow" and r.dst_server is not None and r.dst_server != r.server, bool)
    nan = math.nan
    ready = col(lambda r: nan if r.ready is None else r.ready)
    start = col(lambda r: nan if r.start is None else r.start)
    end = col(lambda r: nan if r.end is None else r.end)
    names = [(r.attrs.get("coflow_type") or UNTYPED) for r in recs if r.kind == "flow"]
    types = type_order(names)
    tix = {t: k for k, t in enumerate(types)}
    ctype = col(lambda r: tix[r.attrs.get("coflow_type") or UNTYPED] if r.kind == "flow" else -1, np.int32)
    coflows: dict[object, int] = {}
    coflow = np.full(n, -1, np.int64)
    devices: dict[tuple, int] = {}
    device = np.full(n, -1, np.int64)
    nics: dict[tuple, int] = {}
    nic = np.full(n, -1, np.int64)
    parent = np.full(n, -1, np.int64)
    for k, r in enumerate(recs):
        if r.kind == "task":
            device[k] = devices.setdefault((r.server, r.device), len(devices))
            continue
        key = r.attrs.get("coflow")
        key = ("flow", r.parent or r.id) if key is None else ("coflow", key)
        coflow[k] = coflows.setdefault(key, len(coflows))
        nic[k] = nics.setdefault((r.server, r.src_nic), len(nics))
        if r.parent is not None and r.parent in index:
            parent[k] = index[r.parent]
    deps = [sorted(index[d] for d in items[i].deps if d in index) if i in items else [] for i in ids]
    pred_ptr, pred_idx = _csr(deps)
    link_id: dict[str, int] = {}
    rate_of = {f"{p.node}:{p.ifname}": p.rate for p in topology.ports.values()}
    routes: dict[tuple, list[int]] = {}
    paths = []
    for k, r in enumerate(recs):
        if not net[k]:
            paths.append([])
            continue
        key = ((r.server, r.src_nic or 0), (r.dst_server, r.dst_nic or 0), r.spine)
        if key not in routes:
            hops = topology.path(key[0], key[1], key[2])
            routes[key] = [link_id.setdefault(f"{h.node}:{h.ifname}", len(link_id)) for h in hops]
        paths.append(routes[key])
    link_names = list(link_id)
    path_ptr, path_idx = _csr(paths)
    framing = topology.spec.fabric.framing
    bits = np.where(net, 8.0 * col(lambda r: framing.wire_bytes(r.size or 0)), 0.0) if n else np.zeros(0)
    cap = col(lambda r: math.inf if r.rate is None else r.rate)
    release = col(lambda r: r.attrs.get("at") or 0.0)
    return Timeline(
        ids, is_flow, net, ready, start, end, ctype, types, coflow, device, nic, parent, pred_ptr, pred_idx,
        path_ptr, path_idx, link_names, np.array([rate_of[x] for x in link_names], float), bits, cap,
        release if release.any() else None,
    )  # fmt: skip


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    idx = np.fromiter((j for x in lists for j in x), np.int64, count=int(ptr[-1]))
    return ptr, idx


# --------------------------------------------------------------- the network-free run
def network_free_makespan(
    job: Job, scheduler: Scheduler, cluster: ClusterSpec, placement: Placement, topology: Topology | None = None
) -> float:
    """The makespan of ``job`` under ``scheduler`` on ``placement`` when communication takes
    no time: every flow ends when it starts (no latency, no transfer), every host-model leg
    and same-server flow takes 0 s; tasks take their durations, device slots are kept, and
    wake-ups come when asked.

    "The same scheduler": ``scheduler`` must be in the state ``place`` left it (a
    Dispatcher's ``placed_scheduler``); ``place`` is not asked again, so a placement search
    (DGTP's ETP) does not run twice. Its hooks decide as in the run: ``on_ready`` may hold
    a flow, which is offered again after the next event, and since flows end in the
    instant they start, a hold behind other flows resolves in that same instant; rate caps
    mean nothing. The events follow :data:`railbed.actions.EVENT_ORDER` (as :mod:`simulator.fluid.run`
    with zero latency and zero bits: flows started end together at the next step, in the order they
    started, before any timer; timers in (time, order set)), so the compact engine's run of
    its job with zero bits (:func:`simulator.rules.network_free_run`) gives the same
    times."""
    disp = Dispatcher(job, scheduler, cluster, topology, placement=placement)
    timers: list[tuple[float, int, str]] = []
    seq = count()
    flows: list[str] = []
    now = 0.0

    def do(actions) -> None:
        for a in actions:
            if isinstance(a, StartFlow):
                flows.append(a.id)
            elif isinstance(a, StartWait):
                _, _, phase = a.key.partition("/")
                seconds = 0.0 if phase in LEG_PHASES else a.seconds
                heapq.heappush(timers, (now + seconds, next(seq), a.key))

    do(disp.begin(0.0))
    while not disp.finished:
        if flows:
            batch = flows[:]
            flows.clear()
            for fid in batch:
                do(disp.flow_done(fid, now))
            continue
        if not timers:
            raise RuntimeError(f"network-free run: {disp.remaining} items unfinished and nothing pending")
        now = timers[0][0]
        while timers and timers[0][0] <= now:
            _, _, key = heapq.heappop(timers)
            do(disp.wait_done(key, now))
    ends = [r.end for r in disp.records.values() if r.end is not None]
    return max(ends) if ends else 0.0


# ------------------------------------------------------------------ critical path
class _Ends:
    """Items grouped by a key, each group's ends sorted: which item of group ``key`` ended at ``t``."""

    def __init__(self, key: np.ndarray, end: np.ndarray, members: np.ndarray, tol: float) -> None:
        idx = np.flatnonzero(members & np.isfinite(end))
        order = np.lexsort((idx, end[idx], key[idx]))
        self.items, self.key, self.end, self.tol = idx[order], key[idx][order], end[idx][order], tol

    def at(self, key: int, t: float, skip: set[int]) -> int:
        lo, hi = np.searchsorted(self.key, key, "left"), np.searchsorted(self.key, key, "right")
        a = lo + np.searchsorted(self.end[lo:hi], t - self.tol, "left")
        b = lo + np.searchsorted(self.end[lo:hi], t + self.tol, "right")
        for x in range(b - 1, a - 1, -1):
            if int(self.items[x]) not in skip:
                return int(self.items[x])
        return -1

    def before(self, t: float) -> int:
        """The item (of group 0) that ended last before ``t - tol``, or -1."""
        x = np.searchsorted(self.end, t - self.tol, "left") - 1
        return int(self.items[x]) if x >= 0 else -1


def critical_path(tl: Timeline) -> dict:
    """The chain of items that decided the makespan, walked back from the item that ended last.

    At each item (its time on the path runs from its start to where the path left it):

    * if it started later than it became ready, it waited for something that ended then:
      a task for its device (the task on that device that ended at its start), a flow for
      its scheduler's hold (a network flow on its source NIC that ended at its start; else,
      for a coflow held whole, a dependency of a member that became ready then; else any
      item that ended then). The path continues at that item. With none (a wake-up), the
      wait counts as the item's own kind (``held``) and the path continues at its ready time;
    * at its ready time, the dependency that ended then; else, if it became ready at its
      release time (``at``), the path ends there and its time before counts as ``release``
      (an arrival, not compute: a trace's or a job's); else any item that ended then;
      else the path is ``idle`` back to the last end before.

    A sub-flow on the path stands for its original (from the original's start), so the path
    lists only the job's items. Ends are compared within ``1e-12`` of the makespan (both
    backends copy one clock reading into the end of one item and the start of the next).

    Returns ``time`` (seconds per kind: ``compute``, each coflow type, ``idle``; PP, DP, EP,
    TP and ``other`` always present), ``held`` (flows' waits with nothing ending, included
    in their types), ``comm`` (their sum: every flow type), ``exposed_comm_fraction``
    (``comm`` / makespan) and ``items`` (ids in time order)."""
    n = tl.n
    makespan = tl.makespan
    time = {COMPUTE: 0.0, **{t: 0.0 for t in (*STANDARD_TYPES, UNTYPED)}, IDLE: 0.0}
    out = {"length": makespan, "time": time, "held": 0.0, "comm": 0.0, "exposed_comm_fraction": 0.0, "items": []}
    if n == 0 or makespan <= 0:
        return out
    tol = 1e-12 * makespan
    done = np.isfinite(tl.end)
    zeros = np.zeros(n, np.int64)
    anyone = _Ends(zeros, tl.end, done, tol)
    by_device = _Ends(tl.device, tl.end, ~tl.is_flow, tol)
    by_nic = _Ends(tl.nic, tl.end, tl.net, tol)
    named = tl.coflow.copy()
    co_order = np.argsort(named, kind="stable")
    co_sorted = named[co_order]

    def resolve(k: int) -> int:
        while tl.parent[k] >= 0:
            k = int(tl.parent[k])
        return k

    def dep_at(k: int, t: float, seen: set[int]) -> int:
        for x in range(tl.pred_ptr[k + 1] - 1, tl.pred_ptr[k] - 1, -1):
            d = int(tl.pred_idx[x])
            if abs(tl.end[d] - t) <= tol and resolve(d) not in seen:
                return d
        return -1

    def gate_at(k: int, t: float, seen: set[int]) -> int:
        """A coflow held whole (a gate, a collective) starts when its last member became ready."""
        lo, hi = np.searchsorted(co_sorted, tl.coflow[k], "left"), np.searchsorted(co_sorted, tl.coflow[k], "right")
        for m in co_order[lo:hi]:
            if abs(tl.ready[m] - t) <= tol:
                d = dep_at(int(m), t, seen)
                if d >= 0:
                    return d
        return -1

    def blocker(k: int, t: float, seen: set[int]) -> int:
        if not tl.is_flow[k]:
            return by_device.at(int(tl.device[k]), t, seen)
        b = by_nic.at(int(tl.nic[k]), t, seen | {k}) if tl.net[k] else -1
        if b < 0 and tl.coflow[k] >= 0:
            b = gate_at(k, t, seen)
        return b if b >= 0 else anyone.at(0, t, seen | {k})

    path: list[int] = []
    seen: set[int] = set()
    k = resolve(int(np.nanargmax(np.where(done, tl.end, -np.inf))))
    t = float(tl.end[k])
    while True:
        path.append(k)
        seen.add(k)
        s = float(tl.start[k])
        time[tl.category(k)] = time.get(tl.category(k), 0.0) + (t - s)
        if s > tl.ready[k] + tol:
            b = blocker(k, s, seen)
            if b >= 0 and resolve(b) not in seen:
                k, t = resolve(b), s
                continue
            wait = s - float(tl.ready[k])
            time[tl.category(k)] += wait
            if tl.is_flow[k]:
                out["held"] += wait
            s = float(tl.ready[k])
        if s <= tol:
            time[IDLE] += max(s, 0.0)
            break
        p = dep_at(k, s, seen)
        if p < 0 and tl.release is not None and tl.release[k] > 0 and abs(tl.release[k] - s) <= tol:
            time[RELEASE] = s
            break
        if p < 0:
            p = anyone.at(0, s, seen)
        if p < 0 or resolve(p) in seen:
            q = anyone.before(s)
            while q >= 0 and resolve(q) in seen:  # rare: step back past items already on the path
                q = anyone.before(float(tl.end[q]))
            if q < 0:
                time[IDLE] += s
                break
            time[IDLE] += s - float(tl.end[q])
            p, s = q, float(tl.end[q])
        k, t = resolve(p), s
    out["items"] = [tl.ids[x] for x in reversed(path)]
    out["comm"] = sum(v for c, v in time.items() if c not in (COMPUTE, IDLE, RELEASE))
    out["exposed_comm_fraction"] = out["comm"] / makespan
    return out


# ------------------------------------------------------------------------ overlap
@dataclass
class _Sweep:
    """Per egress port, the coflows of each type active between consecutive events.

    ``link``, ``t`` (sorted by link, then time) and ``counts[a]`` (coflows of type ``a``
    active on the link from ``t[k]`` to ``t[k + 1]``); ``dur[k]`` that span (0 at a link's
    last event)."""

    link: np.ndarray
    t: np.ndarray
    counts: np.ndarray  # int32 [types, events]
    dur: np.ndarray


def _flow_ports(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(flow index, port) of every network flow that carried bytes itself (not a split
    original: its sub-flows did) and every egress port on its path."""
    split = np.zeros(tl.n, bool)
    split[tl.parent[tl.parent >= 0]] = True
    flows = np.flatnonzero(tl.net & ~split & np.isfinite(tl.start) & np.isfinite(tl.end) & (tl.end > tl.start))
    nhops = tl.path_ptr[flows + 1] - tl.path_ptr[flows]
    flow = np.repeat(flows, nhops)
    first = np.repeat(tl.path_ptr[flows], nhops)
    offset = np.arange(len(flow)) - np.repeat(np.cumsum(nhops) - nhops, nhops)
    return flow, tl.path_idx[first + offset]


def _sweep(tl: Timeline) -> _Sweep:
    """The coflows active per port and type over time (:class:`_Sweep`).

    A coflow is active on a port while any of its flows crosses it; the flows' own
    intervals are merged per (port, coflow) first, so two flows of one coflow count once."""
    flow, port = _flow_ports(tl)
    ntypes = max(len(tl.types), 1)
    cokey = tl.coflow[flow] * ntypes + tl.ctype[flow]
    m = len(flow)
    link = np.concatenate([port, port])
    key = np.concatenate([cokey, cokey])
    t = np.concatenate([tl.start[flow], tl.end[flow]])
    delta = np.concatenate([np.ones(m, np.int64), -np.ones(m, np.int64)])
    order = np.lexsort((delta, t, key, link))  # per (port, coflow) in time, ends before starts at a tie
    link, key, t, delta = link[order], key[order], t[order], delta[order]
    level = np.cumsum(delta)  # each (port, coflow) group sums to 0, so the running sum is its own count
    on = ((delta == 1) & (level == 1)) | ((delta == -1) & (level == 0))
    link, ty, t, delta = link[on], key[on] % ntypes, t[on], delta[on]
    order = np.lexsort((t, link))
    link, ty, t, delta = link[order], ty[order], t[order], delta[order]
    counts = np.zeros((ntypes, len(t)), np.int32)
    for a in range(ntypes):
        counts[a] = np.cumsum(np.where(ty == a, delta, 0))
    dur = np.zeros(len(t))
    if len(t) > 1:
        same = link[1:] == link[:-1]
        dur[:-1] = np.where(same, t[1:] - t[:-1], 0.0)
    return _Sweep(link, t, counts, dur)


def _union_length(sw: _Sweep, cond: np.ndarray) -> float:
    """Length of the union, over ports, of the spans where ``cond`` holds."""
    k = np.flatnonzero(cond & (sw.dur > 0))
    if not len(k):
        return 0.0
    times, inv = np.unique(sw.t, return_inverse=True)
    a, b = inv[k], inv[k + 1]
    cover = np.cumsum(np.bincount(a, minlength=len(times) + 1) - np.bincount(b, minlength=len(times) + 1))
    widths = np.diff(times)
    return float(widths[cover[: len(widths)] > 0].sum())


def busiest_port(tl: Timeline) -> dict | None:
    """The port whose network flows' wire bits take longest at its rate: ``port``, ``seconds``
    and ``share`` of the makespan (None without network flows). A split flow counts by its
    sub-flows (its own record carries the same bytes)."""
    leaf = tl.net.copy()
    leaf[tl.parent[tl.parent >= 0]] = False
    owner = np.repeat(np.arange(tl.n), np.diff(tl.path_ptr))
    bits = np.bincount(tl.path_idx, weights=np.where(leaf, tl.bits, 0.0)[owner], minlength=len(tl.link_names))
    if not len(bits) or bits.max() <= 0:
        return None
    seconds = bits / tl.link_rate
    k = int(np.argmax(seconds))
    span = tl.makespan
    return {"port": tl.link_names[k], "seconds": float(seconds[k]), "share": float(seconds[k] / span) if span else None}


def room(makespan: float, network_free: float | None, port: Mapping | None) -> float | None:
    """``makespan`` over the larger of ``network_free`` and the busiest port's seconds (module
    docstring); None when neither bound is known or both are 0."""
    bound = max(network_free or 0.0, (port or {}).get("seconds") or 0.0)
    return makespan / bound if bound > 0 and (network_free is not None or port) else None


def overlap(tl: Timeline, max_links: int = MAX_LINKS) -> dict:
    """Per pair of coflow types, the share of the makespan during which flows of both are
    active on a common egress port; for a type with itself, two different coflows of it.

    The thesis measures this in Fig. 5.2 (seed 004, §5.1.2: "EP and DP coflows overlap for
    44.8% of the iteration time, DP coflows across different layers for 48.9%"; its footnote:
    "two coflows are considered overlapped when their flows occur concurrently at the same
    endpoints", over inter-node coflows). Here an endpoint is an egress port: the sending
    NIC's, every switch port on the way, and the port into the receiving NIC, so a shared
    sender, a shared receiver and a shared core link all count; same-server flows cross no
    port and never overlap. A flow is active from its start to its end.

    Returns ``types``, ``share`` (``share[a][b]``, symmetric), ``links`` (per port the
    nonzero shares by ``"a/b"``, for the ``max_links`` ports with the largest sum) and
    ``links_with_overlap``."""
    makespan = tl.makespan
    types = [t for k, t in enumerate(tl.types) if np.any(tl.net & (tl.ctype == k))]
    share = {a: {b: 0.0 for b in types} for a in types}
    out = {"types": types, "share": share, "links": {}, "links_with_overlap": 0}
    if makespan <= 0 or not types:
        return out
    sw = _sweep(tl)
    ix = {t: tl.types.index(t) for t in types}
    per_link: dict[str, np.ndarray] = {}
    nlinks = len(tl.link_names)
    for i, a in enumerate(types):
        for b in types[i:]:
            ca, cb = sw.counts[ix[a]], sw.counts[ix[b]]
            cond = (ca >= 2) if a == b else (ca > 0) & (cb > 0)
            share[a][b] = share[b][a] = _union_length(sw, cond) / makespan
            per_link[f"{a}/{b}"] = np.bincount(sw.link[cond], weights=sw.dur[cond], minlength=nlinks) / makespan
    if per_link:
        total = sum(per_link.values())
        busy = np.flatnonzero(total > 0)
        out["links_with_overlap"] = int(len(busy))
        for lk in busy[np.argsort(-total[busy], kind="stable")][:max_links]:
            out["links"][tl.link_names[lk]] = {p: float(v[lk]) for p, v in per_link.items() if v[lk] > 0}
    return out


# ---------------------------------------------------------------- contention (emulator)
def contention_estimate(tl: Timeline, slow: float = SLOW) -> dict:
    """The emulator's estimate of ``contention`` from what it measures: when each flow ran
    (its records), not the rate it got from moment to moment.

    A flow counts as contended while a port on its path carries a flow of another coflow
    type, if it was slowed: its mean wire rate over its life (wire bits / (end - start))
    stayed under ``slow`` of what it could have had alone (its narrowest port's rate, or
    its cap). The simulator's definition asks, moment by moment, whether the shared port
    was the one that limited it; this one counts a slowed flow's whole time beside another
    type, so it counts more where a flow was slowed elsewhere (by its own type, by TCP's
    start) and ran beside another type on a port with room to spare, and it counts a flow
    that kept at least ``slow`` of its rate as never contended. On the simulator's records it
    can be compared with the exact measure (``tests/test_analysis.py``).

    Returns ``share`` (contended flow-seconds / active flow-seconds), ``by_type`` and
    ``method``; ``share`` is ``None`` for runs over :data:`MAX_ESTIMATE_PAIRS` (flow, port) pairs."""
    out: dict = {"share": None, "by_type": {}, "method": f"estimate: slowed under {slow:g} of its rate alone, "
                 "beside another coflow type on a port (records)"}  # fmt: skip
    flow, port = _flow_ports(tl)
    if len(flow) > MAX_ESTIMATE_PAIRS:
        out["method"] += f"; not computed: {len(flow)} (flow, port) pairs"
        return out
    sw = _sweep(tl)
    total = np.zeros(len(tl.types))
    hit = np.zeros(len(tl.types))
    lo = np.searchsorted(sw.link, np.arange(len(tl.link_names)), "left")
    hi = np.searchsorted(sw.link, np.arange(len(tl.link_names)), "right")
    for f in np.unique(flow):
        a = int(tl.ctype[f])
        s, e = float(tl.start[f]), float(tl.end[f])
        total[a] += e - s
        ports = tl.path_idx[tl.path_ptr[f] : tl.path_ptr[f + 1]]
        alone = min(float(tl.link_rate[ports].min()), float(tl.cap[f]))
        if tl.bits[f] / (e - s) >= slow * alone:
            continue
        spans: list[tuple[float, float]] = []
        for lk in ports:
            x = slice(lo[lk], hi[lk])
            others = sw.counts[:, x].sum(axis=0) - sw.counts[a, x]
            spans += _intersect([(t0, t0 + d) for t0, d, o in zip(sw.t[x], sw.dur[x], others) if o > 0 and d > 0],
                                [(s, e)])  # fmt: skip
        hit[a] += _length(spans)
    out["share"] = float(hit.sum() / total.sum()) if total.sum() > 0 else 0.0
    out["by_type"] = {t: float(hit[k] / total[k]) for k, t in enumerate(tl.types) if total[k] > 0}
    return out


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Pairwise intersections of two lists of intervals (each sorted by start)."""
    out, i, j = [], 0, 0
    a, b = sorted(a), sorted(b)
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    """Length of the union of intervals."""
    total, reach = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


# ------------------------------------------------------------------------ assembly
def analyse(
    tl: Timeline | None,
    makespan: float,
    network_free: float | None,
    contention: dict | None,
    notes: Sequence[str] = (),
) -> dict:
    """The ``analysis`` of a run (module docstring): from its timeline (``None`` when the
    run is too large for one: critical path and overlap are then left out, and a note
    says so), its network-free makespan and its contention."""
    speedup = None
    notes = list(notes)
    compute = None if tl is None or tl.n == 0 else not bool(tl.is_flow.all())  # unknown without a timeline
    if network_free is not None:
        if compute is False and makespan > 0:  # flows only (a trace replay): no compute to bound by
            notes.append(
                "max_speedup: n/a, the job has no compute (the network-free makespan is only its last release)"
                if network_free > 0
                else "max_speedup: the network-free makespan is 0 (the job has no compute)"
            )
        elif network_free > 0:
            speedup = makespan / network_free
        elif makespan <= 0:
            speedup = 1.0
        else:
            notes.append("max_speedup: the network-free makespan is 0 (the job has no compute)")
    out: dict = {
        "makespan": makespan,
        "network_free_makespan": network_free,
        "compute": compute,
        "max_speedup": speedup,
        "busiest_port": None,
        "room": None,
        "exposed_comm_fraction": None,
        "critical_path": None,
        "overlap": None,
        "contention": contention,
        "notes": notes,
    }
    if tl is not None:
        out["busiest_port"] = busiest_port(tl)
        out["room"] = room(makespan, network_free, out["busiest_port"])
        cp = critical_path(tl)
        out["critical_path"] = cp
        out["exposed_comm_fraction"] = cp.pop("exposed_comm_fraction")
        out["overlap"] = overlap(tl)
    return out


def of_dispatcher(disp, result: RunResult, contention: dict | None = None) -> dict:
    """The analysis of a run driven by ``disp`` (a :class:`~railbed.dispatch.Dispatcher` made
    with ``snapshot=True``) that produced ``result``: its network-free run (from the
    scheduler as ``place`` left it, on the run's placement), its critical path and overlap,
    and the backend's ``contention`` (the simulator measures it; without one, the estimate
    from the records, :func:`contention_estimate`, as the emulator has)."""
    notes = []
    free = None
    if disp.placed_scheduler is None:
        notes.append(f"network_free_makespan: {disp.snapshot_problem or 'no copy of the scheduler was kept'}")
    else:
        try:
            free = network_free_makespan(disp.job, disp.placed_scheduler, disp.cluster, disp.placement, disp.topology)
        except Exception as exc:  # noqa: BLE001 - a scheduler's own code may fail without a network; the run stands
            notes.append(f"network_free_makespan: the run without a network failed ({type(exc).__name__}: {exc})")
    try:
        tl = timeline_of(disp.records, disp.items, disp.topology)
        if contention is None:
            contention = contention_estimate(tl)
        return analyse(tl, result.makespan, free, contention, notes)
    except Exception as exc:  # noqa: BLE001 - the run's results stand without their analysis; say why
        return failed(result.makespan, free, exc, notes)


def failed(makespan: float, network_free: float | None, exc: Exception, notes: Sequence[str] = ()) -> dict:
    """An analysis that could not be completed: what is known, and why (a note)."""
    out = analyse(None, makespan, network_free, None, notes)
    out["notes"].append(f"analysis failed ({type(exc).__name__}: {exc})")
    return out
