"""Schedulers: pure algorithms behind the hooks of :mod:`railbed.scheduler`.

Registered by name for scenario files and the CLI (:func:`by_name`).
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.scheduler import HOLD, Decision, RunView, Scheduler
from schedulers.example import SmallFirst
from schedulers.fifo import Fifo
from schedulers.tagged import TagPriority

REGISTRY: dict[str, type[Scheduler]] = {"fifo": Fifo, "tag-priority": TagPriority, "small-first": SmallFirst}


def by_name(name: str, field: str = "scheduler") -> Scheduler:
    """A fresh scheduler instance by its registered name."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise SpecError(field, f"unknown scheduler {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return cls()


__all__ = ["HOLD", "Decision", "Fifo", "REGISTRY", "RunView", "Scheduler", "SmallFirst", "TagPriority", "by_name"]
