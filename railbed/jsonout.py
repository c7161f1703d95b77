"""Writing large JSON files piece by piece: the bytes of ``json.dumps(value, indent=1)``.

``json.dumps`` with an ``indent`` runs the pure-Python encoder, which collects every piece of
the text (a key, a separator, a number: a Python string each) in one list before joining
them: about 5.8 KB per item record of a result, 7.7 KB with the joined text and the records
as dicts. A 2.7-million-item result (Hermod's sub-flows at 128 GPUs) needed 21 GB for that
alone. :func:`write_json` writes the same bytes holding one batch of elements at a time.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

BATCH = 1000  # elements of a large list or mapping encoded together
_TOP_KEY = re.compile(rb'\n "((?:[^"\\]|\\.)*)": ')  # a line opening a top-level key at indent 1
_ENTRY = re.compile(rb"\n  (?=[^ \]}])")  # a line opening an element of a top-level value (indent 2; not
# one closing an element: "]" or "}")


class Pairs:
    """A JSON object written from ``(key, value)`` pairs made as :func:`write_json` reaches
    them (a mapping that need not exist: each record's dict is made, written and dropped)."""

    def __init__(self, pairs: Iterable[tuple[Any, Any]]):
        self.pairs = pairs


def write_json(
    path: str | Path, value: Mapping, default: Callable[[Any], Any] | None = None, batch: int = BATCH
) -> None:
    """Write ``json.dumps(value, indent=1, default=default) + "\\n"`` to ``path``, the same
    bytes, without the whole text in memory: each of ``value``'s values is encoded on its
    own, and one that is a list, tuple, mapping, :class:`Pairs` or iterator (written as a
    JSON array) ``batch`` elements at a time. The file is written beside ``path`` and
    renamed over it at the end, so a failure leaves what was there before."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "w", encoding="utf-8") as fp:
            for piece in _pieces(value, default, batch):
                fp.write(piece)
            fp.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _pieces(value: Mapping, default, batch: int) -> Iterator[str]:
    """The text of ``value`` (a mapping at the top level) as ``json.dumps(indent=1)`` gives it."""
    if not value:
        yield "{}"
        return
    for k, (key, v) in enumerate(value.items()):
        yield ("{" if k == 0 else ",") + "\n " + _key(key) + ": "
        if isinstance(v, (Pairs, Mapping, list, tuple, Iterator)):
            yield from _batched(v, 1, default, batch)
        else:
            yield _at(json.dumps(v, indent=1, default=default), 1)
    yield "\n}"


def _batched(value, level: int, default, batch: int) -> Iterator[str]:
    """A list or mapping at nesting ``level``: ``batch`` elements per ``json.dumps``, whose
    brackets are cut off (``"[\\n a,\\n b\\n]"`` -> ``"\\n a,\\n b"``) and lines indented."""
    is_map = isinstance(value, (Pairs, Mapping))
    elements = iter(value.pairs if isinstance(value, Pairs) else value.items() if is_map else value)
    first = True
    while chunk := list(islice(elements, batch)):
        text = json.dumps(dict(chunk) if is_map else chunk, indent=1, default=default)
        yield ("{" if is_map else "[") if first else ","
        yield _at(text[1:-2], level)
        first = False
    if first:  # empty
        yield "{}" if is_map else "[]"
    else:
        yield "\n" + " " * level + ("}" if is_map else "]")


def _key(key: Any) -> str:
    """A mapping key as ``json.dumps`` writes it (a string, or a number, bool or None made one)."""
    return json.dumps(key) if isinstance(key, str) else json.dumps({key: 0})[1:-4]


def _at(text: str, level: int) -> str:
    """``json.dumps(indent=1)``'s text moved ``level`` levels in (JSON strings hold no newline)."""
    return text.replace("\n", "\n" + " " * level) if level else text


def read_keys(path: str | Path, keys: Iterable[str]) -> dict:
    """The top-level ``keys`` of the JSON object in ``path`` (those it has), without decoding the
    rest: in a file written by :func:`write_json` (``json.dumps(indent=1)``) a top-level key is
    the only text that opens a line with one space and a quote (JSON strings hold no newline,
    deeper lines have more spaces), so each wanted value is decoded from its key to the next.
    Reading Hermod's 1024-GPU results took json.loads of 0.5-3 GB each for a few small keys.
    Any other layout is read whole with ``json.load``."""
    wanted = set(keys)
    with open(path, "rb") as fp:
        if fp.read(4) != b'{\n "':  # not indent 1 (indent 2 opens "{\n  "): read it whole
            fp.seek(0)
            whole = json.load(fp)
            return {k: whole[k] for k in wanted if k in whole}
        with mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ) as text:
            found = [(json.loads(b'"' + m.group(1) + b'"'), m.start(), m.end()) for m in _TOP_KEY.finditer(text)]
            out = {}
            for k, (key, _, start) in enumerate(found):
                if key in wanted:
                    end = found[k + 1][1] if k + 1 < len(found) else text.rfind(b"}")
                    out[key] = json.loads(text[start:end].rstrip().rstrip(b","))
            return out


def read_object(path: str | Path, each: Mapping[str, Callable[[Any], Any]], batch: int = BATCH) -> dict:
    """The JSON object in ``path``, the top-level values named in ``each`` (lists or mappings)
    decoded a batch of elements at a time, each element's value passed through ``each[key]`` as it
    is decoded (a mapping keeps its keys): only a batch's parsed form is alive beside what
    ``each`` makes of them, not the whole text and all its parsed elements at once (a result.json of
    2.8 GB: its records as dicts and the text held 17.6 GB for five such files). In a file written by
    :func:`write_json` (indent 1) an element of a top-level value is the only text opening a line with
    two spaces and then neither a space nor a closing bracket (deeper lines have more spaces, an
    element's closing line two and its bracket); the other values are decoded whole
    (:func:`read_keys`' rule). Any other layout is read whole with ``json.load``."""
    with open(path, "rb") as fp:
        if fp.read(4) != b'{\n "':
            fp.seek(0)
            whole = json.load(fp)
            return {k: _each(v, each[k]) if k in each else v for k, v in whole.items()}
        with mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ) as text:
            found = [(json.loads(b'"' + m.group(1) + b'"'), m.start(), m.end()) for m in _TOP_KEY.finditer(text)]
            out = {}
            for k, (key, _, start) in enumerate(found):
                end = found[k + 1][1] if k + 1 < len(found) else text.rfind(b"}")
                fn = each.get(key)
                opening = text[start : start + 1]
                if fn is None or opening not in (b"{", b"["):
                    out[key] = json.loads(text[start:end].rstrip().rstrip(b","))
                    if fn is not None:
                        out[key] = _each(out[key], fn)
                    continue
                out[key] = _elements(text, start, end, opening == b"{", fn, batch)
            return out


def _elements(text, start: int, end: int, is_map: bool, fn: Callable[[Any], Any], batch: int = BATCH) -> dict | list:
    """The elements of the top-level list or mapping whose text is ``text[start:end]``, ``batch`` at a
    time (one ``json.loads`` per batch: per element, the calls cost 15 % more time than reading whole)."""
    starts = [m.end() for m in _ENTRY.finditer(text, start, end)]
    close = text.rfind(b"\n ", start, end)  # its closing line, at indent 1 (none: empty, on one line)
    ends = [s - 3 for s in starts[1:]] + [close]  # an element ends where the next one's line begins
    out: dict | list = {} if is_map else []
    for k in range(0, len(starts), batch):
        e = ends[min(k + batch, len(starts)) - 1]
        chunk = text[starts[k] : e - (text[e - 1 : e] == b",")]  # without the comma before the next batch
        if is_map:
            out.update((key, fn(v)) for key, v in json.loads(b"{" + chunk + b"}").items())
        else:
            out.extend(fn(v) for v in json.loads(b"[" + chunk + b"]"))
    return out


def _each(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: fn(v) for k, v in value.items()}
    return [fn(v) for v in value] if isinstance(value, list) else value
