"""CAGNET's and SANCUS's broadcasts as pipelined rings (seed 001 §4.3.2): the ``cagnet`` scheduler.

A thin class over :mod:`schedulers.cagnet_alg`. The flows of one broadcast
(a ``gnn_cagnet`` coflow tagged ``broadcast``: the root's block to every
other GPU) are held until all are ready (a collective: every GPU enters
it), then replaced in one :class:`~railbed.scheduler.Split` by the ring's
hops, each a multicast sub-flow carrying its piece for every GPU after it
on the chain. Everything else (the all-reduces, already ring steps in the
job; "p2p" sends) starts at once. SANCUS's skipped broadcasts are not in
the job at all (:mod:`workloads.sancus`), so the same scheduler runs CAGNET
and every SCS variant.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow, Job
from railbed.scheduler import HOLD, Decision, RunView, Scheduler, Split, SubFlow
from schedulers.cagnet_alg import ring_broadcast


class Cagnet(Scheduler):
    """Ring broadcasts in ``chunks`` pieces (module docstring)."""

    name = "cagnet"

    def __init__(self, chunks: int = 8) -> None:
        if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= 1024:
            raise SpecError("chunks", f"must be a whole number in 1..1024, got {chunks!r}")
        self.chunks = chunks
        self._job: Job | None = None
        self._members: dict[str, list[str]] = {}

    def on_ready(self, item, view: RunView):
        if not isinstance(item, Flow) or "broadcast" not in item.tags or item.coflow is None:
            return Decision()
        members = self._coflow(view.job, item.coflow)
        held = set(view.held)
        if any(f not in held for f in members):
            return HOLD  # a collective: every GPU enters it
        return self.split([view.job.items[f] for f in members], item.tags["broadcast"])

    def split(self, flows: list[Flow], bcast: dict) -> Split:
        """The ring's hops for the broadcast ``flows`` (root -> each other GPU, equal sizes)."""
        root, p = int(bcast["root"]), int(bcast["gpus"])
        original = {int(f.dst[1:]): f.id for f in flows}
        cid = flows[0].coflow
        hops = ring_broadcast(root, list(range(p)), flows[0].size, self.chunks)
        ids = [f"{cid}.k{h.k}c{h.chunk}" for h in hops]
        parts: dict[str, list[SubFlow]] = {f.id: [] for f in flows}
        for h, sid in zip(hops, ids):
            carries = tuple((original[d], h.size) for d in h.serves)
            sub = SubFlow(sid, h.size, f"w{h.src}", f"w{h.dst}", tuple(ids[d] for d in h.deps), carries=carries)
            parts[carries[0][0]].append(sub)
        return Split(parts)

    def _coflow(self, job: Job, coflow: str) -> list[str]:
        if self._job is not job:
            self._job, self._members = job, {}
            for f in job.flows:
                if f.coflow is not None and "broadcast" in f.tags:
                    self._members.setdefault(f.coflow, []).append(f.id)
        return self._members[coflow]


SCHEDULERS = (Cagnet,)
