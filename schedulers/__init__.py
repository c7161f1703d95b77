"""Schedulers: policies behind the hooks of :mod:`railbed.scheduler`.

Registered by name for scenario files and the CLI. A scenario names a
scheduler as a string or as ``{name: NAME, args: {...}, label: LABEL}``
(:func:`scheduler_spec`); :func:`make` checks ``args`` against the
constructor's signature (unknown names, wrong types, and the constructor's
own :class:`~railbed.errors.SpecError` s all name ``schedulers[i].args.<arg>``)
and gives the instance its ``label``, which names the run in results.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from railbed.errors import SpecError
from railbed.scheduler import HOLD, Decision, RunView, Scheduler
from schedulers.cagnet import SCHEDULERS as _CAGNET
from schedulers.dgcl import SCHEDULERS as _DGCL
from schedulers.dgtp import Dgtp, DgtpLiteral, DgtpOes, DgtpPlace, DistDgl, DistDglPrefetch, Mrtf, OmCoflow
from schedulers.example import SmallFirst
from schedulers.fifo import Fifo
from schedulers.hermod import SCHEDULERS as _HERMOD
from schedulers.leo import SCHEDULERS as _LEO
from schedulers.tagged import TagPriority
from schedulers.varys import SCHEDULERS as _VARYS

REGISTRY: dict[str, type[Scheduler]] = {
    "fifo": Fifo,
    "tag-priority": TagPriority,
    "small-first": SmallFirst,
    "dgtp": Dgtp,
    "dgtp-literal": DgtpLiteral,
    "dgtp-oes": DgtpOes,
    "dgtp-place": DgtpPlace,
    "distdgl": DistDgl,
    "distdgl-prefetch": DistDglPrefetch,
    "omcoflow": OmCoflow,
    "mrtf": Mrtf,
}
REGISTRY.update({cls.name: cls for cls in _HERMOD})  # seed 004, chapter 5
REGISTRY.update({cls.name: cls for cls in _LEO})  # seed 004, chapter 6
REGISTRY.update({cls.name: cls for cls in _DGCL})  # seed 002
REGISTRY.update({cls.name: cls for cls in _CAGNET})  # seed 001, SANCUS
REGISTRY.update({cls.name: cls for cls in _VARYS})  # Varys (SIGCOMM'14 §5): coflow baseline for traces


@dataclass(frozen=True)
class SchedulerSpec:
    """A scheduler as a scenario names it: registered ``name``, constructor ``args``, run ``label``,
    and ``job``: overrides of the scenario's job generator arguments for this run (a variant of the
    system whose data differs: a partitioner, a staleness policy; see :mod:`scenarios.runner`)."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    job: Mapping[str, Any] = field(default_factory=dict)

    @property
    def run_label(self) -> str:
        return self.label or self.name


def scheduler_spec(entry: Any, where: str) -> SchedulerSpec:
    """Read one entry of a scenario's ``schedulers`` list (a name, or a mapping)."""
    if isinstance(entry, str):
        return SchedulerSpec(entry)
    if not isinstance(entry, Mapping):
        raise SpecError(where, f"expected a scheduler name or {{name, args, label}}, got {type(entry).__name__}")
    unknown = set(entry) - {"name", "args", "label", "job"}
    if unknown:
        raise SpecError(f"{where}.{sorted(map(str, unknown))[0]}", "unknown key (known: name, args, label, job)")
    name, args, label = entry.get("name"), entry.get("args") or {}, entry.get("label")
    job = entry.get("job") or {}
    if not isinstance(job, Mapping) or not all(isinstance(k, str) for k in job):
        raise SpecError(f"{where}.job", f"expected a mapping of job argument to value, got {type(job).__name__}")
    if not isinstance(name, str):
        raise SpecError(f"{where}.name", "expected a scheduler name")
    if not isinstance(args, Mapping):
        raise SpecError(f"{where}.args", f"expected a mapping of argument to value, got {type(args).__name__}")
    if label is not None and (not isinstance(label, str) or not label or "/" in label):
        raise SpecError(f"{where}.label", "expected a non-empty name without '/'")
    return SchedulerSpec(name, dict(args), label, dict(job))


def make(spec: SchedulerSpec, where: str = "scheduler") -> Scheduler:
    """A fresh scheduler instance of ``spec`` (see the module docstring)."""
    cls = REGISTRY.get(spec.name)
    if cls is None:
        raise SpecError(where, f"unknown scheduler {spec.name!r} (known: {', '.join(sorted(REGISTRY))})")
    params = _parameters(cls)
    for key, value in spec.args.items():
        if key not in params:
            known = ", ".join(params) or "none"
            raise SpecError(f"{where}.args.{key}", f"{spec.name} takes no argument {key!r} (known: {known})")
        _check_type(value, params[key], f"{where}.args.{key}")
    try:
        sched = cls(**spec.args)
    except SpecError as exc:
        raise SpecError(f"{where}.args.{exc.field}", exc.message) from None
    except TypeError as exc:  # a required argument missing
        raise SpecError(f"{where}.args", str(exc)) from None
    sched.label = spec.label
    return sched


def by_name(name: str, field: str = "scheduler") -> Scheduler:
    """A fresh scheduler instance by its registered name, default arguments."""
    return make(SchedulerSpec(name), field)


def _parameters(cls: type) -> dict[str, Any]:
    """Constructor argument -> its annotation (``Any`` when unannotated or unresolvable)."""
    sig = inspect.signature(cls.__init__)
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an unresolvable annotation is simply not checked
        hints = {}
    return {
        n: hints.get(n, Any)
        for n, p in sig.parameters.items()
        if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _check_type(value: Any, hint: Any, where: str) -> None:
    """Plain ``int``/``float``/``bool``/``str`` annotations are enforced; others are the constructor's business."""
    ok = {
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        bool: lambda v: isinstance(v, bool),
        str: lambda v: isinstance(v, str),
    }.get(hint)
    if ok is not None and not ok(value):
        raise SpecError(where, f"expected {'a finite number' if hint is float else hint.__name__}, got {value!r:.40}")


__all__ = [
    "HOLD",
    "Decision",
    "Fifo",
    "REGISTRY",
    "RunView",
    "Scheduler",
    "SchedulerSpec",
    "SmallFirst",
    "TagPriority",
    "by_name",
    "make",
    "scheduler_spec",
]
