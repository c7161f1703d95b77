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
    ``microbatch``, ``layer`` and free-form ``tags``; ``job``, the job an item belongs to
    when several share a run (:mod:`railbed.jobs`).

Release times
    ``at`` (model seconds, optional): the item is not ready before it, even when its
    dependencies are done (a flow trace's arrival, a job's arrival). Every backend honours
    it (the Dispatcher's release waits, the compact engine's ready time
    ``max(deps done, at)``); the analysis counts the wait as ``release``, not as compute.
    A job's JSON may give a job-level ``at``: added to every item's own.

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

import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.jsonout import write_json
from railbed.safeload import check_bounds, describe, key_name, load_json_file
from railbed.units import parse_duration, parse_size

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
    host model (``hwmodels.plugin``). ``duration`` overrides the model; ``work``
    names a function the leg's device runs (a datapath server's ``compute`` table
    gives its time on that device: LEO's T_c)."""

    src: str
    dst: str
    duration: float | None = None
    work: str | None = None


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
    at: float | None = None  # release time (model s): not ready before it
    job: str | None = None  # the job it belongs to, in a run of several (railbed.jobs)


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


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off while a bulk build runs (as a ``with`` block or a
    decorator), back as it was after. A build that makes millions of acyclic objects (an array
    job's flows, the compaction's Flows of gated flows) otherwise pays for full collections
    that re-scan everything alive: 30 % of the CPU time of the 512-GPU Hermod compaction
    (34.2 s with, 24.6 s without, docs/performance.md), 8 % of the 1024-GPU Mixtral array job's
    generation. What such a build frees is not in cycles (that compaction's 19 collections
    found 10 objects to free), so little waits for the collector's next run."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def edited(item: Item, **changes: Any) -> Item:
    """``dataclasses.replace(item, **changes)`` without running the class's ``__init__`` (a frozen
    dataclass sets each of its 16 fields through ``object.__setattr__``): about 7x faster, for
    copies made per item of items already made (:meth:`Job.public`, an array job's flows).
    ``changes`` are not checked: field names and values must be valid (neither class has a
    ``__post_init__``, so the copy is the object ``replace`` would make)."""
    out = object.__new__(type(item))
    out.__dict__.update(item.__dict__)
    out.__dict__.update(changes)
    return out


def batch_tags(tags: Mapping[str, Any] | None, each: Mapping[str, Sequence] | None, k: int) -> dict[str, Any]:
    """Flow ``k``'s tags in a :meth:`Job.flow_batch`: the shared ones, then its own of ``each``."""
    out = dict(tags or {})
    for name, values in (each or {}).items():
        out[name] = values[k]
    return out


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

    def flow_batch(
        self, ids: Sequence[str], srcs: Sequence[str], dsts: Sequence[str], sizes, deps: Sequence[Iterable[str]],
        reveal: str = "upfront", tags: Mapping[str, Any] | None = None, each: Mapping[str, Sequence] | None = None,
        **attrs: Any,
    ) -> list[str]:  # fmt: skip
        """Flows ``ids[k]`` from ``srcs[k]`` to ``dsts[k]`` of ``sizes[k]`` bytes (or ``sizes``, one
        int for all) after ``deps[k]``, sharing ``reveal``, ``attrs`` and ``tags``, plus the tags
        of ``each`` (name -> one value per flow). The same as calling :meth:`flow` for each, in
        order (a generator's bulk form: :class:`workloads.arrays.ArrayJob` makes them faster)."""
        return [
            self.flow(i, a, b, sizes if isinstance(sizes, int) else sizes[k], deps[k], reveal,
                      tags=batch_tags(tags, each, k), **attrs)
            for k, (i, a, b) in enumerate(zip(ids, srcs, dsts))
        ]  # fmt: skip

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
        _text(self.name, "name")
        _count(self.default_capacity, "default_capacity", 1)
        for dev, cap in self.capacity.items():
            _count(cap, f"capacity.{key_name(dev)}", 1)
        for name, ep in self.endpoints.items():
            _check_endpoint(ep, f"endpoints.{key_name(name)}")
        for i, item in self.items.items():
            where = f"items.{i}"
            if "/" in i:
                raise SpecError(where, "an item id cannot contain '/' (the run uses it to name an item's legs)")
            if item.at is not None and not _is_time(item.at):
                raise SpecError(f"{where}.at", f"must be a release time >= 0 (model seconds), got {describe(item.at)}")
            for d in item.deps:
                if d not in self.items:
                    raise SpecError(f"{where}.deps", f"unknown item {describe(d)}")
                if d == i:
                    raise SpecError(f"{where}.deps", "an item cannot depend on itself")
            if isinstance(item, Task):
                if item.endpoint not in self.endpoints:
                    raise SpecError(f"{where}.endpoint", f"unknown endpoint {describe(item.endpoint)}")
                d = item.duration
                if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 <= d < float("inf"):
                    raise SpecError(f"{where}.duration", f"must be a finite duration >= 0, got {describe(d)}")
            else:
                for end in ("src", "dst"):
                    if getattr(item, end) not in self.endpoints:
                        raise SpecError(f"{where}.{end}", f"unknown endpoint {describe(getattr(item, end))}")
                if isinstance(item.size, bool) or not isinstance(item.size, int) or item.size < 0:
                    raise SpecError(f"{where}.size", f"must be a byte count >= 0, got {describe(item.size)}")
                if item.reveal not in REVEAL_MODES:
                    raise SpecError(f"{where}.reveal", f"must be one of {', '.join(REVEAL_MODES)}")
                names = [o.name for o in item.options]
                if len(set(names)) != len(names):
                    raise SpecError(f"{where}.options", "option names must be unique")
                for o in item.options:
                    if not o.extra >= 0:
                        raise SpecError(f"{where}.options.{o.name}.extra", "must be >= 0")
        self.topological_order()
        return self

    def public(self) -> Job:
        """The scheduler's view before the run: sizes revealed ``on_ready`` or ``hidden`` are ``None``."""
        out = Job(self.name, self.capacity, self.default_capacity)
        out.endpoints = dict(self.endpoints)
        out.items = {
            i: (edited(it, size=None) if isinstance(it, Flow) and it.reveal != "upfront" else it)
            for i, it in self.items.items()
        }
        return out

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        d = self._dict_with_items()
        d["items"] = list(d["items"])
        return d

    def _dict_with_items(self) -> dict[str, Any]:
        """:meth:`to_dict` with the items' dicts made as they are read (an iterator)."""
        return {
            "name": self.name,
            "capacity": self.capacity,
            "default_capacity": self.default_capacity,
            "endpoints": [_endpoint_dict(e) for e in self.endpoints.values()],
            "items": (_item_dict(it) for it in self.items.values()),
        }

    @classmethod
    def from_dict(cls, data: object) -> Job:
        """A job from its JSON form (:meth:`to_dict`), every field type-checked; errors
        name the field (``items[3].size``). Sizes and durations may be strings
        (``"2MB"``, ``"1ms"``)."""
        doc = _fields(data, "job", _JOB_KEYS)
        job = cls(
            _text(doc.get("name", "job"), "name"),
            _capacities(doc.get("capacity"), "capacity"),
            _count(doc.get("default_capacity", 1), "default_capacity", 1),
        )
        for k, e in enumerate(_list(doc.get("endpoints"), "endpoints")):
            ep = _endpoint(e, f"endpoints[{k}]")
            job.endpoint(ep.name, ep.pin, ep.role, ep.demands)
        offset = _optional(doc.get("at"), "at", parse_duration) or 0.0
        for k, raw in enumerate(_list(doc.get("items"), "items")):
            item = _item(raw, f"items[{k}]")
            job._add(replace(item, at=offset + (item.at or 0.0)) if offset else item)
        return job.validate()

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as JSON (``indent=1``), an item's dict made as it is written
        (:func:`railbed.jsonout.write_json`)."""
        write_json(path, self._dict_with_items())

    @classmethod
    def load(cls, path: str | Path) -> Job:
        """Read a saved job (JSON, through :mod:`railbed.safeload`) and validate it."""
        return cls.from_dict(load_json_file(path, "job"))

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"Job({self.name!r}, {len(self.tasks)} tasks, {len(self.flows)} flows, {len(self.endpoints)} endpoints)"


def attrs_of(item: Item) -> dict[str, Any]:
    """The scheduler-facing attributes of an item (for result records)."""
    values = ((name, getattr(item, name)) for name in _ATTRIBUTE_NAMES)
    return {name: v for name, v in values if v is not None and v != {}}


def _item_dict(it: Item) -> dict[str, Any]:
    d = {"kind": it.kind, **asdict(it)}
    d["deps"] = list(it.deps)
    d["tags"] = dict(it.tags)
    return {k: v for k, v in d.items() if v not in (None, (), [], {}) or k in ("deps", "size")}


def _endpoint_dict(e: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {"name": e.name}
    if e.pin:
        out["pin"] = asdict(e.pin)
    if e.role is not None:
        out["role"] = e.role
    if e.demands:
        out["demands"] = dict(e.demands)
    return out


def _is_time(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value < float("inf")


def release_of(item: Item) -> float:
    """An item's release time: its ``at``, 0 without one."""
    return item.at or 0.0


def _check_endpoint(ep: Endpoint, where: str) -> None:
    if ep.role is not None and not isinstance(ep.role, str):
        raise SpecError(f"{where}.role", f"expected a string, got {describe(ep.role)}")
    if not isinstance(ep.demands, Mapping):
        raise SpecError(f"{where}.demands", f"expected a mapping of resource to amount, got {describe(ep.demands)}")
    for res, amount in ep.demands.items():
        ok = isinstance(amount, (int, float)) and not isinstance(amount, bool) and 0 <= amount < float("inf")
        if not ok:
            raise SpecError(f"{where}.demands.{key_name(res)}", f"must be a finite number >= 0, got {describe(amount)}")


# ------------------------------------------------------------ JSON reading
_JOB_KEYS = {"name", "capacity", "default_capacity", "endpoints", "items", "at"}
_ENDPOINT_KEYS = {"name", "pin", "role", "demands"}
_LOCATION_KEYS = {"server", "device", "nic"}
_ATTRIBUTE_KEYS = set(_ATTRIBUTE_NAMES)
_TASK_KEYS = {"kind", "id", "endpoint", "duration", "deps"} | _ATTRIBUTE_KEYS
_FLOW_KEYS = {"kind", "id", "src", "dst", "size", "deps", "reveal", "options", "parent"} | _ATTRIBUTE_KEYS
_OPTION_KEYS = {"name", "src_leg", "dst_leg", "src_nic", "dst_nic", "extra"}
_LEG_KEYS = {"src", "dst", "duration", "work"}
MAX_TEXT_CHARS = 200
MAX_TAG_VALUES = 1000
MAX_TAG_DEPTH = 8


def _fields(value: object, where: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping, got {describe(value)}")
    for key in value:
        if key not in allowed:
            raise SpecError(f"{where}.{key_name(key)}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in required:
        if key not in value:
            raise SpecError(f"{where}.{key}", "missing")
    return value


def _list(value: object, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(where, f"expected a list, got {describe(value)}")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT_CHARS or not value.isprintable():
        raise SpecError(where, f"expected a printable string of 1..{MAX_TEXT_CHARS} characters, got {describe(value)}")
    return value


def _count(value: object, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value > 2**62:
        raise SpecError(where, f"expected a whole number >= {minimum}, got {describe(value)}")
    return value


def _optional(value: object, where: str, read):
    return None if value is None else read(value, where)


def _capacities(value: object, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping of device to parallel tasks, got {describe(value)}")
    return {_text(dev, f"{where}.{key_name(dev)}"): _count(cap, f"{where}.{dev}", 1) for dev, cap in value.items()}


def _location(value: object, where: str) -> Location:
    doc = _fields(value, where, _LOCATION_KEYS, required=("server",))
    return Location(
        _count(doc["server"], f"{where}.server"),
        _text(doc.get("device", "gpu0"), f"{where}.device"),
        _count(doc.get("nic", 0), f"{where}.nic"),
    )


def _endpoint(value: object, where: str) -> Endpoint:
    doc = _fields(value, where, _ENDPOINT_KEYS, required=("name",))
    demands = doc.get("demands") or {}
    if not isinstance(demands, dict):
        raise SpecError(f"{where}.demands", f"expected a mapping of resource to amount, got {describe(demands)}")
    return Endpoint(
        _text(doc["name"], f"{where}.name"),
        _optional(doc.get("pin"), f"{where}.pin", _location),
        _optional(doc.get("role"), f"{where}.role", _text),
        {_text(k, f"{where}.demands.{key_name(k)}"): v for k, v in demands.items()},
    )


def _tags(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping, got {describe(value)}")
    check_bounds(value, where, MAX_TAG_VALUES, MAX_TAG_DEPTH)
    for key in value:
        _text(key, f"{where}.{key_name(key)}")
    return dict(value)


def _attributes(doc: dict, where: str) -> dict[str, Any]:
    """The scheduler-facing attributes of an item (see :class:`Attributes`)."""
    out: dict[str, Any] = {"iteration": _count(doc.get("iteration", 0), f"{where}.iteration")}
    for key in ("coflow", "coflow_type", "job"):
        out[key] = _optional(doc.get(key), f"{where}.{key}", _text)
    out["at"] = _optional(doc.get("at"), f"{where}.at", parse_duration)
    for key in ("microbatch", "layer"):
        out[key] = _optional(doc.get(key), f"{where}.{key}", _count)
    out["tags"] = _tags(doc.get("tags"), f"{where}.tags")
    return out


def _deps(value: object, where: str) -> tuple[str, ...]:
    return tuple(_text(d, f"{where}[{i}]") for i, d in enumerate(_list(value, where)))


def _size(value: object, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        raise SpecError(where, f"expected a whole number of bytes, got {describe(value)}")
    return parse_size(value, where)


def _leg(value: object, where: str) -> Leg:
    doc = _fields(value, where, _LEG_KEYS, required=("src", "dst"))
    duration = _optional(doc.get("duration"), f"{where}.duration", parse_duration)
    work = _optional(doc.get("work"), f"{where}.work", _text)
    return Leg(_text(doc["src"], f"{where}.src"), _text(doc["dst"], f"{where}.dst"), duration, work)


def _option(value: object, where: str) -> PathOption:
    doc = _fields(value, where, _OPTION_KEYS, required=("name",))
    return PathOption(
        _text(doc["name"], f"{where}.name"),
        _optional(doc.get("src_leg"), f"{where}.src_leg", _leg),
        _optional(doc.get("dst_leg"), f"{where}.dst_leg", _leg),
        _optional(doc.get("src_nic"), f"{where}.src_nic", _count),
        _optional(doc.get("dst_nic"), f"{where}.dst_nic", _count),
        parse_duration(doc.get("extra", 0.0), f"{where}.extra"),
    )


def _options(value: object, where: str) -> tuple[PathOption, ...]:
    return tuple(_option(o, f"{where}[{i}]") for i, o in enumerate(_list(value, where)))


def _item(value: object, where: str) -> Item:
    kind = value.get("kind") if isinstance(value, dict) else None
    if kind not in ("task", "flow"):
        if isinstance(value, dict) and "kind" in value:
            raise SpecError(f"{where}.kind", f"must be task or flow, got {describe(kind)}")
        raise SpecError(where, f"expected a mapping with kind task or flow, got {describe(value)}")
    if kind == "task":
        doc = _fields(value, where, _TASK_KEYS, required=("id", "endpoint", "duration"))
        return Task(
            id=_text(doc["id"], f"{where}.id"),
            endpoint=_text(doc["endpoint"], f"{where}.endpoint"),
            duration=parse_duration(doc["duration"], f"{where}.duration"),
            deps=_deps(doc.get("deps"), f"{where}.deps"),
            **_attributes(doc, where),
        )
    doc = _fields(value, where, _FLOW_KEYS, required=("id", "src", "dst", "size"))
    return Flow(
        id=_text(doc["id"], f"{where}.id"),
        src=_text(doc["src"], f"{where}.src"),
        dst=_text(doc["dst"], f"{where}.dst"),
        size=_size(doc["size"], f"{where}.size"),
        deps=_deps(doc.get("deps"), f"{where}.deps"),
        reveal=_choice(doc.get("reveal", "upfront"), f"{where}.reveal", REVEAL_MODES),
        options=tuple(
            _option(o, f"{where}.options[{i}]") for i, o in enumerate(_list(doc.get("options"), f"{where}.options"))
        ),
        parent=_optional(doc.get("parent"), f"{where}.parent", _text),
        **_attributes(doc, where),
    )


def _choice(value: object, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise SpecError(where, f"must be one of {', '.join(choices)}, got {describe(value)}")
    return value
