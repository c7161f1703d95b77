"""Reading user files safely: every YAML and JSON input of railbed comes through here.

A cluster, scenario or job file is untrusted text. Whatever it holds, reading
it ends either in plain data (dicts, lists, strings, numbers, booleans,
None) or in one :class:`SpecError` naming the file, in bounded time and
memory:

* **size**: a file larger than its cap (:data:`MAX_YAML_BYTES`,
  :data:`MAX_JSON_BYTES`) is refused after reading at most cap + 1 bytes;
  character and block devices (``/dev/zero``) are refused without reading;
* **binary**: bytes that are not UTF-8, or a NUL byte, are refused with the
  offset of the first bad byte;
* **aliases**: YAML anchors and aliases share one object per anchor, so a
  500-byte "billion laughs" file loads instantly but expands to 10^9 values
  the moment anything walks it (an error message, a dump). After loading,
  the expanded size is counted, visiting each distinct object once; beyond
  :data:`MAX_VALUES` values, or if an alias contains itself, the file is
  refused;
* **depth**: nesting deeper than :data:`MAX_DEPTH` is refused (the parsers
  recurse; Python's recursion limit would otherwise end in a traceback of
  thousands of lines);
* **numbers**: YAML 1.1 reads ``1e12`` (an exponent without a decimal point)
  as a string; railbed's loader reads it as the number 1e12, as YAML 1.2
  and JSON do. Out-of-range dates and integers of thousands of digits are
  refused.

:func:`describe` is the one way a value from a file enters an error
message: cut to a few dozen characters, with its type, never walking more
than a few levels of it.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import stat
from pathlib import Path

import yaml

from railbed.errors import SpecError

MAX_YAML_BYTES = 256 << 10  # a cluster or scenario file: the largest example is < 2 KB; PyYAML reads ~75 KB/s
MAX_JSON_BYTES = 1 << 30  # a saved job: the 8192-GPU benchmark job is a few hundred MB
MAX_DEPTH = 64
MAX_VALUES = 1_000_000  # expanded values of a YAML file (aliases counted as often as they are used)
MAX_KEY_CHARS = 40


# ------------------------------------------------------------------ reading
def read_text(path: str | Path, limit: int, field: str) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes), or SpecError naming ``field``."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise SpecError(field, f"{describe(str(path))} is a directory, not a file")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise SpecError(field, f"{describe(str(path))} is a device, not a file")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise SpecError(field, f"cannot read {describe(str(path))}: {exc.strerror}") from None
    if len(data) > limit:
        raise SpecError(field, f"{describe(str(path))} is larger than {limit} bytes")
    return decode(data, field)


def decode(data: bytes, field: str) -> str:
    """UTF-8 text without NUL bytes, or SpecError saying where the first bad byte is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            field, f"not a text file: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8"
        ) from None
    nul = text.find("\0")
    if nul >= 0:
        raise SpecError(field, f"not a text file: NUL byte at offset {nul}")
    return text


# --------------------------------------------------------------------- YAML
class _TooDeep(Exception):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e12`` as a float (YAML 1.2), not as a string, and stops
    composing at :data:`MAX_DEPTH` levels (PyYAML's composer recurses per level)."""

    _depth = 0

    def compose_node(self, parent, index):  # noqa: D102
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_FLOAT = "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    first: [r for r in resolvers if r[0] != _FLOAT]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text: str, field: str) -> object:
    """Parse YAML text into plain data, bounded (see the module docstring)."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise SpecError(field, f"malformed YAML{where}: {problem}") from None
    except (RecursionError, _TooDeep):
        raise SpecError(field, f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # a date like 2001-13-45, an int of 5000 digits
        raise SpecError(field, f"malformed YAML: a value cannot be read ({describe(str(exc))})") from None
    check_bounds(data, field)
    return data


def load_yaml_file(path: str | Path, field: str) -> object:
    return load_yaml(read_text(path, MAX_YAML_BYTES, field), field)


# --------------------------------------------------------------------- JSON
def load_json(text: str, field: str) -> object:
    """Parse JSON text into plain data; NaN and Infinity are kept (validators refuse them).

    JSON has no aliases and its parser refuses deep nesting itself, so the
    result is not walked (a saved job holds tens of millions of values); the
    loaders bound the free-form parts (a job's ``tags``) with :func:`check_bounds`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(field, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise SpecError(field, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise SpecError(field, f"not valid JSON: {describe(str(exc))}") from None
    return data


def load_json_file(path: str | Path, field: str) -> object:
    return load_json(read_text(path, MAX_JSON_BYTES, field), field)


# ------------------------------------------------------------------ bounds
def _children(value: object) -> list:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return []


def check_bounds(data: object, field: str, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> int:
    """Count ``data``'s values as a walk would meet them (shared objects as often as
    they occur) without walking more than each distinct object once; refuse
    cycles, nesting deeper than ``max_depth`` and more than ``max_values`` values.
    Returns the count."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[object, bool]] = [(data, False)]
    while stack:
        value, children_done = stack.pop()
        key = id(value)
        kids = _children(value)
        if not kids:
            sizes[key], depths[key] = 1, 0
            continue
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            depths[key] = 1 + max(depths[id(k)] for k in kids)
            if depths[key] > max_depth:
                raise SpecError(field, f"nested deeper than {max_depth} levels")
            if sizes[key] > max_values:
                raise SpecError(field, f"expands to more than {max_values} values (YAML aliases?)")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise SpecError(field, "a YAML alias refers to a value that contains it")
        on_path.add(key)
        stack.append((value, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(data)]


# ---------------------------------------------------------------- messages
_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlong = 40
for _attr in ("maxlist", "maxtuple", "maxdict", "maxset", "maxfrozenset", "maxdeque", "maxarray"):
    setattr(_REPR, _attr, 4)
DESCRIBE_CHARS = 60


def describe(value: object, limit: int = DESCRIBE_CHARS) -> str:
    """``value`` for an error message: its repr cut to ``limit`` characters; when
    cut, or for a container, followed by its type and length. Never walks more
    than two levels of ``value``, so an alias bomb costs nothing."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - an int too long to print, a broken __repr__
        text = "..."
    simple = isinstance(value, (str, int, float, bool, type(None)))
    if len(text) <= limit and simple and text == repr_short(value):
        return text
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    kind = type(value).__name__
    try:
        n = len(value)  # type: ignore[arg-type]
        kind += f" of {n} {'char' if isinstance(value, str) else 'item'}{'' if n == 1 else 's'}"
    except TypeError:
        pass
    return f"{text} ({kind})"


def repr_short(value: object) -> str:
    """repr of a scalar, or "" when it would be long (so :func:`describe` marks it as cut)."""
    if isinstance(value, str) and len(value) > DESCRIBE_CHARS:
        return ""
    try:
        return repr(value)
    except ValueError:
        return ""


def key_name(key: object) -> str:
    """A mapping key as part of a field path: a short string as is, anything else described."""
    if isinstance(key, str) and 0 < len(key) <= MAX_KEY_CHARS and key.isprintable() and key.strip() == key:
        return key
    return describe(key, MAX_KEY_CHARS)


def positive(value: object, field: str, allow_zero: bool = False) -> float | None:
    """A scenario's number: finite and positive (``allow_zero``: or 0), as float; None stays None.
    Anything else is a ``SpecError(field)`` saying what was written."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        hint = " (write numbers without quotes: 1e12, 400)" if isinstance(value, str) else ""
        raise SpecError(field, f"expected a finite number, got {describe(value)}{hint}")
    if value < 0 or (value == 0 and not allow_zero):
        raise SpecError(field, f"must be {'>= 0' if allow_zero else 'positive'}, got {describe(value)}")
    return float(value)


def boolean(value: object, field: str) -> bool:
    """A scenario's ``true`` or ``false``; anything else a ``SpecError(field)``."""
    if not isinstance(value, bool):
        raise SpecError(field, f"expected true or false, got {describe(value)}")
    return value


def choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``; anything else a ``SpecError(field)`` listing them."""
    if not isinstance(value, str) or value not in choices:
        raise SpecError(field, f"must be one of {', '.join(choices)}, got {describe(value)}")
    return value
