"""Tag-driven schedulers for experiments and tests (not from a paper).

``TagPriority``: a flow's DSCP and rate cap come from its tags (``dscp``,
``rate`` in model bit/s); everything starts when ready. It is the simplest
"two-class priority scheduler" and lets a job file state priorities
directly, which the cross-checks between backends use.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow, Item, Job
from railbed.safeload import describe
from railbed.scheduler import Decision, RunView, Scheduler
from railbed.spec import ClusterSpec
from railbed.units import MAX_MODEL_RATE


class TagPriority(Scheduler):
    name = "tag-priority"

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        """Every flow's ``dscp`` tag a whole number in 0..63, every ``rate`` tag a
        positive finite number of bit/s (at most 1 Pbit/s)."""
        for flow in job.flows:
            where = f"items.{flow.id}.tags"
            dscp = flow.tags.get("dscp", 0)
            if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
                raise SpecError(f"{where}.dscp", f"expected a whole-number DSCP in 0..63, got {describe(dscp)}")
            rate = flow.tags.get("rate")
            if rate is None:
                continue
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= MAX_MODEL_RATE:
                raise SpecError(f"{where}.rate", f"expected a rate in bit/s, 0 < rate <= 1e15, got {describe(rate)}")

    def on_ready(self, item: Item, view: RunView) -> Decision:
        if not isinstance(item, Flow):
            return Decision()
        rate = item.tags.get("rate")
        return Decision(dscp=int(item.tags.get("dscp", 0)), rate=float(rate) if rate is not None else None)
