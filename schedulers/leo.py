"""LEO's path selection and its baselines (seed 004, chapter 6): thin classes over :mod:`schedulers.leo_alg`.

Every class here picks one path per *request* of a :mod:`workloads.requests`
stream (``choose_path`` of its first flow; its later flows, the back
messages and further round trips, take the same path) and keeps dependent
requests on one path (§6.2.2 "Request dependency": a request whose ``dep``
key matches a request still in progress takes that request's path when it
is allowed). They differ in ``decide``:

``leo-literal``
    the toll heuristic as §6.2.2 writes it, eq. 6.5: ``k_hat[p] * Q_toll(p, r) +
    T(p, r)``, ``k_hat`` per path from each completed request's measured
    intra-host JCT (the legs' seconds the run recorded, §6.2.2's timestamps;
    jitter excluded), through ``on_done``.
``leo``
    the same with the three variants of :mod:`schedulers.leo_alg` where the
    thesis is silent: the toll divided by a node's parallel servers
    (``parallel``), k_hat per element so that shared devices count once
    (``shared``), k_hat bounded by the requests in progress (``bound``). Each
    is an argument (``{name: leo, args: {bound: false}}``) so its effect alone
    can be measured.
``leo-lp``
    the k-step optimum of eqs. 6.3-6.4 as a MILP (HiGHS): this request and the
    next ``horizon - 1`` of the job (the thesis pre-records the sequence,
    §6.4.3), from the queues the scheduler's own mirror of (6.1)/(6.2) holds
    (its past choices at their arrivals). ``decision_times`` keeps the solver's
    wall time per decision.
``greedy-intra`` / ``greedy-e2e``
    §6.4.3's greedy baselines: the allowed path whose last completed request of
    this type had the least intra-host JCT / end-to-end JCT (network and
    jitter included); a path not yet measured counts its ``T(p, r)`` (our
    choice; the thesis does not say how they start).
``cpu-only`` / ``acc-only``
    single path: ``cpu-cpu`` / ``acc-acc``, else the allowed path with the most
    CPU / accelerator (a YCSB-B PUT under ``acc-only`` takes ``acc-cpu``).

Costs ``T(p, r)``, ``Q_toll(p, r)`` and the LP's per-element work come from the
servers' datapath models (:class:`hwmodels.plugin.DatapathHost`), summed over
the request's legs, computed once per request type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hwmodels.leo import FRAMINGS, SIMULATED_FRAMING
from railbed.errors import SpecError
from railbed.hosts import HostLeg
from railbed.job import Flow, Job
from railbed.scheduler import Scheduler
from schedulers.leo_alg import (
    LpInstance,
    bound_khat,
    drain,
    is_late,
    lp_choose,
    max_rate,
    network_rate,
    path_penalty,
    saturated,
    single_path_rate,
    toll_choice,
    toll_matrix,
    update_khat,
    update_khat_elements,
)

PATHS = ("cpu-cpu", "cpu-acc", "acc-cpu", "acc-acc")


class LeoBase(Scheduler):
    """One path per request, dependent requests together, per-type costs (see the module docstring)."""

    name = "leo-base"

    def __init__(self) -> None:
        self.chosen: dict[int, str] = {}  # request in progress -> its path
        self.inflight: dict[str, list] = {}  # dependency key -> [path, requests in progress]
        self.arrived: dict[int, float] = {}
        self.costs: dict[str, dict[str, tuple[float, float]]] = {}  # rtype -> path -> (T, Q_toll)
        self._hosts: dict[int, object] = {}
        self._flows: dict[int, list[str]] = {}
        self._types: dict[str, int] = {}  # rtype -> index into _T, _w
        self._T: list[np.ndarray] = []  # per type: T(p, r) per path (nan: not allowed)
        self._w: list[np.ndarray] = []  # per type: work w[p, e] on each element of both hosts
        self._cap: np.ndarray | None = None  # elements' parallel capacities
        self._view = None  # the run's view, for notes() at its end

    def check(self, job: Job, cluster) -> None:
        for it in job.items.values():
            if isinstance(it, Flow) and it.options and "request" not in it.tags:
                raise SpecError(f"items.{it.id}.tags.request", f"{self.name} schedules request streams (requests)")
        for s, server in enumerate(cluster.servers[:2]):
            if server.host_spec("datapath") is None:
                raise SpecError(f"servers[{s}].datapath", f"{self.name} needs the servers' datapath models")

    # ------------------------------------------------------------ the hooks
    def choose_path(self, flow: Flow, view) -> int:
        self._view = view
        i = flow.tags["request"]
        names = [o.name for o in flow.options]
        if i in self.chosen:
            return names.index(self.chosen[i])
        dep = flow.tags.get("dep")
        held = self.inflight.get(dep) if dep is not None else None
        if held and held[1] > 0 and held[0] in names:
            name = held[0]
        else:
            name = self.decide(flow, view, names)
        self.chosen[i] = name
        self.arrived[i] = view.now
        if dep is not None:
            entry = self.inflight.setdefault(dep, [name, 0])
            entry[0], entry[1] = name, entry[1] + 1
        self.chose(flow, name, view)
        return names.index(name)

    def on_done(self, item, record, view) -> None:
        if not isinstance(item, Flow) or not item.tags.get("last"):
            return
        i = item.tags["request"]
        name = self.chosen.pop(i)
        dep = item.tags.get("dep")
        if dep is not None:
            entry = self.inflight[dep]
            entry[1] -= 1
            if entry[1] == 0:
                del self.inflight[dep]
        intra = sum(view.records[f].intra or 0.0 for f in self._flows.pop(i))
        self.completed(i, item.tags["rtype"], name, intra, record.end - self.arrived.pop(i))

    def notes(self) -> list[str]:
        """The request stream's capacity check (:func:`capacity_check`) and the paths taken."""
        view = self._view
        if view is None:
            return []
        used: dict[str, int] = {}
        for rec in view.records.values():
            if rec.kind == "flow" and rec.option and (rec.attrs.get("tags") or {}).get("last"):
                used[rec.option] = used.get(rec.option, 0) + 1
        paths = ", ".join(f"{p} {used[p]}" for p in PATHS if p in used)
        return [capacity_check(view.job, view.cluster).note(), f"{self.name}: requests per path: {paths or 'none'}"]

    # ------------------------------------------------------- what differs
    def decide(self, flow: Flow, view, allowed: list[str]) -> str:
        return allowed[0]

    def chose(self, flow: Flow, name: str, view) -> None:
        """After every new request's path (decided or kept by a dependency)."""
        self._flows[flow.tags["request"]] = self.flow_ids(flow, view.job)

    def completed(self, request: int, rtype: str, path: str, intra: float, e2e: float) -> None:
        """Request ``request``'s last message arrived: its measured intra-host and end-to-end JCT."""

    # -------------------------------------------------------------- costs
    @staticmethod
    def flow_ids(flow: Flow, job: Job) -> list[str]:
        i, out, k = flow.tags["request"], [], 0
        while f"q{i}.{k}o" in job.items:
            out += [f"q{i}.{k}o", f"q{i}.{k}b"]
            k += 1
        return out

    def host(self, server: int, view):
        if server not in self._hosts:
            from hwmodels.plugin import DatapathHost

            self._hosts[server] = DatapathHost(view.cluster.servers[server].host_spec("datapath"), server)
        return self._hosts[server]

    def legs(self, flow: Flow, view, path: str):
        """(host, server, plugin leg) of each leg of the request of ``flow`` on ``path``."""
        out = []
        for fid in self.flow_ids(flow, view.job):
            f = view.job.items[fid]
            opt = next(o for o in f.options if o.name == path)
            for ep, leg in ((f.src, opt.src_leg), (f.dst, opt.dst_leg)):
                server = view.location(ep).server
                hw = HostLeg(leg.src, leg.dst, float(f.size or 0), 0.0, leg.work)
                out.append((self.host(server, view), server, hw))
        return out

    def cost(self, flow: Flow, view) -> dict[str, tuple[float, float]]:
        """path -> (T(p, r), Q_toll(p, r)) of the request type of ``flow`` (its allowed paths)."""
        rtype = flow.tags["rtype"]
        if rtype not in self.costs:
            table = {}
            for opt in flow.options:
                parts = [host.cost(leg) for host, _, leg in self.legs(flow, view, opt.name)]
                table[opt.name] = (sum(p[0] for p in parts), sum(p[1] for p in parts))
            self.costs[rtype] = table
        return self.costs[rtype]

    def _type(self, flow: Flow, view) -> int:
        """Index of the request type of ``flow``, with its T[p] and w[p, e] over both hosts' elements."""
        rtype = flow.tags["rtype"]
        if rtype not in self._types:
            servers = sorted({view.location(flow.src).server, view.location(flow.dst).server})
            offset = {s: sum(self.host(x, view).size for x in servers[:i]) for i, s in enumerate(servers)}
            ne = sum(self.host(s, view).size for s in servers)
            if self._cap is None:
                self._cap = np.concatenate([self.host(s, view).capacities() for s in servers])
            T, w = np.full(len(PATHS), np.nan), np.zeros((len(PATHS), ne))
            for opt in flow.options:
                p = PATHS.index(opt.name)
                T[p] = self.cost(flow, view)[opt.name][0]
                for host, server, leg in self.legs(flow, view, opt.name):
                    ids, work = host.demand(leg)
                    np.add.at(w[p], ids + offset[server], work)
            self._types[rtype] = len(self._T)
            self._T.append(T)
            self._w.append(w)
        return self._types[rtype]


class Leo(LeoBase):
    """Eq. 6.5's toll heuristic with k_hat from completions (§6.2.2), with the variants
    ``parallel``, ``shared`` and ``bound`` of :mod:`schedulers.leo_alg` (all on: ``leo``)."""

    name = "leo"

    def __init__(self, bound: bool = True, parallel: bool = True, shared: bool = True) -> None:
        super().__init__()
        self.bound, self.parallel, self.shared = bound, parallel, shared
        self.khat: np.ndarray | None = None  # per element (shared) or per path
        self.busy: np.ndarray | None = None  # requests in progress over each element (or path)
        self._toll: list[np.ndarray] = []  # per type: Q_toll[p, e]
        self._mine: dict[int, tuple[int, int]] = {}  # request in progress -> (type, path)

    def _setup(self, flow, view) -> int:
        r = self._type(flow, view)
        if self.khat is None:
            n = len(self._cap) if self.shared else len(PATHS)
            self.khat, self.busy = np.zeros(n), np.zeros(n)
        while len(self._toll) < len(self._w):
            self._toll.append(toll_matrix(self._w[len(self._toll)], self._cap, self.parallel))
        return r

    def _span(self, r: int, p: int) -> np.ndarray:
        """What a request of type r on path p occupies: its elements (shared) or the path."""
        return np.flatnonzero(self._w[r][p] > 0) if self.shared else np.array([p])

    def decide(self, flow, view, allowed):
        r = self._setup(flow, view)
        khat = bound_khat(self.khat, self.busy) if self.bound else self.khat
        penalty = path_penalty(khat, self._toll[r], self.shared)
        idx = np.array([PATHS.index(p) for p in allowed], dtype=np.int64)
        return PATHS[toll_choice(self._T[r], penalty, np.ones(len(PATHS)), idx)]

    def chose(self, flow, name, view):
        super().chose(flow, name, view)
        r, p = self._setup(flow, view), PATHS.index(name)
        self._mine[flow.tags["request"]] = (r, p)
        self.busy[self._span(r, p)] += 1

    def completed(self, request, rtype, path, intra, e2e):
        r, p = self._mine.pop(request)
        self.busy[self._span(r, p)] -= 1
        if self.shared:
            update_khat_elements(self.khat, self._span(r, p), is_late(intra, self._T[r][p]))
        else:
            update_khat(self.khat, p, intra, self._T[r][p])


class LeoLiteral(Leo):
    """§6.2.2 as written: per-path k_hat, unbounded, toll T_c whatever a node's parallelism."""

    name = "leo-literal"

    def __init__(self) -> None:
        super().__init__(bound=False, parallel=False, shared=False)


class GreedyIntra(LeoBase):
    """§6.4.3's Greedy-Intra: least last-measured intra-host JCT of the type on each path."""

    name = "greedy-intra"
    measure = "intra"

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[tuple[str, str], float] = {}

    def decide(self, flow, view, allowed):
        table = self.cost(flow, view)
        rtype = flow.tags["rtype"]
        return min(allowed, key=lambda p: self.last.get((rtype, p), table[p][0]))

    def completed(self, request, rtype, path, intra, e2e):
        self.last[(rtype, path)] = intra if self.measure == "intra" else e2e


class GreedyE2e(GreedyIntra):
    """§6.4.3's Greedy-E2E: least last-measured end-to-end JCT (network variation included)."""

    name = "greedy-e2e"
    measure = "e2e"


class CpuOnly(LeoBase):
    """Single path on the CPUs (LEO's variant without multi-path on the CPU side)."""

    name = "cpu-only"
    prefer = ("cpu-cpu", "cpu-acc", "acc-cpu", "acc-acc")

    def decide(self, flow, view, allowed):
        return next(p for p in self.prefer if p in allowed)


class AccOnly(CpuOnly):
    """Single path on the accelerators (the usual offloaded MINC system)."""

    name = "acc-only"
    prefer = ("acc-acc", "acc-cpu", "cpu-acc", "cpu-cpu")


class LeoLp(LeoBase):
    """The k-step MILP of eqs. 6.3-6.4 per request (``horizon`` = k requests, this one included)."""

    name = "leo-lp"

    def __init__(self, horizon: int = 4) -> None:
        if horizon < 1 or horizon > 12:
            raise SpecError("horizon", f"must be in 1..12, got {horizon}")
        super().__init__()
        self.horizon = horizon
        self.decision_times: list[float] = []
        self._backlog: np.ndarray | None = None
        self._at = 0.0

    def _upcoming(self, flow: Flow, view) -> tuple[list[float], list[int]]:
        """Arrivals and types of this request and the next ``horizon - 1`` of the job."""
        i = flow.tags["request"]
        at, types = [view.now], [self._type(flow, view)]
        for j in range(i + 1, i + self.horizon):
            nxt = view.job.items.get(f"q{j}.0o")
            if nxt is None:
                break
            at.append(max(view.now, view.job.items[f"a{j}"].duration))
            types.append(self._type(nxt, view))
        return at, types

    def _found(self, now: float) -> np.ndarray:
        """The backlogs the scheduler's mirror of (6.1)/(6.2) holds at ``now``."""
        if self._backlog is None:
            self._backlog = np.zeros(len(self._cap))
        return drain(self._backlog, self._cap, now - self._at)

    def decide(self, flow, view, allowed):
        at, types = self._upcoming(flow, view)
        backlog = self._found(view.now)
        T, w = np.array(self._T), np.array(self._w)  # a type's T is nan on the paths it does not offer
        t0 = time.perf_counter()
        _, choice = lp_choose(LpInstance(T, w, self._cap, backlog, np.array(at), np.array(types)))
        self.decision_times.append(time.perf_counter() - t0)
        return PATHS[choice[0]]

    def chose(self, flow, name, view):
        super().chose(flow, name, view)
        r = self._type(flow, view)
        self._backlog = self._found(view.now) + self._w[r][PATHS.index(name)]
        self._at = view.now


# ------------------------------------------------------------------ does compute bind?
@dataclass(frozen=True)
class CapacityCheck:
    """A request stream's room on its cluster (:func:`capacity_check`), requests/s (model)."""

    types: tuple[str, ...]
    shares: tuple[float, ...]
    datapath: float  # the best split over all paths (LP over every element's capacity)
    single: dict[str, float]  # cpu-only and acc-only
    binds: tuple[str, ...]  # elements at capacity under the best split
    network: dict[str, float]  # framing -> what the NICs carry

    @property
    def network_bound(self) -> bool:
        """The simulated framing's network rate is at or below the datapath's: no split can help."""
        return self.network[SIMULATED_FRAMING] <= self.datapath

    @property
    def split_room(self) -> float:
        """The most a split can add over the best single path, as a fraction (network included)."""
        net = self.network[SIMULATED_FRAMING]
        return min(self.datapath, net) / min(max(self.single.values()), net) - 1.0

    def note(self) -> str:
        single = ", ".join(f"{k} {v / 1e6:.4g} M/s" for k, v in self.single.items())
        net = ", ".join(f"{k} {v / 1e6:.4g} M/s" for k, v in self.network.items())
        head = "network-bound" if self.network_bound else "the datapath binds"
        return (
            f"capacity ({head}): best split over the datapath {self.datapath / 1e6:.4g} M/s ({single}; "
            f"saturated: {', '.join(self.binds) or '-'}); network {net} (simulated: {SIMULATED_FRAMING}); "
            f"a split can add at most {100 * self.split_room:+.1f} % over the best single path"
        )


def capacity_check(job: Job, cluster) -> CapacityCheck:
    """The datapath's best split, the single paths' rates and the network's rate of the request
    stream ``job`` on ``cluster`` (:mod:`schedulers.leo_alg`'s capacity functions; the per-type
    work is what the schedulers' own cost tables hold)."""
    from railbed.scheduler import RunView, default_placement
    from railbed.topology import Topology

    view = RunView(job, cluster, Topology(cluster), default_placement(job, cluster))
    base, first, count = LeoBase(), {}, {}
    for it in job.items.values():
        if isinstance(it, Flow) and it.tags.get("rt") == 0 and it.tags.get("dir") == "o":
            first.setdefault(it.tags["rtype"], it)
            count[it.tags["rtype"]] = count.get(it.tags["rtype"], 0) + 1
    if not first:
        raise SpecError("job", "no request of a request stream (workloads.requests) in the job")
    names = sorted(first, key=lambda t: base._type(first[t], view))
    shares = np.array([count[t] for t in names], dtype=float) / sum(count.values())
    work, cap = np.array(base._w), base._cap
    allowed = ~np.isnan(np.array(base._T))
    rate, x = max_rate(work, cap, shares, allowed)
    single = {}
    for cls in (CpuOnly, AccOnly):
        paths = [PATHS.index(next(p for p in cls.prefer if allowed[r, PATHS.index(p)])) for r in range(len(names))]
        single[cls.name] = single_path_rate(work, cap, shares, paths)
    servers = sorted({view.location(first[names[0]].src).server, view.location(first[names[0]].dst).server})
    labels = [f"h{s}.{e.name}" for s in servers for e in base.host(s, view).queues.model.elements]
    network = {}
    for framing, wire in FRAMINGS.items():
        bits = np.zeros(2)  # out (requester -> responder), back
        for share, t in zip(shares, names):
            for fid in LeoBase.flow_ids(first[t], job):
                f = job.items[fid]
                back = f.tags["dir"] == "b"
                bits[int(back)] += share * 8.0 * wire(int(f.size or 0), back)
        line = [min(cluster.servers[s].nic_rates[0] for s in servers)] * 2
        network[framing] = network_rate(bits, np.array(line))
    binds = tuple(labels[e] for e in saturated(work, cap, x))
    return CapacityCheck(tuple(names), tuple(shares), rate, single, binds, network)


SCHEDULERS = (Leo, LeoLiteral, LeoLp, GreedyIntra, GreedyE2e, CpuOnly, AccOnly)
