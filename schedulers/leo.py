"""LEO's path selection and its baselines (seed 004, chapter 6): thin classes over :mod:`schedulers.leo_alg`.

Every class here picks one path per *request* of a :mod:`workloads.requests`
stream (``choose_path`` of its first flow; its later flows, the back
messages and further round trips, take the same path) and keeps dependent
requests on one path (§6.2.2 "Request dependency": a request whose ``dep``
key matches a request still in progress takes that request's path when it
is allowed). They differ in ``decide``:

``leo``
    the toll heuristic, eq. 6.5: ``k_hat[p] * Q_toll(p, r) + T(p, r)``, ``k_hat``
    per path from each completed request's measured intra-host JCT (the
    legs' seconds the run recorded, §6.2.2's timestamps; jitter excluded),
    through ``on_done``.
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

import numpy as np

from railbed.errors import SpecError
from railbed.hosts import HostLeg
from railbed.job import Flow, Job
from railbed.scheduler import Scheduler
from schedulers.leo_alg import LpInstance, drain, lp_choose, toll_choice, update_khat

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

    def check(self, job: Job, cluster) -> None:
        for it in job.items.values():
            if isinstance(it, Flow) and it.options and "request" not in it.tags:
                raise SpecError(f"items.{it.id}.tags.request", f"{self.name} schedules request streams (requests)")
        for s, server in enumerate(cluster.servers[:2]):
            if server.host_spec("datapath") is None:
                raise SpecError(f"servers[{s}].datapath", f"{self.name} needs the servers' datapath models")

    # ------------------------------------------------------------ the hooks
    def choose_path(self, flow: Flow, view) -> int:
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
        self.completed(item.tags["rtype"], name, intra, record.end - self.arrived.pop(i))

    # ------------------------------------------------------- what differs
    def decide(self, flow: Flow, view, allowed: list[str]) -> str:
        return allowed[0]

    def chose(self, flow: Flow, name: str, view) -> None:
        """After every new request's path (decided or kept by a dependency)."""
        self._flows[flow.tags["request"]] = self.flow_ids(flow, view.job)

    def completed(self, rtype: str, path: str, intra: float, e2e: float) -> None:
        """A request's last message arrived: its measured intra-host and end-to-end JCT."""

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


class Leo(LeoBase):
    """Eq. 6.5's toll heuristic with k_hat from completions (§6.2.2)."""

    name = "leo"

    def __init__(self) -> None:
        super().__init__()
        self.khat = np.zeros(len(PATHS))

    def decide(self, flow, view, allowed):
        table = self.cost(flow, view)
        base = np.array([table[p][0] if p in table else np.inf for p in PATHS])
        toll = np.array([table[p][1] if p in table else np.inf for p in PATHS])
        idx = np.array([PATHS.index(p) for p in allowed], dtype=np.int64)
        return PATHS[toll_choice(base, toll, self.khat, idx)]

    def completed(self, rtype, path, intra, e2e):
        update_khat(self.khat, PATHS.index(path), intra, self.costs[rtype][path][0])


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

    def completed(self, rtype, path, intra, e2e):
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
        self._types: dict[str, int] = {}
        self._T: list[np.ndarray] = []
        self._w: list[np.ndarray] = []
        self._cap: np.ndarray | None = None

    def _type(self, flow: Flow, view) -> int:
        """Index of the request type of ``flow``, with its T[p] and w[p, e] over both hosts' elements."""
        rtype = flow.tags["rtype"]
        if rtype not in self._types:
            servers = sorted({view.location(flow.src).server, view.location(flow.dst).server})
            offset = {s: sum(self.host(x, view).size for x in servers[:i]) for i, s in enumerate(servers)}
            ne = sum(self.host(s, view).size for s in servers)
            if self._cap is None:
                self._cap = np.concatenate([self.host(s, view).capacities() for s in servers])
                self._backlog = np.zeros(ne)
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

    def decide(self, flow, view, allowed):
        at, types = self._upcoming(flow, view)
        backlog = drain(self._backlog, self._cap, view.now - self._at)
        T, w = np.array(self._T), np.array(self._w)  # a type's T is nan on the paths it does not offer
        t0 = time.perf_counter()
        _, choice = lp_choose(LpInstance(T, w, self._cap, backlog, np.array(at), np.array(types)))
        self.decision_times.append(time.perf_counter() - t0)
        return PATHS[choice[0]]

    def chose(self, flow, name, view):
        super().chose(flow, name, view)
        r = self._type(flow, view)
        self._backlog = drain(self._backlog, self._cap, view.now - self._at) + self._w[r][PATHS.index(name)]
        self._at = view.now


SCHEDULERS = (Leo, LeoLp, GreedyIntra, GreedyE2e, CpuOnly, AccOnly)
