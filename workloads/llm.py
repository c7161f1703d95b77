"""LLM training traffic: data-parallel ring all-reduce and pipeline-parallel point-to-point.

Endpoints are named ``p<stage>d<replica>`` and pinned by ``layout``
(``G = gpus_per_server``; GPU *i* always uses NIC/rail *i*):

``"megatron"``
    Megatron-LM's rank order with tensor parallelism 1 (seed 004, chapter 5
    describes the 3D-parallel jobs Hermod schedules): global rank
    ``r = d + dp * p`` on server ``r // G``, GPU ``r % G``; data-parallel
    neighbours mostly share a server.
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
``DP``). The schedule is GPipe's (all forwards, then all backwards): the
papers' 1F1B variants are a scheduler's business, not the workload's.

Ring all-reduce (the NCCL ring): ``2 (n - 1)`` steps; in each, replica *i*
sends ``gradient / n`` bytes to replica *i + 1*; step *s* of replica *i*
starts when its step *s - 1* chunk from replica *i - 1* arrived.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Job, Location


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
    the rank holds the reduced result."""
    n = len(ranks)
    if n == 1:
        return {ranks[0]: after[ranks[0]][-1]} if after[ranks[0]] else {}
    chunk = -(-nbytes // n)
    prev: dict[int, str] = {}
    for step in range(2 * (n - 1)):
        cur = {}
        for i, src in enumerate(ranks):
            deps = list(after[src]) if step == 0 else [prev[(i - 1) % n]]
            if step > 0:
                deps.append(prev[i])  # its own previous send (one NIC queue per step)
            fid = f"{prefix}.s{step}.r{i}"
            job.flow(fid, src, ranks[(i + 1) % n], chunk, deps=deps, **attrs)
            cur[i] = fid
        prev = cur
    return {ranks[(i + 1) % n]: prev[i] for i in range(n)}


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
) -> Job:
    """A ``dp`` x ``pp`` training job (see the module docstring).

    ``dscp`` maps a coflow type (``PP``, ``DP``) to a DSCP written into the
    flows' ``tags`` for tag-driven schedulers (``tag-priority``)."""
    _check("dp", dp)
    _check("pp", pp)
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
    job = Job(name or f"llm-dp{dp}-pp{pp}-mb{microbatches}")
    G = gpus_per_server
    for p in range(pp):
        for d in range(dp):
            if layout == "megatron":
                r = d + dp * p
                pin = Location(r // G, f"gpu{r % G}", r % G)
            elif layout == "rail":
                pin = Location(d + dp * (p // G), f"gpu{p % G}", p % G)
            else:
                pin = None
            job.endpoint(f"p{p}d{d}", pin)
    last_of: dict[str, str] = {}  # endpoint -> last item of the previous iteration
    for it in range(iterations):
        done_bwd: dict[str, str] = {}
        for d in range(dp):
            fwd_ids: dict[tuple[int, int], str] = {}
            for m in range(microbatches):
                for p in range(pp):
                    ep = f"p{p}d{d}"
                    deps = []
                    if p > 0:
                        deps.append(f"i{it}.act.p{p - 1}d{d}.m{m}")
                    if m > 0:
                        deps.append(fwd_ids[(p, m - 1)])
                    elif ep in last_of:
                        deps.append(last_of[ep])
                    tid = job.task(f"i{it}.fwd.{ep}.m{m}", ep, fwd, deps, iteration=it, microbatch=m, layer=p)
                    fwd_ids[(p, m)] = tid
                    if p < pp - 1:
                        job.flow(
                            f"i{it}.act.{ep}.m{m}", ep, f"p{p + 1}d{d}", activation, [tid],
                            iteration=it, microbatch=m, layer=p, coflow=f"i{it}.pp.m{m}", coflow_type="PP",
                            tags=pp_tags,
                        )  # fmt: skip
            prev_bwd: dict[int, str] = {}
            for m in range(microbatches):
                for p in reversed(range(pp)):
                    ep = f"p{p}d{d}"
                    deps = [fwd_ids[(pp - 1, microbatches - 1)]] if p == pp - 1 else [f"i{it}.grad.p{p + 1}d{d}.m{m}"]
                    if p in prev_bwd:
                        deps.append(prev_bwd[p])
                    elif p < pp - 1:
                        deps.append(fwd_ids[(p, microbatches - 1)])
                    tid = job.task(f"i{it}.bwd.{ep}.m{m}", ep, bwd, deps, iteration=it, microbatch=m, layer=p)
                    prev_bwd[p] = tid
                    if p > 0:
                        job.flow(
                            f"i{it}.grad.{ep}.m{m}", ep, f"p{p - 1}d{d}", activation, [tid],
                            iteration=it, microbatch=m, layer=p, coflow=f"i{it}.pp.m{m}", coflow_type="PP",
                            tags=pp_tags,
                        )  # fmt: skip
            for p in range(pp):
                done_bwd[f"p{p}d{d}"] = prev_bwd[p]
        for p in range(pp):
            ranks = [f"p{p}d{d}" for d in range(dp)]
            if dp > 1 and gradient > 0:
                ends = ring_allreduce(
                    job, ranks, gradient, {r: [done_bwd[r]] for r in ranks}, f"i{it}.ar.p{p}",
                    iteration=it, layer=p, coflow=f"i{it}.dp.p{p}", coflow_type="DP", tags=dp_tags,
                )  # fmt: skip
                last_of.update(ends)
            else:
                last_of.update({r: done_bwd[r] for r in ranks})
    return job.validate()
