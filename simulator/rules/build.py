"""The builder: a placed :class:`~railbed.job.Job` (:func:`compact`) or
:class:`~workloads.arrays.ArrayJob` (:func:`compact_arrays`) as a :class:`CompactJob`, with the
scheduler's rules as columns; gated flows' sub-flows are appended by :mod:`simulator.rules.gates`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from railbed.dispatch import check_placement
from railbed.errors import SpecError
from railbed.job import Flow, Job, Placement, Task, edited, paused_gc
from railbed.rulebook import as_offered
from railbed.scheduler import Rule, Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology
from simulator.fabric import Fabric
from simulator.fluid.run import dscp_classes
from simulator.rules.gates import add_gates, gate_arrays
from simulator.rules.model import LOCAL, NET, TASK, CompactJob, route_table, wire_bits
from tc_policies.plan import Policy
from workloads.arrays import ArrayJob


@paused_gc()
def compact(job: Job, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority") -> CompactJob:
    """Place ``job`` with ``scheduler`` and turn it into a :class:`CompactJob` (see module doc).

    Raises :class:`SpecError` for what the compact engine does not model (path
    options, intra-host models) and when the scheduler has no rule for a flow."""
    job = job.validate()
    _refuse_host_models(cluster)
    _refuse_without_rules(scheduler, job, cluster)
    topology = Topology(cluster)
    fabric = Fabric(topology)
    placement = scheduler.place(job.public(), cluster)
    check_placement(job, cluster, placement)
    classes = np.array(dscp_classes(policy), dtype=np.int64)
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    devices = sorted({(placement[t.endpoint].server, placement[t.endpoint].device) for t in job.tasks})
    dev_id = {d: k for k, d in enumerate(devices)}
    rules: dict[int, Rule] = {}
    gates: dict[str, list[int]] = {}
    for k, item in enumerate(job.items.values()):
        if isinstance(item, Flow):
            if item.options:
                raise SpecError(f"items.{item.id}.options", "the compact engine has no path options")
            rule = _checked_rule(scheduler, scheduler.rule(as_offered(item), placement, cluster), item.id)
            rules[k] = rule
            if rule.gate is not None:
                gates.setdefault(rule.gate, []).append(k)
    items: list = list(job.items.values())
    ids = list(job.items)
    n = len(items)
    index = {i: k for k, i in enumerate(ids)}
    kind = np.zeros(n, np.int8)
    device = np.full(n, -1, np.int32)
    duration = np.zeros(n)
    route = np.full(n, -1, np.int32)
    bits = np.zeros(n)
    prio = np.zeros(n, np.int8)
    cap = np.full(n, math.inf)
    key = np.zeros(n, np.int64)
    bar = np.zeros(n, np.int64)
    queued = np.zeros(n, np.bool_)
    nic = np.full(n, -1, np.int32)
    dscp = np.zeros(n, np.int8)
    size = np.zeros(n, np.int64)
    spine_of = np.full(n, -1, np.int16)
    routes: dict[tuple, int] = {}
    route_list = []
    for k, item in enumerate(items):
        if isinstance(item, Task):
            loc = placement[item.endpoint]
            kind[k], device[k], duration[k] = TASK, dev_id[(loc.server, loc.device)], item.duration
            continue
        assert isinstance(item, Flow)
        src, dst = placement[item.src], placement[item.dst]
        nic[k] = nic_base[src.server] + src.nic
        size[k] = item.size or 0
        kind[k] = LOCAL if src.server == dst.server else NET
        rule = rules[k]
        key[k] = rule.key
        if rule.gate is not None:  # split at run time: never starts itself (its sub-flows: add_gates)
            continue
        dscp[k], bar[k], queued[k] = rule.dscp, rule.bar, rule.queued
        cap[k] = math.inf if rule.rate is None else rule.rate
        if kind[k] == LOCAL:
            continue
        a, b = (src.server, src.nic), (dst.server, dst.nic)
        spine = topology.ecmp_spine(a, b, item.id)
        spine_of[k] = -1 if spine is None else spine
        rkey = (a, b, spine)
        r = routes.get(rkey)
        if r is None:
            r = routes[rkey] = len(route_list)
            route_list.append(fabric.route(a, b, spine))
        route[k] = r
        bits[k] = 8.0 * cluster.fabric.framing.wire_bytes(item.size or 0)
        prio[k] = classes[dscp[k]]
    route_links, route_hops, route_latency = route_table(route_list)
    missing = np.array([len(it.deps) for it in items], np.int32)
    dependents = job.dependents()
    counts = np.array([len(dependents[i]) for i in ids], np.int64)
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=dep_ptr[1:])
    dep_idx = np.fromiter((index[j] for i in ids for j in dependents[i]), np.int32, count=int(dep_ptr[-1]))
    device_cap = np.array([job.capacity_of(d) for _, d in devices], np.int32)
    cj = CompactJob(
        job.name, ids, kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, dscp, size,
        missing, dep_ptr, dep_idx, device_cap, route_links, route_hops, route_latency,
        fabric.capacity.copy(), list(fabric.names), int(nic_base[-1]), spine_of, placement,
        *gate_arrays({}, np.zeros(0, np.int32), np.zeros(0, np.int64), n),
        np.array([getattr(it, "iteration", 0) or 0 for it in items], np.int16),
        *_types_and_coflows(items),
        bool(getattr(scheduler, "hold_by_class", False)),
        _releases(items),
    )  # fmt: skip
    if gates:  # the sub-flows, items after the job's, as compact_arrays appends them
        nspines, total = len(topology.spines), cj.nics
        route_of = {}  # compact_arrays' route keys: (source NIC, destination NIC, spine + 1)
        for (a, b, sp), r in routes.items():
            ends = (int(nic_base[a[0]]) + a[1]) * total + int(nic_base[b[0]]) + b[1]
            route_of[ends * (nspines + 1) + (0 if sp is None else sp + 1)] = r
        flows = {k: items[k] for k in sorted(k for members in gates.values() for k in members)}
        add_gates(cj, flows, gates, ids, scheduler, placement, cluster, topology, fabric, classes, route_of)
    return cj


def _releases(items: list) -> np.ndarray:
    """Each item's release time (``at``, 0 without), or an empty array when none has one."""
    at = np.array([it.at or 0.0 for it in items], np.float64)
    return at if at.any() else np.zeros(0)


def _types_and_coflows(items: list) -> tuple[np.ndarray, list[str], np.ndarray]:
    """CompactJob's ``ctype``, ``types`` and ``coflow`` of a job's items (sub-flows included)."""
    from railbed.analysis import UNTYPED, type_order

    types = type_order(it.coflow_type or UNTYPED for it in items if isinstance(it, Flow))
    tix = {t: k for k, t in enumerate(types)}
    coflows: dict[str, int] = {}
    ctype = np.array([tix[it.coflow_type or UNTYPED] if isinstance(it, Flow) else -1 for it in items], np.int16)
    coflow = np.array(
        [coflows.setdefault(it.coflow, len(coflows)) if it.coflow is not None else -1 for it in items], np.int32
    )
    return ctype, types, coflow


def _refuse_host_models(cluster: ClusterSpec) -> None:
    for s in cluster.servers:
        if s.host is not None:
            why = f"server {s.name} has a hardware model ({s.host.kind}); the compact engine has none"
            raise SpecError("servers", why)


# hooks the compact engine never calls
UNCALLED_HOOKS = ("on_flows_changed", "on_done", "choose_path", "choose_spine", "on_job_arrived", "on_job_finished")


def _refuse_without_rules(scheduler: Scheduler, job: Job, cluster: ClusterSpec) -> None:
    """Before ``place`` (which may be long, or fail on a job the scheduler was not made for):
    a scheduler that decides in a hook the engine never calls (a ``rule`` stands for
    ``on_ready`` only), or keeps the base ``rule``, which is ``None`` exactly when it decides
    in its hooks (the base tells without a placement)."""
    mine = type(scheduler)
    for hook in UNCALLED_HOOKS:
        if getattr(mine, hook) is not getattr(Scheduler, hook):
            why = f"{scheduler.name} has its own {hook}, which the compact engine never calls"
            raise SpecError("scheduler", f"{why}: run it on the fluid backend")
    if mine.rule is Scheduler.rule:
        flow = next((it for it in job.items.values() if isinstance(it, Flow)), None)
        if flow is not None:
            _checked_rule(scheduler, Scheduler.rule(scheduler, flow, None, cluster), flow.id)


def _checked_rule(scheduler: Scheduler, rule: Rule | None, what: str) -> Rule:
    """``rule`` (the scheduler's for flow ``what``), or a one-line error: none, or out of range."""
    if rule is None:
        raise SpecError("scheduler", f"{scheduler.name} has no rule for flow {what}: run it on the fluid backend")
    if not 0 <= rule.dscp <= 63 or (rule.rate is not None and not rule.rate > 0):
        raise SpecError("scheduler", f"{scheduler.name}: rule {rule} for {what} out of range")
    return rule


@paused_gc()
def compact_arrays(
    aj: ArrayJob, scheduler: Scheduler, cluster: ClusterSpec, policy: str | Policy = "dscp-priority"
) -> CompactJob:
    """:func:`compact` for an :class:`~workloads.arrays.ArrayJob`, with numpy over its columns.

    The same :class:`CompactJob`, array for array, as ``compact`` of the equal :class:`Job`
    (``tests/test_compact.py``), under the assumption the rule classes rest on
    (:mod:`workloads.arrays`): ``place`` and ``rule`` read the endpoints and, of the flows,
    only what a class shares (attributes, source, whether it crosses servers). ``place``
    gets a skeleton job of the endpoints and one representative flow per class; ``rule``
    is asked once per class. When a class is gated (:class:`~railbed.scheduler.Rule` ``gate``:
    Hermod's EP coflows between servers, Alg. 3), every flow of the gated classes joins the
    skeleton, ``place`` and the class rules are asked again (Hermod learns its coflows'
    members there), ``rule`` is asked per gated flow (its gate) and ``gate_split`` per gate
    (:func:`add_gates`). The 8192-GPU Mixtral-8x22B job has no gates (EP 8 = TP 8 is one
    server); Qwen-MoE-24L's EP 32 spans four."""
    aj.finish()
    _refuse_host_models(cluster)
    topology = Topology(cluster)
    fabric = Fabric(topology)
    rep_flows = [aj.rep_flow(c) for c in range(len(aj.reps))]
    in_skeleton = {h: rep_flows[c] for c, (h, _) in enumerate(aj.reps)}
    placement = _place_skeleton(aj, in_skeleton, scheduler, cluster)
    rules = [scheduler.rule(as_offered(in_skeleton[h]), placement, cluster) for h, _ in aj.reps]
    gated_classes = [c for c, r in enumerate(rules) if r is not None and r.gate is not None]
    members = np.zeros(0, np.int64)
    if gated_classes:  # their flows join the skeleton: the scheduler learns the gates' members
        members = np.flatnonzero((aj.kind == 1) & np.isin(aj.rclass, gated_classes))
        in_skeleton.update(zip(members.tolist(), _member_flows(aj, members, rep_flows)))
        again = _place_skeleton(aj, in_skeleton, scheduler, cluster)
        if again.locations != placement.locations:
            raise SpecError("scheduler", f"{scheduler.name} places the skeleton with the gated flows differently")
        rules = [scheduler.rule(as_offered(in_skeleton[h]), placement, cluster) for h, _ in aj.reps]
        gates: dict[str, list[int]] = {}
        for k in members.tolist():  # each gated flow's gate from rule on the flow itself (its coflow)
            f = in_skeleton[k]
            rule = scheduler.rule(as_offered(f), placement, cluster)
            if rule is None or rule.gate is None:
                raise SpecError("scheduler", f"{scheduler.name}: flow {f.id} is not gated like its rule class")
            gates.setdefault(rule.gate, []).append(k)
        # the gated flows as Flows only while asked: made again per batch of gates (_GatedFlows)
        in_skeleton = {h: in_skeleton[h] for h, _ in aj.reps}
    classes = np.array(dscp_classes(policy), dtype=np.int64)
    nic_base = np.cumsum([0] + [s.nics for s in cluster.servers])
    locs = [placement[e] for e in aj.endpoints]
    ep_server = np.array([loc.server for loc in locs], np.int64)
    ep_nic = np.array([nic_base[loc.server] + loc.nic for loc in locs], np.int64)
    n = aj.items
    is_task = aj.kind == 0
    is_flow = ~is_task
    # devices: the tasks' (server, device) in sorted order, as compact()
    task_eps = np.unique(aj.a[is_task])
    devices = sorted({(locs[e].server, locs[e].device) for e in task_eps})
    dev_id = {d: k for k, d in enumerate(devices)}
    ep_dev = np.full(len(locs), -1, np.int32)
    for e in task_eps:
        ep_dev[e] = dev_id[(locs[e].server, locs[e].device)]
    device = np.where(is_task, ep_dev[aj.a], -1).astype(np.int32)
    duration = np.where(is_task, aj.value, 0.0)
    # rules, once per class
    nrep = len(aj.reps)
    r_dscp = np.zeros(nrep, np.int8)
    r_cap = np.full(nrep, math.inf)
    r_key = np.zeros(nrep, np.int64)
    r_bar = np.zeros(nrep, np.int64)
    r_queued = np.zeros(nrep, np.bool_)
    r_gated = np.zeros(nrep, np.bool_)
    for c in range(nrep):
        rule = _checked_rule(scheduler, rules[c], f"{in_skeleton[aj.reps[c][0]].id} (its class)")
        r_gated[c] = rule.gate is not None
        r_dscp[c], r_key[c], r_bar[c], r_queued[c] = rule.dscp, rule.key, rule.bar, rule.queued
        r_cap[c] = math.inf if rule.rate is None else rule.rate
    rc = np.where(is_flow, aj.rclass, 0)
    gated = is_flow & r_gated[rc] if r_gated.any() else np.zeros(n, np.bool_)
    ruled = is_flow & ~gated  # a gated flow never starts itself: no DSCP, cap or wait (compact())
    dscp = np.where(ruled, r_dscp[rc], 0).astype(np.int8)
    key = np.where(is_flow, r_key[rc], 0)
    bar = np.where(ruled, r_bar[rc], 0)
    queued = np.where(ruled, r_queued[rc], False)
    cap = np.where(ruled, r_cap[rc], math.inf)
    del rc, ruled
    src = np.where(is_flow, aj.a, 0)
    dst = np.where(is_flow, aj.b, 0)
    nic = np.where(is_flow, ep_nic[src], -1).astype(np.int32)
    size = np.where(is_flow, aj.value, 0).astype(np.int64)
    net = is_flow & (ep_server[src] != ep_server[dst])
    kind = np.full(n, TASK, np.int8)
    kind[is_flow] = LOCAL
    kind[net] = NET
    net &= ~gated  # the flows routed: a gated one's sub-flows are
    spine_of, route, (route_links, route_hops, route_latency), (uniq, rank) = _array_routes(
        aj, cluster, topology, fabric, nic_base, ep_nic, src, dst, net
    )
    payload = np.where(net, size, 0)
    bits = wire_bits(payload, cluster.fabric.framing)
    prio = np.where(net, classes[dscp.astype(np.int64)], 0).astype(np.int8)
    del payload, src, dst
    iteration = aj.iteration.astype(np.int16)
    ids = aj.ids
    missing = aj.dep_count.copy()
    owner = np.repeat(np.arange(n, dtype=np.int32), aj.dep_count)
    by_dep = np.argsort(aj.deps, kind="stable")
    dep_idx = owner[by_dep]
    del owner, by_dep
    dep_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(aj.deps, minlength=n), out=dep_ptr[1:])
    device_cap = np.array([aj.skeleton.capacity_of(d) for _, d in devices], np.int32)
    cj = CompactJob(
        aj.name, ids, kind, device, duration, route, bits, prio, cap, key, bar, queued, nic, dscp, size,
        missing, dep_ptr, dep_idx, device_cap, route_links, route_hops, route_latency,
        fabric.capacity.copy(), list(fabric.names), int(nic_base[-1]), spine_of, placement, iteration=iteration,
        **_array_types(aj, is_flow),
        hold_by_class=bool(getattr(scheduler, "hold_by_class", False)),
    )  # fmt: skip
    if gated.any():
        flows = _GatedFlows(aj, members, rep_flows)
        route_of = {int(u): int(r) for u, r in zip(uniq, rank)}
        add_gates(cj, flows, gates, None, scheduler, placement, cluster, topology, fabric, classes, route_of)
    _trim_heap()
    return cj


def _array_routes(aj: ArrayJob, cluster: ClusterSpec, topology: Topology, fabric: Fabric, nic_base, ep_nic, src, dst,
                  net) -> tuple:  # fmt: skip
    """ECMP spines (by the CRC-32 of the id, as Topology.ecmp_spine) and routes, in order of
    first use, of an ArrayJob's routed flows (``net``; ``src``, ``dst``: items' endpoints): each
    item's spine and route (-1: none), the route table (:func:`route_table`), and the route keys
    with their routes' indices (for the gates' sub-flows)."""
    n = aj.items
    nic_leaf = np.array([topology.nics[sv][k].leaf for sv in range(len(cluster.servers))
                         for k in range(cluster.servers[sv].nics)], np.int64)  # fmt: skip
    a_nic, b_nic = ep_nic[src[net]], ep_nic[dst[net]]
    nspines = len(topology.spines)
    cross_leaf = nic_leaf[a_nic] != nic_leaf[b_nic]
    sp = np.where(cross_leaf, aj.crc[net].astype(np.int64) % max(nspines, 1), -1) if nspines else np.full(
        len(a_nic), -1, np.int64)  # fmt: skip
    spine_of = np.full(n, -1, np.int16)
    spine_of[net] = sp
    total_nics = int(nic_base[-1])
    rkey = (a_nic * total_nics + b_nic) * (nspines + 1) + (sp + 1)
    uniq, first, inverse = np.unique(rkey, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    route = np.full(n, -1, np.int32)
    route[net] = rank[inverse]
    server_of_nic = np.repeat(np.arange(len(cluster.servers)), [s.nics for s in cluster.servers])
    route_list = []
    for u in order:
        i = first[u]
        a, b, spn = int(a_nic[i]), int(b_nic[i]), int(sp[i])
        route_list.append(
            fabric.route(
                (int(server_of_nic[a]), a - int(nic_base[server_of_nic[a]])),
                (int(server_of_nic[b]), b - int(nic_base[server_of_nic[b]])),
                None if spn < 0 else spn,
            )
        )
    route_links, route_hops, route_latency = route_table(route_list)
    return spine_of, route, (route_links, route_hops, route_latency), (uniq, rank)


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing): a compaction frees a million small objects and numpy buffers below glibc's mmap
    threshold, whose pages would otherwise stay in the process through the run (1.4 GB of RSS
    after the 1024-GPU hermod compaction)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _array_types(aj: ArrayJob, is_flow: np.ndarray) -> dict:
    """CompactJob's ``ctype``, ``types`` and ``coflow`` from an ArrayJob's rule classes (a
    class shares its coflow type) and its ``coflow`` column."""
    from railbed.analysis import UNTYPED, type_order

    names = [fields.get("coflow_type") or UNTYPED for _, fields in aj.reps]
    types = type_order(names)
    of_class = np.array([types.index(t) for t in names] or [0], np.int16)
    ctype = np.where(is_flow, of_class[np.where(is_flow, aj.rclass, 0)], -1).astype(np.int16)
    return {"ctype": ctype, "types": types, "coflow": np.asarray(aj.coflow, np.int32).copy()}


def _place_skeleton(aj: ArrayJob, flows: dict[int, Flow], scheduler: Scheduler, cluster: ClusterSpec) -> Placement:
    """``place`` on a job of the ArrayJob's endpoints and ``flows`` (item index -> Flow, in item order)."""
    skeleton = Job(aj.name, aj.skeleton.capacity, aj.skeleton.default_capacity)
    skeleton.endpoints = dict(aj.skeleton.endpoints)
    for k in sorted(flows):
        skeleton.items[flows[k].id] = flows[k]
    placement = scheduler.place(skeleton.public(), cluster)
    check_placement(skeleton, cluster, placement)
    return placement


def _member_flows(aj: ArrayJob, ks: np.ndarray, rep_flows: list[Flow]) -> list[Flow]:
    """Items ``ks`` of an ArrayJob as :class:`Flow` s: each its class's representative
    (``rep_flows``, per class: :meth:`ArrayJob.rep_flow`) with its own id, ends, size and
    coflow; the columns are read once for all of them."""
    ks = np.asarray(ks, np.int64)
    eps, names = aj.endpoints, aj.coflow_names
    cols = (aj.ids.some(ks), aj.rclass[ks].tolist(), aj.a[ks].tolist(), aj.b[ks].tolist(),
            aj.value[ks].astype(np.int64).tolist(), aj.coflow[ks].tolist())  # fmt: skip
    return [
        edited(rep_flows[c], id=i, src=eps[a], dst=eps[b], size=v, coflow=names[co] if co >= 0 else None)
        for i, c, a, b, v, co in zip(*cols)
    ]


class _GatedFlows(Mapping):
    """Item index -> :class:`Flow` of an ArrayJob's gated flows (``members``, in item order),
    each made when asked (:func:`_member_flows`): 7 million gated flows at 8192 GPUs, about
    350 bytes each as Flows, are not kept while :func:`add_gates` runs (it asks a batch's once)."""

    def __init__(self, aj: ArrayJob, members: np.ndarray, rep_flows: list[Flow]) -> None:
        self.aj, self.members, self.rep_flows = aj, members.tolist(), rep_flows
        self.index = dict.fromkeys(self.members)

    def __getitem__(self, k: int) -> Flow:
        if k not in self.index:
            raise KeyError(k)
        return _member_flows(self.aj, [k], self.rep_flows)[0]

    def many(self, ks: list[int]) -> dict[int, Flow]:
        """``{k: self[k] for k in ks}``, the columns read once (:func:`_member_flows`)."""
        if any(k not in self.index for k in ks):
            raise KeyError(next(k for k in ks if k not in self.index))
        return dict(zip(ks, _member_flows(self.aj, ks, self.rep_flows)))

    def __iter__(self):
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def raw_id(self, k: int) -> bytes:
        ids = self.aj.ids
        return ids.blob[ids.offsets[k] : ids.offsets[k + 1]]
