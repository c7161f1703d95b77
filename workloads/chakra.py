"""Chakra execution traces (MLCommons; the format ASTRA-sim reads) to railbed jobs and back.

A trace is one file per rank, ``<prefix>.<rank>.et`` (gzipped or not), each a ``GlobalMetadata``
message then ``Node`` messages, length-delimited (read and written with the ``mlc-chakra`` package:
``chakra.schema.protobuf.et_def_pb2`` and ``chakra.src.third_party.utils.protolib``; the extra
``railbed[chakra]``). :func:`import_trace` reads one into a :class:`~railbed.job.Job`:

* ``COMP_NODE`` -> a task on its rank for ``duration_micros``; a node without one (0) takes the
  roofline time ``max(num_ops / peak_flops, tensor_size / mem_bandwidth)`` of its ``num_ops`` and
  ``tensor_size`` attributes (defaults: one H100 SXM GPU, 989 TFLOP/s dense BF16 and 3.35 TB/s of
  HBM3, NVIDIA's datasheet), and 0 s without those; each case is counted in the notes.
* ``COMM_SEND_NODE`` on rank *s* with ``comm_dst`` *d* and ``comm_tag`` *t*, and ``COMM_RECV_NODE``
  on rank *d* with ``comm_src`` *s* and tag *t* -> one flow of ``comm_size`` (else ``tensor_size``)
  bytes; the *k*-th send of (*s*, *d*, *t*) pairs with the *k*-th receive. The flow starts once
  both nodes' dependencies are done (a rendezvous, as NCCL's send/recv), and what depends on either
  node depends on the flow.
* ``COMM_COLL_NODE`` -> the flows of the chosen algorithm (:mod:`workloads.collectives`) over the
  ranks of its process group: ``pg_name`` looked up in ``groups`` (a mapping of group name -> ranks),
  all ranks when the node has no ``pg_name`` or no groups are given; the *k*-th collective node of a
  group on each member rank is one collective. ``comm_type`` picks the operation (ALL_REDUCE,
  ALL_GATHER, REDUCE_SCATTER and REDUCE_SCATTER_BLOCK, ALL_TO_ALL, BROADCAST from rank 0 of the
  group; BARRIER: no flows, every member waits for all members' dependencies); ``comm_size`` is the
  nccl-tests size of the collective (the source is silent on whether it is per rank or in all; this
  reading is nccl-tests' and ASTRA-sim's system layer's). Its flows form one coflow named after the
  node (``<name>#<rank>.<node id>``), tagged by :func:`workloads.collectives.collective_tags` (so a run
  reports its algbw and busbw).
* ``ctrl_deps`` and ``data_deps`` -> dependencies (both alike); ``comm_priority`` -> the flows'
  ``dscp`` tag (0..63; ``tag-priority`` reads it).
* ``METADATA_NODE``, ``MEM_LOAD_NODE``, ``MEM_STORE_NODE`` are not modelled: they take no time, what
  depends on them depends on their dependencies, and they are counted in the notes (once per type).

Ranks are endpoints ``rank<r>`` (or the ``railbed.endpoint`` name :func:`export_trace` wrote),
placed in order (rank *r* on server ``r // gpus_per_server``, GPU and NIC ``r % gpus_per_server``),
by ``placement`` (a list, per rank, of ``[server, gpu, nic]``), or by the pins an exported trace
carries. Items are named by their node's name when it is unique in the trace, else
``r<rank>.n<node id>``. Other node attributes are read by no one and ignored. A missing rank file,
a dependency on a node the rank lacks, a cycle, an unpaired send or receive and disagreeing
collective nodes each end in one :class:`~railbed.errors.SpecError` naming the node.

:func:`export_trace` writes a job as such a trace (one rank per endpoint, in job order): tasks as
COMP nodes (durations rounded to whole microseconds, Chakra's unit), flows as SEND/RECV pairs
tagged by the flow's index, DSCP as ``comm_priority``; a dependency goes to the node of the flow's
side it is on (the sender's, else the receiver's). Coflow ids, iterations and other attributes have
no place in Chakra's schema and are not written.
"""

from __future__ import annotations

import gzip
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railbed.errors import SpecError
from railbed.job import Flow, Job, Location, Task
from workloads.collectives import ALGORITHMS, DEFINED, add_collective

PEAK_FLOPS = 989e12  # H100 SXM dense BF16, FLOP/s (NVIDIA H100 datasheet)
MEM_BANDWIDTH = 3.35e12  # H100 SXM HBM3, bytes/s
UNMODELLED = {"METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE"}
COLLECTIVES = {
    "ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather", "REDUCE_SCATTER": "reduce-scatter",
    "REDUCE_SCATTER_BLOCK": "reduce-scatter", "ALL_TO_ALL": "all-to-all", "BROADCAST": "broadcast",
}  # fmt: skip
META = "railbed."  # GlobalMetadata attributes export_trace writes (endpoint name and pin)


def _pb():
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError:
        raise SpecError("job.chakra", "reading Chakra traces needs mlc-chakra: pip install 'railbed[chakra]'") from None
    return et_def_pb2, protolib


# ------------------------------------------------------------------ reading
def rank_files(prefix: str | Path, field: str = "job.chakra") -> list[Path]:
    """``<prefix>.0.et``, ``<prefix>.1.et``, ... (``.et.gz`` too), ranks 0..n-1 without a gap."""
    prefix = Path(prefix)
    found: dict[int, Path] = {}
    for path in prefix.parent.glob(f"{prefix.name}.*.et*"):
        rank = path.name[len(prefix.name) + 1 :].split(".")[0]
        if rank.isdigit() and path.name.endswith((".et", ".et.gz")):
            found[int(rank)] = path
    if not found:
        raise SpecError(field, f"no rank files {prefix}.<rank>.et")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise SpecError(field, f"no file {prefix}.{missing[0]}.et (ranks 0..{max(found)} otherwise present)")
    return [found[r] for r in range(len(found))]


def read_rank(path: Path, field: str = "job.chakra") -> tuple[Any, list[Any]]:
    """(GlobalMetadata, nodes) of one rank file, gzipped or not."""
    pb, protolib = _pb()
    from google.protobuf.message import DecodeError

    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    meta, nodes = pb.GlobalMetadata(), []
    with gzip.open(path, "rb") if gz else open(path, "rb") as f:
        try:
            if not protolib.decodeMessage(f, meta):
                raise SpecError(field, f"{path}: empty, or not a Chakra trace")
            node = pb.Node()
            while protolib.decodeMessage(f, node):
                nodes.append(node)
                node = pb.Node()
        except DecodeError as exc:
            raise SpecError(field, f"{path}: not a Chakra trace ({exc})") from None
    return meta, nodes


@dataclass
class _Node:
    rank: int
    id: int
    name: str
    type: str
    deps: list[int]
    duration: float  # s (0: none given)
    attrs: dict[str, Any]

    @property
    def where(self) -> str:
        return f"rank {self.rank} node {self.id} ({self.name or self.type})"


def _attr(a: Any) -> Any:
    kind = a.WhichOneof("value")
    value = getattr(a, kind) if kind else None
    return list(value.values) if hasattr(value, "values") else value


def _nodes(pb: Any, rank: int, raw: list[Any], field: str) -> dict[int, _Node]:
    out: dict[int, _Node] = {}
    for n in raw:
        node = _Node(rank, n.id, n.name, pb.NodeType.Name(n.type), [*n.ctrl_deps, *n.data_deps],
                     n.duration_micros * 1e-6, {a.name: _attr(a) for a in n.attr})  # fmt: skip
        if n.id in out:
            raise SpecError(field, f"{node.where}: node id used twice in rank {rank}'s trace")
        out[n.id] = node
    for node in out.values():
        for d in node.deps:
            if d not in out:
                raise SpecError(field, f"{node.where}: depends on node {d}, which rank {rank}'s trace lacks")
    _acyclic(out, field)
    return out


def _acyclic(nodes: dict[int, _Node], field: str) -> None:
    """Kahn's algorithm; a node left over is on (or after) a cycle: name one on it."""
    indeg = {i: len(set(n.deps)) for i, n in nodes.items()}
    users = defaultdict(list)
    for i, n in nodes.items():
        for d in set(n.deps):
            users[d].append(i)
    todo = [i for i, k in indeg.items() if k == 0]
    while todo:
        for u in users[todo.pop()]:
            indeg[u] -= 1
            if indeg[u] == 0:
                todo.append(u)
    left = {i for i, k in indeg.items() if k}
    if left:
        i = min(left)
        seen = set()
        while i not in seen:  # walk back along dependencies that are left over until one repeats
            seen.add(i)
            i = min(d for d in nodes[i].deps if d in left)
        raise SpecError(field, f"{nodes[i].where}: a dependency cycle through it")


# ---------------------------------------------------------------- importing
@dataclass
class Options:
    """How a trace becomes a job (module docstring)."""

    algorithm: str = "ring"
    chunks: int = 1
    gpus_per_server: int = 1
    placement: Sequence[Sequence[int]] | None = None
    groups: Mapping[str, Sequence[int]] | None = None
    peak_flops: float = PEAK_FLOPS
    mem_bandwidth: float = MEM_BANDWIDTH
    name: str | None = None


@dataclass
class _State:
    job: Job
    opts: Options
    field: str
    ranks: list[dict[int, _Node]]
    names: list[str]  # rank -> endpoint
    done: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # (rank, node) -> items
    notes: Counter = field(default_factory=Counter)
    unique: set[str] = field(default_factory=set)


def import_trace(prefix: str | Path, opts: Options | None = None, field: str = "job.chakra") -> tuple[Job, list[str]]:
    """The job of the trace at ``prefix`` and notes on what was not modelled or was estimated."""
    opts = opts or Options()
    pb, _ = _pb()
    metas, ranks = [], []
    for r, path in enumerate(rank_files(prefix, field)):
        meta, raw = read_rank(path, field)
        metas.append({a.name[len(META) :]: _attr(a) for a in meta.attr if a.name.startswith(META)})
        ranks.append(_nodes(pb, r, raw, field))
    n = len(ranks)
    if opts.algorithm not in ALGORITHMS:
        raise SpecError("algorithm", f"unknown algorithm {opts.algorithm!r} (known: {', '.join(ALGORITHMS)})")
    job = Job(opts.name or Path(prefix).name)
    names = [str(m.get("endpoint") or f"rank{r}") for r, m in enumerate(metas)]
    for r, name in enumerate(names):
        job.endpoint(name, _pin(r, metas[r], opts, field))
    counts = Counter(nd.name for nodes in ranks for nd in nodes.values() if nd.type in ("COMP_NODE", "COMM_SEND_NODE"))
    st = _State(job, opts, field, ranks, names, unique={k for k, v in counts.items() if v == 1 and k})
    _build(st)
    notes = [f"{count} {kind} not modelled (no time; their dependents wait on their dependencies)"
             for kind, count in sorted(st.notes.items()) if kind in UNMODELLED]  # fmt: skip
    notes += [f"{count} {kind}" for kind, count in sorted(st.notes.items()) if kind not in UNMODELLED]
    return job.validate(), [f"chakra: {n} ranks, {len(job.items)} items; " + "; ".join(notes or ["all modelled"])]


def _pin(r: int, meta: dict, opts: Options, field: str) -> Location:
    if opts.placement is not None:
        if r >= len(opts.placement):
            raise SpecError(f"{field}.placement", f"rank {r} has no entry ({len(opts.placement)} given)")
        row = opts.placement[r]
        if len(row) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row):
            raise SpecError(f"{field}.placement[{r}]", f"expected [server, gpu, nic], got {row!r}")
        return Location(row[0], f"gpu{row[1]}", row[2])
    if "server" in meta:
        return Location(int(meta["server"]), str(meta.get("device", "gpu0")), int(meta.get("nic", 0)))
    g = opts.gpus_per_server
    return Location(r // g, f"gpu{r % g}", r % g)


def _item_id(st: _State, node: _Node) -> str:
    name = node.name
    if name in st.unique and name.isprintable() and name not in st.job.items:
        return name
    return f"r{node.rank}.n{node.id}"


def _after(st: _State, node: _Node) -> list[str]:
    out: list[str] = []
    for d in node.deps:
        out += [x for x in st.done[(node.rank, d)] if x not in out]
    return out


def _ready(st: _State, node: _Node) -> bool:
    return all((node.rank, d) in st.done for d in node.deps)


def _build(st: _State) -> None:
    """Add items in dependency order across ranks: a node once its rank's dependencies are done, a
    send/recv pair once both are ready, a collective once every member's node is (a pass that adds
    nothing while nodes remain is a trace whose ranks wait on each other forever: named)."""
    pending = [list(nodes.values()) for nodes in st.ranks]
    sends: dict[tuple, list[_Node]] = defaultdict(list)
    recvs: dict[tuple, list[_Node]] = defaultdict(list)
    colls: dict[str, dict[int, list[_Node]]] = defaultdict(lambda: defaultdict(list))
    for nodes in st.ranks:
        for nd in nodes.values():
            if nd.type == "COMM_SEND_NODE":
                sends[(nd.rank, _int(nd, "comm_dst", st), _tag(nd))].append(nd)
            elif nd.type == "COMM_RECV_NODE":
                recvs[(_int(nd, "comm_src", st), nd.rank, _tag(nd))].append(nd)
            elif nd.type == "COMM_COLL_NODE":
                colls[str(nd.attrs.get("pg_name") or "")][nd.rank].append(nd)
    partner = _pairs(st, sends, recvs)
    instance = _instances(st, colls)
    while any(pending):
        progress = False
        for r in range(len(pending)):
            left = []
            for nd in pending[r]:
                if (r, nd.id) in st.done:
                    continue
                if _try(st, nd, partner, instance):
                    progress = True
                else:
                    left.append(nd)
            pending[r] = left
        if not progress and any(pending):
            stuck = next(nd for nodes in pending for nd in nodes)
            raise SpecError(st.field, f"{stuck.where}: waits forever (its partner or group members depend on it)")


def _try(st: _State, nd: _Node, partner: dict, instance: dict) -> bool:
    """Add ``nd``'s items if it (and its partner or group) can go now."""
    if not _ready(st, nd):
        return False
    key = (nd.rank, nd.id)
    if nd.type == "COMP_NODE":
        tid = _item_id(st, nd)
        st.job.task(tid, st.names[nd.rank], _duration(st, nd), _after(st, nd))
        st.done[key] = [tid]
    elif nd.type in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
        other = partner[key]
        if not _ready(st, other):
            return False
        send, recv = (nd, other) if nd.type == "COMM_SEND_NODE" else (other, nd)
        fid = _item_id(st, send)
        deps = _after(st, send) + [x for x in _after(st, recv) if x not in _after(st, send)]
        st.job.flow(fid, st.names[send.rank], st.names[recv.rank], _size(st, send), deps, **_priority(st, send))
        st.done[(send.rank, send.id)] = st.done[(recv.rank, recv.id)] = [fid]
    elif nd.type == "COMM_COLL_NODE":
        members = instance[key]
        if not all(_ready(st, m) for m in members):
            return False
        _collective(st, members)
    else:
        st.notes[nd.type if nd.type in UNMODELLED else f"{nd.type} (unknown type) not modelled"] += 1
        st.done[key] = _after(st, nd)
    return True


def _collective(st: _State, members: list[_Node]) -> None:
    first = members[0]
    kind = _comm_type(st, first)
    ranks = [st.names[m.rank] for m in members]
    after = {st.names[m.rank]: _after(st, m) for m in members}
    if kind == "BARRIER":
        every = [x for items in after.values() for x in items]
        for m in members:
            st.done[(m.rank, m.id)] = list(dict.fromkeys(every))
        return
    op, opts = COLLECTIVES[kind], st.opts
    name = f"{first.name or kind}#{first.rank}.{first.id}"
    algorithm = opts.algorithm if op in DEFINED[opts.algorithm] else "direct"
    if algorithm != opts.algorithm:
        st.notes[f"{op} by direct ({opts.algorithm} has none)"] += 1
    local = opts.gpus_per_server if algorithm == "hierarchical" else 1
    tags = _priority(st, first).get("tags", {})
    ends = add_collective(
        st.job, op, ranks, _size(st, first), algorithm, after=after, prefix=name, chunks=_chunks(opts, algorithm, op),
        local=local, tag=True, coflow=name, coflow_type="COLL", tags=tags,
    )  # fmt: skip
    for m in members:
        st.done[(m.rank, m.id)] = ends[st.names[m.rank]]


def _chunks(opts: Options, algorithm: str, op: str) -> int:
    return opts.chunks if algorithm == "tree" or (algorithm, op) == ("ring", "broadcast") else 1


def _pairs(st: _State, sends: dict, recvs: dict) -> dict[tuple[int, int], _Node]:
    """(rank, node) -> its partner: the k-th send of (src, dst, tag) with the k-th receive."""
    out = {}
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            lone = s[len(r)] if len(s) > len(r) else r[len(s)]
            what = "send to" if lone.type == "COMM_SEND_NODE" else "receive from"
            peer = key[1] if lone.type == "COMM_SEND_NODE" else key[0]
            raise SpecError(st.field, f"{lone.where}: no matching {'receive' if 'send' in what else 'send'} "
                            f"for its {what} rank {peer} (tag {key[2]})")  # fmt: skip
        for a, b in zip(s, r):
            if _size(st, a) != _size(st, b):
                raise SpecError(st.field, f"{b.where}: receives {_size(st, b)} bytes, its send has {_size(st, a)}")
            out[(a.rank, a.id)], out[(b.rank, b.id)] = b, a
    return out


def _instances(st: _State, colls: dict) -> dict[tuple[int, int], list[_Node]]:
    """(rank, node) -> the member nodes of its collective (the k-th of its group on each rank)."""
    out = {}
    n = len(st.ranks)
    for pg, per_rank in colls.items():
        members = _group(st, pg, per_rank, n)
        counts = {r: len(per_rank.get(r, [])) for r in members}
        if len(set(counts.values())) > 1:
            r = min(counts, key=lambda x: (counts[x], x))
            other = max(counts, key=counts.get)
            raise SpecError(st.field, f"rank {r}: {counts[r]} collectives of group {pg or '(all)'}, rank {other} has "
                            f"{counts[other]}")  # fmt: skip
        for k in range(counts[members[0]]):
            group = [per_rank[r][k] for r in members]
            head = group[0]
            for m in group[1:]:
                if (_comm_type(st, m), _size(st, m)) != (_comm_type(st, head), _size(st, head)):
                    raise SpecError(st.field, f"{m.where}: {_comm_type(st, m)} of {_size(st, m)} bytes, but "
                                    f"{head.where} (the same collective) is {_comm_type(st, head)} of "
                                    f"{_size(st, head)}")  # fmt: skip
            for m in group:
                out[(m.rank, m.id)] = group
    return out


def _group(st: _State, pg: str, per_rank: dict, n: int) -> list[int]:
    if not pg or st.opts.groups is None:
        members = list(range(n))
    elif pg not in st.opts.groups:
        node = next(iter(per_rank.values()))[0]
        raise SpecError(st.field, f"{node.where}: process group {pg!r} is not in the groups given")
    else:
        members = sorted(int(r) for r in st.opts.groups[pg])
    for r, nodes in per_rank.items():
        if r not in members:
            raise SpecError(st.field, f"{nodes[0].where}: rank {r} is not in its process group {pg!r}")
    return members


def _int(nd: _Node, key: str, st: _State) -> int:
    value = nd.attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= len(st.ranks):
        raise SpecError(st.field, f"{nd.where}: {key} {value!r} is not a rank of this trace (0..{len(st.ranks) - 1})")
    return value


def _tag(nd: _Node) -> int:
    return int(nd.attrs.get("comm_tag") or 0)


def _size(st: _State, nd: _Node) -> int:
    value = nd.attrs.get("comm_size", nd.attrs.get("tensor_size"))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(st.field, f"{nd.where}: expected comm_size (or tensor_size) in bytes, got {value!r}")
    return value


def _comm_type(st: _State, nd: _Node) -> str:
    pb, _ = _pb()
    value = nd.attrs.get("comm_type")
    try:
        kind = pb.CollectiveCommType.Name(value)
    except (ValueError, TypeError):
        raise SpecError(st.field, f"{nd.where}: comm_type {value!r} is not a Chakra collective") from None
    if kind not in COLLECTIVES and kind != "BARRIER":
        raise SpecError(st.field, f"{nd.where}: {kind} is not modelled (known: {', '.join([*COLLECTIVES, 'BARRIER'])})")
    return kind


def _priority(st: _State, nd: _Node) -> dict[str, Any]:
    value = nd.attrs.get("comm_priority")
    if value is None:
        return {}
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 63:
        raise SpecError(st.field, f"{nd.where}: comm_priority {value!r} is not a DSCP (0..63)")
    return {"tags": {"dscp": value}}


def _duration(st: _State, nd: _Node) -> float:
    if nd.duration > 0:
        return nd.duration
    ops, size = nd.attrs.get("num_ops"), nd.attrs.get("tensor_size")
    if ops is None and size is None:
        st.notes["COMP_NODE without duration, num_ops or tensor_size: 0 s"] += 1
        return 0.0
    st.notes["COMP_NODE timed by the roofline (num_ops, tensor_size)"] += 1
    return max((ops or 0) / st.opts.peak_flops, (size or 0) / st.opts.mem_bandwidth)


# ---------------------------------------------------------------- exporting
def export_trace(job: Job, prefix: str | Path) -> list[Path]:
    """Write ``job`` as ``<prefix>.<rank>.et``, one rank per endpoint (module docstring)."""
    pb, protolib = _pb()
    ranks = {name: r for r, name in enumerate(job.endpoints)}
    nodes: list[list[Any]] = [[] for _ in ranks]
    index: dict[tuple[str, int], int] = {}  # (item, rank) -> node id on that rank
    order = job.topological_order()
    for k, iid in enumerate(order):
        item = job.items[iid]
        if isinstance(item, Task):
            _node(pb, nodes, index, ranks[item.endpoint], item, "COMP_NODE", duration=item.duration)
        else:
            s, d = ranks[item.src], ranks[item.dst]
            if s == d:
                raise SpecError(f"items.{iid}", "a flow from an endpoint to itself has no send/recv pair in Chakra")
            common = {"comm_tag": k, "comm_size": int(item.size or 0), **_dscp_attr(item)}
            _node(pb, nodes, index, s, item, "COMM_SEND_NODE", comm_dst=d, **common)
            _node(pb, nodes, index, d, item, "COMM_RECV_NODE", comm_src=s, **common)
    for iid in order:
        _deps(job, job.items[iid], ranks, nodes, index)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, r in ranks.items():
        path = prefix.parent / f"{prefix.name}.{r}.et"
        meta = pb.GlobalMetadata(version="0.0.4", attr=_meta(pb, name, job.endpoints[name].pin))
        with open(path, "wb") as f:
            protolib.encodeMessage(f, meta)
            for node in nodes[r]:
                protolib.encodeMessage(f, node)
        paths.append(path)
    return paths


def _dscp_attr(item: Flow) -> dict[str, int]:
    dscp = item.tags.get("dscp")
    return {"comm_priority": int(dscp)} if isinstance(dscp, int) and not isinstance(dscp, bool) else {}


def _node(pb, nodes, index, rank: int, item, kind: str, duration: float = 0.0, **attrs: int) -> None:
    node = pb.Node(id=len(nodes[rank]), name=item.id, type=pb.NodeType.Value(kind))
    node.duration_micros = round(duration * 1e6)
    for key, value in attrs.items():
        node.attr.append(pb.AttributeProto(name=key, int64_val=value))
    index[(item.id, rank)] = node.id
    nodes[rank].append(node)


def _deps(job: Job, item, ranks: dict[str, int], nodes, index) -> None:
    """A dependency goes to the node of the side it is on: the task's rank, else the flow's sender's
    rank, else its receiver's; one on neither side has no place in a per-rank trace."""
    sides = [ranks[item.endpoint]] if isinstance(item, Task) else [ranks[item.src], ranks[item.dst]]
    for dep in item.deps:
        other = job.items[dep]
        on = {ranks[other.endpoint]} if isinstance(other, Task) else {ranks[other.src], ranks[other.dst]}
        side = next((r for r in sides if r in on), None)
        if side is None:
            raise SpecError(f"items.{item.id}.deps", f"{dep} is on neither side of {item.id}: Chakra has no "
                            "dependency across ranks but through a send/recv")  # fmt: skip
        nodes[side][index[(item.id, side)]].ctrl_deps.append(index[(dep, side)])


def _meta(pb, name: str, pin: Location | None) -> list[Any]:
    out = [pb.AttributeProto(name=f"{META}endpoint", string_val=name)]
    if pin is not None:
        out += [pb.AttributeProto(name=f"{META}server", int64_val=pin.server),
                pb.AttributeProto(name=f"{META}device", string_val=pin.device),
                pb.AttributeProto(name=f"{META}nic", int64_val=pin.nic)]  # fmt: skip
    return out


def scenario_job(value: Mapping[str, Any], base: Path, echo=None) -> Job:
    """``job: {chakra: PREFIX, algorithm, chunks, gpus_per_server, placement, groups, peak_flops,
    mem_bandwidth}`` of a scenario (``PREFIX``, and ``placement`` and ``groups`` when they are file
    names, relative to the scenario file); the notes go to ``echo``."""
    from workloads import check_type

    known = {"chakra", "algorithm", "chunks", "gpus_per_server", "placement", "groups", "peak_flops", "mem_bandwidth"}
    for key in value:
        if key not in known:
            raise SpecError(f"job.{key}", f"unknown key (known: {', '.join(sorted(known))})")
    prefix = value["chakra"]
    if not isinstance(prefix, str) or not prefix:
        raise SpecError("job.chakra", "expected a path prefix (<prefix>.<rank>.et)")
    hints = {"algorithm": str, "chunks": int, "gpus_per_server": int, "placement": list[list[int]],
             "groups": dict[str, list[int]], "peak_flops": float, "mem_bandwidth": float}  # fmt: skip
    value = {k: _file(v, base, f"job.{k}") if k in ("placement", "groups") else v for k, v in value.items()}
    args = {k: check_type(v, hints[k], f"job.{k}") for k, v in value.items() if k != "chakra"}
    for k in ("chunks", "gpus_per_server", "peak_flops", "mem_bandwidth"):
        if k in args and args[k] <= 0:
            raise SpecError(f"job.{k}", f"must be positive, got {args[k]}")
    try:
        job, notes = import_trace(base / prefix, Options(**args), "job.chakra")
    except SpecError as exc:
        if exc.field in ("algorithm", "chunks", "local", "ranks", "across"):
            field = {"local": "gpus_per_server", "ranks": "algorithm", "across": "algorithm"}.get(exc.field, exc.field)
            raise SpecError(f"job.{field}", exc.message) from None
        raise
    for line in notes:
        (echo or print)(line)
    return job


def _file(value: Any, base: Path, field: str) -> Any:
    """A YAML/JSON file's content when ``value`` names one, else ``value``."""
    if not isinstance(value, str):
        return value
    from railbed.safeload import load_yaml_file

    return load_yaml_file(base / value, field)
