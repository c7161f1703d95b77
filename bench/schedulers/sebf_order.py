"""SEBF's order without MADD's rates: a probe of which of Varys's two parts takes the MoE room.

Varys (SIGCOMM'14, §5) orders the active coflows by their effective bottleneck (smallest first) and
then gives each flow its MADD rate, the slowest rate at which its coflow still ends at its
bottleneck, backfilling what is left. This scheduler keeps the order and drops the rates: the
coflows' ranks become strict-priority classes (DSCP ``(7 - min(rank, 7)) << 3``, the 8 classes a
switch serves, ``tc_policies.plan``), every flow uncapped, so a coflow shares its ports by max-min
inside its class. Ranks from 7 on share the lowest class (the paper has no such limit: Varys sets
rates, not classes). Re-ranked when :class:`schedulers.varys.Sebf` would re-rate (coflow arrivals
and departures), by the remaining bytes (``rank: remaining``, Varys's) or by each coflow's
bottleneck over all its flows' whole sizes, from the job and the placement (``rank: size``: one
static order by bottleneck, to tell the re-ranking from the order itself). A scheduler from outside the tree, named in a
scenario as ``../schedulers/sebf_order.py:SebfOrder``.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.scheduler import Change, RunView
from railbed.units import wire_bytes
from schedulers.varys import Sebf, coflow_of
from schedulers.varys_alg import CoflowFlow, bottleneck, sebf_order


def classes(order: list[str]) -> dict[str, int]:
    """Coflow -> its DSCP: rank 0 in the highest of 8 strict-priority classes, ranks >= 7 in the lowest."""
    return {c: (7 - min(rank, 7)) << 3 for rank, c in enumerate(order)}


class SebfOrder(Sebf):
    """Varys's SEBF order as strict-priority classes, no rate caps."""

    name = "sebf-order"

    def __init__(self, rank: str = "remaining") -> None:
        if rank not in ("remaining", "size"):
            raise SpecError("rank", f"expected remaining or size, got {rank!r:.40}")
        super().__init__()
        self.rank = rank
        self._whole: dict[str, float] = {}  # coflow -> its bottleneck (s) over its whole flows

    def place(self, job, cluster):
        placement = super().place(job, cluster)
        coflows: dict[str, list[CoflowFlow]] = {}
        cap: dict = {}
        for f in job.flows:
            src, dst = placement[f.src], placement[f.dst]
            if f.size is None or src.server == dst.server:
                continue
            up, down = ("up", src.server, src.nic), ("down", dst.server, dst.nic)
            cap[up] = float(cluster.servers[src.server].nic_rates[src.nic])
            cap[down] = float(cluster.servers[dst.server].nic_rates[dst.nic])
            coflows.setdefault(coflow_of(f), []).append(CoflowFlow(f.id, up, down, 8.0 * wire_bytes(f.size)))
        self._whole = {c: bottleneck(flows, cap, cap) for c, flows in coflows.items()}
        return placement

    def on_flows_changed(self, view: RunView):
        if not self.due(view):
            return {}
        coflows, up_cap, down_cap, arrival = self.active_coflows(view)
        if self.rank == "remaining":
            order = sebf_order(coflows, up_cap, down_cap, arrival)
        else:
            order = sorted(coflows, key=lambda c: (self._whole.get(c, 0.0), arrival[c], c))
        dscp = classes(order)
        return {fid: Change(rate=None, dscp=dscp[coflow_of(f.flow)]) for fid, f in view.active.items()}
