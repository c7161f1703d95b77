"""Registries of plug-ins the core names but never imports: run backends (:mod:`railbed.backend`)
and hardware-model kinds (:mod:`railbed.hosts`).

A registry maps the name an input uses (a CLI flag, a cluster file's key) to a target
``"package.module:attribute"``, imported the first time that name is used, so registering a
backend costs nothing until it runs: naming the emulator does not import Mininet or pyroute2
(``tests/test_no_emulator.py``). A name is decoded once, where the input is read
(:meth:`Registry.canonical`, a :class:`~railbed.errors.SpecError` naming the field for an
unknown one); what is passed on is the canonical name or the loaded object. Old spellings
stay accepted as aliases with a note saying the new name.
"""

from __future__ import annotations

import importlib
from typing import Any

from railbed.errors import SpecError
from railbed.safeload import describe


class Registry:
    """Names -> plug-ins. ``targets``: name -> ``"module:attribute"`` (or the object itself);
    ``aliases``: old spelling -> name."""

    def __init__(self, what: str, targets: dict[str, Any], aliases: dict[str, str] | None = None) -> None:
        self.what = what
        self._targets = dict(targets)
        self._aliases = dict(aliases or {})
        self._loaded: dict[str, Any] = {}

    def names(self) -> tuple[str, ...]:
        """The canonical names, in registration order (aliases not included)."""
        return tuple(self._targets)

    def spellings(self) -> tuple[str, ...]:
        """Every name an input may use: the canonical names, then the old spellings."""
        return (*self._targets, *self._aliases)

    def target(self, name: str) -> Any:
        """What ``name`` is registered as (a ``"module:attribute"`` string until loaded)."""
        return self._targets[name]

    def canonical(self, name: object, field: str) -> str:
        """The canonical name for ``name`` (an old spelling gives its new name)."""
        if isinstance(name, str) and name in self._aliases:
            return self._aliases[name]
        if not isinstance(name, str) or name not in self._targets:
            raise SpecError(field, f"unknown {self.what} {describe(name)} (known: {', '.join(self._targets)})")
        return name

    def note(self, name: str) -> str | None:
        """A line telling the user the new name, when ``name`` is an old spelling."""
        new = self._aliases.get(name)
        return None if new is None else f"{self.what} {name!r} is now called {new!r} (the old name still works)"

    def get(self, name: str, field: str = "name") -> Any:
        """The plug-in registered as ``name`` (or an old spelling of it), imported on first use."""
        name = self.canonical(name, field)
        if name not in self._loaded:
            target = self._targets[name]
            if isinstance(target, str):
                module, _, attr = target.partition(":")
                target = getattr(importlib.import_module(module), attr)
            self._loaded[name] = target
        return self._loaded[name]

    def register(self, name: str, target: Any) -> None:
        """Add (or replace) ``name``: a ``"module:attribute"`` string or the object itself."""
        self._targets[name] = target
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        self._targets.pop(name, None)
        self._loaded.pop(name, None)
