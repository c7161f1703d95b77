"""Several jobs on one cluster (issue 45): placement policies, the merge into one run, the
per-job scheduler.

A run of several jobs is one :class:`~railbed.job.Job` made by :func:`merge`: each job's
endpoints and items keep their names behind the prefix ``<job>.`` (so ids, coflows and the
DSCP tags a job carries stay its own), every item names its ``job``, and a job's arrival is
its items' release time (``at``, honoured by every backend). Endpoints are pinned where the
job's placement policy put them, so every scheduler keeps them:

``packed``
    the job's GPUs, in its own (server, GPU) order, on the free GPUs in (server, GPU) order;
``spread``
    on the free GPUs in (GPU, server) order: one per server, then the next GPU index;
``rail``
    each of the job's servers on the first server where the same GPU indices are free: a
    GPU keeps its index, hence its rail NIC (GPU *g* on NIC *g*, rail-optimized);
``{random: SEED}``
    on free GPUs drawn with the seed;
``{explicit: {ENDPOINT: SERVER or [server, device, nic]}}``
    the named endpoints where given (a bare server: the endpoint's GPU index there if free,
    else the first free GPU), the others ``packed``.

"The job's own layout" is its pins, else :func:`railbed.scheduler.default_placement` on the
cluster (what it would get alone). A job's endpoints off GPUs (``cpu``, a clock) follow the
server their GPUs moved to. GPUs are exclusive: a GPU given to an earlier job, or a NIC asked
to serve more GPUs than its share (``ceil(gpus / nics)`` of its server), is refused with
:class:`SpecError` naming the job's field and the server.

Per-job schedulers: :class:`PerJob` routes every hook by ``item.job`` to that job's own
scheduler, or to the cluster-wide one.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from railbed.errors import SpecError
from railbed.job import Flow, Item, Job, Location, Placement, Task
from railbed.results import ItemRecord
from railbed.rulebook import RuleBook, decides_by_rule
from railbed.safeload import describe
from railbed.scheduler import Decision, RunView, Scheduler, Split, default_placement
from railbed.spec import ClusterSpec

POLICIES = ("packed", "spread", "rail", "random", "explicit")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class JobEntry:
    """One job of a run of several: its name (the prefix of its ids), the job, its arrival
    (model seconds), its placement policy (``(policy, argument)``, :func:`parse_placement`)
    and the field it came from (``jobs[2]``), for errors."""

    name: str
    job: Job
    arrival: float = 0.0
    placement: tuple[str, Any] = ("packed", None)
    where: str = "jobs[0]"


def check_name(value: object, where: str) -> str:
    """A job's name: letters, digits, ``_`` and ``-`` (it prefixes ids, which may not hold ``/``)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise SpecError(where, f"expected a name of 1..40 letters, digits, _ or - , got {describe(value)}")
    return value


def parse_placement(value: object, where: str) -> tuple[str, Any]:
    """``packed | spread | rail | {random: SEED} | {explicit: {ENDPOINT: SERVER | [s, device, nic]}}``."""
    if isinstance(value, str) and value in ("packed", "spread", "rail"):
        return value, None
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "random":
            if isinstance(arg, bool) or not isinstance(arg, int):
                raise SpecError(f"{where}.random", f"expected an integer seed, got {describe(arg)}")
            return "random", arg
        if key == "explicit":
            if not isinstance(arg, dict) or not arg:
                raise SpecError(f"{where}.explicit", f"expected a mapping of endpoint to server, got {describe(arg)}")
            return "explicit", {str(k): _explicit(v, f"{where}.explicit.{k}") for k, v in arg.items()}
    raise SpecError(where, f"expected one of packed, spread, rail, {{random: SEED}}, {{explicit: {{...}}}}, "
                    f"got {describe(value)}")  # fmt: skip


def _explicit(value: object, where: str) -> Location | int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    ok = isinstance(value, list) and len(value) == 3 and isinstance(value[1], str)
    if ok and all(isinstance(value[k], int) and not isinstance(value[k], bool) and value[k] >= 0 for k in (0, 2)):
        return Location(value[0], value[1], value[2])
    raise SpecError(where, f"expected a server index or [server, device, nic], got {describe(value)}")


def _gpu(device: str) -> int | None:
    return int(device[3:]) if device.startswith("gpu") and device[3:].isdigit() else None


class _Cluster:
    """The GPUs and NIC shares taken so far, by job."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.gpu_owner: dict[tuple[int, int], str] = {}
        self.nic_gpus: dict[tuple[int, int], set[tuple[int, int]]] = {}

    def free(self) -> list[tuple[int, int]]:
        return [(s, g) for s, srv in enumerate(self.cluster.servers) for g in range(srv.gpus)
                if (s, g) not in self.gpu_owner]  # fmt: skip

    def server_name(self, s: int) -> str:
        return self.cluster.servers[s].name if 0 <= s < len(self.cluster.servers) else f"#{s}"

    def take(self, entry: JobEntry, locs: Mapping[str, Location]) -> None:
        """Mark the job's GPUs and NIC shares taken; refuse what is taken or does not exist."""
        where, servers = f"{entry.where}.placement", self.cluster.servers
        mine: set[tuple[int, int]] = set()
        for ep, loc in locs.items():
            if not 0 <= loc.server < len(servers) or not 0 <= loc.nic < servers[loc.server].nics:
                raise SpecError(where, f"job {entry.name}: endpoint {ep} placed on server {loc.server} NIC {loc.nic}, "
                                "which the cluster does not have")  # fmt: skip
            g = _gpu(loc.device)
            if g is None:
                continue
            slot = (loc.server, g)
            if g >= servers[loc.server].gpus:
                raise SpecError(where, f"job {entry.name}: server {self.server_name(loc.server)} has no gpu{g}")
            owner = self.gpu_owner.get(slot)
            if owner is not None and owner != entry.name:
                raise SpecError(where, f"job {entry.name}: gpu{g} of server {self.server_name(loc.server)} is "
                                f"taken by job {owner}")  # fmt: skip
            mine.add(slot)
            self.nic_gpus.setdefault((loc.server, loc.nic), set()).add(slot)
        for (s, nic), gpus in self.nic_gpus.items():
            share = max(1, math.ceil(servers[s].gpus / servers[s].nics))
            if len(gpus) > share and gpus & mine:
                raise SpecError(where, f"job {entry.name}: NIC {nic} of server {self.server_name(s)} would serve "
                                f"{len(gpus)} GPUs, over its share of {share}")  # fmt: skip
        for slot in mine:
            self.gpu_owner[slot] = entry.name


def _layout(job: Job, cluster: ClusterSpec) -> Placement:
    """The job's own layout: its pins, the others as ``default_placement`` puts them."""
    return default_placement(job, cluster)


def _targets(entry: JobEntry, slots: list[tuple[int, int]], state: _Cluster) -> dict[tuple[int, int], tuple[int, int]]:
    """Job slot (server, GPU) -> cluster slot, by the policy (explicit endpoints excepted)."""
    policy, arg = entry.placement
    free = state.free()
    if policy == "rail":
        return _rail(entry, slots, free, state)
    if policy == "spread":
        free.sort(key=lambda sg: (sg[1], sg[0]))
    elif policy == "random":
        random.Random(arg).shuffle(free)
    if len(slots) > len(free):
        raise SpecError(f"{entry.where}.placement", f"job {entry.name} needs {len(slots)} GPUs; {len(free)} are free")
    return dict(zip(slots, free))


def _rail(entry, slots, free, state) -> dict:
    free_set, used, out = set(free), set(), {}
    for s in sorted({s for s, _ in slots}):
        gpus = [g for t, g in slots if t == s]
        target = next((t for t in range(len(state.cluster.servers))
                       if t not in used and all((t, g) in free_set for g in gpus)), None)  # fmt: skip
        if target is None:
            raise SpecError(f"{entry.where}.placement", f"job {entry.name}: no server has gpu "
                            f"{', '.join(map(str, gpus))} free for its server {s} (rail placement)")  # fmt: skip
        used.add(target)
        out.update({(s, g): (target, g) for g in gpus})
    return out


def place(entry: JobEntry, state: _Cluster) -> dict[str, Location]:
    """Where each of the job's endpoints goes (module docstring)."""
    cluster = state.cluster
    layout = _layout(entry.job, cluster)
    policy, arg = entry.placement
    explicit = arg if policy == "explicit" else {}
    for ep in explicit:
        if ep not in entry.job.endpoints:
            raise SpecError(f"{entry.where}.placement.explicit.{ep}", f"job {entry.name} has no endpoint {ep}")
    out: dict[str, Location] = {}
    for ep, target in explicit.items():
        own = layout[ep]
        if isinstance(target, Location):
            out[ep] = target
            continue
        if not 0 <= target < len(cluster.servers):
            raise SpecError(f"{entry.where}.placement.explicit.{ep}", f"server {target} does not exist")
        mine = {_gpu(o.device) for o in out.values() if o.server == target}
        gfree = [g for s, g in state.free() if s == target and g not in mine]
        g = _gpu(own.device)
        if g is not None and g not in gfree:
            if not gfree:
                raise SpecError(f"{entry.where}.placement", f"job {entry.name}: server {state.server_name(target)} "
                                "has no free GPU")  # fmt: skip
            g = gfree[0]
        nics = cluster.servers[target].nics
        out[ep] = Location(target, own.device if g is None else f"gpu{g}", (own.nic if g is None else g) % nics)
    rest = {ep: loc for ep, loc in layout.locations.items() if ep not in out}
    slots = sorted({(loc.server, g) for loc in rest.values() if (g := _gpu(loc.device)) is not None})
    state_for_rest = _Cluster(cluster)
    state_for_rest.gpu_owner = {**state.gpu_owner, **{(o.server, _gpu(o.device)): entry.name for o in out.values()
                                                      if _gpu(o.device) is not None}}  # fmt: skip
    moved = _targets(entry, slots, state_for_rest)
    server_of = {s: t for (s, _), (t, _) in moved.items()}
    first = next(iter(moved.values()), (0, 0))[0]
    for ep, loc in rest.items():
        g = _gpu(loc.device)
        if g is None:  # off the GPUs: on the server its job's GPUs of that server moved to
            t = server_of.get(loc.server, first)
            out[ep] = Location(t, loc.device, loc.nic % cluster.servers[t].nics)
            continue
        t, g2 = moved[(loc.server, g)]
        nic = loc.nic if policy == "rail" else g2
        out[ep] = Location(t, f"gpu{g2}", nic % cluster.servers[t].nics)
    return out


def place_jobs(entries: list[JobEntry], cluster: ClusterSpec) -> list[dict[str, Location]]:
    """Each job's endpoint locations, in arrival order of the list (earlier entries first)."""
    state = _Cluster(cluster)
    out = []
    for entry in entries:
        locs = place(entry, state)
        state.take(entry, locs)
        out.append(locs)
    return out


def merge(entries: list[JobEntry], cluster: ClusterSpec, name: str = "jobs") -> Job:
    """The one job of a run of several (module docstring)."""
    seen: dict[str, str] = {}
    for e in entries:
        if e.name in seen:
            raise SpecError(f"{e.where}.name", f"job name {e.name} is used twice (also {seen[e.name]})")
        seen[e.name] = e.where
    first = entries[0].job
    capacity: dict[str, int] = {}
    for e in entries:
        if e.job.default_capacity != first.default_capacity:
            raise SpecError(e.where, f"job {e.name} runs {e.job.default_capacity} tasks per device, "
                            f"{entries[0].name} {first.default_capacity}: one run has one device capacity")  # fmt: skip
        for dev, cap in e.job.capacity.items():
            if capacity.setdefault(dev, cap) != cap:
                raise SpecError(e.where, f"job {e.name} gives device {dev} capacity {cap}, another job {capacity[dev]}")
    out = Job(name, capacity, first.default_capacity)
    for e, locs in zip(entries, place_jobs(entries, cluster)):
        p = f"{e.name}."
        for ep in e.job.endpoints.values():
            out.endpoint(p + ep.name, locs[ep.name], ep.role, ep.demands)
        for it in e.job.items.values():
            out._add(_prefixed(it, p, e.name, e.arrival))
    return out.validate()


def _prefixed(it: Item, p: str, job: str, arrival: float) -> Item:
    at = arrival + (it.at or 0.0) if (arrival or it.at) else it.at
    common = dict(id=p + it.id, deps=tuple(p + d for d in it.deps), job=job, at=at,
                  coflow=None if it.coflow is None else p + it.coflow)  # fmt: skip
    if isinstance(it, Task):
        return replace(it, endpoint=p + it.endpoint, **common)
    return replace(it, src=p + it.src, dst=p + it.dst, parent=None if it.parent is None else p + it.parent, **common)


def part(job: Job, name: str) -> Job:
    """The items and endpoints of job ``name`` in a merged job (ids, pins and times kept)."""
    out = Job(name, job.capacity, job.default_capacity)
    p = f"{name}."
    out.endpoints = {e: ep for e, ep in job.endpoints.items() if e.startswith(p)}
    out.items = {i: it for i, it in job.items.items() if it.job == name}
    return out


def arrivals(job: Job) -> dict[str, float]:
    """Job name -> its arrival (its items' earliest release), in the merged job's order."""
    out: dict[str, float] = {}
    for it in job.items.values():
        if it.job is not None:
            out[it.job] = min(out.get(it.job, math.inf), it.at or 0.0)
    return out


def alone(job: Job, name: str) -> Job:
    """Job ``name`` of a merged job run by itself: its items, pins and ids, arriving at 0."""
    sub = part(job, name)
    arrival = arrivals(sub).get(name, 0.0)
    sub.items = {i: replace(it, at=(it.at - arrival) or None if it.at is not None else None)
                 for i, it in sub.items.items()}  # fmt: skip
    return sub.validate()


class PerJob(Scheduler):
    """Each job's own scheduler where it has one (``own``: job -> scheduler), the cluster-wide
    ``default`` for the others: every hook routed by ``item.job`` (or the job named). Each own
    scheduler's ``place`` sees its job's part (endpoints are pinned by the merge, so the
    placement is the default's); ``on_flows_changed`` asks every scheduler and keeps each
    answer for the flows of its own jobs. A scheduler that decides by rule
    (:func:`~railbed.rulebook.decides_by_rule`) is answered by its rules' reading
    (:class:`~railbed.rulebook.RuleBook`, its jobs' flows ruled as the view shows them at the
    run's first offer). Not for the compact engine (it calls no hooks)."""

    def __init__(self, default: Scheduler, own: Mapping[str, Scheduler]) -> None:
        self.default, self.own = default, dict(own)
        self._books: dict[int, RuleBook] = {}  # a scheduler that decides by rule -> its rules' reading
        self.name = default.name
        self.label = getattr(default, "label", None) or default.name

    def _of(self, job: str | None) -> Scheduler:
        return self.own.get(job, self.default) if job is not None else self.default

    def place(self, job: Job, cluster: ClusterSpec) -> Placement:
        self._books = {}
        for name, sched in self.own.items():
            sched.place(part(job, name), cluster)
        return self.default.place(job, cluster)

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        self.default.check(job, cluster)
        for name, sched in self.own.items():
            sched.check(part(job, name), cluster)

    def on_ready(self, item: Item, view: RunView) -> Decision | Split:
        sched = self._of(item.job)
        if not decides_by_rule(sched):
            return sched.on_ready(item, view)
        book = self._books.get(id(sched))
        if book is None:  # its jobs' flows as the view shows them at the run's first offer
            mine = (f for f in view.job.flows if self._of(f.job) is sched)
            book = self._books[id(sched)] = RuleBook(sched, mine, view.placement, view.cluster)
        return book.decide(item, view)

    def on_flows_changed(self, view: RunView):
        out = {}
        for sched in (self.default, *self.own.values()):
            for fid, value in (sched.on_flows_changed(view) or {}).items():
                active = view.active.get(fid)
                if active is None or self._of(active.flow.job) is sched:
                    out[fid] = value
        return out

    def on_done(self, item: Item, record: ItemRecord, view: RunView) -> None:
        self._of(item.job).on_done(item, record, view)

    def choose_path(self, flow: Flow, view: RunView) -> int:
        return self._of(flow.job).choose_path(flow, view)

    def choose_spine(self, flow: Flow, src: Location, dst: Location, view: RunView) -> int | None:
        return self._of(flow.job).choose_spine(flow, src, dst, view)

    def on_job_arrived(self, job_name: str, job: Job, view: RunView) -> float | None:
        return self._of(job_name).on_job_arrived(job_name, job, view)

    def on_job_finished(self, job_name: str, view: RunView) -> None:
        self._of(job_name).on_job_finished(job_name, view)

    def notes(self) -> list[str]:
        out = list(self.default.notes())
        for name, sched in self.own.items():
            out += [f"job {name} ({sched.name}): {line}" for line in sched.notes()]
            out.append(f"job {name} ran under its own scheduler {getattr(sched, 'label', None) or sched.name}")
        return out
