"""The checks of a scheduler's :class:`~railbed.scheduler.Split` and the byte shares of its
sub-flows, for the :class:`~railbed.dispatch.Dispatcher` (and the compact engine, which checks
its gates' splits the same way).

A split replaces held flows (originals) by sub-flows; per original, the sub-flows listed under
it (or naming it in ``carries``) must carry its bytes from its source to its destination
(:func:`check_conservation`), a copy may serve several originals of one source or of one
destination only (:func:`check_copies`), ids must be new, endpoints known, DSCPs and caps valid,
and the dependencies among sub-flows acyclic (:func:`check_acyclic`).
"""

from __future__ import annotations

from collections.abc import Mapping

from railbed.actions import SchedulerError, check_dscp, check_rate
from railbed.job import Flow, Item
from railbed.results import ItemRecord
from railbed.scheduler import Split, SubFlow


def check_split(
    split: Split, offered: str, held: set[str], items: Mapping[str, Item], endpoints, done, name: str
) -> set[str]:
    """Validate a :class:`Split` (see its docstring) that scheduler ``name`` answered when
    ``offered`` was offered, with ``held`` the held items, ``items`` the run's items (sub-flows
    made so far included), ``endpoints`` the job's and ``done`` the finished ids; return the
    originals it replaces."""
    who = f"{name}: split of {offered}"
    if not isinstance(split.parts, Mapping) or offered not in split.parts:
        raise SchedulerError(f"{who}: its parts must include the offered flow")
    new_ids: set[str] = set()
    ends: dict[str, list[tuple[str, str, int]]] = {orig: [] for orig in split.parts}
    carried_by: list[tuple[SubFlow, dict[str, int]]] = []
    for orig, subs in split.parts.items():
        item = items.get(orig)
        if orig not in held or not isinstance(item, Flow):
            raise SchedulerError(f"{who}: {orig!r} is not a ready, held flow")
        if item.options:
            raise SchedulerError(f"{who}: {orig} offers path options; a flow with options cannot be split")
        for sub in subs:
            check_sub(sub, who, new_ids, items, endpoints, name)
            src, dst, _ = sub_ends(sub, item)
            carried_by.append((sub, shares_of(sub, orig, split, who)))
            for carried, share in carried_by[-1][1].items():
                ends[carried].append((src, dst, share))
    for orig, carried_ends in ends.items():
        if not carried_ends:
            raise SchedulerError(f"{who}: {orig} gets no sub-flows: none listed under it or carrying it")
        check_conservation(items[orig], carried_ends, who)
    for sub, shares in carried_by:
        check_copies(sub, shares, items, who)
    for subs in split.parts.values():
        for sub in subs:
            for d in sub.deps:
                if d not in new_ids and d not in done:
                    raise SchedulerError(f"{who}: sub-flow {sub.id} depends on {d!r}: not in the split, not done")
    check_acyclic(split, who)
    return set(split.parts)


def check_sub(sub: SubFlow, who: str, new_ids: set[str], items: Mapping[str, Item], endpoints, name: str) -> None:
    """One sub-flow: a :class:`SubFlow` with a new id (added to ``new_ids``), a byte count, known
    endpoints, a valid DSCP and cap."""
    if not isinstance(sub, SubFlow):
        raise SchedulerError(f"{who}: {sub!r} is not a SubFlow")
    if not isinstance(sub.id, str) or "/" in sub.id or sub.id in items or sub.id in new_ids:
        raise SchedulerError(f"{who}: sub-flow id {sub.id!r} is not new in the run (or contains '/')")
    new_ids.add(sub.id)
    if isinstance(sub.size, bool) or not isinstance(sub.size, int) or sub.size < 0:
        raise SchedulerError(f"{who}: sub-flow {sub.id} size {sub.size!r} is not a byte count")
    for end in (sub.src, sub.dst):
        if end is not None and end not in endpoints:
            raise SchedulerError(f"{who}: sub-flow {sub.id} names unknown endpoint {end!r}")
    check_dscp(sub.dscp, sub.id, name)
    check_rate(sub.rate, sub.id, name)


def check_copies(sub: SubFlow, shares: dict[str, int], items: Mapping[str, Item], who: str) -> None:
    """One copy serves the originals of one source (multicast) or of one destination (a
    reduction: gradients summed at a relay); others need bytes of their own. So the largest
    share per source, summed, or per destination, summed, fits in the sub-flow's size."""
    need = min(copies(shares, items, "src"), copies(shares, items, "dst"))
    if need > sub.size:
        raise SchedulerError(f"{who}: sub-flow {sub.id} carries at least {need} distinct bytes in {sub.size}")


def copies(shares: dict[str, int], items: Mapping[str, Item], end: str) -> int:
    """The bytes ``shares`` need when one copy serves the originals of one ``end`` (src or dst)."""
    largest: dict[str, int] = {}
    for carried, share in shares.items():
        key = getattr(items[carried], end)
        largest[key] = max(largest.get(key, 0), share)
    return sum(largest.values())


def sub_ends(sub: SubFlow, orig: Flow) -> tuple[str, str, int]:
    """A sub-flow's source, destination (its original's where it names none) and size."""
    return (sub.src or orig.src, sub.dst or orig.dst, sub.size)


def shares_of(sub: SubFlow, listed_under: str, split: Split, who: str) -> dict[str, int]:
    """{original: bytes of it in ``sub``}: its whole size for the original it is listed under, unless
    ``carries`` names the originals it serves (a multicast hop)."""
    if not sub.carries:
        return {listed_under: sub.size}
    shares: dict[str, int] = {}
    for entry in sub.carries:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {entry!r}, not (original id, bytes)")
        orig, share = entry
        if orig not in split.parts or orig in shares:
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {orig!r}: not an original of the split, or twice")
        if isinstance(share, bool) or not isinstance(share, int) or not 0 <= share <= sub.size:
            raise SchedulerError(f"{who}: sub-flow {sub.id} carries {share!r} bytes of {orig}, not in 0..{sub.size}")
        shares[orig] = share
    return shares


def share_received(share: int, rec: ItemRecord) -> int:
    """The bytes of an original's ``share`` that a sub-flow delivered: all of them when it delivered
    its size, else in proportion (a hop that lost bytes cannot count whole for a smaller share)."""
    received = rec.received or 0
    return share if received >= rec.size else share * received // rec.size


def check_conservation(orig: Flow, ends: list[tuple[str, str, int]], who: str) -> None:
    """The sub-flows carry ``orig.size`` bytes out of its source, into its destination, and relays forward all."""
    net: dict[str, int] = {}
    for src, dst, size in ends:
        if src == dst:
            raise SchedulerError(f"{who}: a sub-flow of {orig.id} goes from {src} to itself")
        net[src] = net.get(src, 0) - size
        net[dst] = net.get(dst, 0) + size
    want = {orig.src: -(orig.size or 0), orig.dst: orig.size or 0}
    for ep in [orig.src, orig.dst, *sorted(set(net) - set(want))]:
        if net.get(ep, 0) != want.get(ep, 0):
            raise SchedulerError(
                f"{who}: the sub-flows of {orig.id} leave {ep} with {net.get(ep, 0):+d} bytes, "
                f"expected {want.get(ep, 0):+d} (sizes must carry {orig.size} bytes from {orig.src} to {orig.dst})"
            )


def check_acyclic(split: Split, who: str) -> None:
    """The sub-flows' dependencies among themselves form no cycle (:class:`SchedulerError` naming one)."""
    deps = {sub.id: [d for d in sub.deps] for subs in split.parts.values() for sub in subs}
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        stack = [(node, iter(deps.get(node, ())))]
        state[node] = 1
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[cur] = 2
                stack.pop()
            elif nxt in deps and state.get(nxt) == 1:
                raise SchedulerError(f"{who}: sub-flow dependencies form a cycle through {nxt}")
            elif nxt in deps and nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))

    for node in deps:
        if node not in state:
            visit(node)
