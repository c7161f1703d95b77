"""What exists, read from the code so it cannot drift: ``railbed list [KIND]``.

Each listing is a list of :class:`Entry` (name, one line, arguments with
their defaults): generators from :data:`workloads.GENERATORS` (each
function's signature and its docstring's first line, else its module's),
schedulers from :data:`schedulers.REGISTRY` (the constructor's signature,
the class's docstring), backends from :data:`railbed.backend.BACKENDS`
(summary and capabilities) and host models: the ``intra_host`` presets
(``hwmodels/presets/*.yaml``, their first comment line) and the ``datapath``
presets (:data:`hwmodels.leo.HOST_PRESETS`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields

KINDS = ("generators", "schedulers", "backends", "hosts")


@dataclass(frozen=True)
class Entry:
    name: str
    line: str  # what it is, one line
    args: tuple[str, ...] = ()  # "name=default" or "name" (required)

    def lines(self) -> list[str]:
        out = [f"{self.name:<20} {self.line}"]
        if self.args:
            out.append(f"{'':<20}   {', '.join(self.args)}")
        return out


def first_line(obj) -> str:
    """The first line of ``obj``'s docstring, else of its module's (empty if neither has one)."""
    for doc in (inspect.getdoc(obj), inspect.getdoc(inspect.getmodule(obj))):
        if doc:
            return doc.strip().splitlines()[0].rstrip(".")
    return ""


def arguments(func: Callable) -> tuple[str, ...]:
    """``name=default`` (``name`` when required) of every keyword a scenario may give ``func``."""
    out = []
    for p in inspect.signature(func).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out.append(p.name if p.default is p.empty else f"{p.name}={_value(p.default)}")
    return tuple(out)


def _value(value) -> str:
    """A default as a scenario file would write it (sizes of whole MiB as ``NMiB``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20}MiB"
    return repr(value)


def default_seeds(scenario) -> dict[str, object]:
    """The seeds a scenario's job generator and schedulers use without its naming them (their
    ``seed`` argument's default), by the dotted path the file would give them (``job.args.seed``,
    ``schedulers[1].args.seed``): provenance records them beside the seeds the file gives."""
    from schedulers import REGISTRY
    from workloads import GENERATORS

    if not isinstance(scenario, dict):
        return {}
    out: dict[str, object] = {}
    job = scenario.get("job")
    pairs = []
    if isinstance(job, dict) and job.get("generator") in GENERATORS:
        pairs.append(("job.args", GENERATORS[job["generator"]], job.get("args")))
    entries = scenario.get("schedulers")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, (str, dict)):
            continue  # a scenario built in Python has no source to read seeds from
        name, args = (entry, {}) if isinstance(entry, str) else (entry.get("name"), entry.get("args"))
        if name in REGISTRY:
            pairs.append((f"schedulers[{i}].args", REGISTRY[name].__init__, args))
    for where, func, args in pairs:
        seed = inspect.signature(func).parameters.get("seed")
        if seed is not None and seed.default is not seed.empty and "seed" not in (args or {}):
            out[f"{where}.seed"] = seed.default
    return out


def generators() -> list[Entry]:
    from workloads import GENERATORS

    return [Entry(n, first_line(f), arguments(f)) for n, f in sorted(GENERATORS.items())]


def schedulers() -> list[Entry]:
    from schedulers import REGISTRY

    return [Entry(n, first_line(c), arguments(c.__init__)) for n, c in sorted(REGISTRY.items())]


def backends() -> list[Entry]:
    from railbed.backend import BACKENDS, backend

    out = []
    for name in BACKENDS.names():
        try:
            be = backend(name)
        except Exception as exc:  # noqa: BLE001 - a backend whose module cannot load here: say why
            out.append(Entry(name, f"(cannot be loaded here: {type(exc).__name__}: {exc})"))
            continue
        caps = be.capabilities
        flags = tuple(f"{f.name}={getattr(caps, f.name)}" for f in fields(caps))
        out.append(Entry(name, be.summary, flags))
    return out


def hosts() -> list[Entry]:
    from hwmodels.graph import PRESET_DIR, presets
    from hwmodels.leo import HOST_PRESETS

    out = []
    for name in presets():
        out.append(Entry(name, f"intra_host: {_head_comment(PRESET_DIR / f'{name}.yaml')}"))
    for name, spec in HOST_PRESETS.items():
        out.append(Entry(name, "datapath (LEO, seed 004 §6.4)", tuple(f"{k}={v!r}" for k, v in spec.items())))
    return out


def _head_comment(path) -> str:
    """The first sentence of a YAML file's leading comment."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    return text.split(". ")[0].split(": ")[0].rstrip(".")


LISTINGS: dict[str, Callable[[], list[Entry]]] = {
    "generators": generators,
    "schedulers": schedulers,
    "backends": backends,
    "hosts": hosts,
}


def listing(kind: str | None = None) -> list[str]:
    """The lines ``railbed list [kind]`` prints (every kind, under headings, when None)."""
    kinds = [kind] if kind else list(KINDS)
    out: list[str] = []
    for k in kinds:
        if not kind:
            out += [""] * bool(out) + [f"{k}:"]
        for entry in LISTINGS[k]():
            out += entry.lines()
    return out
