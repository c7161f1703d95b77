"""LLM training traffic: data-parallel ring all-reduce and pipeline-parallel point-to-point.

Endpoints are named ``p<stage>d<replica>`` (``p<stage>d<replica>t<tensor rank>``
when ``tp`` > 1) and pinned by ``layout`` (``G = gpus_per_server``; GPU *i*
always uses NIC/rail *i*):

``"megatron"``
    Megatron-LM's rank order, tensor parallelism fastest (seed 004, chapter 5
    describes the 3D-parallel jobs Hermod schedules): global rank
    ``r = t + tp * (d + dp * p)`` on server ``r // G``, GPU ``r % G``. With
    ``tp`` = 1 data-parallel neighbours mostly share a server; with ``tp`` =
    ``G`` (Hermod's simulations, Table 5.5: TP 8 and PP 8 on 8-GPU servers)
    a server is one tensor-parallel group and every data- and
    pipeline-parallel flow runs on the rail of its tensor rank.
``"rail"``
    replica *d* of stage *p* on server ``d + dp * (p // G)``, GPU ``p % G``:
    a stage's data-parallel ring crosses servers on one rail, consecutive
    stages sit on neighbouring GPUs of a server.
``None``
    nothing pinned: the scheduler places.

Per iteration and stage: the microbatches' forward passes (tasks, ``fwd``
s each) send activations to the next stage (flows of ``activation`` bytes,
coflow type ``PP``), the backward passes (``bwd`` s) send gradients of the
activations back, and after the last microbatch's backward pass each stage's
data-parallel replicas all-reduce ``gradient`` bytes with a ring (coflow type
``DP``). The schedule is GPipe's: every backward pass of a stage waits for
the stage's last forward pass. A scheduler can only delay items, so 1F1B
(and interleaved 1F1B) cannot be had from this generator by scheduling;
they belong in the generator (the Hermod issue adds them).

Ring all-reduce (the NCCL ring): ``2 (n - 1)`` steps; in each, replica *i*
sends ``gradient / n`` bytes to replica *i + 1*; step *s* of replica *i*
starts when its step *s - 1* chunk from replica *i - 1* arrived.

Tensor parallelism: each tensor rank has its own pipeline (its share of
every activation) and its own data-parallel ring (its shard of the
gradients). The tensor-parallel all-reduces stay inside the server on
NVLink; they are not flows here and belong in ``fwd``/``bwd``. The ranks of
a group run in lockstep (same times, same sizes), so nothing forces them to.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Job, Location
from workloads.collectives import add_collective, check


def _check(name: str, value: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(name, f"must be an integer >= {low}, got {value!r}")
    return value


def ring_allreduce(
    job: Job,
    ranks: list[str],
    nbytes: int,
    after: dict[str, list[str]],
    prefix: str,
    **attrs,
) -> dict[str, str]:
    """Add a ring all-reduce of ``nbytes`` over ``ranks``; ``after[rank]`` are the items
    each rank waits for before its first send. Returns rank -> the item after which
    the rank holds the reduced result. The ring of :mod:`workloads.collectives` (same ids and
    dependencies as this function had before it moved there)."""
    if len(ranks) == 1:
        return {ranks[0]: after[ranks[0]][-1]} if after[ranks[0]] else {}
    ends = add_collective(job, "all-reduce", ranks, nbytes, "ring", after=after, prefix=prefix, **attrs)
    return {r: items[-1] for r, items in ends.items()}


def _algorithm(collective: dict | None, dp: int) -> tuple[str, int]:
    """(algorithm, chunks) of ``collective`` (checked for an all-reduce over ``dp`` ranks)."""
    spec = dict(collective or {})
    unknown = set(spec) - {"algorithm", "chunks"}
    if unknown:
        raise SpecError(f"collective.{sorted(unknown)[0]}", "unknown key (known: algorithm, chunks)")
    algorithm, chunks = spec.get("algorithm", "ring"), spec.get("chunks", 1)
    if algorithm == "hierarchical":
        raise SpecError("collective.algorithm", "hierarchical needs whole servers per group; not for DP groups here")
    try:
        check("all-reduce", str(algorithm), dp, chunks)
    except SpecError as exc:
        raise SpecError(f"collective.{exc.field if exc.field != 'ranks' else 'algorithm'}", exc.message) from None
    return str(algorithm), int(chunks)


def hybrid_parallel(
    dp: int = 4,
    pp: int = 1,
    microbatches: int = 1,
    iterations: int = 1,
    fwd: float = 1e-3,
    bwd: float = 2e-3,
    activation: int = 8 << 20,
    gradient: int = 64 << 20,
    gpus_per_server: int = 4,
    layout: str | None = "megatron",
    dscp: dict[str, int] | None = None,
    name: str | None = None,
    tp: int = 1,
    collective: dict[str, str | int] | None = None,
) -> Job:
    """A ``tp`` x ``dp`` x ``pp`` training job (see the module docstring).

    ``activation`` and ``gradient`` are the bytes *each* rank sends to the
    next stage and all-reduces. ``dscp`` maps a coflow type (``PP``, ``DP``)
    to a DSCP written into the flows' ``tags`` for tag-driven schedulers
    (``tag-priority``). ``collective``: ``{algorithm: ..., chunks: ...}``, the data-parallel
    all-reduce by another algorithm of :mod:`workloads.collectives` (default: the ring above); given,
    the DP flows carry its tags (``collective``, ``algorithm``, ...)."""
    _check("dp", dp)
    _check("pp", pp)
    _check("tp", tp)
    _check("microbatches", microbatches)
    _check("iterations", iterations)
    _check("gpus_per_server", gpus_per_server)
    if fwd < 0 or bwd < 0:
        raise SpecError("fwd" if fwd < 0 else "bwd", "compute time must be >= 0")
    for kind, value in (dscp or {}).items():
        if kind not in ("PP", "DP") or isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 63:
            raise SpecError(f"dscp.{kind}", f"expected PP or DP mapped to a DSCP in 0..63, got {value!r}")
    pp_tags = {"dscp": dscp["PP"]} if dscp and "PP" in dscp else {}
    dp_tags = {"dscp": dscp["DP"]} if dscp and "DP" in dscp else {}
    if layout not in ("megatron", "rail", None):
        raise SpecError("layout", f"must be megatron, rail or null, got {layout!r}")
    if tp > 1 and layout == "rail":
        raise SpecError("tp", "tensor parallelism needs layout megatron (or null)")
    if layout == "megatron" and gpus_per_server % tp:
        raise SpecError("tp", f"a tensor-parallel group must fit in a server: {tp} does not divide {gpus_per_server}")
    algo = _algorithm(collective, dp)
    job = Job(name or (f"llm-dp{dp}-pp{pp}-mb{microbatches}" + (f"-tp{tp}" if tp > 1 else "")))
    G = gpus_per_server

    def ep(p: int, d: int, t: int) -> str:
        return f"p{p}d{d}" + (f"t{t}" if tp > 1 else "")

    for p in range(pp):
        for d in range(dp):
            for t in range(tp):
                if layout == "megatron":
                    r = t + tp * (d + dp * p)
                    pin = Location(r // G, f"gpu{r % G}", r % G)
                elif layout == "rail":
                    pin = Location(d + dp * (p // G), f"gpu{p % G}", p % G)
                else:
                    pin = None
                job.endpoint(ep(p, d, t), pin)
    last_of: dict[str, list[str]] = {}  # endpoint -> last items of the previous iteration
    for it in range(iterations):
        done_bwd: dict[str, str] = {}
        for d in range(dp):
            for t in range(tp):
                _pipeline(job, it, d, t, pp, microbatches, fwd, bwd, activation, ep, last_of, done_bwd, pp_tags)
        for p in range(pp):
            for t in range(tp):
                ranks = [ep(p, d, t) for d in range(dp)]
                if dp > 1 and gradient > 0:
                    ends = add_collective(
                        job, "all-reduce", ranks, gradient, algo[0], {r: [done_bwd[r]] for r in ranks},
                        f"i{it}.ar.p{p}" + (f"t{t}" if tp > 1 else ""), algo[1], tag=collective is not None,
                        iteration=it, layer=p, coflow=f"i{it}.dp.p{p}", coflow_type="DP", tags=dp_tags,
                    )  # fmt: skip
                    last_of.update(ends)
                else:
                    last_of.update({r: [done_bwd[r]] for r in ranks})
    return job.validate()


def _pipeline(job, it, d, t, pp, microbatches, fwd, bwd, activation, ep, last_of, done_bwd, pp_tags) -> None:
    """One replica's (and tensor rank's) GPipe schedule of iteration ``it``: forwards, then backwards."""
    fwd_ids: dict[tuple[int, int], str] = {}
    for m in range(microbatches):
        for p in range(pp):
            here = ep(p, d, t)
            deps = []
            if p > 0:
                deps.append(f"i{it}.act.{ep(p - 1, d, t)}.m{m}")
            if m > 0:
                deps.append(fwd_ids[(p, m - 1)])
            elif here in last_of:
                deps.extend(last_of[here])
            tid = job.task(f"i{it}.fwd.{here}.m{m}", here, fwd, deps, iteration=it, microbatch=m, layer=p)
            fwd_ids[(p, m)] = tid
            if p < pp - 1:
                job.flow(
                    f"i{it}.act.{here}.m{m}", here, ep(p + 1, d, t), activation, [tid],
                    iteration=it, microbatch=m, layer=p, coflow=f"i{it}.pp.m{m}", coflow_type="PP",
                    tags=pp_tags,
                )  # fmt: skip
    prev_bwd: dict[int, str] = {}
    for m in range(microbatches):
        for p in reversed(range(pp)):
            here = ep(p, d, t)
            deps = [fwd_ids[(pp - 1, microbatches - 1)]] if p == pp - 1 else [f"i{it}.grad.{ep(p + 1, d, t)}.m{m}"]
            if p in prev_bwd:
                deps.append(prev_bwd[p])
            elif p < pp - 1:
                deps.append(fwd_ids[(p, microbatches - 1)])
            tid = job.task(f"i{it}.bwd.{here}.m{m}", here, bwd, deps, iteration=it, microbatch=m, layer=p)
            prev_bwd[p] = tid
            if p > 0:
                job.flow(
                    f"i{it}.grad.{here}.m{m}", here, ep(p - 1, d, t), activation, [tid],
                    iteration=it, microbatch=m, layer=p, coflow=f"i{it}.pp.m{m}", coflow_type="PP",
                    tags=pp_tags,
                )  # fmt: skip
    for p in range(pp):
        done_bwd[ep(p, d, t)] = prev_bwd[p]


def item_estimate(dp=4, pp=1, microbatches=1, iterations=1, tp=1, **_) -> int:
    """Upper bound of hybrid_parallel's items: per rank and iteration 2 tasks and up to
    2 pipeline flows per microbatch, 2 (dp - 1) ring flows."""
    return iterations * tp * dp * pp * (4 * microbatches + 2 * dp)
