"""Job generators: pure functions returning a :class:`railbed.job.Job`.

Registered by name for scenario files (``job: {generator: NAME, args: {...}}``);
:func:`generate` reads sizes (``"8MB"``) and durations (``"2ms"``) in the
arguments and reports bad ones by field.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job
from railbed.plugins import Registry
from railbed.safeload import describe, key_name
from railbed.units import parse_duration, parse_size

# name -> "module:function", imported the first time the name is used (railbed.plugins.Registry): a
# run imports only its generator, and a REPRODUCTION.md section's digest counts only the generators
# its paper's files name (scenarios/block.py). Each generator's module also gives its item estimate
# (an upper bound, checked against MAX_ITEMS before anything is built) and, for some, an array form.
GENERATORS = Registry(
    "generator",
    {
        "hybrid_parallel": "workloads.llm:hybrid_parallel",
        "all_to_all": "workloads.synthetic:all_to_all",
        "collective": "workloads.collectives:collective",  # one collective over n ranks, nccl-tests style
        "gnn_training": "workloads.gnn:gnn_training",
        "gnn_fullgraph": "workloads.gnn_fullgraph:gnn_fullgraph",
        "gnn_cagnet": "workloads.gnn_cagnet:gnn_cagnet",
        "gnn_hybrid": "workloads.gnn_hybrid:gnn_hybrid",
        "gnn_epoch": "workloads.gnn_epoch:gnn_epoch",
        "moe_training": "workloads.moe:moe_training",
        "requests": "workloads.requests:requests",
        "pp_chain": "workloads.mechanisms:pp_chain",  # the mechanism tests' tiny jobs (workloads/mechanisms.py)
        "oes_incast": "workloads.mechanisms:oes_incast",
        "relay_allgather": "workloads.mechanisms:relay_allgather",
        "leo_toll": "workloads.mechanisms:leo_toll",
        "periodic": "workloads.mechanisms:periodic",  # issue 45: the two-job mechanism
    },
)
SIZE_HINTS = Registry(
    "item estimate",
    {
        "gnn_hybrid": "workloads.gnn_hybrid:item_estimate",
        "gnn_cagnet": "workloads.gnn_cagnet:item_estimate",
        "gnn_fullgraph": "workloads.gnn_fullgraph:item_estimate",
        "hybrid_parallel": "workloads.llm:item_estimate",
        "all_to_all": "workloads.synthetic:item_estimate",
        "gnn_training": "workloads.gnn:item_estimate",
        "moe_training": "workloads.moe:item_estimate",
        "requests": "workloads.requests:item_estimate",
        "collective": "workloads.collectives:item_estimate",
    },
)
SIZE_ARGS = {"activation", "gradient", "size"}
TIME_ARGS = {"fwd", "bwd", "compute", "duration"}


MAX_ITEMS = 5_000_000  # the 8192-GPU benchmark job has 2.3 million items (about 3 GB in memory)
MAX_ARRAY_ITEMS = 70_000_000  # by item_estimate (an upper bound): Mixtral-8x22B at 8192 GPUs 40 M (27 M made)
ARRAY_FORMS = Registry("array form", {"moe_training": "workloads.moe:moe_arrays"})  # generators with an ArrayJob form
DESCRIPTIONS = Registry("job description", {"moe_training": "workloads.moe:describe"})  # the model a job runs


# the arguments whose product is the GPUs a generator pins (messages of check_fits name them)
GPU_FACTORS: dict[str, tuple[str, ...]] = {
    "hybrid_parallel": ("dp", "pp", "tp"),
    "moe_training": ("dp", "pp", "tp"),
    "gnn_fullgraph": ("gpus",),
    "gnn_cagnet": ("gpus",),
    "gnn_hybrid": ("workers",),
    "gnn_epoch": ("servers",),
}
SHAPE_ARGS = ("gpus_per_server", "nics_per_server", "layout", "machines", "model")


def check_fits(name: str, args: Mapping[str, Any] | None, job: Job, cluster, field: str = "job") -> None:
    """A generated job whose pins leave ``cluster`` (a server, GPU or NIC it does not have) is refused
    in the terms the user wrote: ``hybrid_parallel {dp: 4, pp: 16, gpus_per_server: 8} needs dp x pp
    x tp = 64 GPUs on 8 servers (8 per server), the cluster has 32 GPUs on 4 servers (8 per server)``,
    naming ``job.args`` (not the generated endpoint that first falls off the cluster)."""
    pins = [ep.pin for ep in job.endpoints.values() if ep.pin is not None]
    servers = cluster.servers
    gpu = [(p.server, int(p.device[3:])) for p in pins if p.device.startswith("gpu") and p.device[3:].isdigit()]
    off = any(
        p.server >= len(servers) or p.nic >= servers[p.server].nics for p in pins
    ) or any(s >= len(servers) or g >= servers[s].gpus for s, g in gpu)  # fmt: skip
    if not off:
        return
    args = dict(args or {})
    factors = GPU_FACTORS.get(name, ())
    wrote = ", ".join(f"{k}: {args[k]}" for k in (*factors, *SHAPE_ARGS) if k in args)
    formula = f"{' x '.join(factors)} = " if factors else ""
    per = max((g for _, g in gpu), default=-1) + 1
    need = f"{max(p.server for p in pins) + 1} servers"
    if gpu:
        need = f"{formula}{len(set(gpu))} GPUs on {need} ({per} per server)"
    widest = max(s.gpus for s in servers)
    has = f"the cluster has {cluster.gpus} GPUs on {len(servers)} servers (up to {widest} per server)"
    raise SpecError(f"{field}.args", f"{name} {{{wrote}}} needs {need}, {has}")


def generate(name: str, args: Mapping[str, Any] | None = None, field: str = "job") -> Job:
    """Run generator ``name`` with ``args`` (from YAML); errors name ``field.args.<arg>``.

    Each argument is checked against the generator's annotation (``int``,
    ``float``, ``str``, ``dict[str, int]``, optional), sizes and durations
    are parsed from strings, and a job of more than :data:`MAX_ITEMS` items
    is refused before it is built."""
    gen, kwargs, hints, items = checked_args(name, args, field)
    if items > MAX_ITEMS:
        hint = " (railbed simulate --backend fluid-rules builds it as arrays)" if name in ARRAY_FORMS else ""
        raise SpecError(f"{field}.args", f"{name} would make about {items:.3g} items; at most {MAX_ITEMS}{hint}")
    return _call(gen, kwargs, hints, field)


def too_many_items(name: str, args: Mapping[str, Any] | None = None, field: str = "job") -> bool:
    """Would :func:`generate` refuse this job for its size (and only for that)?"""
    return checked_args(name, args, field)[3] > MAX_ITEMS


def generate_arrays(name: str, args: Mapping[str, Any] | None = None, field: str = "job"):
    """The same job as :func:`generate`, made straight into a :class:`workloads.arrays.ArrayJob`
    (the compact engine's input, :func:`simulator.rules.compact_arrays`), for generators with
    an array form (:data:`ARRAY_FORMS`). The item bound is :data:`MAX_ARRAY_ITEMS`, not
    :data:`MAX_ITEMS`: an item costs about 80 bytes here, 830 as a Python object."""
    gen, kwargs, hints, items = checked_args(name, args, field)
    if name not in ARRAY_FORMS:
        raise SpecError(f"{field}.generator", f"{name} has no array form (those that do: {', '.join(ARRAY_FORMS)})")
    if items > MAX_ARRAY_ITEMS:
        raise SpecError(f"{field}.args", f"{name} would make about {items:.3g} items; at most {MAX_ARRAY_ITEMS}")
    return _call(ARRAY_FORMS.get(name), kwargs, hints, field)


def checked_args(name, args, field):
    """(generator, checked keyword arguments, its annotations, item estimate); see :func:`generate`."""
    if not isinstance(name, str) or name not in GENERATORS:
        raise SpecError(
            f"{field}.generator", f"unknown generator {describe(name)} (known: {', '.join(sorted(GENERATORS))})"
        )
    gen = GENERATORS.get(name, f"{field}.generator")
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise SpecError(f"{field}.args", f"expected a mapping of argument to value, got {describe(args)}")
    hints = typing.get_type_hints(gen)
    kwargs = {}
    for key, value in args.items():
        where = f"{field}.args.{key_name(key)}"
        if key not in hints or key == "return":
            known = ", ".join(sorted(k for k in hints if k != "return"))
            raise SpecError(where, f"{name} takes no argument {key_name(key)!r} (known: {known})")
        if key in SIZE_ARGS:
            value = parse_size(value, where)
        elif key in TIME_ARGS:
            value = parse_duration(value, where)
        kwargs[key] = check_type(value, hints[key], where)
    items = SIZE_HINTS.get(name)(**kwargs) if name in SIZE_HINTS else 0
    return gen, kwargs, hints, items


def _call(gen, kwargs, hints, field):
    try:
        return gen(**kwargs)
    except SpecError as exc:
        if exc.field.split(".")[0].split("[")[0] in hints:
            raise SpecError(f"{field}.args.{exc.field}", exc.message) from None
        raise


def check_type(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it fits the annotation ``hint`` (int, float, str, bool, None,
    unions of those, ``dict[str, X]``, ``list[X]``), else SpecError naming ``where``."""
    if _fits(value, hint):
        return float(value) if hint is float else value
    raise SpecError(where, f"expected {_hint_name(hint)}, got {describe(value)}")


def _fits(value: Any, hint: Any) -> bool:
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, p) for p in params)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, params[0]) and _fits(v, params[1]) for k, v in value.items())
    if origin is list:
        return isinstance(value, list) and all(_fits(v, params[0]) for v in value)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)


def _hint_name(hint: Any) -> str:
    names = {int: "a whole number", float: "a finite number", str: "a string", bool: "true or false"}
    if hint in names:
        return names[hint]
    return str(hint).replace("typing.", "").replace("NoneType", "null")
