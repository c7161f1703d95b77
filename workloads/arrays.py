"""A job as columns, for jobs too large to hold as :class:`railbed.job.Job` objects (issue 14).

:class:`ArrayJob` has :class:`~railbed.job.Job`'s ``endpoint``/``task``/``flow``
methods, so a generator written against ``Job`` fills it unchanged
(:func:`workloads.moe.moe_arrays` runs :func:`~workloads.moe.moe_training`'s code
with it): it only has to use the handle ``task``/``flow`` return for
dependencies (an index here, the id in a ``Job``) and to name an item made
later through ``forward(id)``. Each item costs about 80 bytes (the Python ``Job``:
about 830): its kind, endpoints (indices), duration or size, dependencies (a flat
int32 list), its id (UTF-8 in one byte buffer) and, for flows, a *rule class*.

**Rule classes.** A scheduler's :meth:`~railbed.scheduler.Scheduler.rule` reads
a flow's attributes, its source endpoint and whether it crosses servers
(Hermod: the source's layers, Alg. 3's EP coflows between servers); not its
id, size or destination. So the flows are grouped by (coflow type, iteration,
microbatch, layer, tags other than ``ep``, source endpoint, crosses servers),
and the first flow of each group, its *representative*, stands for the group:
:func:`simulator.rules.compact_arrays` places a skeleton job of the endpoints
and the representatives and asks ``rule`` once per group. At 8192 GPUs
(Mixtral-8x22B) that is 966,656 groups for 27 million items. A gated class
(Hermod's EP coflows between servers) is asked again flow by flow, with
each flow's own coflow (``coflow`` column).
``tests/test_compact.py`` checks the result against :func:`~simulator.rules.compact`
of the full ``Job`` on small jobs, item for item.

**ECMP.** A flow between servers keeps the CRC-32 of its id
(:meth:`railbed.topology.Topology.ecmp_spine` hashes the id), computed as it is
made, so the id need not be kept as a Python string.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, islice
from typing import Any

import numpy as np
from numba import njit

from railbed.errors import SpecError
from railbed.job import Flow, Job, Location, batch_tags

TASK_ITEM, FLOW_ITEM = 0, 1


class Ids(Sequence):
    """Item ids in one UTF-8 buffer with offsets: ``ids[k]`` is item ``k``'s id (a ``str``).

    :meth:`extended` adds ids made of an earlier id and a suffix from a small table (split
    sub-flows: their original's id + ``".h<phase>"``) without writing them out: 2 or 4 bytes a
    sub-flow where the text would be about 40 (``tail``: per added id its prefix item, -1 for
    none, and suffix; :meth:`flat` writes them out)."""

    def __init__(self, blob: bytes | bytearray, offsets: np.ndarray, tail=None) -> None:
        self.blob, self.offsets = blob, offsets
        self.tail = tail  # None or (prefix item per added id, suffix index per added id, suffixes as bytes)

    @property
    def base(self) -> int:
        """How many ids are in ``blob``."""
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return self.base + (len(self.tail[0]) if self.tail is not None else 0)

    def __getitem__(self, k):  # type: ignore[override]
        o = self.offsets
        if not isinstance(k, slice) and 0 <= k < len(o) - 1:  # an id in the blob (the common case first)
            return self.blob[o[k] : o[k + 1]].decode()
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        nb = self.base
        if k < nb:
            return self.blob[o[k] : o[k + 1]].decode()
        pre, suf, table = self.tail
        p = int(pre[k - nb])
        return (self[p] if p >= 0 else "") + table[int(suf[k - nb])].decode()

    def __iter__(self) -> Iterator[str]:
        o, blob = self.offsets, self.blob
        for k in range(len(o) - 1):
            yield blob[o[k] : o[k + 1]].decode()
        if self.tail is not None:
            pre, suf, table = self.tail
            table = [t.decode() for t in table]
            for p, s in zip(pre.tolist(), suf.tolist()):
                yield (self[p] if p >= 0 else "") + table[s]

    def __eq__(self, other) -> bool:
        if isinstance(other, Ids):
            a, b = self.flat(), other.flat()
            return bytes(a.blob) == bytes(b.blob) and np.array_equal(a.offsets, b.offsets)
        return isinstance(other, (list, tuple)) and len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def extended(self, prefix: np.ndarray, suffix: np.ndarray, suffixes: Sequence[bytes]) -> Ids:
        """These ids followed by ``len(prefix)`` ids ``self[prefix[x]] + suffixes[suffix[x]]``
        (``prefix[x]`` < 0: the suffix alone), kept as those two columns (int32, and int16
        where the table is short)."""
        pre = np.asarray(prefix)
        if len(pre) and pre.max() >= self.base:
            raise ValueError("an added id's prefix must be one of the ids in the blob")
        table = list(self.tail[2]) if self.tail is not None else []
        at = {t: k for k, t in enumerate(table)}
        remap = np.array([at.setdefault(t, len(at)) for t in suffixes] or [0], np.int64)
        table = list(at)
        sdt = np.int16 if len(table) < 2**15 else np.int32
        pre, suf = pre.astype(np.int32, copy=False), remap.astype(sdt)[np.asarray(suffix)]
        if self.tail is not None:
            pre, suf = np.concatenate([self.tail[0], pre]), np.concatenate([self.tail[1].astype(sdt), suf])
        return Ids(self.blob, self.offsets, (pre, suf, tuple(table)))

    def some(self, ks: np.ndarray) -> list[str]:
        """``[self[k] for k in ks]`` for ids in the blob (``0 <= k < base``), read in one pass."""
        ks = np.asarray(ks, np.int64)
        if len(ks) and not (0 <= ks.min() and ks.max() < self.base):
            raise IndexError("Ids.some reads ids in the blob only")
        blob, o = self.blob, self.offsets
        return [blob[a:b].decode() for a, b in zip(o[ks].tolist(), o[ks + 1].tolist())]

    def flat(self) -> Ids:
        """The same ids all in one buffer (written out with numba)."""
        if self.tail is None:
            return self
        pre, suf, table = self.tail
        t_len = np.array([len(t) for t in table] or [0], np.int64)
        t_off = np.zeros(len(t_len) + 1, np.int64)
        np.cumsum(t_len, out=t_off[1:])
        t_blob = np.frombuffer(b"".join(table) or b"\0", np.uint8)
        o = self.offsets
        lens = np.where(pre >= 0, o[np.maximum(pre, 0) + 1] - o[np.maximum(pre, 0)], 0) + t_len[suf]
        offsets = np.empty(len(o) + len(pre), np.int64)
        offsets[: len(o)] = o
        np.cumsum(lens, out=offsets[len(o) :])
        offsets[len(o) :] += o[-1]
        out = np.empty(int(offsets[-1]), np.uint8)
        base = np.frombuffer(self.blob, np.uint8)
        out[: int(o[-1])] = base[: int(o[-1])]
        _fill_ids(out, offsets[len(o) - 1 :], base, o, pre, suf, t_blob, t_off)
        return Ids(out.tobytes(), offsets)

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.offsets.nbytes + (self.tail[0].nbytes + self.tail[1].nbytes if self.tail else 0)


@njit(cache=True)
def _fill_ids(out, starts, base, offsets, pre, suf, t_blob, t_off):  # pragma: no cover - numba
    """Write added ids (prefix id from ``base``, then suffix from ``t_blob``) at ``out[starts[x]:]``."""
    for x in range(pre.shape[0]):
        w = starts[x]
        p = pre[x]
        if p >= 0:
            for y in range(offsets[p], offsets[p + 1]):
                out[w] = base[y]
                w += 1
        s = suf[x]
        for y in range(t_off[s], t_off[s + 1]):
            out[w] = t_blob[y]
            w += 1


class ArrayJob:
    """See the module docstring. After :meth:`finish`, the columns are numpy arrays:

    ``kind`` (int8: 0 task, 1 flow), ``a`` (int32: a task's endpoint, a flow's source),
    ``b`` (int32: a flow's destination, -1), ``value`` (float64: a task's seconds, a flow's
    bytes), ``rclass`` (int32: a flow's rule class, -1), ``crc`` (uint32: CRC-32 of a
    flow's id where it crosses servers, else 0), ``dep_count`` (int32), ``deps`` (int32,
    each item's dependencies in order, flat), ``iteration`` (int16), ``coflow`` (int32: a
    flow's coflow in ``coflow_names``, -1), ``ids`` (:class:`Ids`); ``endpoints`` (names in
    index order), ``skeleton`` (a :class:`Job` of the endpoints), ``reps`` (per rule class:
    its representative's item index and its Flow fields but id and deps)."""

    def __init__(self, name: str, default_capacity: int = 1) -> None:
        self.name = name
        self.skeleton = Job(name, default_capacity=default_capacity)
        self.endpoint_index: dict[str, int] = {}
        self.endpoints: list[str] = []
        self._server: list[int] = []  # the pin's server, -1 if unpinned
        self.kind = array("b")
        self.a = array("i")
        self.b = array("i")
        self.value = array("d")
        self.rclass = array("i")
        self.crc = array("I")
        self.dep_count = array("i")
        self.deps = array("i")
        self.iteration = array("h")
        self.coflow = array("i")
        self.coflow_names: list[str] = []
        self._coflow_index: dict[str | None, int] = {None: -1}
        self._blob = bytearray()
        self._offsets = array("q", [0])
        self._classes: dict[tuple, int] = {}
        self.reps: list[tuple[int, dict[str, Any]]] = []  # per class: (item, Flow fields other than id/deps)
        self._waiting: dict[str, int] = {}  # id named before it was made -> placeholder number
        self._resolved: list[int] = []  # placeholder -> item (-1: not yet made)
        self.finished = False

    # ------------------------------------------------------ the Job interface
    def endpoint(self, name: str, pin: Location | None = None, role: str | None = None, demands=None) -> str:
        self.skeleton.endpoint(name, pin, role, demands)
        self.endpoint_index[name] = len(self.endpoints)
        self.endpoints.append(name)
        self._server.append(-1 if pin is None else pin.server)
        return name

    def forward(self, item_id: str) -> int:
        """A placeholder (a negative handle) for the item ``item_id`` made later."""
        k = self._waiting.get(item_id)
        if k is None:
            k = self._waiting[item_id] = len(self._resolved)
            self._resolved.append(-1)
        return -1 - k

    def _add(self, item_id: str, deps) -> tuple[int, bytes]:
        h = len(self.kind)
        raw = item_id.encode()
        self._blob += raw
        self._offsets.append(len(self._blob))
        self.dep_count.append(len(deps))
        self.deps.extend(deps)
        if self._waiting:
            k = self._waiting.pop(item_id, None)
            if k is not None:
                self._resolved[k] = h
        return h, raw

    def task(self, id: str, endpoint: str, duration: float, deps=(), **attrs: Any) -> int:
        h, _ = self._add(id, deps)
        self.iteration.append(attrs.get("iteration", 0))
        self.coflow.append(-1)
        self.kind.append(TASK_ITEM)
        self.a.append(self.endpoint_index[endpoint])
        self.b.append(-1)
        self.value.append(float(duration))
        self.rclass.append(-1)
        self.crc.append(0)
        return h

    def flow(
        self, id: str, src: str, dst: str, size: int, deps=(), reveal: str = "upfront", options=(), **attrs: Any
    ) -> int:
        if options:
            raise SpecError(f"items.{id}.options", "an ArrayJob has no path options")
        tags = attrs.pop("tags", None)
        return self.flow_batch([id], [src], [dst], [size], [deps], reveal, tags, **attrs)[0]

    def flow_batch(
        self, ids, srcs, dsts, sizes, deps, reveal: str = "upfront", tags=None, each=None, **attrs: Any
    ) -> list[int]:
        """:meth:`Job.flow_batch <railbed.job.Job.flow_batch>`: flows sharing ``reveal``, ``attrs``
        and ``tags`` (plus their own tags of ``each``), made column by column (27 million flows at
        8192 GPUs: what is shared is looked at once)."""
        n = len(ids)
        h0 = len(self.kind)
        raws = [i.encode() for i in ids]
        ei, server = self.endpoint_index, self._server
        a = [ei[x] for x in srcs]
        b = [ei[x] for x in dsts]
        cross = [server[x] < 0 or server[x] != server[y] for x, y in zip(a, b)]
        sizes = [sizes] * n if isinstance(sizes, int) else sizes
        get = attrs.get
        head = (get("coflow_type"), get("iteration", 0), get("microbatch"), get("layer"), reveal)
        if not each or set(each) == {"ep"}:  # the tags of the class key are the shared ones
            tkey = _tag_key(tags)
            keys = [(head, tkey, x, c) for x, c in zip(a, cross)]
        else:
            keys = [(head, _tag_key(batch_tags(tags, each, k)), a[k], cross[k]) for k in range(n)]
        classes, reps = self._classes, self.reps
        rclass = [classes.get(key) for key in keys]
        for k, c in enumerate(rclass):
            if c is None:
                c = classes.get(keys[k])  # an earlier flow of this batch may have made it
                if c is None:
                    c = classes[keys[k]] = len(reps)
                    fields = dict(attrs, src=srcs[k], dst=dsts[k], size=int(sizes[k]), reveal=reveal)
                    if tags is not None or each:
                        fields["tags"] = batch_tags(tags, each, k) if each else tags
                    reps.append((h0 + k, fields))
                rclass[k] = c
        blob = self._blob
        base = len(blob)
        blob += b"".join(raws)
        self._offsets.extend(islice(accumulate([len(r) for r in raws], initial=base), 1, None))
        self.dep_count.extend([len(d) for d in deps])
        self.deps.extend(chain.from_iterable(deps))
        if self._waiting:
            for k, i in enumerate(ids):
                w = self._waiting.pop(i, None)
                if w is not None:
                    self._resolved[w] = h0 + k
        self.kind.extend(bytes([FLOW_ITEM]) * n)
        self.a.extend(a)
        self.b.extend(b)
        self.value.extend(sizes)
        self.rclass.extend(rclass)
        self.crc.extend([zlib.crc32(r) if x else 0 for r, x in zip(raws, cross)])
        self.iteration.extend([head[1]] * n)
        co = get("coflow")
        ci = self._coflow_index.get(co)
        if ci is None:
            ci = self._coflow_index[co] = len(self.coflow_names)
            self.coflow_names.append(co)
        self.coflow.extend([ci] * n)
        return list(range(h0, h0 + n))

    # ------------------------------------------------------------- columns
    def finish(self) -> ArrayJob:
        """Columns to numpy, placeholders to item indices (a name never made is an error)."""
        if self.finished:
            return self
        if self._waiting:
            raise SpecError(f"items.{next(iter(self._waiting))}", "named as a dependency and never made")
        self._classes.clear()
        for col in _DTYPES:
            setattr(self, col, np.frombuffer(getattr(self, col), dtype=_DTYPES[col]) if len(getattr(self, col)) else
                    np.zeros(0, _DTYPES[col]))  # fmt: skip
        if len(self.deps) and self.deps.min() < 0:
            resolved = np.array(self._resolved, np.int32)
            deps = self.deps.copy()
            neg = deps < 0
            deps[neg] = resolved[-1 - deps[neg]]
            self.deps = deps
        self.ids = Ids(bytes(self._blob), np.frombuffer(self._offsets, np.int64))
        self._blob = bytearray()
        self.finished = True
        return self

    @property
    def items(self) -> int:
        return len(self.kind)

    def rep_flow(self, c: int) -> Flow:
        """Rule class ``c``'s representative as a :class:`Flow` (no dependencies)."""
        h, fields = self.reps[c]
        return Flow(self.ids[h], **fields)

    def nbytes(self) -> int:
        return sum(getattr(self, c).nbytes for c in _DTYPES) + self.ids.nbytes


def _tag_key(tags) -> tuple:
    """A flow's tags as part of its rule class: all but ``ep`` (an EP flow's (sender, receiver)
    pair, read by no rule)."""
    if not tags:
        return ()
    if "ep" in tags:
        return tuple([kv for kv in tags.items() if kv[0] != "ep"])
    return tuple(tags.items())


_DTYPES = dict(
    kind=np.int8,
    a=np.int32,
    b=np.int32,
    value=np.float64,
    rclass=np.int32,
    crc=np.uint32,
    dep_count=np.int32,
    deps=np.int32,
    iteration=np.int16,
    coflow=np.int32,
)


def ids_of(names: Sequence[str]) -> Ids:
    """:class:`Ids` of a list of strings."""
    raw = [n.encode() for n in names]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return Ids(b"".join(raw), offsets)
