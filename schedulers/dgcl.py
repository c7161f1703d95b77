"""DGCL's planners as schedulers (seed 002): ``dgcl`` (SPST), ``p2p`` (peer-to-peer), ``swap`` (NeuGraph).

Each is a thin class over :mod:`schedulers.dgcl_alg`. A graphAllgather is a
collective: the flows of one coflow (a ``gnn_fullgraph`` exchange, tagged
``graph``) are held until all of them are ready, then replaced in one
:class:`~railbed.scheduler.Split` by the plan's hops: one sub-flow per
(stage, from, to) with the bytes of every GPU pair it serves in its
``carries`` (a tree hop serves several pairs at once), each stage after the
previous one. The plan is computed once per graph and direction and reused
by every layer and epoch (§6: "the same communication tuples are reused for
all GNN layers"); the backward pass runs it reversed.

Where the hops run: a hop between GPUs of one server is a wait of the
server's intra-host model (the hops of a stage start together and share its
links); a hop between servers is a network flow between the servers' NICs
(the job pins every worker on NIC 0, as the paper's servers use one IB NIC).
Its legs inside the servers are not timed, our choice: PCIe (11.13 GB/s) is
faster than IB (6.37 GB/s, Table 1), so the NIC bounds one hop. The paper
enables GPU RDMA only for the GPUs under the NIC's PCIe switch (§7) and
does not say how the others reach the NIC (through host memory, at a cost
not modelled here); SPST's planning topology does include those links.

SPST plans on the communication topology of the workers' GPUs: one
server's intra-host graph, or several joined through their NICs and a
switch (:func:`hwmodels.graph.join`, NIC rate from the cluster). Other
flows (none in ``gnn_fullgraph``) start at once.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Flow, Job
from railbed.scheduler import HOLD, Decision, RunView, Scheduler, Split, SubFlow
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers.dgcl_alg import Hop, p2p_hops, reverse, spst_hops, swap_hops


class GraphAllgather(Scheduler):
    """The collective's hold-then-split; subclasses give the forward plan (:meth:`hops`)."""

    name = "graph-allgather"

    def __init__(self, seed: int = 0) -> None:
        if seed < 0:  # numpy's generators take non-negative seeds
            raise SpecError("seed", f"must be >= 0, got {seed!r}")
        self.seed = seed
        self._members: dict[str, list[str]] = {}
        # the job and cluster the caches are of, held (an id may be reused once a run's objects are freed)
        self._job: Job | None = None
        self._cluster: ClusterSpec | None = None
        self._plans: dict[tuple, list[Hop]] = {}

    def place(self, job: Job, cluster: ClusterSpec):
        """The default placement, and every plan the job will ask for, computed now: before an
        emulated run's clock starts (planned inside ``on_ready``, SPST's first plan held the
        run's controller for 345 ms real, 690 us of model time at k = 500)."""
        placement = super().place(job, cluster)
        view = RunView(job, cluster, Topology(cluster), placement)
        wanted = {
            (tuple(sorted(f.tags["graph"].items())), f.coflow_type == "gradient")
            for f in job.flows
            if "graph" in f.tags and f.coflow is not None
        }  # one per graph and direction, not one per flow
        for graph, backward in wanted:
            self._plan(dict(graph), backward, view)
        return placement

    def on_ready(self, item, view: RunView):
        if not isinstance(item, Flow) or "graph" not in item.tags or item.coflow is None:
            return Decision()
        members = self._coflow(view.job, item.coflow)
        held = set(view.held)
        if any(f not in held for f in members):
            return HOLD  # a collective: every GPU enters it
        return self._split(item, members, view)

    def hops(self, graph: dict, view: RunView) -> list[Hop]:
        raise NotImplementedError

    # ------------------------------------------------------------------
    def _coflow(self, job: Job, coflow: str) -> list[str]:
        if self._job is not job:
            self._job, self._members = job, {}
            for f in job.flows:
                if f.coflow is not None and "graph" in f.tags:
                    self._members.setdefault(f.coflow, []).append(f.id)
        return self._members[coflow]

    def _plan(self, graph: dict, backward: bool, view: RunView) -> list[Hop]:
        if self._cluster is not view.cluster:
            self._cluster, self._plans = view.cluster, {}
        key = (tuple(sorted(graph.items())), tuple(sorted(view.placement.locations.items())), backward)
        if key not in self._plans:
            fwd = (*key[:2], False)
            if fwd not in self._plans:
                self._plans[fwd] = self.hops(graph, view)
            self._plans[key] = reverse(self._plans[fwd]) if backward else self._plans[fwd]
        return self._plans[key]

    def _split(self, item: Flow, members: list[str], view: RunView) -> Split:
        graph = item.tags["graph"]
        hops = self._plan(graph, item.coflow_type == "gradient", view)
        flows = [view.job.items[f] for f in members]
        original = {(int(f.src[1:]), int(f.dst[1:])): f.id for f in flows}
        m, cid = graph["gpus"], item.coflow
        ids = [f"{cid}.k{h.stage}.{self._node(h.src, m)}-{self._node(h.dst, m)}" for h in hops]
        by_stage: dict[int, list[str]] = {}
        for h, i in zip(hops, ids):
            by_stage.setdefault(h.stage, []).append(i)
        parts: dict[str, list[SubFlow]] = {f.id: [] for f in flows}
        for h, i in zip(hops, ids):
            carries = tuple((original[pair], n) for pair, n in sorted(h.shares.items()))
            sub = SubFlow(i, h.size, self._endpoint(h.src, graph, view), self._endpoint(h.dst, graph, view),
                          tuple(by_stage.get(h.stage - 1, ())), carries=carries)  # fmt: skip
            parts[carries[0][0]].append(sub)
        return Split(parts)

    @staticmethod
    def _node(node: int, m: int) -> str:
        return str(node) if node < m else f"m{node - m}"

    @staticmethod
    def _endpoint(node: int, graph: dict, view: RunView) -> str:
        m = graph["gpus"]
        if node < m:
            return f"w{node}"
        sockets = _sockets(view.job)
        return f"mem{(node - m) // sockets}c{(node - m) % sockets}"


def _sockets(job: Job) -> int:
    return sum(1 for e in job.endpoints if e.startswith("mem0c"))


def planning_topology(job: Job, cluster: ClusterSpec, view: RunView, m: int):
    """The communication topology of workers ``w0..w<m-1>`` (see the module docstring)."""
    from hwmodels.dgcl import comm_topology
    from hwmodels.graph import join, load_preset

    locs = [view.location(f"w{g}") for g in range(m)]
    servers = sorted({loc.server for loc in locs})
    presets = [cluster.servers[s].host_spec("intra_host") for s in servers]
    if any(p is None for p in presets):
        raise SpecError("servers.intra_host", "DGCL plans on the servers' intra-host presets; a server has none")
    if len(servers) == 1:
        return comm_topology(load_preset(presets[0]), [loc.device for loc in locs])
    nic_of = {loc.server: loc.nic for loc in locs}
    graph = join(
        [load_preset(p) for p in presets],
        [f"nic{nic_of[s]}" for s in servers],
        [cluster.servers[s].nic_rates[nic_of[s]] for s in servers],
    )
    return comm_topology(graph, [f"s{servers.index(loc.server)}.{loc.device}" for loc in locs])


def _requirements(graph: dict):
    from workloads.gnn_fullgraph import requirements

    return requirements(graph)


class Dgcl(GraphAllgather):
    """SPST's trees (§5.2, Alg. 1-2), stages in order, relays through GPUs."""

    name = "dgcl"

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        for f in job.flows:
            if "graph" in f.tags and not 2 <= f.tags["graph"].get("gpus", 0) <= 32:
                raise SpecError(f"items.{f.id}.tags.graph.gpus", "SPST's hops are planned for 2 to 32 GPUs")
        pinned = {e.pin.server for e in job.endpoints.values() if e.pin is not None}
        if any(s < len(cluster.servers) and cluster.servers[s].host_spec("intra_host") is None for s in pinned):
            raise SpecError("servers.intra_host", "DGCL plans on the servers' intra-host presets; a server has none")

    def hops(self, graph, view):
        topo = planning_topology(view.job, view.cluster, view, graph["gpus"])
        return spst_hops(topo, _requirements(graph), seed=self.seed)


class PeerToPeer(GraphAllgather):
    """Every GPU pair directly, all at once (ROC's peer-to-peer, §7)."""

    name = "p2p"

    def hops(self, graph, view):
        return p2p_hops(_requirements(graph), graph["gpus"])


class Swap(GraphAllgather):
    """Through host memory (NeuGraph, §7): every GPU writes all its embeddings, then loads every
    partition it needs whole, chained under each PCIe switch (``load="chunks"``), or only the
    vertices it needs (``load="needed"``, the previous model)."""

    name = "swap"

    def __init__(self, seed: int = 0, load: str = "chunks") -> None:
        super().__init__(seed)
        if load not in ("chunks", "needed"):
            raise SpecError("load", f"'chunks' or 'needed', got {load!r}")
        self.load = load

    def check(self, job: Job, cluster: ClusterSpec) -> None:
        if _sockets(job) == 0:
            raise SpecError("job.args.sockets", "swap relays through host memory: gnn_fullgraph needs sockets >= 1")

    def hops(self, graph, view):
        m, sockets = graph["gpus"], _sockets(view.job)
        socket_of, switch_of = [], []
        for g in range(m):
            loc = view.location(f"w{g}")
            socket_of.append(loc.server * sockets + min(_nearest(view.cluster, loc, "cpu"), sockets - 1))
            switch_of.append((loc.server, _nearest(view.cluster, loc, "pcie_switch")))
        switches = sorted(set(switch_of))
        return swap_hops(_requirements(graph), m, socket_of, [switches.index(w) for w in switch_of], self.load)


def _nearest(cluster: ClusterSpec, loc, kind: str) -> int:
    """The node of ``kind`` (``cpu``: the socket whose memory is nearest, ``pcie_switch``: the GPU's
    switch) fewest hops from the GPU: its index among the preset's nodes of that kind."""
    from hwmodels.graph import load_preset

    graph = load_preset(cluster.servers[loc.server].host_spec("intra_host"))
    nodes = graph.of_type(kind)
    if not nodes:
        return 0
    best = min(nodes, key=lambda c: (len(graph.routes(loc.device, c)[0][0]), c))
    return nodes.index(best)


SCHEDULERS = (Dgcl, PeerToPeer, Swap)
