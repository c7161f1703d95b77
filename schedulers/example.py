"""The example scheduler of ARCHITECTURE.md (kept identical by a test): every hook in use."""

from __future__ import annotations

from railbed.job import Flow
from railbed.scheduler import HOLD, Decision, Scheduler, default_placement


class SmallFirst(Scheduler):
    """Smaller flows in higher DSCP classes; at most ``limit`` flows per source NIC;
    background flows capped to half a NIC while urgent ones run; the "acc" path if offered."""

    name = "small-first"

    def __init__(self, limit: int = 4) -> None:
        self.limit = limit

    def place(self, job, cluster):
        return default_placement(job, cluster)  # pins, then round-robin over servers

    def on_ready(self, item, view):
        if not isinstance(item, Flow):
            return Decision()  # tasks start at once (and queue for a device slot)
        src = view.location(item.src)
        busy = sum(1 for f in view.active.values() if (f.src.server, f.src.nic) == (src.server, src.nic))
        if busy >= self.limit:
            return HOLD  # offered again after the next event
        cls = 7 if item.size < 1 << 20 else 4 if item.size < 64 << 20 else 0
        return Decision(dscp=cls << 3)

    def on_flows_changed(self, view):
        urgent = any(f.dscp >= 56 for f in view.active.values())
        servers = view.cluster.servers
        return {
            fid: servers[f.src.server].nic_rates[f.src.nic] / 2 if urgent else None
            for fid, f in view.active.items()
            if f.dscp == 0
        }

    def choose_path(self, flow, view):
        names = [o.name for o in flow.options]
        return names.index("acc") if "acc" in names else 0
