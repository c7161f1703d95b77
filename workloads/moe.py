"""MoE (and dense) LLM training traffic for Hermod (seed 004, chapter 5): ``moe_training``.

**Model** (§5.1.1, Fig. 5.4). ``layers`` transformer layers. A MoE layer's
forward pass on a GPU: attention + gate (one task) -> metadata all-gather
in the EP group -> EP dispatch all-to-all -> expert compute (in proportion
to the tokens the GPU received) -> combine all-to-all. A dense layer
(``experts`` = 0, GPT-3) is one task (attention + MLP). The backward pass
mirrors it (combine gradients, expert backward, dispatch gradients,
attention backward) at twice the compute.

**Parallelism** ``(tp, pp, dp, ep)``. ``layout`` is one of Megatron-LM's
two rank orders (``initialize_model_parallel``'s ``order``), TP fastest:
``"megatron"`` (default, ``tp-cp-ep-dp-pp``) ``r = t + tp * (d + dp * p)``,
the pipeline outermost, so PP crosses servers; ``"dp-outer"`` (its
``--use-tp-pp-dp-mapping``, ``tp-cp-ep-pp-dp``) ``r = t + tp * (p + pp *
d)``, a replica's stages side by side. Rank *r* sits on server ``r //
gpus_per_server``, GPU ``g = r % gpus_per_server`` and NIC ``g *
nics_per_server // gpus_per_server`` (8 GPUs on 2 NICs: GPUs 0-3 on NIC 0,
4-7 on NIC 1, as the §5.5.1 testbed must share them). The thesis names
neither order; which of its scopes each keeps (Table 5.1: TP inside a
node, EP across nodes inside a rack, DP and PP across racks) is
:func:`crossing`'s to say, and the scenarios' choice is in
``scenarios/hermod/README.md``. TP stays inside a server: its
all-reduces run on NVLink and are folded into the compute times, as in
:mod:`workloads.llm`; with sequence parallelism each tensor rank holds
``1/tp`` of a microbatch's tokens, so PP and EP flows carry ``1/tp`` of the
tokens each.

**Experts.** Megatron-Core's expert grid over a stage's ``dp * tp``
ranks: local rank ``t + tp * d = et + etp * (e + ep * ed)``, expert tensor
rank ``et`` fastest, then the EP rank ``e``, then the expert-data rank
``ed``. ``etp`` (``expert_tensor_parallel_size``) is Megatron's default,
``tp``, when ``ep`` divides ``dp``: an EP group is then ``ep`` consecutive
data-parallel replicas at one tensor rank, so with TP 8 on 8-GPU servers
(every simulated model of Table 5.5) each member is on another server, the
"intra-rack" cross-node scope of Table 5.1. Otherwise (Qwen-MoE-24L: EP 32
over DP 16) ``etp = 1`` (Megatron-Core's MoE parallel folding): an EP group
is ``ep`` consecutive ranks of the plane. The argument ``etp`` (Megatron's
``--expert-tensor-parallel-size``) sets it instead: a divisor of ``tp``
with ``ep * etp`` dividing ``dp * tp``. Each GPU holds ``experts / ep``
experts, ``1/etp`` of each. The all-to-alls carry each GPU's own
(sequence-parallel) tokens, as Megatron-Core's all-to-all token dispatcher
does; with ``etp > 1`` the tokens are then gathered in the expert-tensor
group over NVLink (free here) and every member computes ``1/etp`` of them.
Expert gradients are reduced over the ``edp = dp * tp / (etp * ep)`` GPUs
holding the same expert shard.

``expert_grid: strided`` (ours; default ``megatron``, the grid above) takes
the expert-data rank before the EP rank, ``et + etp * (ed + edp * e)``: an
EP group's members are ``edp`` replicas apart, so they span the servers of
a stage's plane. The thesis states the scope, not the grid: Table 5.1 gives
EP coflows an intra-rack, cross-node scope, and Fig. 5.11 credits the EP
matching with 1.24 / 1.12 = 1.11x on the testbed's Mixtral-8x7B (t1 p2 e8 d16
on 8-GPU servers), whose EP groups Megatron-Core's grid keeps inside one
server (TP 1: eight consecutive replicas), where no matching can gain. The
grid is an unstated parameter of that row: both are run.

**Data parallelism** (Megatron-Core's gradient buckets, ring or double binary tree, ZeRO-2's
phases, when each bucket's reduction starts and what waits for it): :mod:`workloads.moe_dp`, whose
docstring has the rules and their sources.

**Routing.** Per (iteration, layer) the experts' popularity is drawn from
a Dirichlet of concentration ``skew`` (small: skewed, as EP matrices are,
Table 5.1); per microbatch and GPU the ``tokens * topk`` assignments are a
multinomial draw from it (a token may draw one expert twice: aggregates
only). ``seed`` makes it reproducible. EP flows are ``reveal="on_ready"``.
A ring all-gather of the token counts (``metadata`` bytes per GPU) precedes
each forward dispatch (§5.3.2); the combine and the backward all-to-alls
reuse those counts, as Megatron's token dispatcher does (the issue asks
for one before each EP coflow; we follow the framework).

**Pipeline schedules** (``schedule``): ``gpipe``, ``1f1b`` (PipeDream-Flush:
``pp - p - 1`` warm-up forwards on stage *p*, then one forward one
backward) and ``interleaved`` (Megatron's interleaved 1F1B with
``chunks`` model chunks per stage; ``microbatches`` a multiple of ``pp``).
Each stage runs its operations in that order (each waits for the one
before on its GPU); PP sends are asynchronous (isend).

**Sizes** (bf16, 2 bytes). Tokens per microbatch ``seq * mbs``; an
activation is ``tokens / tp * hidden * 2`` bytes; a token routed to an
expert moves ``hidden * 2`` bytes. Dense parameters per layer: ``4 h^2``
attention (+ ``2 h ffn`` MLP when dense); an expert ``3 h ffn`` (SwiGLU).
**Compute** (forward, backward twice that): attention ``tokens (8 h^2 +
4 seq h)`` FLOPs, an expert ``6 h ffn`` per routed token, a dense MLP
``4 h ffn`` per token, over ``gpu_tflops * efficiency``: 312 TFLOP/s, the
testbed's A100 (§5.5.1) in bf16 dense (NVIDIA's A100 datasheet), at 0.5,
the share of peak Megatron-LM's PTD-P sustains per A100 ("per-GPU
throughput of 52% of theoretical peak", Narayanan et al. 2021, the
thesis's [125]). Checked against the thesis's own profile (Case I,
§5.2.2: attention 2.4 ms + gate 0.6 ms against a PP coflow of ~4 ms) by
``python scenarios/hermod/calibration.py``.

**Presets** (``model``, Table 5.5): layers, experts, PP/TP/EP, sequence
length and microbatch size from the table; the rest, where the table is
silent, from the models' public configurations: Qwen1.5-MoE (hidden 2048,
expert FFN 1408, top-4; the table's 64 experts counts its 4 shared ones as
routed), Mixtral 8x7B (hidden 4096, FFN 14336, top-2), Mixtral 8x22B
(hidden 6144, FFN 16384, top-2; the table's 32 layers, not the model's 56),
GPT-3 13B (hidden 5120) and 175B (hidden 12288), FFN 4h. The paper gives
no microbatch count; we use ``2 * pp`` unless told. Arguments given
explicitly override the preset.

**Shrink** (emulation, issue 14). ``shrink = s`` divides hidden, FFN and
sequence length by ``s`` and the GPUs' throughput by ``s``: every byte count
(activations ``tokens h``, EP ``tokens h``, parameters ``h^2`` and ``h ffn``)
and every compute time (``tokens h^2``, ``tokens seq h``, ``tokens h ffn``
over the throughput) shrinks by ``s^2``, so each ratio of compute to
communication is kept, which cutting the sequence alone does not (DP
gradients do not depend on it). Experts, top-k, parallelism and the token
routing's shape stay; what does not scale is what is fixed per message or
per link: the 512-byte metadata, link latency, TCP's headers and windows.

**Arrays** (issue 14). :func:`moe_arrays` runs this same code into a
:class:`workloads.arrays.ArrayJob` instead of a :class:`Job` (27 million
items at 8192 GPUs: about 22 GB as objects, 2 GB as columns). The code
therefore uses what ``task``/``flow`` return as dependencies (the id, or
an index) and names items by id only through ``_Builder.ref`` (a PP
gradient from the next stage is named before it is made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Location, paused_gc
from workloads.moe_dp import buckets, dp_sync, megatron_bucket

SCHEDULES = ("gpipe", "1f1b", "interleaved")
EXPERT_GRIDS = ("megatron", "strided")  # moe_training's expert_grid (module docstring, "Experts")
SHRUNK = ("hidden", "ffn", "seq")  # divided by ``shrink``, with the GPUs' throughput
PRESETS: dict[str, dict] = {
    "qwen-moe-12l": dict(layers=12, experts=64, topk=4, hidden=2048, ffn=1408, pp=4, tp=1, ep=8, seq=4096, mbs=4),
    "qwen-moe-24l": dict(layers=24, experts=64, topk=4, hidden=2048, ffn=1408, pp=8, tp=8, ep=32, seq=4096, mbs=8),
    "mixtral-8x7b": dict(layers=32, experts=8, topk=2, hidden=4096, ffn=14336, pp=2, tp=1, ep=8, seq=4096, mbs=4),
    "mixtral-8x22b": dict(layers=32, experts=8, topk=2, hidden=6144, ffn=16384, pp=8, tp=8, ep=8, seq=4096, mbs=8),
    "gpt3-13b": dict(layers=40, experts=0, topk=0, hidden=5120, ffn=20480, pp=4, tp=4, ep=1, seq=2048, mbs=4),
    "gpt3-175b": dict(layers=96, experts=0, topk=0, hidden=12288, ffn=49152, pp=8, tp=8, ep=1, seq=2048, mbs=8),
}
DEFAULTS = dict(layers=4, experts=8, topk=2, hidden=1024, ffn=2048, pp=2, tp=1, ep=2, seq=512, mbs=1)
BYTES = 2  # bf16
__all__ = ["buckets", "megatron_bucket"]  # workloads.moe_dp's, importable from here as before the split


def stage_order(schedule: str, pp: int, microbatches: int, stage: int, chunks: int = 1) -> list[tuple[str, int, int]]:
    """The operations of pipeline ``stage`` in the order its GPU runs them: ``("F"|"B", microbatch, chunk)``."""
    m, p = microbatches, stage
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule == "1f1b":
        chunks, warm = 1, min(pp - p - 1, m)
    else:
        warm = m * chunks if m == pp else min((pp - p - 1) * 2 + (chunks - 1) * pp, m * chunks)

    def op(kind: str, k: int) -> tuple[str, int, int]:
        c = (k // pp) % chunks
        return (kind, (k // (pp * chunks)) * pp + k % pp, c if kind == "F" else chunks - 1 - c)

    total = m * chunks
    ops = [op("F", k) for k in range(warm)]
    for i in range(total - warm):
        ops += [op("F", warm + i), op("B", i)]
    return ops + [op("B", k) for k in range(total - warm, total)]


@dataclass
class _Shape:
    layers: int
    experts: int
    topk: int
    hidden: int
    ffn: int
    pp: int
    tp: int
    ep: int
    seq: int
    mbs: int
    dp: int
    microbatches: int
    chunks: int
    flops: float  # effective FLOP/s of a GPU
    etp: int = 1  # expert tensor parallel size (module docstring, "Experts")

    @property
    def edp(self) -> int:  # expert data parallel size: GPUs holding the same expert shard
        return self.dp * self.tp // (self.etp * self.ep)

    @property
    def tokens(self) -> int:  # per GPU and microbatch (sequence parallel)
        return self.seq * self.mbs // self.tp

    def attn_time(self) -> float:
        h = self.hidden
        mlp = 0 if self.experts else 4 * h * self.ffn
        return self.tokens * (8 * h * h + 4 * self.seq * h + mlp) / self.flops

    def expert_time(self, routed: int) -> float:
        return routed * 6 * self.hidden * self.ffn / self.flops

    def dense_grad(self) -> int:
        h = self.hidden
        return (4 * h * h + (0 if self.experts else 2 * h * self.ffn)) * BYTES // self.tp

    def expert_grad(self) -> int:
        return (self.experts // self.ep) * 3 * self.hidden * self.ffn * BYTES // self.etp

    def dense_params(self) -> int:  # a layer's dense gradient in parameters (workloads.moe_dp's buckets)
        return self.dense_grad() // BYTES

    def expert_params(self) -> int:  # a layer's expert gradient in parameters
        return self.expert_grad() // BYTES

    def last_bwd(self) -> int:
        """The microbatch whose backward pass a stage runs last (in every schedule here: the last)."""
        return self.microbatches - 1


@dataclass
class _Builder:
    job: Job
    s: _Shape
    rng: np.random.Generator
    skew: float
    metadata: int
    zero2: bool
    bucket: float | None  # parameters per gradient bucket; None: Megatron's default (megatron_bucket)
    tree: bool = False
    strided: bool = False  # expert_grid: strided (module docstring, "Experts")
    last: dict[str, list[str]] = field(default_factory=dict)  # endpoint -> items its GPU's next op waits for
    dp_done: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (endpoint, layer) -> its DP ends
    routes: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)  # id -> handle of the items named later by id (PP flows, last backward)

    def keep(self, item_id: str, handle):
        """Remember an item that a later dependency names by its id (``ref``)."""
        self.kept[item_id] = handle
        return handle

    def ref(self, item_id: str):
        """The handle of item ``item_id`` for a dependency: its id in a :class:`Job`, its index in a
        :class:`workloads.arrays.ArrayJob`, where an item made later (a backward pass's gradient
        from the next stage) is a placeholder the sink resolves when it is made."""
        got = self.kept.get(item_id)
        if got is not None:
            return got
        forward = getattr(self.job, "forward", None)
        return item_id if forward is None else forward(item_id)

    # ranks and groups
    def name(self, p: int, d: int, t: int) -> str:
        return f"p{p}d{d}t{t}"

    def plane(self, p: int) -> list[str]:
        """A stage's ranks in (data, tensor) order, tensor fastest (made once per stage; not to be changed)."""
        got = self.routes.get(("plane", p))
        if got is None:
            got = self.routes[("plane", p)] = [self.name(p, d, t) for d in range(self.s.dp) for t in range(self.s.tp)]
        return got

    def expert_rank(self, p: int, et: int, e: int, ed: int) -> str:
        """The GPU of stage ``p`` at expert-tensor rank ``et``, expert rank ``e``, expert-data
        rank ``ed``: Megatron-Core's expert grid, ``etp`` fastest, then ``ep``, then the rest,
        over the same ranks as the stage's (data, tensor) plane, or (``expert_grid: strided``)
        ``ed`` before ``ep`` (module docstring, "Experts")."""
        s = self.s
        if self.strided:
            return self.plane(p)[et + s.etp * (ed + s.edp * e)]
        return self.plane(p)[et + s.etp * (e + s.ep * ed)]

    def ep_groups(self, p: int) -> list[list[str]]:
        """Stage ``p``'s EP groups, each ``ep`` GPUs holding every expert once."""
        s = self.s
        return [[self.expert_rank(p, et, e, ed) for e in range(s.ep)] for ed in range(s.edp) for et in range(s.etp)]

    def layers_of(self, vs: int) -> range:
        n = self.s.layers // (self.s.pp * self.s.chunks)
        return range(vs * n, (vs + 1) * n)

    # EP routing
    def matrix(self, it: int, layer: int, m: int, p: int, g: int) -> np.ndarray:
        """Tokens routed from GPU a to GPU b of EP group g (experts of b): ``[a, b]``."""
        key = (it, layer, m, p, g)
        if key not in self.routes:
            s = self.s
            pop = self._popularity(it, layer)
            counts = self.rng.multinomial(s.tokens * s.topk, pop, size=s.ep)  # [gpu, expert]
            self.routes[key] = counts.reshape(s.ep, s.ep, s.experts // s.ep).sum(axis=2)
        return self.routes[key]

    def _popularity(self, it: int, layer: int) -> np.ndarray:
        key = ("pop", it, layer)
        if key not in self.routes:
            self.routes[key] = self.rng.dirichlet(np.full(self.s.experts, self.skew))
        return self.routes[key]


def _check_int(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(name, f"must be an integer >= {low}, got {value!r}")
    return value


def shape(
    model, args: dict, dp: int, microbatches, chunks: int, flops: float, shrink: int = 1, etp: int | None = None
) -> _Shape:
    if model is not None and model not in PRESETS:
        raise SpecError("model", f"unknown model {model!r} (known: {', '.join(PRESETS)})")
    base = dict(DEFAULTS, **(PRESETS[model] if model else {}))
    base.update({k: v for k, v in args.items() if v is not None})
    for k, v in base.items():
        _check_int(k, v, 0 if k in ("experts", "topk") else 1)
    for k in SHRUNK:  # every size and compute time / shrink**2 (module docstring, "Shrink")
        if base[k] % shrink:
            raise SpecError("shrink", f"{shrink} must divide {k} ({base[k]})")
        base[k] //= shrink
    flops /= shrink
    mb = base["pp"] * 2 if microbatches is None else _check_int("microbatches", microbatches)
    dp = _check_int("dp", dp)
    if etp is None:  # module docstring, "Experts"
        etp = base["tp"] if base["ep"] and dp % base["ep"] == 0 else 1
    elif _check_int("etp", etp) and (base["tp"] % etp or (dp * base["tp"]) % (etp * base["ep"])):
        raise SpecError(
            "etp", f"must divide tp ({base['tp']}) with ep x etp dividing dp x tp ({dp * base['tp']}), got {etp}"
        )
    return _Shape(**base, dp=dp, microbatches=mb, chunks=chunks, flops=flops, etp=etp)


def _validate(s: _Shape, schedule: str, gpus: int, nics: int) -> None:
    if schedule not in SCHEDULES:
        raise SpecError("schedule", f"must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if s.chunks > 1 and schedule != "interleaved":
        raise SpecError("chunks", "model chunks need schedule: interleaved")
    if schedule == "interleaved" and (s.microbatches % s.pp or s.pp < 2):
        raise SpecError("microbatches", f"interleaved 1F1B needs pp >= 2 and microbatches a multiple of pp ({s.pp})")
    if s.layers % (s.pp * s.chunks):
        raise SpecError("layers", f"{s.layers} layers do not split into {s.pp} stages x {s.chunks} chunks")
    if gpus % s.tp:
        raise SpecError("tp", f"a tensor-parallel group must fit in a server: {s.tp} does not divide {gpus}")
    if nics > gpus:
        raise SpecError("nics_per_server", f"more NICs ({nics}) than GPUs ({gpus}) per server")
    if s.experts:
        if s.topk < 1 or s.topk > s.experts:
            raise SpecError("topk", f"must be in 1..experts ({s.experts}), got {s.topk}")
        if (s.dp * s.tp) % s.ep or s.experts % s.ep:
            raise SpecError("ep", f"{s.ep} must divide dp x tp ({s.dp * s.tp}) and experts ({s.experts})")
    if s.tokens < 1:
        raise SpecError("seq", "seq * mbs must be at least tp")


def moe_training(
    model: str | None = None,
    dp: int = 2,
    microbatches: int | None = None,
    iterations: int = 1,
    schedule: str = "1f1b",
    chunks: int = 1,
    zero2: bool = False,
    bucket_params: int | None = None,
    dp_algo: str = "ring",
    skew: float = 1.0,
    seed: int = 0,
    metadata: int = 512,
    layout: str = "megatron",
    expert_grid: str = "megatron",
    etp: int | None = None,
    gpus_per_server: int = 8,
    nics_per_server: int = 8,
    gpu_tflops: float = 312.0,
    efficiency: float = 0.5,
    layers: int | None = None,
    experts: int | None = None,
    topk: int | None = None,
    hidden: int | None = None,
    ffn: int | None = None,
    pp: int | None = None,
    tp: int | None = None,
    ep: int | None = None,
    seq: int | None = None,
    mbs: int | None = None,
    shrink: int = 1,
    name: str | None = None,
) -> Job:
    """A MoE or dense training job (see the module docstring); ``model`` picks a Table 5.5 preset."""
    return _build(Job, dict(locals())).validate()


@paused_gc()
def moe_arrays(**kwargs):
    """:func:`moe_training`'s job, the same items in the same order, made straight into a
    :class:`workloads.arrays.ArrayJob` (columns, no :class:`~railbed.job.Job`): the same code
    makes both, through the sink's ``task``/``flow``/``endpoint`` (issue 14: 27 million items
    at 8192 GPUs do not fit as Python objects). Same arguments as :func:`moe_training`."""
    import inspect

    from workloads.arrays import ArrayJob

    params = inspect.signature(moe_training).parameters
    unknown = set(kwargs) - set(params)
    if unknown:
        raise SpecError(sorted(unknown)[0], "moe_training takes no such argument")
    args = {k: kwargs.get(k, p.default) for k, p in params.items()}
    return _build(ArrayJob, args).finish()


def describe(**kwargs) -> dict:
    """What :func:`moe_training` with these arguments builds, without building it (the
    reproduction report's labels): model, layers and the model's own layer count, GPUs
    (tp x pp x dp), microbatches, iterations, shrink. Same arguments and checks as ``moe_training``."""
    import inspect

    params = inspect.signature(moe_training).parameters
    a = {k: kwargs.get(k, p.default) for k, p in params.items()}
    shape_args = {k: a[k] for k in ("layers", "experts", "topk", "hidden", "ffn", "pp", "tp", "ep", "seq", "mbs")}
    s = shape(a["model"], shape_args, a["dp"], a["microbatches"], _check_int("chunks", a["chunks"]), 1.0,
               _check_int("shrink", a["shrink"]))  # fmt: skip
    own = PRESETS[a["model"]]["layers"] if a["model"] else s.layers  # a model without a preset is what it is
    return {"model": a["model"] or "moe", "layers": s.layers, "model_layers": own, "gpus": s.tp * s.pp * s.dp,
            "microbatches": s.microbatches, "iterations": a["iterations"], "shrink": a["shrink"]}  # fmt: skip


def _build(make, a: dict):
    """The generator: ``make(name)`` is the sink (a :class:`Job` or an ``ArrayJob``)."""
    model, dp, microbatches, iterations, schedule, chunks, zero2, bucket_params = (
        a["model"], a["dp"], a["microbatches"], a["iterations"], a["schedule"], a["chunks"], a["zero2"],
        a["bucket_params"],
    )  # fmt: skip
    dp_algo, skew, seed, metadata, layout, gpus_per_server, nics_per_server, gpu_tflops, efficiency, name = (
        a["dp_algo"], a["skew"], a["seed"], a["metadata"], a["layout"], a["gpus_per_server"], a["nics_per_server"],
        a["gpu_tflops"], a["efficiency"], a["name"],
    )  # fmt: skip
    if a["expert_grid"] not in EXPERT_GRIDS:
        raise SpecError("expert_grid", f"must be {' or '.join(EXPERT_GRIDS)}, got {a['expert_grid']!r}")
    shape_args = {k: a[k] for k in ("layers", "experts", "topk", "hidden", "ffn", "pp", "tp", "ep", "seq", "mbs")}
    if not (isinstance(gpu_tflops, (int, float)) and isinstance(efficiency, (int, float))) or not (
        gpu_tflops > 0 and 0 < efficiency <= 1
    ):
        raise SpecError("efficiency", "gpu_tflops must be > 0 and efficiency in (0, 1]")
    if not (isinstance(skew, (int, float)) and skew > 0):
        raise SpecError("skew", f"must be > 0, got {skew!r}")
    flops, shrink = gpu_tflops * 1e12 * efficiency, _check_int("shrink", a["shrink"])
    s = shape(model, shape_args, dp, microbatches, _check_int("chunks", chunks), flops, shrink, a["etp"])
    gpus, nics = _check_int("gpus_per_server", gpus_per_server), _check_int("nics_per_server", nics_per_server)
    _validate(s, schedule, gpus, nics)
    _check_int("iterations", iterations)
    if bucket_params is not None:
        _check_int("bucket_params", bucket_params)
    _check_int("seed", seed, 0)
    _check_int("metadata", metadata, 0)
    if not s.experts:
        s.ep = 1
    label = name or f"{model or 'moe'}-t{s.tp}p{s.pp}d{s.dp}e{s.ep}-{schedule}"
    if dp_algo not in ("ring", "tree"):
        raise SpecError("dp_algo", f"must be ring or tree, got {dp_algo!r}")
    b = _Builder(make(label), s, np.random.default_rng(seed), float(skew), metadata, bool(zero2), bucket_params)
    b.tree = dp_algo == "tree"
    b.strided = a["expert_grid"] == "strided"
    if layout not in ("dp-outer", "megatron"):
        raise SpecError("layout", f"must be dp-outer or megatron, got {layout!r}")
    _endpoints(b, gpus_per_server, nics_per_server, layout)
    for it in range(iterations):
        _iteration(b, it, schedule)
    return b.job


def _endpoints(b: _Builder, gpus: int, nics: int, layout: str) -> None:
    s = b.s
    for p in range(s.pp):
        for d in range(s.dp):
            for t in range(s.tp):
                r = t + s.tp * ((p + s.pp * d) if layout == "dp-outer" else (d + s.dp * p))
                g = r % gpus
                b.job.endpoint(b.name(p, d, t), Location(r // gpus, f"gpu{g}", g * nics // gpus), role="gpu")
                b.last[b.name(p, d, t)] = []


def _iteration(b: _Builder, it: int, schedule: str) -> None:
    """Every stage's operations in its order (each waits for its GPU's previous one, for its
    input from the neighbouring virtual stage and, at a layer's first forward pass, for that
    layer's DP of the previous iteration), then the DP synchronisation. A schedule that could
    deadlock would be a dependency cycle, which ``Job.validate`` refuses."""
    s = b.s
    for p in range(s.pp):
        for kind, m, c in stage_order(schedule, s.pp, s.microbatches, p, s.chunks):
            _op(b, it, kind, m, c * s.pp + p)
    dp_sync(b, it)


def _op(b: _Builder, it: int, kind: str, m: int, vs: int) -> None:
    """Forward or backward pass of microbatch ``m`` through virtual stage ``vs`` on every (d, t)."""
    s = b.s
    p = vs % s.pp
    layers = b.layers_of(vs) if kind == "F" else reversed(b.layers_of(vs))
    for d in range(s.dp):
        for t in range(s.tp):
            here = b.name(p, d, t)
            b.last[here] = b.last[here] + _input_flow(b, it, kind, m, vs, d, t)
    for layer in layers:
        if kind == "F" and m == 0:
            for r in b.plane(p):
                b.last[r] = b.last[r] + b.dp_done.pop((r, layer), [])
        _layer(b, it, kind, m, p, layer)
    nxt = vs + 1 if kind == "F" else vs - 1
    if 0 <= nxt < s.pp * s.chunks:
        for d in range(s.dp):
            for t in range(s.tp):
                here = b.name(p, d, t)
                tag = "act" if kind == "F" else "grad"
                fid = f"i{it}.{tag}.v{vs}.m{m}.{here}"
                b.keep(fid, b.job.flow(
                    fid, here, b.name(nxt % s.pp, d, t),
                    s.tokens * s.hidden * BYTES, list(b.last[here]),
                    iteration=it, microbatch=m, layer=b.layers_of(vs)[-1 if kind == "F" else 0],
                    coflow=f"i{it}.pp.{kind}.v{vs}.m{m}", coflow_type="PP", tags={"pass": kind},
                ))  # fmt: skip


def _input_flow(b: _Builder, it: int, kind: str, m: int, vs: int, d: int, t: int) -> list[str]:
    s = b.s
    prev = vs - 1 if kind == "F" else vs + 1
    if not 0 <= prev < s.pp * s.chunks:
        return []
    tag = "act" if kind == "F" else "grad"
    return [b.ref(f"i{it}.{tag}.v{prev}.m{m}.{b.name(prev % s.pp, d, t)}")]


def _layer(b: _Builder, it: int, kind: str, m: int, p: int, layer: int) -> None:
    s = b.s
    attrs = dict(iteration=it, microbatch=m, layer=layer)
    scale = 1.0 if kind == "F" else 2.0
    plane = b.plane(p)
    if kind == "F" or not s.experts:  # attention (+ gate, + dense MLP) first in forward
        for ep in plane:
            tid = b.job.task(f"i{it}.{kind}.attn.l{layer}.m{m}.{ep}", ep, scale * s.attn_time(), b.last[ep], **attrs)
            b.last[ep] = [tid]
    if s.experts:
        _moe_block(b, it, kind, m, p, layer, scale)
    if kind == "B" and s.experts:
        for ep in plane:
            tid = b.job.task(f"i{it}.{kind}.attn.l{layer}.m{m}.{ep}", ep, scale * s.attn_time(), b.last[ep], **attrs)
            b.last[ep] = [tid]
    if kind == "B" and m == s.last_bwd():  # the DP all-reduces start after these (workloads.moe_dp)
        for ep in plane:
            b.keep(f"i{it}.B.attn.l{layer}.m{m}.{ep}", b.last[ep][0])


def _moe_block(b: _Builder, it: int, kind: str, m: int, p: int, layer: int, scale: float) -> None:
    """All-to-all, expert compute, all-to-all in every EP group of stage ``p``. A GPU's expert
    shard computes the tokens routed to it from the ``etp`` EP groups of its expert-tensor group
    (gathered over NVLink, free), ``1/etp`` of the work each, after all of them arrived; the
    combine waits for the whole expert-tensor group (its reduce-scatter)."""
    s = b.s
    attrs = dict(iteration=it, microbatch=m, layer=layer)
    groups = b.ep_groups(p)
    first = "dispatch" if kind == "F" else "combine-grad"
    second = "combine" if kind == "F" else "dispatch-grad"
    mats, into = [], {}
    for g, group in enumerate(groups):
        tokens = b.matrix(it, layer, m, p, g)
        mats.append(tokens)
        if kind == "F" and b.metadata and s.ep > 1:
            _metadata(b, it, m, layer, group, attrs)
        for j, flows in enumerate(_all_to_all(b, it, kind, m, layer, g, group, tokens, first, attrs)):
            into[group[j]] = flows
    routed: dict[tuple[int, int], int] = {}  # (expert-data rank, expert rank) -> tokens into that shard
    for g, tokens in enumerate(mats):
        for j in range(s.ep):
            routed[(g // s.etp, j)] = routed.get((g // s.etp, j), 0) + int(tokens[:, j].sum())
    tids: dict[str, str] = {}
    for g, group in enumerate(groups):
        for j, ep in enumerate(group):
            peers = [b.expert_rank(p, et, j, g // s.etp) for et in range(s.etp)]
            tids[ep] = b.job.task(
                f"i{it}.{kind}.expert.l{layer}.m{m}.{ep}", ep, scale * s.expert_time(routed[(g // s.etp, j)]) / s.etp,
                b.last[ep] + [f for q in peers for f in into[q]], **attrs,
            )  # fmt: skip
    for g, group in enumerate(groups):
        for j, ep in enumerate(group):
            b.last[ep] = [tids[ep]] + [tids[q] for q in (b.expert_rank(p, et, j, g // s.etp) for et in range(s.etp))
                                       if q != ep]  # fmt: skip
    for g, group in enumerate(groups):
        back = _all_to_all(b, it, kind, m, layer, g, group, mats[g].T, second, attrs)
        for j, ep in enumerate(group):
            b.last[ep] = b.last[ep] + back[j]


def _all_to_all(b, it, kind, m, layer, g, group, tokens, what, attrs) -> list[list[str]]:
    """Flows ``tokens[i, j] * hidden * 2`` bytes from group[i] to group[j] (sizes revealed on ready);
    returns, per receiver, the flows into it."""
    into: list[list[str]] = [[] for _ in group]
    coflow = f"i{it}.ep.{what}.l{layer}.m{m}.p{group[0]}"
    pairs = [(i, j) for i in range(len(group)) for j in range(len(group)) if i != j and tokens[i, j] > 0]
    fids = b.job.flow_batch(
        [f"{coflow}.{i}-{j}" for i, j in pairs], [group[i] for i, _ in pairs], [group[j] for _, j in pairs],
        [int(tokens[i, j]) * b.s.hidden * BYTES for i, j in pairs], [list(b.last[group[i]]) for i, _ in pairs],
        reveal="on_ready", tags={"pass": kind}, each={"ep": [[i, j] for i, j in pairs]}, coflow=coflow,
        coflow_type="EP", **attrs,
    )  # fmt: skip
    for (_, j), fid in zip(pairs, fids):
        into[j].append(fid)
    return into


def _metadata(b, it, m, layer, group, attrs) -> None:
    """Ring all-gather of the token counts: after ``n - 1`` steps every GPU has the matrix."""
    n = len(group)
    prev: dict[int, str] = {}
    coflow = f"i{it}.meta.l{layer}.m{m}.p{group[0]}"
    for step in range(n - 1):
        deps = [list(b.last[src]) if step == 0 else [prev[(i - 1) % n]] for i, src in enumerate(group)]
        prev = dict(enumerate(b.job.flow_batch(
            [f"{coflow}.s{step}.r{i}" for i in range(n)], group, group[1:] + group[:1], b.metadata, deps,
            tags={"metadata": True}, coflow=coflow, coflow_type="EP", **attrs,
        )))  # fmt: skip
    for i, src in enumerate(group):
        b.last[src] = b.last[src] + [prev[(i - 1) % n]]


def crossing(job) -> set[str]:
    """The coflow types with a flow between servers in ``job`` (a :class:`Job`): which of Table
    5.1's network scopes a layout keeps (module docstring, "Parallelism")."""
    return {
        f.coflow_type for f in job.flows
        if f.coflow_type and job.endpoints[f.src].pin.server != job.endpoints[f.dst].pin.server
    }  # fmt: skip


def item_estimate(model=None, dp=2, microbatches=None, iterations=1, **kw) -> int:
    """Upper bound of the job's items, to refuse huge jobs before building them."""
    base = dict(DEFAULTS, **(PRESETS.get(model, {}) if isinstance(model, str) else {}))
    base.update({k: v for k, v in kw.items() if k in base and isinstance(v, int) and v > 0})
    pp, tp, ep, layers = base["pp"], base["tp"], max(1, base["ep"]), base["layers"]
    mb = microbatches if isinstance(microbatches, int) and microbatches > 0 else 2 * pp
    dp = dp if isinstance(dp, int) and dp > 0 else 1
    it = iterations if isinstance(iterations, int) and iterations > 0 else 1
    per_rank_layer_mb = 2 * (3 + (5 * ep if base["experts"] else 0)) + 2
    return it * dp * tp * layers * (mb * per_rank_layer_mb + 4 * dp)
