"""Varys's inter-coflow scheduling: Smallest-Effective-Bottleneck-First order with MADD rates.

Source: M. Chowdhury, Y. Zhong, I. Stoica, "Efficient Coflow Scheduling with Varys", SIGCOMM
2014, §5 (CCT minimisation: the SEBF ordering heuristic, the MADD allocation, work
conservation). The paper's own text beyond its abstract was not readable here; what follows is
§5 as public code gives it, each point with the code that gives it:

* CoflowSim (github.com/coflow/coflowsim, by the paper's first author, the simulator of its
  trace-driven evaluation), ``CoflowSimulator.calcAlphaOnline`` / ``updateRatesDynamicAlphaOneJob``;
* Varys (github.com/coflow/varys), ``scheduler/SEBFScheduler.scala``, ``OrderingBasedScheduler.scala``;
* Ximulator (github.com/sunnyxhuang/sunflow, ``src/schedulerVarys.cc``), whose
  ``SchedulerVarysPaper`` is "Varys described in the paper" and quotes §5's work conservation:
  "for each active coflow C in P_in, Rem(P_in) is allocated to C's flows in their current r_ij
  ratios, subject to capacity constraints in corresponding P_out".

The fabric is a non-blocking switch whose ports are the machines' links: each has an ingress
side (its uplink: it sends) and an egress side (its downlink: it receives) of known capacity;
only ports constrain a flow (in railbed a port is a NIC, ``(server, nic)``, at the NIC's rate).

:func:`bottleneck` (the effective bottleneck Gamma of a coflow): the largest, over the ports its
flows use, of the coflow's remaining bits through the port over the port's remaining capacity
(``calcAlphaOnline``: ``max(max_i send_i * 8 / sFree_i, max_j recv_j * 8 / rFree_j)``); infinite
when a port it needs has nothing left.

:func:`sebf_order`: coflows by Gamma on whole port capacities, smallest first (SEBF). CoflowSim
sorts by a static alpha fixed at arrival (``SEBFComparator`` on ``Job.alpha``); Varys's
``SEBFScheduler`` and Ximulator's paper version sort on the bottleneck at each schedule. Here
Gamma is recomputed from the remaining bytes whenever rates are (at every coflow arrival and
departure, as Varys reschedules); ties by arrival, then id.

:func:`madd_rates` (Minimum Allocation for Desired Duration): in SEBF order, each coflow's Gamma
against what earlier coflows left; each of its flows gets its remaining bits over Gamma (all its
flows then end together, at the bottleneck's pace; CoflowSim clips to what is left at the flow's
two ports, which only rounding can reach); the coflow's rates are taken from its ports. A coflow
whose Gamma is infinite gets nothing in this pass. Then work conservation, ``backfill``:

* ``"paper"`` (default): per ingress port, what is left there goes to the flows behind it that
  have a MADD rate, in proportion to those rates, each clipped to what is left at its egress
  port (the quoted text; a flow without a MADD rate gets none). Where the text is silent:
  ingress ports are visited in the order their first flow appears in SEBF order, and flows
  behind one port in SEBF order (it decides who meets a full egress port first).
* ``"greedy"``: Varys's and CoflowSim's implementations: flow by flow, coflows in SEBF order
  (Varys's step 2A; CoflowSim visits them in arrival order), each flow takes all that is left at
  both its ports.

A flow left with no rate gets ``floor`` times its slower port (a cap must be positive;
:data:`railbed.dispatch.HOLD_FRACTION` makes such a cap a hold on the packet backends).
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


BACKFILLS = ("paper", "greedy")


def madd_rates(
    order: Sequence[str],
    coflows: Mapping[str, Sequence[CoflowFlow]],
    up_cap: Mapping[Port, float],
    down_cap: Mapping[Port, float],
    backfill: str = "paper",
    floor: float = 1e-6,
) -> dict[str, float]:
    """Flow id -> rate (bit/s): MADD per coflow in ``order``, then work conservation by
    ``backfill``, then the ``floor`` for flows left without a rate (module docstring)."""
    if backfill not in BACKFILLS:
        raise ValueError(f"backfill must be one of {BACKFILLS}, got {backfill!r}")
    up, down = dict(up_cap), dict(down_cap)
    flows = [f for c in order for f in coflows[c]]
    rate: dict[str, float] = {}
    for c in order:
        gamma = bottleneck(coflows[c], up, down)
        for f in coflows[c]:
            r = 0.0 if math.isinf(gamma) or gamma <= 0 else f.bits / gamma
            rate[f.id] = min(r, up[f.up], down[f.down])
        for f in coflows[c]:  # taken from its ports only once the whole coflow's Gamma was used
            up[f.up] = max(0.0, up[f.up] - rate[f.id])
            down[f.down] = max(0.0, down[f.down] - rate[f.id])
    (_backfill_paper if backfill == "paper" else _backfill_greedy)(flows, rate, up, down)
    for f in flows:
        rate[f.id] = max(rate[f.id], floor * min(up_cap[f.up], down_cap[f.down]))
    return rate


def _backfill_paper(flows: list[CoflowFlow], rate: dict, up: dict, down: dict) -> None:
    """§5's work conservation: each ingress port's rest to its flows in their MADD ratios."""
    behind: dict[Port, list[CoflowFlow]] = {}
    for f in flows:
        if rate[f.id] > 0:
            behind.setdefault(f.up, []).append(f)
    for port, mine in behind.items():
        free, total = up[port], sum(rate[f.id] for f in mine)
        for f in mine:
            extra = min(free * rate[f.id] / total, down[f.down])
            if extra > 0:
                rate[f.id] += extra
                up[port] -= extra
                down[f.down] -= extra


def _backfill_greedy(flows: list[CoflowFlow], rate: dict, up: dict, down: dict) -> None:
    """Varys's and CoflowSim's code: flow by flow, all that is left at both its ports."""
    for f in flows:
        extra = min(up[f.up], down[f.down])
        if extra > 0:
            rate[f.id] += extra
            up[f.up] -= extra
            down[f.down] -= extra


def sebf_madd(
    coflows: Mapping[str, Sequence[CoflowFlow]],
    up_cap: Mapping[Port, float],
    down_cap: Mapping[Port, float],
    arrival: Mapping[str, float] | None = None,
    backfill: str = "paper",
    floor: float = 1e-6,
) -> dict[str, float]:
    """Varys's rates for the active coflows: :func:`madd_rates` in :func:`sebf_order`."""
    return madd_rates(sebf_order(coflows, up_cap, down_cap, arrival), coflows, up_cap, down_cap, backfill, floor)
