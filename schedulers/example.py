"""The example scheduler of ARCHITECTURE.md (kept identical by a test): every hook in use."""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow
from railbed.scheduler import Change, Decision, OnFewer, Scheduler, Split, SubFlow, default_placement, hold


class SmallFirst(Scheduler):
    """Small flows in high DSCP classes, demoted once half delivered (looked at every ms); at most ``limit``
    flows per source NIC (held until fewer send there); flows over ``chunk`` bytes sent in chunks
    in turn; background capped to half a NIC while urgent flows run; the "acc" path; completion times."""

    name = "small-first"

    def __init__(self, limit: int = 4, chunk: int = 1 << 30) -> None:
        if limit < 1:
            raise SpecError("limit", f"must be at least 1, got {limit}")
        if chunk < 1 << 20:  # a sub-flow per chunk: smaller ones would flood the run with sub-flows
            raise SpecError("chunk", f"must be at least 1 MiB (1048576 bytes), got {chunk}")
        self.limit, self.chunk = limit, chunk
        self.times, self.jct = {}, {}  # flow id -> completion time (on_done); job -> JCT (several jobs)
        self.look = 0.0  # model time of the next wake-up asked for

    def check(self, job, cluster):  # before anything is built: refuse what it cannot run, naming the field
        for f in job.flows:
            if any(o.name not in ("acc", "cpu") for o in f.options):
                raise SpecError(f"items.{f.id}.options", "small-first knows the paths acc and cpu")

    def place(self, job, cluster):
        return default_placement(job, cluster)  # pins, then round-robin over servers

    def on_ready(self, item, view):
        if not isinstance(item, Flow):
            return Decision()  # tasks start at once (and queue for a device slot)
        if item.size is not None and item.size > self.chunk:  # chunks in turn, each after the last
            n = -(-item.size // self.chunk)
            size = [min(self.chunk, item.size - k * self.chunk) for k in range(n)]
            after = [(f"{item.id}.c{k - 1}",) if k else () for k in range(n)]
            return Split({item.id: [SubFlow(f"{item.id}.c{k}", size[k], deps=after[k]) for k in range(n)]})
        src = view.location(item.src)
        if view.sending.get((src.server, src.nic), 0) >= self.limit:  # active flows from this NIC
            return hold(OnFewer(src.server, src.nic, self.limit))  # woken one at a time as flows there end
        cls = 7 if item.size is not None and item.size < 1 << 20 else 4 if (item.size or 0) < 64 << 20 else 0
        return Decision(dscp=cls << 3)

    def on_flows_changed(self, view):
        urgent = any(f.dscp >= 56 for f in view.active.values())
        look, out = view.now >= self.look, {}  # progress read at most once a ms (microseconds a read)
        for fid, f in view.active.items():
            if f.dscp == 0:
                cap = view.cluster.servers[f.src.server].nic_rates[f.src.nic] / 2 if urgent else None
                if cap != f.rate:  # only what changes
                    out[fid] = cap
            elif look and f.remaining is not None and 2 * f.remaining < f.flow.size:  # half delivered: demote
                out[fid] = Change(dscp=0)
        if look and any(f.dscp for f in view.active.values()):  # one wake-up at a time: look again in 1 ms
            self.look = view.now + 1e-3
            view.wake_at(self.look)
        return out

    def on_done(self, item, record, view):
        if isinstance(item, Flow):
            self.times[item.id] = record.end - record.start

    def choose_path(self, flow, view):
        return next((k for k, o in enumerate(flow.options) if o.name == "acc"), 0)

    def choose_spine(self, flow, src, dst, view):  # a flow between leaves: a spine's index, or None (ECMP)
        return None

    def on_job_arrived(self, job_name, job, view):  # several jobs: seconds to delay its start, or None
        return None

    def on_job_finished(self, job_name, view):
        self.jct[job_name] = view.now - view.jobs[job_name]

    def notes(self):  # lines for the result's notes
        return [f"small-first: {len(self.times)} flows done, at most {self.limit} per NIC at once"]

    def rule(self, flow, placement, cluster):  # None: on_ready counts busy flows and splits (no compact
        return None  # engine); a Rule with a gate would also need gate_split (and gate_split_arrays)
