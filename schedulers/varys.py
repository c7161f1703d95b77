"""Varys's SEBF with MADD rates (SIGCOMM 2014, §5) as a scheduler: :mod:`schedulers.varys_alg`.

Every flow starts when it is ready (a trace's flows at their release); at every change of the
active flows the scheduler groups them by coflow (the ``coflow`` attribute; a flow without one
is a coflow of its own), orders the coflows by their effective bottleneck on the remaining
bytes and caps every flow at its MADD rate plus its share of the work-conserving backfill
(``backfill``: ``paper``, §5's proportional one, or ``greedy``, Varys's code's). Rates are
recomputed at coflow arrivals and departures (``reschedule: coflow``, as Varys reschedules; a
coflow's flows released in one instant arrive together: :meth:`Sebf.place` counts them) or, with
``reschedule: flow``, also when a flow ends inside a coflow. On the emulator a coflow's release
waits end at slightly different real times: its first flows run uncapped until the last starts. A
port is a NIC: the sender's NIC is the flow's uplink, the receiver's its downlink, each at the
NIC's rate; the fabric is assumed not to constrain (Varys's non-blocking model: on an
oversubscribed fabric the caps still hold, the network may give less). Rates are wire bit/s:
a flow's remaining bits are the wire bits of its remaining payload.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow
from railbed.scheduler import Decision, RunView, Scheduler
from railbed.units import wire_bytes
from schedulers.varys_alg import BACKFILLS, CoflowFlow, sebf_madd


class Sebf(Scheduler):
    """Smallest-Effective-Bottleneck-First with MADD rates (Varys, SIGCOMM'14 §5)."""

    name = "sebf"

    def __init__(self, backfill: str = "paper", reschedule: str = "coflow") -> None:
        if backfill not in BACKFILLS:
            raise SpecError("backfill", f"expected one of {', '.join(BACKFILLS)}, got {backfill!r:.40}")
        if reschedule not in ("coflow", "flow"):
            raise SpecError("reschedule", f"expected coflow or flow, got {reschedule!r:.40}")
        self.reschedule = reschedule  # re-rate on coflow arrivals/departures (Varys), or on every flow's end too
        self.backfill = backfill  # work conservation: §5's proportional one, or Varys's code's greedy one
        self._known: set[str] = set()  # the active flows at the last call
        self._key: dict[str, str] = {}  # their coflows
        self._live: dict[str, int] = {}  # coflow -> its active flows
        self._waiting: list[Flow] = []  # started flows not yet rated (the rest of their coflow is due)
        self._due: dict[tuple[str, float], int] = {}  # (coflow, release) -> its flows not yet started
        self._seen: set[str] = set()  # flows counted off _due

    def on_ready(self, item, view):
        return Decision()  # flows start at once; on_flows_changed caps them before they move

    def place(self, job, cluster):
        """The default placement; counts each coflow's flows released together (same ``at``, no
        dependencies): a trace's coflow arrives as one event, not one per flow."""
        self._due = {}
        for f in job.flows:
            if not f.deps:
                group = (coflow_of(f), f.at or 0.0)
                self._due[group] = self._due.get(group, 0) + 1
        return super().place(job, cluster)

    def on_flows_changed(self, view: RunView):
        """Re-rate every active flow when a coflow arrived (all its flows released together have
        started) or departed, or another flow started (Varys reschedules on coflow arrivals and
        departures; CoflowSim's ``afterJobAdmission``/``afterJobDeparture``); a flow that ends
        inside a coflow that goes on changes nothing (``reschedule: flow``: it re-rates too, so what
        it freed is given out at once)."""
        if not self.due(view):
            return {}
        return sebf_madd(*self.active_coflows(view), self.backfill)

    def due(self, view: RunView) -> bool:
        """Whether the coflows are to be re-rated now (the rule above); keeps the counts it needs."""
        new, gone, changed = self._changes(view)
        if not new and not changed and not (gone and self.reschedule == "flow"):
            return False
        for flow in new:
            group = (coflow_of(flow), flow.at or 0.0)
            if not flow.deps and group in self._due and flow.id not in self._seen:
                self._seen.add(flow.id)
                self._due[group] -= 1
        self._waiting.extend(new)
        if any(self._due.get((coflow_of(f), f.at or 0.0), 0) > 0 for f in self._waiting):
            return False  # more of a coflow are released in this instant: rate them all at once
        self._waiting = []
        return True

    @staticmethod
    def active_coflows(view: RunView) -> tuple[dict[str, list[CoflowFlow]], dict, dict, dict[str, float]]:
        """The active flows by coflow (remaining wire bits, sender's NIC up, receiver's down), the
        NICs' rates (bit/s) up and down, and each coflow's arrival (its first flow's ready time)."""
        coflows: dict[str, list[CoflowFlow]] = {}
        arrival: dict[str, float] = {}
        up_cap: dict = {}
        down_cap: dict = {}
        servers = view.cluster.servers
        for fid, f in view.active.items():
            up, down = (f.src.server, f.src.nic), (f.dst.server, f.dst.nic)
            up_cap[up] = float(servers[up[0]].nic_rates[up[1]])
            down_cap[down] = float(servers[down[0]].nic_rates[down[1]])
            key = coflow_of(f.flow)
            coflows.setdefault(key, []).append(CoflowFlow(fid, up, down, 8.0 * wire_bytes(f.remaining or 0)))
            arrival[key] = min(arrival.get(key, f.started), view.ready_at.get(fid, f.started))
        return coflows, up_cap, down_cap, arrival

    def _changes(self, view: RunView) -> tuple[list[Flow], list[str], bool]:
        """Flows started and ended since the last call, and whether a coflow arrived or departed
        (counts of active flows per coflow, kept across calls: the active set is diffed in C)."""
        active = view.active.keys()
        new = [view.active[i].flow for i in active - self._known]
        gone = list(self._known - active)
        changed = False
        for flow in new:
            key = self._key[flow.id] = coflow_of(flow)
            changed = changed or key not in self._live
            self._live[key] = self._live.get(key, 0) + 1
        for fid in gone:
            key = self._key.pop(fid)
            self._live[key] -= 1
            if not self._live[key]:
                del self._live[key]
                changed = True
        self._known = set(active)
        return new, gone, changed

    def check(self, job, cluster):
        for f in job.flows:
            if f.reveal == "hidden":  # Varys is clairvoyant: MADD needs every flow's remaining bytes
                raise SpecError(f"items.{f.id}.reveal", "sebf needs flow sizes (Varys is clairvoyant), not 'hidden'")

    def rule(self, flow, placement, cluster):
        return None  # rates follow the active set: not a pure function of the flow (no compact engine)


def coflow_of(flow: Flow) -> str:
    """The coflow a flow belongs to: its ``coflow`` attribute, or a coflow of its own."""
    return f"coflow:{flow.coflow}" if flow.coflow is not None else f"flow:{flow.id}"


SCHEDULERS = (Sebf,)
