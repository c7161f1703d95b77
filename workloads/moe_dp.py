"""The data-parallel gradient synchronisation of :func:`workloads.moe.moe_training` (Hermod, seed 004,
chapter 5): :func:`dp_sync`, run once per iteration after every stage's operations.

**Data parallelism.** A stage's data-parallel replicas reduce the dense
gradients, ``1/tp`` of them per tensor rank, and the expert gradients over
their ``edp`` GPUs, in buckets as Megatron-Core's
``DistributedDataParallel`` with ``overlap_grad_reduce`` (which the thesis
enabled, §5.1.2: "the overlap-grad-reduce training parameter is enabled"):
gradient synchronisation runs on the last microbatch only (§5.2.2 Case
II: "DP coflows are invoked only after the last microbatch completes its
gradient calculation for the layer"); a bucket's reduction starts when the
last microbatch's backward pass has produced all its gradients, so it
overlaps the rest of that backward pass. Bucket size (``bucket_params``,
parameters): Megatron-Core's default, ``DistributedDataParallelConfig.
bucket_size``: "If unspecified, MCore uses a default value of
max(40000000, 1000000 * dp_size) parameters" (megatron/core/distributed/
distributed_data_parallel_config.py), and ``DistributedDataParallel``
turns bucketing off on pipeline stages after the first ("since
data-parallel communication on these stages is not on the critical
path") and on model chunks after the first: one bucket there
(:func:`megatron_bucket`). Dense and expert parameters fill separate
buckets (Megatron's expert-parallel buffers). Buckets are cut at layer
boundaries once they hold at least the size (Megatron's rule, which cuts
at parameter boundaries: a layer larger than the bucket is one bucket
here, since its backward pass is one task). With ``zero2`` the ring is a
reduce-scatter (tag ``dp_phase: rs``) then an all-gather of the updated
parameters (``dp_phase: ag``): ZeRO-2 moves the same bytes as an
all-reduce (§5.1.1), the phases only say when the data is consumed.
Without, every step is ``dp_phase: ar``. ``dp_algo: tree`` uses NCCL's
double binary tree instead (half the bytes per tree, reduce then
broadcast; Hermod runs each tree at half the line rate, §5.3.2). DP flows
carry the last microbatch id. No barrier between iterations: the next
iteration's forward pass of a layer waits only for that layer's DP
(clip-by-value, §5.2.2 note 4).

Every function takes ``b``, :mod:`workloads.moe`'s builder (the job being made, its shape ``b.s``, and
``b.dp_done``: where each rank's next forward pass of a layer waits), so it makes a
:class:`~railbed.job.Job` or an ``ArrayJob`` alike (:mod:`workloads.moe`, "Arrays"). It imports
nothing from :mod:`workloads.moe`, which imports it.
"""

from __future__ import annotations


def dp_sync(b, it: int) -> None:
    """Per bucket (:func:`buckets`): dense gradients over the data-parallel replicas, expert
    gradients over the expert-data-parallel GPUs (ring all-reduce, or ZeRO-2 reduce-scatter +
    all-gather)."""
    s = b.s
    for p in range(s.pp):
        for c in range(s.chunks):
            layers = list(reversed(b.layers_of(c * s.pp + p)))
            size = b.bucket if b.bucket is not None else megatron_bucket(s.dp, p, c)
            for bucket in buckets(layers, s.dense_params(), size):
                for t in range(s.tp):
                    ranks = [b.name(p, d, t) for d in range(s.dp)]
                    _allreduce(b, it, ranks, s.dense_grad() * len(bucket), bucket, f"i{it}.dp.l{bucket[0]}.p{p}t{t}")
            if not s.experts or s.edp < 2:
                continue
            for bucket in buckets(layers, s.expert_params(), size):
                for et in range(s.etp):
                    for e in range(s.ep):
                        ranks = [b.expert_rank(p, et, e, ed) for ed in range(s.edp)]
                        prefix = f"i{it}.edp.l{bucket[0]}.p{p}q{e + s.ep * et}"
                        _allreduce(b, it, ranks, s.expert_grad() * len(bucket), bucket, prefix)


def megatron_bucket(dp: int, stage: int, chunk: int) -> float:
    """Megatron-Core's gradient bucket, in parameters, with ``overlap_grad_reduce`` on (module
    docstring, "Data parallelism"): ``max(40e6, 1e6 * dp)`` on pipeline stage 0's first model
    chunk, one bucket (infinite) elsewhere."""
    return float(max(40_000_000, 1_000_000 * dp)) if stage == 0 and chunk == 0 else float("inf")


def buckets(layers: list[int], params_per_layer: int, size: float) -> list[list[int]]:
    """``layers`` (in backward order) cut into buckets: a bucket closes once it holds at least
    ``size`` parameters (Megatron's rule, at layer granularity)."""
    out: list[list[int]] = [[]]
    held = 0
    for layer in layers:
        out[-1].append(layer)
        held += params_per_layer
        if held >= size:
            out.append([])
            held = 0
    return [bk for bk in out if bk]


def _allreduce(b, it: int, ranks: list[str], nbytes: int, bucket: list[int], prefix: str) -> None:
    """All-reduce ``nbytes`` over ``ranks`` (ring or double binary tree) after each rank's backward
    pass of the bucket's first layer (the last it computes); records where each rank holds the result."""
    if len(ranks) < 2 or nbytes <= 0:
        return
    after = {r: b.ref(f"i{it}.B.attn.l{min(bucket)}.m{b.s.last_bwd()}.{r}") for r in ranks}
    ends = (_tree if b.tree else _ring)(b, it, ranks, nbytes, after, bucket, prefix)
    for rank, items in ends.items():
        for layer in bucket:
            b.dp_done.setdefault((rank, layer), []).extend(items)


def _dp_flow(b, it: int, fid: str, src: str, dst: str, size: int, deps, bucket, prefix, tags) -> str:
    return b.job.flow(
        fid, src, dst, size, deps, iteration=it, microbatch=b.s.microbatches - 1, layer=min(bucket),
        coflow=prefix, coflow_type="DP", tags=tags,
    )  # fmt: skip


def _tree(b, it: int, ranks: list[str], nbytes: int, after, bucket, prefix) -> dict[str, list[str]]:
    """Double binary tree (NCCL's): half the bytes over each of two trees, reduced to the root
    then broadcast down (tags ``tree``: 0, 1; ``dp_phase`` rs/ag with ZeRO-2, else ar). Tree 0 is
    the binary heap over ``ranks``, tree 1 the heap over them reversed, so most of tree 0's
    leaves are inner nodes of tree 1. Not pipelined in chunks: each hop carries its half at once."""
    n, half = len(ranks), -(-nbytes // 2)
    ends: dict[str, list[str]] = {r: [] for r in ranks}
    for k, order in enumerate((ranks, ranks[::-1])):
        up: dict[int, list[str]] = {i: [] for i in range(n)}  # flows into position i, reduce phase
        for i in reversed(range(1, n)):
            tags = {"dp_phase": "rs" if b.zero2 else "ar", "tree": k}
            fid = f"{prefix}.t{k}.up{i}"
            up[(i - 1) // 2].append(
                _dp_flow(
                    b, it, fid, order[i], order[(i - 1) // 2], half, [after[order[i]], *up[i]], bucket, prefix, tags
                )
            )
        down: dict[int, list[str]] = {0: [after[order[0]], *up[0]]}
        for i in range(1, n):
            tags = {"dp_phase": "ag" if b.zero2 else "ar", "tree": k}
            fid = f"{prefix}.t{k}.down{i}"
            down[i] = [
                _dp_flow(b, it, fid, order[(i - 1) // 2], order[i], half, down[(i - 1) // 2], bucket, prefix, tags)
            ]
        for i in range(n):
            ends[order[i]] += down[i]
    return ends


def _ring(b, it: int, ranks: list[str], nbytes: int, after, bucket, prefix) -> dict[str, list[str]]:
    """Ring all-reduce (NCCL's): ``2 (n - 1)`` steps of ``nbytes / n`` to the next rank."""
    n, s = len(ranks), b.s
    chunk = -(-nbytes // n)
    prev: dict[int, str] = {}
    nxt = ranks[1:] + ranks[:1]
    for step in range(2 * (n - 1)):
        phase = ("rs" if step < n - 1 else "ag") if b.zero2 else "ar"
        deps = [[after[src]] for src in ranks] if step == 0 else [[prev[(i - 1) % n], prev[i]] for i in range(n)]
        prev = dict(enumerate(b.job.flow_batch(
            [f"{prefix}.s{step}.r{i}" for i in range(n)], ranks, nxt, chunk, deps,
            tags={"dp_phase": phase}, iteration=it, microbatch=s.microbatches - 1, layer=min(bucket), coflow=prefix,
            coflow_type="DP",
        )))  # fmt: skip
    return {ranks[(i + 1) % n]: [prev[i]] for i in range(n)}
