"""Tiny jobs whose answers can be computed by hand (the mechanism tests, issue 22).

``pp_chain``: a pipeline chain beside data-parallel flows. Tasks
``t0 .. t<n-1>`` of ``compute`` seconds alternate between endpoint ``g0``
(server 0) and ``g1`` (server 1); flow ``f<i>`` carries ``activation`` bytes
from ``t<i>``'s endpoint to ``t<i+1>``'s, so the even flows go 0 -> 1 and
the odd ones 1 -> 0. Beside each even PP flow, a DP flow ``dp<i>`` (a
gradient bucket of ``gradient`` bytes, at most ``activation``, 0 -> 1) is
released by the same task, so the two start together and share server 0's
NIC and the switch port to server 1; the odd PP flows share nothing.
Attributes: PP flows microbatch 0, DP flows microbatch ``dp_microbatch``;
tags ``dscp`` (``PP`` 46, ``DP`` 0) for ``tag-priority``.

Why buckets that start with the PP flow, not one long DP flow: fair sharing
(the hand-computed FIFO time) is what TCP gives two flows that start
together, by symmetry; a fresh 1 MB flow beside an established long one
got 58-78 % of the port under bbr and about 30 % under cubic in the
emulator, and ns-3 (cubic, drop-tail) starved it (docs/fidelity.md,
"Sharing a port"). Strict priority's time does not depend on it.

``oes_incast``: DGTP's OES rate rule (seed 000, Alg. 1 lines 18-21) where it
differs from max-min. Graph stores on servers 0 (A) and 1 (B), samplers on
servers 2, 3, 4 (C, D, E), a worker on C, a PS on A; flows A -> C, B -> C,
B -> D, B -> E of ``size`` bytes each at time 0, then the worker's
``compute`` after A -> C. Everything is pinned, so every scheduler runs the
same placement.

``relay_allgather``: DGCL's relaying (seed 002, §5) on one 8-GPU server:
one graphAllgather coflow of one flow, ``size`` bytes from ``w<source>`` to
``w<dest>`` (one vertex computed on ``source`` and needed by ``dest``,
tagged as ``gnn_fullgraph``'s exchanges are, with the requirement set
written out: ``tags.graph.explicit``), then a task of ``compute`` on the
destination. On a DGX-1 GPUs 0 and 5 have no NVLink between them.

``ep_shared_nic``: Hermod's EP matching (seed 004, Alg. 3) where GPUs share a
NIC: 3 servers of 2 GPUs (``g<server><gpu>``) behind one NIC each, one EP
coflow whose NIC matrix carries ``3, 1 / 1, 2 / 2, 1`` times ``size`` bytes
(0 -> 1, 0 -> 2 / 1 -> 0, 1 -> 2 / 2 -> 0, 2 -> 1), every NIC pair's bytes
split 1 : 3 over two GPU pairs. The busiest NIC sends and receives 4
``size``: a matching of NICs ends there.

``leo_toll``: LEO's path choice (seed 004, eq. 6.5 and §6.2.2's k_hat) on
requests of one type (``out`` bytes out, ``back`` bytes back, function
``mech`` at the responder; paths ``cpu-cpu`` and ``acc-acc``) arriving at
the given ``times`` (the request stream of :mod:`workloads.requests`).
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Job, Location


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SpecError(name, f"must be > 0, got {value!r}")


def pp_chain(
    tasks: int = 9,
    compute: float = 1e-3,
    activation: int = 1_000_000,
    gradient: int | None = None,
    dp_microbatch: int = 1,
) -> Job:
    """The chain and its DP buckets (module docstring); ``gradient`` defaults to ``activation``."""
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 2:
        raise SpecError("tasks", f"must be a whole number >= 2, got {tasks!r}")
    gradient = activation if gradient is None else gradient
    for name, value in (("compute", compute), ("activation", activation), ("gradient", gradient)):
        _positive(name, value)
    if gradient > activation:
        raise SpecError("gradient", f"at most the activation ({activation}): the hand formula needs it, got {gradient}")
    if isinstance(dp_microbatch, bool) or not isinstance(dp_microbatch, int) or dp_microbatch < 0:
        raise SpecError("dp_microbatch", f"must be a whole number >= 0, got {dp_microbatch!r}")
    job = Job(f"pp-chain-{tasks}")
    for s in (0, 1):
        job.endpoint(f"g{s}", Location(s, "gpu0", 0), role="gpu")
    prev: list[str] = []
    for i in range(tasks):
        here = f"g{i % 2}"
        prev = [job.task(f"t{i}", here, compute, prev, iteration=0, microbatch=0, layer=i)]
        if i < tasks - 1:
            task = prev
            prev = [job.flow(f"f{i}", here, f"g{(i + 1) % 2}", activation, task, iteration=0, microbatch=0, layer=i,
                             coflow=f"pp{i}", coflow_type="PP", tags={"dscp": 46})]  # fmt: skip
            if i % 2 == 0:
                job.flow(f"dp{i}", "g0", "g1", gradient, task, iteration=0, microbatch=dp_microbatch, layer=i,
                         coflow=f"dp{i}", coflow_type="DP", tags={"dscp": 0})  # fmt: skip
    return job.validate()


def oes_incast(size: int = 1_000_000, compute: float = 2e-3) -> Job:
    """The incast and fan-out of four flows (module docstring)."""
    _positive("size", size)
    _positive("compute", compute)
    job = Job("oes-incast")
    for name, server, role in (("store0", 0, "store"), ("store1", 1, "store"), ("s2", 2, "sampler"),
                               ("s3", 3, "sampler"), ("s4", 4, "sampler"), ("ps", 0, "ps")):  # fmt: skip
        job.endpoint(name, Location(server, "cpu", 0), role=role)
    job.endpoint("w2", Location(2, "gpu0", 0), role="worker")
    for fid, src, dst in (("ac", "store0", "s2"), ("bc", "store1", "s2"), ("bd", "store1", "s3"),
                          ("be", "store1", "s4")):  # fmt: skip
        job.flow(fid, src, dst, size, (), iteration=0, coflow=f"to-{dst}", coflow_type="graph-data")
    job.task("train", "w2", compute, ["ac"], iteration=0)
    return job.validate()


def relay_allgather(
    gpus: int = 8, source: int = 0, dest: int = 5, size: int = 100_000_000, compute: float = 1e-3
) -> Job:
    """The one-vertex graphAllgather (module docstring)."""
    for name, value in (("gpus", gpus), ("source", source + 1), ("dest", dest + 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(name, f"must be a whole number in range, got {value!r}")
    if not (source < gpus and dest < gpus and source != dest):
        raise SpecError("dest", f"source and dest must be two of the {gpus} GPUs")
    _positive("size", size)
    _positive("compute", compute)
    job = Job(f"relay-allgather-{source}-{dest}")
    for g in range(gpus):
        job.endpoint(f"w{g}", Location(0, f"gpu{g}", 0), role="worker")
    graph = {"gpus": gpus, "explicit": f"{source}>{dest}:{int(size)}"}
    job.flow(f"ag.{source}-{dest}", f"w{source}", f"w{dest}", int(size), (), iteration=0, coflow="ag",
             coflow_type="graph-data", layer=2, tags={"graph": graph})  # fmt: skip
    job.task("use", f"w{dest}", compute, [f"ag.{source}-{dest}"], iteration=0)
    return job.validate()


def leo_toll(times: list[float] | None = None, out: int = 64, back: int = 8) -> Job:
    """Requests at ``times`` (default: 0, 1, 2 and 100 us) of one type (module docstring)."""
    from workloads.requests import RequestType, request_stream

    times = [0.0, 1e-6, 2e-6, 100e-6] if times is None else times
    if not isinstance(times, list) or not times or any(not isinstance(t, (int, float)) or t < 0 for t in times):
        raise SpecError("times", f"expected a list of arrival times >= 0 (s), got {times!r}")
    if sorted(times) != list(times):
        raise SpecError("times", "arrival times must not decrease")
    _positive("out", out)
    _positive("back", back)
    rt = RequestType("mech", 1.0, ((int(out), int(back)),), ("cpu-cpu", "acc-acc"), resp_work="mech")
    return request_stream((rt,), 1.0, len(times), name="leo-toll", times=[float(t) for t in times])


def ep_shared_nic(size: int) -> Job:
    """One EP coflow between GPUs that share their servers' NICs (module docstring)."""
    _positive("size", size)
    job = Job("ep-shared-nic")
    for s in range(3):
        for g in range(2):
            job.endpoint(f"g{s}{g}", Location(s, f"gpu{g}", 0))
    sizes = {(0, 1): 3 * size, (0, 2): size, (1, 0): size, (1, 2): 2 * size, (2, 0): 2 * size, (2, 1): size}
    for (i, j), nbytes in sizes.items():
        for g, part in ((0, nbytes // 4), (1, nbytes - nbytes // 4)):
            job.flow(f"e{i}{j}{g}", f"g{i}{g}", f"g{j}{1 - g}", part, reveal="on_ready", coflow="ep",
                     coflow_type="EP", microbatch=0)  # fmt: skip
    return job.validate()


def periodic(iterations: int = 4, compute: float = 1e-3, size: int = 956_374) -> Job:
    """One job of the two-job mechanism (issue 45): endpoint ``g`` computes ``compute`` seconds
    (task ``c<k>``), then sends ``size`` bytes to ``r`` (flow ``f<k>``), ``iterations`` times, each
    compute after the previous flow; iteration ``k`` is ``c<k>`` and ``f<k>``. Pinned as ``g`` on
    server 0 and ``r`` on server 1 (its own layout; a run of several jobs places it). With 956,374
    bytes (661 segments: 1,000,000 bytes on the wire) a flow alone at 8 Gbit/s takes 1 ms, as long
    as the compute: communication is half of each iteration."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise SpecError("iterations", f"must be a whole number >= 1, got {iterations!r}")
    _positive("compute", compute)
    _positive("size", size)
    job = Job("periodic")
    job.endpoint("g", Location(0, "gpu0", 0), role="gpu")
    job.endpoint("r", Location(1, "gpu0", 0), role="gpu")
    prev: tuple[str, ...] = ()
    for k in range(iterations):
        job.task(f"c{k}", "g", compute, deps=prev, iteration=k)
        job.flow(f"f{k}", "g", "r", size, deps=[f"c{k}"], iteration=k, coflow=f"it{k}", coflow_type="DP")
        prev = (f"f{k}",)
    return job.validate()
