"""Apply a :class:`~tc_policies.plan.TcPlan` with pyroute2 and read tc counters.

Both functions take an open ``pyroute2.IPRoute`` (bound to the namespace of
the port) and an interface index. No shell, no ``tc`` binary.
"""

from __future__ import annotations

from dataclasses import dataclass

from tc_policies.plan import ETH_P_IP, HtbClass, Qdisc, TcPlan, U32Filter, U32Match


def remove_root(ipr, index: int) -> None:
    """Delete the root qdisc of ``index`` (nothing happens when there is none)."""
    try:
        ipr.tc("del", index=index, handle=0, parent=0xFFFFFFFF)
    except Exception:  # noqa: BLE001 - a fresh veth has no root qdisc to delete
        pass


def apply_plan(ipr, index: int, plan: TcPlan) -> None:
    """Replace the root qdisc of interface ``index`` with ``plan``.

    All or nothing: when the kernel refuses an item (a missing qdisc module),
    the partial configuration is removed and the error re-raised.
    """
    remove_root(ipr, index)
    try:
        _add_items(ipr, index, plan)
    except Exception:
        remove_root(ipr, index)
        raise


def _add_items(ipr, index: int, plan: TcPlan) -> None:
    for it in plan.items:
        if isinstance(it, Qdisc):
            kwargs = dict(it.params)
            if it.kind == "htb":
                kwargs["default"] = kwargs.get("default", 0)
            if it.parent is not None:
                kwargs["parent"] = it.parent
            ipr.tc("add", it.kind, index, it.handle, **kwargs)
        elif isinstance(it, HtbClass):
            ipr.tc(
                "add-class",
                "htb",
                index,
                it.classid,
                parent=it.parent,
                rate=it.rate,
                ceil=it.ceil,
                burst=it.burst,
                cburst=it.cburst,
                quantum=it.quantum,
                prio=it.prio,
            )
        elif isinstance(it, (U32Match, U32Filter)):
            keys = it.keys if isinstance(it, U32Match) else (it.key,)
            ipr.tc(
                "add-filter",
                "u32",
                index,
                parent=it.parent,
                prio=it.prio,
                protocol=it.protocol if isinstance(it, U32Match) else ETH_P_IP,
                target=it.target,
                keys=[f"0x{v:08x}/0x{m:08x}+{o}" for v, m, o in keys],
            )


@dataclass(frozen=True)
class ClassCounters:
    classid: int
    bytes: int
    packets: int
    drops: int
    backlog: int = 0  # packets queued in the class at the time of reading


@dataclass(frozen=True)
class PortCounters:
    """Counters of a port's root qdisc (bytes on the wire, headers included)."""

    bytes: int
    packets: int
    drops: int
    overlimits: int
    classes: dict[int, ClassCounters]
    backlog: int = 0  # packets queued at the port at the time of reading


def _qlen(msg) -> int:
    stats2 = msg.get_attr("TCA_STATS2")
    queue = stats2.get_attr("TCA_STATS_QUEUE") if stats2 else None
    return int(queue["qlen"]) if queue else 0


def _basic(msg) -> tuple[int, int, int, int]:
    stats2 = msg.get_attr("TCA_STATS2")
    basic = stats2.get_attr("TCA_STATS_BASIC") if stats2 else None
    queue = stats2.get_attr("TCA_STATS_QUEUE") if stats2 else None
    stats = msg.get_attr("TCA_STATS")
    b = basic["bytes"] if basic else (stats["bytes"] if stats else 0)
    p = basic["packets"] if basic else (stats["packets"] if stats else 0)
    d = queue["drops"] if queue else (stats["drops"] if stats else 0)
    o = queue["overlimits"] if queue else (stats["overlimits"] if stats else 0)
    return b, p, d, o


def read_counters(ipr, index: int) -> PortCounters:
    """Root qdisc counters plus per-HTB-class counters (and prio bands' leaf drops)."""
    total = (0, 0, 0, 0)
    leaf_drops = 0
    backlog = 0
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == 0xFFFFFFFF:
            total = _basic(msg)
        else:
            leaf_drops += _basic(msg)[2]
            backlog += _qlen(msg)
    classes = {}
    for msg in ipr.get_classes(index=index):
        b, p, d, _ = _basic(msg)
        classes[msg["handle"]] = ClassCounters(msg["handle"], b, p, d, _qlen(msg))
    return PortCounters(total[0], total[1], max(total[2], leaf_drops), total[3], classes, backlog)
