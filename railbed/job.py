"""Job: a DAG of compute tasks and network flows between logical endpoints.

Pure data, shared by the emulated run-time and the simulator. A job is built
in Python (usually by a generator in :mod:`workloads`) and saved or loaded
as JSON, so a run can be replayed exactly::

    job = Job("tiny")
    job.endpoint("w0"); job.endpoint("w1")
    job.task("fwd", "w0", duration=1e-3)
    job.flow("act", "w0", "w1", size=4 << 20, deps=["fwd"], coflow="pp0", coflow_type="PP")
    job.task("bwd", "w1", duration=2e-3, deps=["act"])
    job.validate()

Items
    A **task** runs on its endpoint's device for ``duration`` model seconds;
    a device runs at most its capacity of tasks at once (``Job.capacity``),
    the rest queue in ready order. A **flow** carries ``size`` bytes of TCP
    payload from one endpoint to another. ``deps`` lists the ids (tasks or
    flows) that must finish before an item is ready.

Attributes schedulers read
    ``iteration``, ``coflow`` (id), ``coflow_type`` (``DP``/``PP``/``EP``/
    ``TP``/``graph-data``/``gradient``/``parameter`` or any string),
    ``microbatch``, ``layer`` and free-form ``tags``.

Online sizes
    A flow with ``reveal="on_ready"`` hides its size from the scheduler
    until it becomes ready: :meth:`Job.public` is the view ``place`` gets.
    ``reveal="hidden"`` keeps it hidden for the whole run (non-clairvoyant
    schedulers): the scheduler sees bytes delivered, never bytes remaining.

Alternative paths
    A flow may offer :class:`PathOption` s (LEO's requests through a CPU or an
    accelerator): each names intra-host legs on the source and destination
    server and, optionally, other NICs; the scheduler picks one when the
    flow becomes ready.

Endpoints
    An endpoint may carry a ``role`` (``store``, ``sampler``, ``worker``,
    ``ps``, ``expert``, ...: schedulers read it) and resource ``demands``
    (``{"cpu": 2, "mem": 7, "gpu": 0}``, in the units of the servers'
    ``resources``); a placement must fit them (:func:`railbed.dispatch.check_placement`).

Placement
    :class:`Placement` maps every endpoint to a :class:`Location` (server
    index, device name, NIC index). Endpoints may be pinned in the job;
    schedulers place the rest.

Sub-flows
    A scheduler may replace a ready flow by sub-flows (:class:`railbed.scheduler.Split`);
    each is a :class:`Flow` whose ``parent`` names the original.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from railbed.errors import SpecError

REVEAL_MODES = ("upfront", "on_ready", "hidden")


@dataclass(frozen=True)
class Location:
    """Where an endpoint runs: server index, device on it (``gpu3``, ``cpu``), NIC index."""

    server: int
    device: str = "gpu0"
    nic: int = 0


@dataclass(frozen=True)
class Endpoint:
    name: str
    pin: Location | None = None  # fixed by the job; schedulers must keep it
    role: str | None = None
    demands: Mapping[str, float] = field(default_factory=dict)  # resource -> amount on its server


@dataclass(frozen=True)
class Leg:
    """An intra-host hop of a flow: ``src`` to ``dst`` device on one server's
    host model (``hwmodels.plugin``). ``duration`` overrides the model."""

    src: str
    dst: str
    duration: float | None = None


@dataclass(frozen=True)
class PathOption:
    """One way to carry a flow: legs before and after the network, NIC overrides,
    and a fixed extra processing time (model seconds)."""

    name: str
    src_leg: Leg | None = None
    dst_leg: Leg | None = None
    src_nic: int | None = None
    dst_nic: int | None = None
    extra: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Attributes:
    """What schedulers read of a task or flow (keyword-only in both)."""

    iteration: int = 0
    coflow: str | None = None
    coflow_type: str | None = None
    microbatch: int | None = None
    layer: int | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)


_ATTRIBUTE_NAMES = tuple(f.name for f in fields(Attributes))


@dataclass(frozen=True)
class Task(Attributes):
    id: str
    endpoint: str
    duration: float
    deps: tuple[str, ...] = ()

    kind = "task"


@dataclass(frozen=True)
class Flow(Attributes):
    id: str
    src: str
    dst: str
    size: int | None  # payload bytes; None only in a public view before the flow is ready
    deps: tuple[str, ...] = ()
    reveal: str = "upfront"
    options: tuple[PathOption, ...] = ()
    parent: str | None = None  # a sub-flow: the flow it is part of

    kind = "flow"


Item = Task | Flow


@dataclass
class Placement:
    """Endpoint name -> :class:`Location`."""

    locations: dict[str, Location] = field(default_factory=dict)

    def __getitem__(self, endpoint: str) -> Location:
        return self.locations[endpoint]

    def to_dict(self) -> dict[str, list]:
        return {e: [loc.server, loc.device, loc.nic] for e, loc in self.locations.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Placement:
        out = {}
        for e, v in data.items():
            if not (isinstance(v, (list, tuple)) and len(v) == 3):
                raise SpecError(f"placement.{e}", "expected [server, device, nic]")
            out[e] = Location(int(v[0]), str(v[1]), int(v[2]))
        return cls(out)


class Job:
    """A DAG of tasks and flows (see module docstring)."""

    def __init__(self, name: str = "job", capacity: Mapping[str, int] | None = None, default_capacity: int = 1):
        self.name = name
        self.endpoints: dict[str, Endpoint] = {}
        self.items: dict[str, Item] = {}
        self.capacity: dict[str, int] = dict(capacity or {})  # device name -> parallel tasks
        self.default_capacity = default_capacity

    # ----------------------------------------------------------------- build
    def endpoint(
        self,
        name: str,
        pin: Location | None = None,
        role: str | None = None,
        demands: Mapping[str, float] | None = None,
    ) -> str:
        if name in self.endpoints:
            raise SpecError(f"endpoints.{name}", "defined twice")
        self.endpoints[name] = Endpoint(name, pin, role, dict(demands or {}))
        return name

    def endpoints_with(self, role: str) -> list[str]:
        """Names of the endpoints of ``role``, in job order."""
        return [e.name for e in self.endpoints.values() if e.role == role]

    def _add(self, item: Item) -> str:
        if item.id in self.items:
            raise SpecError(f"items.{item.id}", "id used twice")
        self.items[item.id] = item
        return item.id

    def task(self, id: str, endpoint: str, duration: float, deps: Iterable[str] = (), **attrs: Any) -> str:
        return self._add(Task(id, endpoint, float(duration), tuple(deps), **attrs))

    def flow(
        self,
        id: str,
        src: str,
        dst: str,
        size: int,
        deps: Iterable[str] = (),
        reveal: str = "upfront",
        options: Iterable[PathOption] = (),
        **attrs: Any,
    ) -> str:
        return self._add(Flow(id, src, dst, int(size), tuple(deps), reveal, tuple(options), **attrs))

    def capacity_of(self, device: str) -> int:
        return self.capacity.get(device, self.default_capacity)

    # ------------------------------------------------------------- structure
    @property
    def tasks(self) -> list[Task]:
        return [i for i in self.items.values() if isinstance(i, Task)]

    @property
    def flows(self) -> list[Flow]:
        return [i for i in self.items.values() if isinstance(i, Flow)]

    def dependents(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {i: [] for i in self.items}
        for item in self.items.values():
            for d in item.deps:
                out[d].append(item.id)
        return out

    def topological_order(self) -> list[str]:
        """Item ids in an order that respects every dependency (stable: insertion order)."""
        indeg = {i: len(item.deps) for i, item in self.items.items()}
        dependents = self.dependents()
        order, frontier = [], [i for i, n in indeg.items() if n == 0]
        while frontier:
            nxt = []
            for i in frontier:
                order.append(i)
                for j in dependents[i]:
                    indeg[j] -= 1
                    if indeg[j] == 0:
                        nxt.append(j)
            frontier = nxt
        if len(order) != len(self.items):
            stuck = sorted(i for i, n in indeg.items() if n > 0)[:5]
            raise SpecError(f"items.{stuck[0]}.deps", f"dependency cycle through {', '.join(stuck)}")
        return order

    def validate(self) -> Job:
        """Check names, values and acyclicity; errors name the field."""
        if self.default_capacity < 1:
            raise SpecError("default_capacity", "must be at least 1")
        for dev, cap in self.capacity.items():
            if not isinstance(cap, int) or cap < 1:
                raise SpecError(f"capacity.{dev}", f"must be an integer >= 1, got {cap!r}")
        for name, ep in self.endpoints.items():
            _check_endpoint(ep, f"endpoints.{name}")
        for i, item in self.items.items():
            where = f"items.{i}"
            if "/" in i:
                raise SpecError(where, "an item id cannot contain '/' (the run uses it to name an item's legs)")
            for d in item.deps:
                if d not in self.items:
                    raise SpecError(f"{where}.deps", f"unknown item {d!r}")
                if d == i:
                    raise SpecError(f"{where}.deps", "an item cannot depend on itself")
            if isinstance(item, Task):
                if item.endpoint not in self.endpoints:
                    raise SpecError(f"{where}.endpoint", f"unknown endpoint {item.endpoint!r}")
                if not item.duration >= 0 or item.duration == float("inf"):
                    raise SpecError(f"{where}.duration", f"must be a finite duration >= 0, got {item.duration!r}")
            else:
                for end in ("src", "dst"):
                    if getattr(item, end) not in self.endpoints:
                        raise SpecError(f"{where}.{end}", f"unknown endpoint {getattr(item, end)!r}")
                if item.size is None or item.size < 0:
                    raise SpecError(f"{where}.size", f"must be a byte count >= 0, got {item.size!r}")
                if item.reveal not in REVEAL_MODES:
                    raise SpecError(f"{where}.reveal", f"must be one of {', '.join(REVEAL_MODES)}")
                names = [o.name for o in item.options]
                if len(set(names)) != len(names):
                    raise SpecError(f"{where}.options", "option names must be unique")
                for o in item.options:
                    if o.extra < 0:
                        raise SpecError(f"{where}.options.{o.name}.extra", "must be >= 0")
        self.topological_order()
        return self

    def public(self) -> Job:
        """The scheduler's view before the run: sizes revealed ``on_ready`` or ``hidden`` are ``None``."""
        out = Job(self.name, self.capacity, self.default_capacity)
        out.endpoints = dict(self.endpoints)
        out.items = {
            i: (replace(it, size=None) if isinstance(it, Flow) and it.reveal != "upfront" else it)
            for i, it in self.items.items()
        }
        return out

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        def item_dict(it: Item) -> dict[str, Any]:
            d = {"kind": it.kind, **asdict(it)}
            d["deps"] = list(it.deps)
            d["tags"] = dict(it.tags)
            return {k: v for k, v in d.items() if v not in (None, (), [], {}) or k in ("deps", "size")}

        return {
            "name": self.name,
            "capacity": self.capacity,
            "default_capacity": self.default_capacity,
            "endpoints": [_endpoint_dict(e) for e in self.endpoints.values()],
            "items": [item_dict(it) for it in self.items.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        if not isinstance(data, Mapping):
            raise SpecError("job", "expected a mapping")
        job = cls(str(data.get("name", "job")), dict(data.get("capacity") or {}), int(data.get("default_capacity", 1)))
        for k, e in enumerate(data.get("endpoints") or []):
            try:
                pin = Location(**e["pin"]) if e.get("pin") else None
                job.endpoint(str(e["name"]), pin, e.get("role"), e.get("demands"))
            except (KeyError, TypeError) as exc:
                raise SpecError(f"endpoints[{k}]", f"malformed endpoint: {exc}") from None
        for k, raw in enumerate(data.get("items") or []):
            try:
                d = dict(raw)
                kind = d.pop("kind")
                d["deps"] = tuple(d.get("deps") or ())
                d["tags"] = dict(d.get("tags") or {})
                if kind == "task":
                    job._add(Task(**d))
                elif kind == "flow":
                    opts = []
                    for o in d.get("options") or ():
                        o = dict(o)
                        for leg in ("src_leg", "dst_leg"):
                            if o.get(leg):
                                o[leg] = Leg(**o[leg])
                        opts.append(PathOption(**o))
                    d["options"] = tuple(opts)
                    job._add(Flow(**d))
                else:
                    raise SpecError(f"items[{k}].kind", f"must be task or flow, got {kind!r}")
            except (KeyError, TypeError) as exc:
                raise SpecError(f"items[{k}]", f"malformed item: {exc}") from None
        return job.validate()

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Job:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise SpecError("job", f"cannot read {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise SpecError("job", f"{path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        return cls.from_dict(data)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"Job({self.name!r}, {len(self.tasks)} tasks, {len(self.flows)} flows, {len(self.endpoints)} endpoints)"


def attrs_of(item: Item) -> dict[str, Any]:
    """The scheduler-facing attributes of an item (for result records)."""
    values = ((name, getattr(item, name)) for name in _ATTRIBUTE_NAMES)
    return {name: v for name, v in values if v is not None and v != {}}


def _endpoint_dict(e: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {"name": e.name}
    if e.pin:
        out["pin"] = asdict(e.pin)
    if e.role is not None:
        out["role"] = e.role
    if e.demands:
        out["demands"] = dict(e.demands)
    return out


def _check_endpoint(ep: Endpoint, where: str) -> None:
    if ep.role is not None and not isinstance(ep.role, str):
        raise SpecError(f"{where}.role", f"expected a string, got {type(ep.role).__name__}")
    if not isinstance(ep.demands, Mapping):
        raise SpecError(f"{where}.demands", "expected a mapping of resource to amount")
    for res, amount in ep.demands.items():
        ok = isinstance(amount, (int, float)) and not isinstance(amount, bool) and 0 <= amount < float("inf")
        if not ok:
            raise SpecError(f"{where}.demands.{res}", f"must be a finite number >= 0, got {type(amount).__name__}")
