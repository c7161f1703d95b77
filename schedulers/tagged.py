"""Tag-driven schedulers for experiments and tests (not from a paper).

``TagPriority``: a flow's DSCP and rate cap come from its tags (``dscp``,
``rate`` in model bit/s); everything starts when ready. It is the simplest
"two-class priority scheduler" and lets a job file state priorities
directly, which the cross-checks between backends use.
"""

from __future__ import annotations

from railbed.job import Flow, Item
from railbed.scheduler import Decision, RunView, Scheduler


class TagPriority(Scheduler):
    name = "tag-priority"

    def on_ready(self, item: Item, view: RunView) -> Decision:
        if not isinstance(item, Flow):
            return Decision()
        rate = item.tags.get("rate")
        return Decision(dscp=int(item.tags.get("dscp", 0)), rate=float(rate) if rate is not None else None)
