"""Writing large JSON files piece by piece: the bytes of ``json.dumps(value, indent=1)``.

``json.dumps`` with an ``indent`` runs the pure-Python encoder, which collects every piece of
the text (a key, a separator, a number: a Python string each) in one list before joining
them: about 5.8 KB per item record of a result, 7.7 KB with the joined text and the records
as dicts. A 2.7-million-item result (Hermod's sub-flows at 128 GPUs) needed 21 GB for that
alone. :func:`write_json` writes the same bytes holding one batch of elements at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

BATCH = 1000  # elements of a large list or mapping encoded together


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
