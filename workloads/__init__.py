"""Job generators: pure functions returning a :class:`railbed.job.Job`.

Registered by name for scenario files (``job: {generator: NAME, args: {...}}``);
:func:`generate` reads sizes (``"8MB"``) and durations (``"2ms"``) in the
arguments and reports bad ones by field.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job
from railbed.units import parse_duration, parse_size
from workloads.llm import hybrid_parallel
from workloads.synthetic import all_to_all

GENERATORS: dict[str, Callable[..., Job]] = {"hybrid_parallel": hybrid_parallel, "all_to_all": all_to_all}
SIZE_ARGS = {"activation", "gradient", "size"}
TIME_ARGS = {"fwd", "bwd", "compute"}


def generate(name: str, args: Mapping[str, Any] | None = None, field: str = "job") -> Job:
    """Run generator ``name`` with ``args`` (from YAML); errors name ``field.args.<arg>``."""
    gen = GENERATORS.get(name)
    if gen is None:
        raise SpecError(f"{field}.generator", f"unknown generator {name!r} (known: {', '.join(sorted(GENERATORS))})")
    known = set(inspect.signature(gen).parameters)
    kwargs = {}
    for key, value in (args or {}).items():
        where = f"{field}.args.{key}"
        if key not in known:
            raise SpecError(where, f"{name} takes no argument {key!r} (known: {', '.join(sorted(known))})")
        if key in SIZE_ARGS:
            value = parse_size(value, where)
        elif key in TIME_ARGS:
            value = parse_duration(value, where)
        kwargs[key] = value
    try:
        return gen(**kwargs)
    except SpecError as exc:
        if exc.field in known:
            raise SpecError(f"{field}.args.{exc.field}", exc.message) from None
        raise
