"""The rules engine's data model: a placed job as columns (:class:`CompactJob`), the kinds of
item, and the column helpers the builder and the gates share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from railbed.errors import SpecError
from railbed.job import Placement
from railbed.units import Framing

TASK, LOCAL, NET = 0, 1, 2  # kinds of item
MAX_HOPS = 4


@dataclass
class CompactJob:
    """A placed job as arrays, item ``i`` being the job's ``i``-th item (``ids[i]``).

    It is :class:`railbed.job.Job` after ``place`` and the scheduler's
    :class:`~railbed.scheduler.Rule` s, with everything the run needs and
    nothing a scheduler reads: names become indices, flows their route and
    wire bits. ``dep_ptr``/``dep_idx`` list each item's dependents (CSR);
    ``missing`` counts its dependencies."""

    name: str
    ids: list[str]
    kind: np.ndarray  # int8: TASK, LOCAL (same-server flow), NET
    device: np.ndarray  # int32: a task's device (-1 for flows); devices numbered in (server, name) order
    duration: np.ndarray  # float64: a task's model seconds
    route: np.ndarray  # int32: a network flow's route (-1 else)
    bits: np.ndarray  # float64: a network flow's wire bits
    prio: np.ndarray  # int8: the class its DSCP gets under the tc policy
    cap: np.ndarray  # float64: its rate cap (inf: none)
    key: np.ndarray  # int64: its Rule's key, bar, queued
    bar: np.ndarray
    queued: np.ndarray  # bool
    nic: np.ndarray  # int32: a flow's source NIC, numbered over the cluster
    dscp: np.ndarray  # int8
    size: np.ndarray  # int64: payload bytes of flows
    missing: np.ndarray  # int32
    dep_ptr: np.ndarray  # int64
    dep_idx: np.ndarray  # int32
    device_cap: np.ndarray  # int32: parallel tasks per device
    route_links: np.ndarray  # int64 [route, hop], -1 past the last hop
    route_hops: np.ndarray  # int64
    route_latency: np.ndarray  # float64
    link_cap: np.ndarray  # float64 per fabric link
    link_names: list[str]
    nics: int
    spine: np.ndarray  # int16: a network flow's ECMP spine (-1: none)
    placement: Placement
    # gated flows (Rule.gate) and their sub-flows, items n_job.. (all four empty without gates)
    gate: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # int32: a gated flow's gate, -1
    gate_size: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # flows per gate
    gate_sub: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # gate g's sub-flows: [g], [g + 1]
    parent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # int32: a sub-flow's original, -1
    children: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # sub-flows per original
    iteration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))  # per item, for results (or empty)
    # for the analysis (railbed/analysis.py): a flow's coflow type (index into types; -1 tasks), its coflow (-1)
    ctype: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    types: list[str] = field(default_factory=list)
    coflow: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    hold_by_class: bool = False  # the scheduler's: Rule holds per (NIC, dscp >> 3), not per NIC
    release: np.ndarray = field(default_factory=lambda: np.zeros(0))  # float64: an item's `at` (0: none; or empty)

    @property
    def items(self) -> int:
        return len(self.kind)

    def nbytes(self) -> int:
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


def route_table(routes: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Links (padded with -1 to ``MAX_HOPS``), hop counts and latencies of fabric routes, one
    row each (one placeholder row when there are none)."""
    nr = max(1, len(routes))
    links, hops, latency = np.full((nr, MAX_HOPS), -1, np.int64), np.zeros(nr, np.int64), np.zeros(nr)
    if not routes:
        return links, hops, latency
    n = np.array([len(rt.links) for rt in routes], np.int64)
    if n.max() > MAX_HOPS:
        raise SpecError("fabric", f"a route of {int(n.max())} hops; the compact engine takes {MAX_HOPS}")
    row = np.repeat(np.arange(len(routes)), n)
    links[row, np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)] = [h for rt in routes for h in rt.links]
    hops[:] = n
    latency[:] = [rt.latency for rt in routes]
    return links, hops, latency


def wire_bits(payload: np.ndarray, framing: Framing) -> np.ndarray:
    """``8 * framing.wire_bytes`` over an array of payloads (>= 0)."""
    if framing.payload_only:
        return 8.0 * payload
    return 8.0 * (payload + (-(-payload // framing.mss)) * (framing.frame - framing.mss))


def padded(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` followed by zeros up to ``n`` (a column of the job's items, for every item)."""
    out = np.zeros(n, values.dtype)
    out[: len(values)] = values
    return out
