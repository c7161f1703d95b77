"""SEBF's order without MADD's rates: a probe of which of Varys's two parts takes the MoE room.

Varys (SIGCOMM'14, §5) orders the active coflows by their effective bottleneck (smallest first) and
then gives each flow its MADD rate, the slowest rate at which its coflow still ends at its
bottleneck, backfilling what is left. This scheduler keeps the order and drops the rates: the
coflows' ranks become strict-priority classes (DSCP ``(7 - min(rank, 7)) << 3``, the 8 classes a
switch serves, ``tc_policies.plan``), every flow uncapped, so a coflow shares its ports by max-min
inside its class. Ranks from 7 on share the lowest class (the paper has no such limit: Varys sets
rates, not classes). Re-ranked when :class:`schedulers.varys.Sebf` would re-rate (coflow arrivals
and departures). A scheduler from outside the tree, named in a scenario as
``../schedulers/sebf_order.py:SebfOrder``.
"""

from __future__ import annotations

from railbed.scheduler import Change, RunView
from railbed.units import wire_bytes
from schedulers.varys import Sebf, _coflow_of
from schedulers.varys_alg import CoflowFlow, sebf_order


def classes(order: list[str]) -> dict[str, int]:
    """Coflow -> its DSCP: rank 0 in the highest of 8 strict-priority classes, ranks >= 7 in the lowest."""
    return {c: (7 - min(rank, 7)) << 3 for rank, c in enumerate(order)}


class SebfOrder(Sebf):
    """Varys's SEBF order as strict-priority classes, no rate caps."""

    name = "sebf-order"

    def on_flows_changed(self, view: RunView):
        rated = super().on_flows_changed(view)
        if not rated:
            return {}
        coflows: dict[str, list[CoflowFlow]] = {}
        up_cap: dict = {}
        down_cap: dict = {}
        arrival: dict[str, float] = {}
        servers = view.cluster.servers
        for fid, f in view.active.items():
            up, down = (f.src.server, f.src.nic), (f.dst.server, f.dst.nic)
            up_cap[up] = float(servers[up[0]].nic_rates[up[1]])
            down_cap[down] = float(servers[down[0]].nic_rates[down[1]])
            key = _coflow_of(f.flow)
            coflows.setdefault(key, []).append(CoflowFlow(fid, up, down, 8.0 * wire_bytes(f.remaining or 0)))
            arrival[key] = min(arrival.get(key, f.started), view.ready_at.get(fid, f.started))
        dscp = classes(sebf_order(coflows, up_cap, down_cap, arrival))
        return {fid: Change(rate=None, dscp=dscp[_coflow_of(f.flow)]) for fid, f in view.active.items()}
