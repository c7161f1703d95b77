"""Collective algorithms as flows: pure builders that add one collective to a :class:`~railbed.job.Job`.

:func:`add_collective` adds ``operation`` over ``ranks`` (endpoint names, in rank order) with
``algorithm``. Sizes follow nccl-tests (``nbytes`` is its "size"): all-reduce and broadcast move a
buffer of ``nbytes``; all-gather gathers ``nbytes`` in all (``nbytes / n`` from each rank);
reduce-scatter reduces ``nbytes`` and leaves ``nbytes / n`` on each rank; all-to-all sends
``nbytes / n`` from every rank to every rank. Chunk sizes round up to whole bytes.

Algorithms (n ranks; "step": every flow of a step depends on what its sender received and sent in
the sender's previous step, so a rank moves on once its own part of the step is done):

``ring`` (NCCL's ring; Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 2009)
    all-reduce: ``2 (n - 1)`` steps in which rank *i* sends ``nbytes / n`` to rank *i + 1*
    (reduce-scatter, then all-gather); all-gather and reduce-scatter: ``n - 1`` such steps;
    broadcast: a chain from the root, ``nbytes`` cut into ``chunks`` pipelined pieces (chunk *k*
    on hop *j* after chunk *k* on hop *j - 1* and chunk *k - 1* on hop *j*). Not all-to-all.
``tree`` (NCCL's double binary tree, Sanders, Speck and Traeff, "Two-tree algorithms for full
    bandwidth broadcast, reduction and scan", Parallel Computing 2009; NCCL 2.4's blog post)
    two binary trees, each carrying half of ``nbytes``: tree 0 is the binary heap over the ranks,
    tree 1 the heap over them reversed (so most of tree 0's leaves are inner nodes of tree 1; NCCL
    builds its second tree by a shift or mirror, the paper by a mirror: the source is silent on the
    exact shape at a given n, this is the one ``workloads.moe``'s ``dp_algo: tree`` has always used).
    all-reduce: reduce to each tree's root, then broadcast down; broadcast: down only, from the
    root's position (the root is rank 0 of the heap order: ranks rotated so ``root`` is first).
    ``chunks`` pipeline both phases (chunk *k* of a hop after chunk *k - 1* of the same hop).
    Not all-gather, reduce-scatter or all-to-all (NCCL has no tree for them).
``halving-doubling`` (Thakur, Rabenseifner and Gropp, "Optimization of collective communication
    operations in MPICH", IJHPCA 2005) n a power of two. all-gather: recursive doubling, log2 n
    steps, in step *k* ranks *i* and *i xor 2^k* exchange ``nbytes 2^k / n``; reduce-scatter:
    recursive halving, in step *k* partners at distance ``n / 2^(k+1)`` exchange
    ``nbytes / 2^(k+1)``; all-reduce: Rabenseifner's, halving then doubling. Not broadcast or
    all-to-all.
``direct`` (all pairs in one step): all-to-all and all-gather: every rank sends its ``nbytes / n``
    to every other; reduce-scatter: every rank sends block *j* (``nbytes / n``) to rank *j*;
    all-reduce: direct reduce-scatter, then direct all-gather (2 steps); broadcast: the root sends
    ``nbytes`` to each other rank.
``hierarchical`` (Jia et al., "Highly scalable deep learning training system with mixed-precision",
    2018; NCCL's and Horovod's hierarchical all-reduce) ranks grouped by server (``local``
    consecutive ranks per server, local index *g* on rail *g*): all-reduce: reduce-scatter inside
    each server (direct), the ``across`` algorithm over the ``nbytes / local`` block of each rail
    (ranks with the same local index), all-gather inside (direct); reduce-scatter and all-gather:
    the inner and outer halves of it (all-gather: across first, then inside). Not broadcast or
    all-to-all (their hierarchical forms are different algorithms, not the composition above).
    Inside a server the flows are same-server flows: the network does not see them (a server's
    hardware model, if any, times them).

Every combination not listed is refused with a :class:`~railbed.errors.SpecError` naming
``algorithm`` (:data:`DEFINED`). A rank's result is ready after the items :func:`add_collective`
returns for it (the flows it received in its last step that received anything; its ``after``
items if it receives nothing).

The bus bandwidth factors of nccl-tests (``doc/PERFORMANCE.md``) are :func:`bus_factor`.
:func:`collective` is the generator of one collective over ``ranks`` endpoints (microbenchmarks, as
nccl-tests runs them); a run of it reports algbw and busbw (``railbed.metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from railbed.errors import SpecError
from railbed.job import Job, Location

OPERATIONS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")
ALGORITHMS = ("ring", "tree", "halving-doubling", "direct", "hierarchical")
DEFINED: dict[str, tuple[str, ...]] = {
    "ring": ("all-reduce", "all-gather", "reduce-scatter", "broadcast"),
    "tree": ("all-reduce", "broadcast"),
    "halving-doubling": ("all-reduce", "all-gather", "reduce-scatter"),
    "direct": OPERATIONS,
    "hierarchical": ("all-reduce", "all-gather", "reduce-scatter"),
}
PIPELINED = ("tree", "ring-broadcast")  # where ``chunks`` > 1 means something


def bus_factor(operation: str, n: int) -> float:
    """nccl-tests' busbw / algbw: all-reduce 2 (n - 1) / n; all-gather, reduce-scatter and
    all-to-all (n - 1) / n; broadcast 1."""
    if operation == "all-reduce":
        return 2 * (n - 1) / n
    return 1.0 if operation == "broadcast" else (n - 1) / n


def collective_tags(operation: str, algorithm: str, n: int, nbytes: int) -> dict[str, Any]:
    """The tags a collective's flows carry: what it is, its nccl-tests size and its bus factor."""
    return {"collective": operation, "algorithm": algorithm, "bytes": int(nbytes), "ranks": n,
            "bus_factor": bus_factor(operation, n)}  # fmt: skip


Transfer = tuple[int, int, int, str]  # (src index, dst index, bytes, id suffix)


def check(operation: str, algorithm: str, n: int, chunks: int = 1, local: int = 1, across: str = "ring") -> None:
    """Refuse what is not defined (module docstring), naming the argument."""
    if operation not in OPERATIONS:
        raise SpecError("operation", f"unknown collective {operation!r} (known: {', '.join(OPERATIONS)})")
    if algorithm not in ALGORITHMS:
        raise SpecError("algorithm", f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    if operation not in DEFINED[algorithm]:
        raise SpecError("algorithm", f"{algorithm} {operation} is not defined ({algorithm} does: "
                        f"{', '.join(DEFINED[algorithm])})")  # fmt: skip
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise SpecError("chunks", f"expected a whole number >= 1, got {chunks!r}")
    if chunks > 1 and algorithm != "tree" and (algorithm, operation) != ("ring", "broadcast"):
        raise SpecError("chunks", "only tree and ring broadcast pipeline chunks; the others move each step at once")
    if n < 1:
        raise SpecError("ranks", "expected at least one rank")
    if algorithm == "halving-doubling" and n & (n - 1):
        raise SpecError("ranks", f"halving-doubling needs a power of two ranks, got {n}")
    if algorithm == "hierarchical":
        if local < 1 or n % local:
            raise SpecError("local", f"{n} ranks are not whole servers of {local}")
        if across not in ("ring", "halving-doubling", "direct"):
            raise SpecError("across", f"expected ring, halving-doubling or direct across servers, got {across!r}")
        check(operation, across, n // local)


def add_collective(
    job: Any,
    operation: str,
    ranks: Sequence[str],
    nbytes: int,
    algorithm: str = "ring",
    after: Mapping[str, Sequence[str]] | None = None,
    prefix: str = "coll",
    chunks: int = 1,
    local: int = 1,
    across: str = "ring",
    root: int = 0,
    tag: bool = False,
    **attrs: Any,
) -> dict[str, list[str]]:
    """Add the flows of one collective (module docstring) to ``job``; ``after[rank]``: the items a
    rank waits for before its first send; ``attrs``: the flows' attributes (coflow, tags, ...).
    Flow ids start with ``prefix``. ``tag``: the flows' tags also say what the collective is
    (:func:`collective_tags`, read for its algbw and busbw by ``railbed.metrics``). Returns rank ->
    the items after which it holds its result."""
    ranks = list(ranks)
    n = len(ranks)
    check(operation, algorithm, n, chunks, local, across)
    if tag:
        attrs["tags"] = {**attrs.get("tags", {}), **collective_tags(operation, algorithm, n, nbytes)}
    state = {r: list((after or {}).get(r, ())) for r in ranks}
    if n == 1 or nbytes <= 0:
        return state
    if algorithm == "tree":
        return _tree(job, operation, ranks, nbytes, state, prefix, chunks, root, attrs)
    if algorithm == "hierarchical":
        return _hierarchical(job, operation, ranks, nbytes, state, prefix, local, across, attrs)
    if (algorithm, operation) == ("ring", "broadcast"):
        return _ring_broadcast(job, ranks, nbytes, state, prefix, chunks, root, attrs)
    return run_steps(job, ranks, STEPS[algorithm](operation, n, nbytes, root), state, prefix, attrs)


def run_steps(
    job: Any, ranks: list[str], steps: list[list[Transfer]], state: dict[str, list[str]], prefix: str, attrs: dict
) -> dict[str, list[str]]:
    """Add the flows of ``steps``; a flow depends on its sender's ``state`` (what it received and
    sent in its last step; a rank that only received keeps what it had as well). Returns each
    rank's last received flows (its ``state`` if it received none)."""
    ends = {r: list(state[r]) for r in ranks}
    for transfers in steps:
        recv: dict[int, list[str]] = {}
        sent: dict[int, list[str]] = {}
        for src, dst, size, name in transfers:
            fid = job.flow(f"{prefix}.{name}", ranks[src], ranks[dst], size, deps=list(state[ranks[src]]), **attrs)
            recv.setdefault(dst, []).append(fid)
            sent.setdefault(src, []).append(fid)
        for i in set(recv) | set(sent):
            r = ranks[i]
            state[r] = recv.get(i, []) + sent[i] if i in sent else state[r] + recv[i]
            if i in recv:
                ends[r] = list(recv[i])
    return ends


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def ring_steps(operation: str, n: int, nbytes: int, root: int = 0) -> list[list[Transfer]]:
    chunk = _ceil(nbytes, n)
    count = 2 * (n - 1) if operation == "all-reduce" else n - 1
    return [[(i, (i + 1) % n, chunk, f"s{s}.r{i}") for i in range(n)] for s in range(count)]


def halving_doubling_steps(operation: str, n: int, nbytes: int, root: int = 0) -> list[list[Transfer]]:
    logn = n.bit_length() - 1
    halving = [
        [(i, i ^ (n >> (k + 1)), _ceil(nbytes, 2 << k), f"h{k}.r{i}") for i in range(n)] for k in range(logn)
    ]  # fmt: skip
    doubling = [[(i, i ^ (1 << k), _ceil(nbytes << k, n), f"d{k}.r{i}") for i in range(n)] for k in range(logn)]
    return {"reduce-scatter": halving, "all-gather": doubling, "all-reduce": halving + doubling}[operation]


def direct_steps(operation: str, n: int, nbytes: int, root: int = 0) -> list[list[Transfer]]:
    if operation == "broadcast":
        return [[(root, j, nbytes, f"b.r{j}") for j in range(n) if j != root]]
    block = _ceil(nbytes, n)
    pairs = [[(i, j, block, f"{{}}.r{i}.r{j}") for i in range(n) for j in range(n) if i != j]]
    name = {"all-to-all": "a2a", "all-gather": "ag", "reduce-scatter": "rs"}
    if operation == "all-reduce":
        return [[(a, b, s, t.format(k)) for a, b, s, t in pairs[0]] for k in ("rs", "ag")]
    return [[(a, b, s, t.format(name[operation])) for a, b, s, t in pairs[0]]]


STEPS = {"ring": ring_steps, "halving-doubling": halving_doubling_steps, "direct": direct_steps}


def _ring_broadcast(job, ranks, nbytes, state, prefix, chunks, root, attrs) -> dict[str, list[str]]:
    """A chain from ``root`` (rank order rotated), ``chunks`` pipelined pieces (module docstring)."""
    n = len(ranks)
    order = ranks[root:] + ranks[:root]
    size = _ceil(nbytes, chunks)
    last: dict[int, str] = {}  # hop -> the previous chunk's flow on it
    ends = {r: list(state[r]) for r in ranks}
    for k in range(chunks):
        came: list[str] = list(state[order[0]])
        for j in range(n - 1):
            deps = came + ([last[j]] if j in last else []) + (list(state[order[j]]) if j else [])
            fid = job.flow(f"{prefix}.c{k}.h{j}", order[j], order[j + 1], size, deps=deps, **attrs)
            last[j], came = fid, [fid]
            if k == chunks - 1:
                ends[order[j + 1]] = [fid]
    return ends


def _tree(job, operation, ranks, nbytes, state, prefix, chunks, root, attrs) -> dict[str, list[str]]:
    """The double binary tree (module docstring): per tree, chunk and heap position, the flows up
    (all-reduce) then down."""
    n = len(ranks)
    base = ranks[root:] + ranks[:root]
    size = _ceil(_ceil(nbytes, 2), chunks)
    ends: dict[str, list[str]] = {r: [] for r in ranks}
    for t, order in enumerate((base, base[:1] + base[1:][::-1] if operation == "broadcast" else base[::-1])):
        prev_up: dict[int, str] = {}
        prev_down: dict[int, str] = {}
        for k in range(chunks):
            up: dict[int, list[str]] = {i: [] for i in range(n)}
            if operation == "all-reduce":
                for i in reversed(range(1, n)):
                    deps = [*state[order[i]], *up[i], *([prev_up[i]] if i in prev_up else [])]
                    fid = job.flow(f"{prefix}.t{t}.c{k}.up{i}", order[i], order[(i - 1) // 2], size, deps=deps, **attrs)
                    up[(i - 1) // 2].append(fid)
                    prev_up[i] = fid
            down: dict[int, list[str]] = {0: [*state[order[0]], *up[0]]}
            for i in range(1, n):
                deps = [*down[(i - 1) // 2], *([prev_down[i]] if i in prev_down else [])]
                fid = job.flow(f"{prefix}.t{t}.c{k}.down{i}", order[(i - 1) // 2], order[i], size, deps=deps, **attrs)
                down[i], prev_down[i] = [fid], fid
            if k == chunks - 1:
                for i in range(n):
                    ends[order[i]] += down[i]
    return ends


def _hierarchical(job, operation, ranks, nbytes, state, prefix, local, across, attrs) -> dict[str, list[str]]:
    """Inside each server (direct), then ``across`` over each rail, then inside again (module docstring)."""
    servers = len(ranks) // local
    groups = [ranks[s * local : (s + 1) * local] for s in range(servers)]
    rails = [[ranks[s * local + g] for s in range(servers)] for g in range(local)]

    ends = {r: list(state[r]) for r in ranks}

    def phase(op: str, groups_: list[list[str]], steps: Callable[..., list], size: int, tag: str) -> None:
        for s, group in enumerate(groups_):
            got = run_steps(job, group, steps(op, len(group), size), state, f"{prefix}.{tag}{s}", attrs)
            ends.update(got)

    if local > 1 and operation in ("all-reduce", "reduce-scatter"):
        phase("reduce-scatter", groups, direct_steps, nbytes, "rs.s")
    if servers > 1:
        phase(operation, rails, STEPS[across], _ceil(nbytes, local), "x.g")
    if local > 1 and operation in ("all-reduce", "all-gather"):
        phase("all-gather", groups, direct_steps, nbytes, "ag.s")
    return ends


def describe(operation: str, algorithm: str) -> str:
    """One line: what ``algorithm`` does for ``operation`` (for summaries)."""
    return f"{operation} by {algorithm}"


def collective(
    operation: str = "all-reduce",
    size: int = 64 << 20,
    ranks: int = 8,
    algorithm: str = "ring",
    chunks: int = 1,
    gpus_per_server: int = 1,
    across: str = "ring",
    root: int = 0,
    dscp: int | None = None,
) -> Job:
    """One ``operation`` of ``size`` bytes (nccl-tests' size) over ``ranks`` endpoints ``r<i>``, rank
    *i* on server ``i // gpus_per_server``, GPU and NIC ``i % gpus_per_server`` (the rail-optimized
    order); ``across``: the algorithm over servers of ``hierarchical`` (its ``local`` is
    ``gpus_per_server``); ``dscp``: the flows' ``dscp`` tag. One coflow, ``coll``."""
    for name, value, low in (("ranks", ranks, 1), ("gpus_per_server", gpus_per_server, 1), ("root", root, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise SpecError(name, f"expected a whole number >= {low}, got {value!r}")
    if root >= ranks:
        raise SpecError("root", f"rank {root}, but there are {ranks} (0..{ranks - 1})")
    if dscp is not None and not 0 <= dscp <= 63:
        raise SpecError("dscp", f"expected a DSCP in 0..63, got {dscp}")
    if size < 1:
        raise SpecError("size", f"expected at least one byte, got {size}")
    local = gpus_per_server if algorithm == "hierarchical" else 1
    try:
        check(operation, algorithm, ranks, chunks, local, across)
    except SpecError as exc:
        raise SpecError("gpus_per_server" if exc.field == "local" else exc.field, exc.message) from None
    job = Job(f"{operation}-{algorithm}-{ranks}")
    g = gpus_per_server
    names = [job.endpoint(f"r{i}", Location(i // g, f"gpu{i % g}", i % g)) for i in range(ranks)]
    tags = {} if dscp is None else {"dscp": dscp}
    add_collective(job, operation, names, size, algorithm, prefix="coll", chunks=chunks, local=local, across=across,
                   root=root, tag=True, coflow="coll", coflow_type="COLL", tags=tags)  # fmt: skip
    return job.validate()


def item_estimate(operation: str = "all-reduce", ranks: int = 8, algorithm: str = "ring", chunks: int = 1, **_) -> int:
    """An upper bound of :func:`collective`'s flows: the direct all-reduce's 2 n (n - 1), or per chunk
    the ring's 2 n (n - 1) and the tree's 4 n."""
    n = ranks if isinstance(ranks, int) else 0
    c = chunks if isinstance(chunks, int) else 1
    return 2 * n * max(n - 1, 1) * max(c, 1)


__all__ = [
    "ALGORITHMS",
    "DEFINED",
    "OPERATIONS",
    "add_collective",
    "bus_factor",
    "check",
    "collective",
    "collective_tags",
    "run_steps",
]
