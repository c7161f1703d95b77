"""Schedulers: policies behind the hooks of :mod:`railbed.scheduler`.

Registered by name for scenario files and the CLI. A scenario names a
scheduler as a string or as ``{name: NAME, args: {...}, label: LABEL}``
(:func:`scheduler_spec`); :func:`make` checks ``args`` against the
constructor's signature (unknown names, wrong types, and the constructor's
own :class:`~railbed.errors.SpecError` s all name ``schedulers[i].args.<arg>``)
and gives the instance its ``label``, which names the run in results.

A scheduler from outside the tree is named where a registered one would be (scenario entries,
``--scheduler``, sweep axes, and so claims rows through their scenarios) as ``module:Class`` (the
module on ``PYTHONPATH``) or ``path/to/file.py:Class`` (in a scenario, relative to the scenario
file; on the command line, to the current directory), or by the name an installed package gives it
under the entry-point group :data:`ENTRY_POINTS` (``[options.entry_points] railbed.schedulers =
mine = mypkg.sched:Mine``). Its arguments are checked as a registered one's; its run is labelled
``<module or file stem>:Class`` unless the entry gives a label. Loading goes through
:func:`railbed.plugins.load_target` (one line naming ``<field>.name`` for a bad module, file or
class, exit 2).
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railbed import plugins
from railbed.errors import SpecError
from railbed.scheduler import HOLD, Decision, OnDone, OnNic, OnReady, OnSlot, OnTime, RunView, Scheduler, hold

# name -> "module:Class", imported the first time the name is used (railbed.plugins.Registry): a run
# imports only the schedulers it names, and a REPRODUCTION.md section depends only on those
# (scenarios/block.py; tests/test_schedulers_registry.py checks the table against the classes).
REGISTRY = plugins.Registry(
    "scheduler",
    {
        "fifo": "schedulers.fifo:Fifo",
        "tag-priority": "schedulers.tagged:TagPriority",
        "small-first": "schedulers.example:SmallFirst",
        # seed 000 (DGTP) and its baselines
        "dgtp": "schedulers.dgtp:Dgtp",
        "dgtp-literal": "schedulers.dgtp:DgtpLiteral",
        "dgtp-oes": "schedulers.dgtp:DgtpOes",
        "dgtp-place": "schedulers.dgtp:DgtpPlace",
        "distdgl": "schedulers.dgtp:DistDgl",
        "distdgl-prefetch": "schedulers.dgtp:DistDglPrefetch",
        "omcoflow": "schedulers.dgtp:OmCoflow",
        "mrtf": "schedulers.dgtp:Mrtf",
        # seed 004, chapter 5
        "hermod": "schedulers.hermod:Hermod",
        "hermod-literal": "schedulers.hermod:HermodLiteral",
        "hermod-inter": "schedulers.hermod:HermodInter",
        "hermod-intra": "schedulers.hermod:HermodIntra",
        "megatron": "schedulers.hermod:Megatron",
        "lina": "schedulers.hermod:Lina",
        "dp-first": "schedulers.hermod:DpFirst",
        "pp-first": "schedulers.hermod:PpFirst",
        "ep-first": "schedulers.hermod:EpFirst",
        # seed 004, chapter 6
        "leo": "schedulers.leo:Leo",
        "leo-literal": "schedulers.leo:LeoLiteral",
        "leo-lp": "schedulers.leo:LeoLp",
        "greedy-intra": "schedulers.leo:GreedyIntra",
        "greedy-e2e": "schedulers.leo:GreedyE2e",
        "cpu-only": "schedulers.leo:CpuOnly",
        "acc-only": "schedulers.leo:AccOnly",
        # seed 002
        "dgcl": "schedulers.dgcl:Dgcl",
        "p2p": "schedulers.dgcl:PeerToPeer",
        "swap": "schedulers.dgcl:Swap",
        # seed 001, SANCUS
        "cagnet": "schedulers.cagnet:Cagnet",
        # issue 45: several jobs
        "job-priority": "schedulers.multijob:JobPriority",
        "delay": "schedulers.multijob:Delay",
        # issue 45: NSDI'24, SIGCOMM'24
        "cassini": "schedulers.cassini:Cassini",
        "crux": "schedulers.crux:Crux",
        # Varys (SIGCOMM'14 §5): coflow baseline for traces
        "sebf": "schedulers.varys:Sebf",
    },
)


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
        return self.label or default_label(self.name)


def default_label(name: str) -> str:
    """A run's label when its entry gives none: the registered name, or ``stem:Class`` for
    ``path/to/stem.py:Class`` (a label names a results directory: no ``/``)."""
    if not plugins.is_target(name):
        return name
    left, _, attr = name.rpartition(":")
    return f"{Path(left).stem if left.endswith('.py') or '/' in left else left}:{attr}"


def absolute(name: str, base: Path | None) -> str:
    """``name`` with a relative ``file.py:Class`` made absolute against ``base`` (the scenario's folder)."""
    if base is None or not plugins.is_target(name):
        return name
    left, _, attr = name.rpartition(":")
    if not (left.endswith(".py") or "/" in left) or Path(left).expanduser().is_absolute():
        return name
    return f"{(base / left).resolve()}:{attr}"


def scheduler_spec(entry: Any, where: str, base: Path | None = None) -> SchedulerSpec:
    """Read one entry of a scenario's ``schedulers`` list (a name, or a mapping); a file named
    relative to ``base`` is made absolute."""
    if isinstance(entry, str):
        return SchedulerSpec(absolute(entry, base))
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
    return SchedulerSpec(absolute(name, base), dict(args), label, dict(job))


ENTRY_POINTS = "railbed.schedulers"  # the entry-point group of schedulers from installed packages


def scheduler_class(name: str, field: str) -> type[Scheduler]:
    """The class ``name`` names: registered, an entry point of :data:`ENTRY_POINTS`, or ``module:Class``
    / ``file.py:Class`` (module docstring). Anything else: a :class:`SpecError` naming ``field``."""
    cls = REGISTRY.get(name, field) if name in REGISTRY else None
    if cls is None and not plugins.is_target(name):
        cls = plugins.entry_point(ENTRY_POINTS, name, field)
        if cls is None:
            known = ", ".join(sorted({*REGISTRY, *plugins.entry_point_names(ENTRY_POINTS)}))
            raise SpecError(field, f"unknown scheduler {name!r} (known: {known}; or module:Class, file.py:Class)")
    if cls is None:
        cls = plugins.load_target(name, field)
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise SpecError(field, f"{name} is not a Scheduler subclass (railbed.scheduler.Scheduler)")
    return cls


def make(spec: SchedulerSpec, where: str = "scheduler") -> Scheduler:
    """A fresh scheduler instance of ``spec`` (see the module docstring)."""
    cls = scheduler_class(spec.name, f"{where}.name" if plugins.is_target(spec.name) else where)
    params = _parameters(cls)
    for key, value in spec.args.items():
        if key not in params:
            known = ", ".join(params) or "none"
            raise SpecError(f"{where}.args.{key}", f"{spec.run_label} takes no argument {key!r} (known: {known})")
        _check_type(value, params[key], f"{where}.args.{key}")
    try:
        sched = cls(**spec.args)
    except SpecError as exc:
        raise SpecError(f"{where}.args.{exc.field}", exc.message) from None
    except TypeError as exc:  # a required argument missing
        raise SpecError(f"{where}.args", str(exc)) from None
    sched.label = spec.label if spec.name in REGISTRY else spec.run_label  # results name an outside one as written
    return sched


def by_name(name: str, field: str = "scheduler") -> Scheduler:
    """A fresh scheduler instance by its name (registered, or from outside the tree), default arguments."""
    scheduler_class(name, field)  # a bad name is the field's own (``--scheduler[0]``), not ``.name``
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
    "OnDone",
    "OnNic",
    "OnSlot",
    "OnTime",
    "OnReady",
    "REGISTRY",
    "RunView",
    "Scheduler",
    "SchedulerSpec",
    "by_name",
    "default_label",
    "scheduler_class",
    "hold",
    "make",
    "scheduler_spec",
]
