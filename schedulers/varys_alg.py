"""Varys's inter-coflow scheduling: Smallest-Effective-Bottleneck-First order with MADD rates.

Source: M. Chowdhury, Y. Zhong, I. Stoica, "Efficient Coflow Scheduling with Varys", SIGCOMM
2014, §5 (CCT minimisation: the SEBF ordering heuristic and the MADD allocation). The paper's own
text beyond its abstract was not readable here; the definitions below follow the public
implementations by its first author, which are the paper's algorithm in code:

* CoflowSim (github.com/coflow/coflowsim), ``CoflowSimulator.calcAlphaOnline`` and
  ``updateRatesDynamicAlphaOneJob`` (the simulator of the paper's trace-driven evaluation);
* Varys (github.com/coflow/varys), ``scheduler/SEBFScheduler.scala`` and
  ``OrderingBasedScheduler.scala``.

The fabric is a non-blocking switch whose ports are the machines' links: each has an uplink (it
sends) and a downlink (it receives) of known capacity; only ports constrain a flow (Varys §2's
model; in railbed a port is a NIC, ``(server, nic)``, its rate the NIC's).

:func:`bottleneck` (the effective bottleneck Gamma of a coflow): the largest, over the ports its
flows use, of the coflow's remaining bits through the port over the port's remaining capacity
(``calcAlphaOnline``: ``max(max_i send_i * 8 / sFree_i, max_j recv_j * 8 / rFree_j)``); infinite
when a port it needs has nothing left.

:func:`sebf_order`: coflows by Gamma computed on whole port capacities, smallest first (SEBF).
CoflowSim sorts by a static alpha fixed at arrival; Varys recomputes it at every schedule; the
paper's online version re-sorts as coflows arrive and finish. Here Gamma is recomputed from the
remaining bytes whenever the rates are (the online reading); ties by arrival, then id.

:func:`madd_rates` (Minimum Allocation for Desired Duration): in SEBF order, each coflow's Gamma
against what earlier coflows left; each of its flows gets its remaining bits over Gamma (all its
flows then end together, at the bottleneck's pace), clipped to what is left at its two ports
(CoflowSim's clip); the coflow's rates are taken from its ports. A coflow with an infinite Gamma
gets nothing in this pass. Then work conservation: what is left at the ports is given out flow by
flow, coflows in SEBF order (Varys's ``OrderingBasedScheduler`` step 2A; CoflowSim backfills in
arrival order instead: with no deadlines its EDF sort is an arrival sort). Where the sources are
silent: flows within a coflow are backfilled in their given order; a flow left with no rate gets
``floor`` times its slower port (a cap must be positive; :data:`railbed.dispatch.HOLD_FRACTION`
turns such a cap into a hold on the packet backends).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

Port = Hashable


@dataclass(frozen=True)
class CoflowFlow:
    """One flow of a coflow as the algorithm sees it: its ports and remaining bits."""

    id: str
    up: Port  # the sender's port (its uplink carries the flow)
    down: Port  # the receiver's port (its downlink carries the flow)
    bits: float


def bottleneck(flows: Sequence[CoflowFlow], up_free: Mapping[Port, float], down_free: Mapping[Port, float]) -> float:
    """Gamma: the time the coflow's most loaded port needs for its remaining bits at the
    capacity left there (module docstring); 0 for a coflow with nothing left, inf when a port it
    needs has no capacity left."""
    send: dict[Port, float] = {}
    recv: dict[Port, float] = {}
    for f in flows:
        send[f.up] = send.get(f.up, 0.0) + f.bits
        recv[f.down] = recv.get(f.down, 0.0) + f.bits
    gamma = 0.0
    for load, free in ((send, up_free), (recv, down_free)):
        for port, bits in load.items():
            if bits <= 0:
                continue
            if free[port] <= 0:
                return math.inf
            gamma = max(gamma, bits / free[port])
    return gamma


def sebf_order(
    coflows: Mapping[str, Sequence[CoflowFlow]],
    up_cap: Mapping[Port, float],
    down_cap: Mapping[Port, float],
    arrival: Mapping[str, float] | None = None,
) -> list[str]:
    """Coflow ids, smallest effective bottleneck (on whole capacities) first; ties by
    ``arrival`` (0 when not given), then id."""
    arrival = arrival or {}
    return sorted(coflows, key=lambda c: (bottleneck(coflows[c], up_cap, down_cap), arrival.get(c, 0.0), c))


def madd_rates(
    order: Sequence[str],
    coflows: Mapping[str, Sequence[CoflowFlow]],
    up_cap: Mapping[Port, float],
    down_cap: Mapping[Port, float],
    floor: float = 1e-6,
) -> dict[str, float]:
    """Flow id -> rate (bit/s): MADD per coflow in ``order``, then work conservation in the same
    order, then the ``floor`` for flows left without a rate (module docstring)."""
    up, down = dict(up_cap), dict(down_cap)
    rate: dict[str, float] = {}
    for c in order:
        gamma = bottleneck(coflows[c], up, down)
        for f in coflows[c]:
            r = 0.0 if math.isinf(gamma) or gamma <= 0 else f.bits / gamma
            rate[f.id] = min(r, up[f.up], down[f.down])
        for f in coflows[c]:  # taken from its ports only after the whole coflow's Gamma was used
            up[f.up] = max(0.0, up[f.up] - rate[f.id])
            down[f.down] = max(0.0, down[f.down] - rate[f.id])
    for c in order:
        for f in coflows[c]:
            extra = min(up[f.up], down[f.down])
            if extra > 0:
                rate[f.id] += extra
                up[f.up] -= extra
                down[f.down] -= extra
    for c in order:
        for f in coflows[c]:
            rate[f.id] = max(rate[f.id], floor * min(up_cap[f.up], down_cap[f.down]))
    return rate


def sebf_madd(
    coflows: Mapping[str, Sequence[CoflowFlow]],
    up_cap: Mapping[Port, float],
    down_cap: Mapping[Port, float],
    arrival: Mapping[str, float] | None = None,
    floor: float = 1e-6,
) -> dict[str, float]:
    """Varys's rates for the active coflows: :func:`madd_rates` in :func:`sebf_order`."""
    return madd_rates(sebf_order(coflows, up_cap, down_cap, arrival), coflows, up_cap, down_cap, floor)
