"""Registries of plug-ins the core names but never imports: run backends (:mod:`railbed.backend`)
and hardware-model kinds (:mod:`railbed.hosts`).

A registry maps the name an input uses (a CLI flag, a cluster file's key) to a target
``"package.module:attribute"``, imported the first time that name is used, so registering a
backend costs nothing until it runs: naming the emulator does not import Mininet or pyroute2
(``tests/test_no_emulator.py``). A name is decoded once, where the input is read
(:meth:`Registry.canonical`, a :class:`~railbed.errors.SpecError` naming the field for an
unknown one); what is passed on is the canonical name or the loaded object. Old spellings
stay accepted as aliases with a note saying the new name.

Plug-ins from outside the tree (a user's own scheduler, :mod:`schedulers`) are named by
:func:`load_target`'s ``"module:attribute"`` or ``"path/to/file.py:attribute"``, or registered
by an installed package under an entry-point group (:func:`entry_point`, ``importlib.metadata``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
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

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a canonical name or an old spelling (nothing is imported)."""
        return name in self._targets or name in self._aliases

    def __iter__(self):
        """The canonical names (:meth:`names`)."""
        return iter(self._targets)

    def __getitem__(self, name: str) -> Any:
        """:meth:`get` for a known name (imported on first use); ``KeyError`` for another."""
        if name not in self:
            raise KeyError(name)
        return self.get(name)

    def find(self, name: object) -> Any | None:
        """The plug-in ``name`` names (imported on first use), or None when it names none."""
        return self.get(name) if isinstance(name, str) and name in self else None

    def items(self) -> list[tuple[str, Any]]:
        """(name, plug-in) of every canonical name: imports them all (listings, tests)."""
        return [(name, self.get(name)) for name in self._targets]

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
                target = load_target(target, field)
            self._loaded[name] = target
        return self._loaded[name]

    def register(self, name: str, target: Any) -> None:
        """Add (or replace) ``name``: a ``"module:attribute"`` string or the object itself."""
        self._targets[name] = target
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        self._targets.pop(name, None)
        self._loaded.pop(name, None)


def is_target(name: str) -> bool:
    """Whether ``name`` is a ``"module:attribute"`` or ``"file.py:attribute"`` reference."""
    left, sep, attr = name.rpartition(":")
    return bool(sep and left and attr)


def load_target(target: str, field: str) -> Any:
    """The object ``target`` names: ``"package.module:attribute"`` (imported from ``sys.path``) or
    ``"path/to/file.py:attribute"`` (a file anywhere, loaded once per resolved path as a module of
    its own, so two files of the same name do not collide). A missing module, file or attribute,
    or a module that fails to import: a :class:`SpecError` naming ``field``."""
    left, _, attr = target.rpartition(":")
    if not left or not attr:
        raise SpecError(field, f"expected module:Class or path/to/file.py:Class, got {describe(target)}")
    if left.endswith(".py") or "/" in left:
        where, module = left, _file_module(Path(left), field)
    else:
        where = f"module {left}"
        try:
            module = importlib.import_module(left)
        except ModuleNotFoundError as exc:
            if exc.name and left.startswith(exc.name):
                raise SpecError(field, f"no module {left!r} (is its folder on PYTHONPATH?)") from None
            raise SpecError(field, f"{left} failed to import: {_one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
            raise SpecError(field, f"{left} failed to import: {_one_line(exc)}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SpecError(field, f"no class {attr!r} in {where}") from None


def _file_module(path: Path, field: str) -> Any:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise SpecError(field, f"no such file {path}")
    name = f"railbed_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(field, f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look modules up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file raised while loading
        del sys.modules[name]
        raise SpecError(field, f"{path} failed to load: {_one_line(exc)}") from None
    return module


def entry_point(group: str, name: str, field: str) -> Any | None:
    """The object an installed package registers as ``name`` in entry-point ``group`` (loaded),
    or None when none does."""
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        return None
    try:
        return found[0].load()
    except Exception as exc:  # noqa: BLE001 - the package's entry point is broken
        why = f"entry point {name!r} ({found[0].value}) of {group} failed to load: {_one_line(exc)}"
        raise SpecError(field, why) from None


def entry_point_names(group: str) -> tuple[str, ...]:
    return tuple(sorted(ep.name for ep in importlib.metadata.entry_points(group=group)))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
