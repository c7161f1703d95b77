"""DGTP (seed 000) and its baselines as thin schedulers over :mod:`schedulers.dgtp_alg`.

====================  ==================================  ===================  =============
scheduler             placement                           flow rates           pipelining
====================  ==================================  ===================  =============
``dgtp``              ETP with the deviations below,       OES (Alg. 1)         unbounded
                      from DistDGL's placement
``dgtp-literal``      IFS then Alg. 2 as written (§V)     OES                  unbounded
``dgtp-oes``          DistDGL's                           OES                  unbounded
``dgtp-place``        ``dgtp``'s                          fair sharing         unbounded
``distdgl``           owner-compute (seed 001 §4.1)       fair sharing         none (depth 0)
``distdgl-prefetch``  owner-compute                       fair sharing         one mini-batch
``omcoflow``          ``dgtp``'s (§VI-B: "the same        OMCoflow's weights   unbounded
                      placements as computed by DGTP")
``mrtf``              ``dgtp``'s                          min. remaining time  unbounded
====================  ==================================  ===================  =============

Every scheduler starts a task as soon as it is ready (tasks wait only for
their dependencies and a device slot), as §VI-B says of the baselines and
Alg. 1 (line 7) of OES, except where its pipelining bound holds it.

Pipelining (``depth``; :func:`pipeline_waits`)
    DGTP's formulation (§III-B) bounds a sampler only by its own previous
    iteration (eqs. 10-11), and DGTP claims to "pipeline mini-batch
    training across training iterations" (§II-C) where DistDGL "does not
    pipeline GNN training across iterations" (§II-B). So ``dgtp``'s job
    runs unbounded (``depth = -1``). ``distdgl`` is the DGTP paper's
    baseline as that paper describes it: iteration ``n``'s sampling waits
    for iteration ``n-1``'s parameters at its worker (``depth = 0``: a
    store's work for ``n`` waits for update ``n-1``, a fetch for sampler
    ``s`` for the pull to ``s``'s worker). DistDGL's own paper says its
    trainers "overlap the sampling cost with mini-batch training" (seed 001
    §4.1.4) by "fixed size prefetching" (seed 001 §1, [83]):
    ``distdgl-prefetch`` lets sampling run one mini-batch ahead (``depth =
    1``: iteration ``n`` waits for ``n-2``'s parameters). The DGTP paper's
    numbers (-31.75 %, -22.95 %) are against its ``distdgl``. ``depth`` is
    an argument of every scheduler here (the prefetch sensitivity).

Machine bandwidth (B_in^m, B_out^m): the rate of the server's NIC 0, which
every placed endpoint uses (model wire bit/s); every flow counted by OES
crosses machines (same-server flows never enter the network).

ETP's cost (§V-B): the makespan of ``eval_iterations`` (20, §VI-A)
iterations of the job simulated under OES (with the scheduler's pipelining
bound), sizes drawn from the profile (once per search, the same draw for
every candidate, so candidates differ only by placement; the paper does not
say whether it redraws). The run goes through the core's backend seam
(:mod:`railbed.backend`; ``fluid`` unless a caller hands
:func:`simulated_makespan` another backend), so this module imports no
simulator; on one switch without latency :mod:`schedulers.dgtp_eval`'s
event loop computes the same number faster.

The unit of cost (``cost_unit``): eq. 21 multiplies T'_Y by a penalty
that is a sum of percentages, and eq. 23's β = 0.1 multiplies the cost,
but the paper does not say in what unit T'_Y is. The chain's behaviour
depends on it entirely (in seconds a 20-iteration testbed makespan of ~3 s
gives exp(-0.1 x 0.3) ~ 1 for a 10 % worse move: a random walk; in
milliseconds exp(-30): greedy descent). We choose **percent of the start's
T'** (``cost_unit = "percent"``): β is one number for the testbed and for
simulations whose makespans differ by orders of magnitude (§VI uses 0.1 for
all), which it can only be if the cost is scale-free, and eq. 21 already
prices violations in percent. At β = 0.1 a move 1 % worse is accepted with
probability 0.90, 10 % worse with 0.37: the "tendency ... to jump out of
local optima" §V-B describes. ``"s"`` and ``"ms"`` remain for comparison.
Both ``dgtp`` and ``dgtp-literal`` use it (it is a reading, not a deviation).

Deviations of ``dgtp`` from Alg. 2 (``dgtp-literal`` keeps Alg. 2 as written)
    1. start (``start = "distdgl"``): DistDGL's data-aware placement instead
       of IFS's packed one; IFS places tasks regardless of data and the
       chain must first undo it (Alg. 2 line 1 uses IFS only for a feasible
       start; DistDGL's placement is feasible too).
    2. swaps (``moves = "variant"``): half of the proposals exchange the
       machines of two tasks (:func:`schedulers.dgtp_alg.propose_swap`): on
       a packed cluster (the testbed uses 31 of 32 cores) no single task
       can move without overfilling a machine, so single moves alone reach
       better placements only through infeasible ones.
    3. feasible-only proposals (with 2): moves and swaps that keep every
       machine within its capacity (μ = 0 for moves), so no step is spent
       on placements that cannot be returned.

A placement search is done once per (job, cluster, arguments) in a process
and shared (``dgtp-place``, ``omcoflow`` and ``mrtf`` reuse ``dgtp``'s).
Each DGTP-placed run's notes give the search's counters and its trace
(step and best T' at every improvement); every scheduler here notes the
job's graph, partitioner and home-store share (``Scheduler.notes``).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, replace

from railbed.backend import Backend, RunOptions
from railbed.backend import backend as get_backend
from railbed.dispatch import server_resources
from railbed.errors import SpecError
from railbed.job import Flow, Job, Location, Placement
from railbed.scheduler import HOLD, Decision, RunView, Scheduler
from railbed.spec import ClusterSpec
from schedulers import dgtp_alg as alg

KINDS = ("sampler", "worker", "ps")
_SEARCHES: dict[str, tuple[dict[str, int], dict]] = {}  # search key -> (endpoint -> server, stats)


# ------------------------------------------------------------ job reading
def check_gnn_job(job: Job) -> None:
    """A job DGTP can plan: one pinned store per role set, every kind present, same demands per kind,
    a profile for every flow kind whose sizes are hidden before the run."""
    for role in ("store", *KINDS):
        if not job.endpoints_with(role):
            raise SpecError("endpoints", f"DGTP needs endpoints with role {role!r} (a gnn_training job)")
    for role in KINDS:
        eps = [job.endpoints[e] for e in job.endpoints_with(role)]
        if any(dict(e.demands) != dict(eps[0].demands) for e in eps):
            raise SpecError(f"endpoints.{eps[0].name}.demands", f"every {role} must demand the same resources")
    for name in job.endpoints_with("store"):
        if job.endpoints[name].pin is None:
            raise SpecError(f"endpoints.{name}.pin", "a graph store must be pinned to its machine")
    profiles = size_profiles(job)
    for f in job.flows:
        if f.reveal != "upfront" and _pair(f) not in profiles:
            raise SpecError(f"items.{f.id}.tags.profile", "no size profile for this flow's kind and endpoints")


def _pair(f: Flow) -> tuple[str, str, str | None]:
    return f.src, f.dst, f.coflow_type


def size_profiles(job: Job) -> dict[tuple, list[int]]:
    """(src, dst, coflow type) -> the profiled sizes (``tags["profile"]``)."""
    return {_pair(f): list(f.tags["profile"]) for f in job.flows if f.tags.get("profile")}


def previous_flows(job: Job) -> dict[str, str]:
    """Flow id -> its previous-iteration counterpart (same source, destination and kind)."""
    by_key: dict[tuple, dict[int, str]] = {}
    for f in job.flows:
        by_key.setdefault(_pair(f), {})[f.iteration] = f.id
    return {fid: its[n - 1] for its in by_key.values() for n, fid in its.items() if n - 1 in its}


def bandwidth(cluster: ClusterSpec) -> list[float]:
    """B_in^m = B_out^m: the rate of NIC 0, the one :func:`placement_from` gives every endpoint."""
    return [float(s.nic_rates[0]) for s in cluster.servers]


def placement_from(job: Job, cluster: ClusterSpec, machine_of: dict[str, int]) -> Placement:
    """Pins kept; a worker takes the next free GPU of its machine, the rest run on ``cpu``; NIC 0."""
    gpus_taken: dict[int, int] = {}
    out = {}
    for name, ep in job.endpoints.items():
        if ep.pin is not None:
            out[name] = ep.pin
            continue
        m = machine_of[name]
        if ep.role == "worker" and cluster.servers[m].gpus > 0:
            g = gpus_taken.get(m, 0)
            gpus_taken[m] = g + 1
            out[name] = Location(m, f"gpu{g % cluster.servers[m].gpus}", 0)
        else:
            out[name] = Location(m, "cpu", 0)
    return Placement(out)


def unlimited(cluster: ClusterSpec) -> ClusterSpec:
    """The cluster with no resource limits (devices and NICs unchanged)."""
    servers = tuple(replace(s, resources={r: 1e18 for r in server_resources(s)}) for s in cluster.servers)
    return replace(cluster, servers=servers)


def _movable(job: Job) -> list[str]:
    return [e for e in job.endpoints if job.endpoints[e].role in KINDS]


def _capacity(cluster: ClusterSpec) -> list[dict[str, float]]:
    return [server_resources(s) for s in cluster.servers]


# ------------------------------------------------------------ placements
def ifs_assignment(job: Job, cluster: ClusterSpec, seed: int = 0) -> dict[str, int]:
    """IFS (§V-A) on the job's samplers, workers and PSs; tasks of a kind fill machines in job order."""
    groups = [job.endpoints_with(k) for k in KINDS]
    demands = [dict(job.endpoints[g[0]].demands) for g in groups]
    order = list(range(len(cluster.servers)))
    random.Random(seed).shuffle(order)
    counts = alg.ifs([len(g) for g in groups], demands, _capacity(cluster), order)
    if counts is None:
        raise SpecError("cluster", "no placement of the job's samplers, workers and PSs fits the servers' resources")
    out: dict[str, int] = {}
    for k, names in enumerate(groups):
        slots = [m for m in order for _ in range(counts[m][k])]
        out.update(zip(names, slots))
    return out


def distdgl_assignment(job: Job, cluster: ClusterSpec) -> dict[str, int]:
    """DistDGL (seed 001 §4.1; seed 000 §VI-A): each worker with its samplers on its data's
    machine (the store its samplers fetch most from, by the profile) where the whole group
    fits; then the other workers (their home, else the machine with the most free cores that
    holds one), then their samplers (the worker's machine, its home, the freest); the PS on
    the freest machine. Workers are placed before stray samplers so that samplers never take
    the cores a worker needs."""
    cap = _capacity(cluster)
    used: list[dict[str, float]] = [{} for _ in cap]
    samplers_of = {w: [f.src for f in job.flows if f.dst == w and f.iteration == 0 and _role(job, f.src) == "sampler"]
                   for w in job.endpoints_with("worker")}  # fmt: skip
    out: dict[str, int] = {}

    def free_cpu(m: int) -> float:
        return cap[m].get("cpu", 0.0) - used[m].get("cpu", 0.0)

    def take(names: list[str], m: int) -> bool:
        need: dict[str, float] = {}
        for n in names:
            for r, w in job.endpoints[n].demands.items():
                need[r] = need.get(r, 0.0) + w
        if any(used[m].get(r, 0.0) + w > cap[m][r] * (1 + 1e-12) for r, w in need.items() if r in cap[m]):
            return False
        for r, w in need.items():
            used[m][r] = used[m].get(r, 0.0) + w
        out.update({n: m for n in names})
        return True

    def place(names: list[str], first: list[int]) -> bool:
        rest = sorted(range(len(cap)), key=lambda m: (-free_cpu(m), m))
        return any(take(names, m) for m in dict.fromkeys(first + rest))

    home = _homes(job, cluster)
    home_of = {w: home.get(ss[0], 0) if ss else 0 for w, ss in samplers_of.items()}
    for w, samplers in samplers_of.items():  # whole groups at home first
        if not take([w, *samplers], home_of[w]):
            continue
    for w in samplers_of:  # then the workers left out, by their data, then the freest machine
        if w not in out and not place([w], [home_of[w]]):
            raise SpecError("cluster", f"DistDGL: no machine can host worker {w}")
    for w, samplers in samplers_of.items():  # then their samplers: the worker's machine, its home, the freest
        for s in samplers:
            if s not in out and not place([s], [out[w], home_of[w]]):
                raise SpecError("cluster", f"DistDGL: no machine can host sampler {s}")
    for ps in job.endpoints_with("ps"):
        if not place([ps], []):
            raise SpecError("cluster", f"DistDGL: no machine can host {ps}")
    return out


def _role(job: Job, name: str) -> str | None:
    return job.endpoints[name].role


def _homes(job: Job, cluster: ClusterSpec) -> dict[str, int]:
    """Sampler -> the machine of the store it fetches most from (mean profiled bytes)."""
    best: dict[str, tuple[float, int]] = {}
    for (src, dst, _kind), sizes in size_profiles(job).items():
        if _role(job, src) == "store" and sizes:
            mean = sum(sizes) / len(sizes)
            pin = job.endpoints[src].pin
            if pin is not None and mean > best.get(dst, (-1.0, 0))[0]:
                best[dst] = (mean, pin.server)
    return {s: m for s, (_, m) in best.items()}


def pipeline_waits(job: Job, depth: int) -> dict[str, tuple[str, ...]]:
    """Item id -> what it waits for under pipelining ``depth`` (see "Pipelining"): a store's task
    of iteration ``n`` waits for the PS's update of ``n - 1 - depth``, a fetch into sampler ``s``
    for the pull of ``n - 1 - depth`` to ``s``'s worker; nothing for ``depth < 0`` (unbounded)."""
    if depth < 0:
        return {}
    worker_of = {f.src: f.dst for f in job.flows if _role(job, f.src) == "sampler" and _role(job, f.dst) == "worker"}
    pull: dict[tuple[str, int], str] = {}
    update: dict[int, str] = {}
    for item in job.items.values():
        if isinstance(item, Flow) and _role(job, item.src) == "ps":
            pull[item.dst, item.iteration] = item.id
        elif not isinstance(item, Flow) and _role(job, item.endpoint) == "ps":
            update[item.iteration] = item.id
    out: dict[str, tuple[str, ...]] = {}
    for item in job.items.values():
        n = item.iteration - 1 - depth
        if n < 0:
            continue
        if isinstance(item, Flow) and _role(job, item.src) == "store":
            waits = (pull.get((worker_of.get(item.dst, ""), n)),)
        elif not isinstance(item, Flow) and _role(job, item.endpoint) == "store":
            waits = (update.get(n),)
        else:
            continue
        out[item.id] = tuple(w for w in waits if w is not None)
    return out


def profile_job(job: Job, iterations: int, seed: int = 0, depth: int = -1) -> Job:
    """The job's first ``iterations`` iterations with hidden sizes drawn from the profile (§V-B),
    and the waits of pipelining ``depth`` as dependencies."""
    rng = random.Random(seed)
    profiles = size_profiles(job)
    waits = pipeline_waits(job, depth)
    out = Job(f"{job.name}-profile", job.capacity, job.default_capacity)
    out.endpoints = dict(job.endpoints)
    for item in job.items.values():
        if item.iteration >= iterations:
            continue
        if isinstance(item, Flow):
            size = item.size if item.size is not None else rng.choice(profiles[_pair(item)])
            item = replace(item, size=int(size), reveal="upfront", tags={})
        if waits.get(item.id):
            item = replace(item, deps=(*item.deps, *waits[item.id]))
        out.items[item.id] = item
    return out.validate()


@dataclass(frozen=True)
class SearchArgs:
    """Everything a placement search depends on besides the job and the cluster."""

    beta: float = 0.1
    mu: float = 1.0
    steps: int = 10_000
    seed: int = 0
    eval_iterations: int = 20
    cost_unit: str = "percent"
    start: str = "distdgl"
    moves: str = "variant"
    depth: int = -1


COST_UNITS = {"s": 1.0, "ms": 1e-3}  # and "percent": of the start's T'
STARTS = ("ifs", "distdgl")
MOVES = ("literal", "variant")


def dgtp_assignment(job: Job, cluster: ClusterSpec, args: SearchArgs) -> tuple[dict[str, int], dict]:
    """The start, then ETP with OES-simulated costs; shared by every scheduler asking with the same key."""
    key = _search_key(job, cluster, args)
    if key not in _SEARCHES:
        _SEARCHES[key] = _search(job, cluster, args)
    return _SEARCHES[key]


def _search_key(job: Job, cluster: ClusterSpec, args: SearchArgs) -> str:
    text = json.dumps([job.to_dict(), repr(cluster), repr(args)], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def simulated_makespan(
    job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int, depth: int = -1, backend: Backend | None = None
):
    """T'_Y as a function of a placement vector (machine per :func:`_movable` endpoint): a run of
    ``eval_iterations`` profiled iterations under OES on ``backend`` (default ``fluid``, the full
    simulator; it must call every hook: OES re-rates flows), without resource limits (ETP visits
    over-full placements, eq. 22; the penalty prices them)."""
    runner = backend if backend is not None else get_backend("fluid")
    if not runner.capabilities.hooks:
        raise SpecError("backend", f"ETP's cost runs OES, which re-rates flows: {runner.name} calls no hooks")
    names = _movable(job)
    sample = profile_job(job, eval_iterations, seed, depth)
    roomy = unlimited(cluster)

    def makespan(y: tuple[int, ...]) -> float:
        sched = FixedOes(placement_from(job, cluster, dict(zip(names, y))))
        return runner.run(sample, sched, roomy, RunOptions()).makespan

    return makespan


def fast_makespan(job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int, depth: int = -1):
    """The same T'_Y from :mod:`schedulers.dgtp_eval`'s numba event loop, or ``None`` where that
    loop's assumptions do not hold (a fabric other than one switch, latency, flows that do not
    depend on their previous-iteration counterparts)."""
    from schedulers.dgtp_eval import CompiledJob

    if cluster.fabric.kind != "single_switch" or cluster.fabric.latency > 0:
        return None
    sample = profile_job(job, eval_iterations, seed, depth)
    prev = previous_flows(sample)
    if any(p not in sample.items[f].deps for f, p in prev.items()):
        return None
    compiled = CompiledJob(sample, cluster, bandwidth(cluster))
    names = _movable(job)
    return lambda y: compiled.makespan(placement_from(job, cluster, dict(zip(names, y))))


def evaluators(
    job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int, depth: int = -1, backend: Backend | None = None
) -> dict:
    """Every way railbed has to compute ETP's T'_Y (the benchmark compares them)."""
    out = {"simulate": simulated_makespan(job, cluster, eval_iterations, seed, depth, backend)}
    fast = fast_makespan(job, cluster, eval_iterations, seed, depth)
    if fast is not None:
        out["fast"] = fast
    return out


def start_assignment(job: Job, cluster: ClusterSpec, start: str, seed: int) -> dict[str, int]:
    return ifs_assignment(job, cluster, seed) if start == "ifs" else distdgl_assignment(job, cluster)


def _search(job: Job, cluster: ClusterSpec, a: SearchArgs) -> tuple[dict[str, int], dict]:
    names = _movable(job)
    start = start_assignment(job, cluster, a.start, a.seed)
    fast = fast_makespan(job, cluster, a.eval_iterations, a.seed, a.depth)
    seconds = fast or simulated_makespan(job, cluster, a.eval_iterations, a.seed, a.depth)
    t0 = time.perf_counter()
    y0 = tuple(start[n] for n in names)
    unit = COST_UNITS.get(a.cost_unit) or seconds(y0) / 100.0
    demands = [dict(job.endpoints[n].demands) for n in names]
    capacity = _capacity(cluster)
    propose = None
    if a.moves == "variant":
        propose = lambda y, rng: alg.propose_variant(y, demands, capacity, rng)  # noqa: E731
    best, best_t, stats = alg.etp(
        y0, demands, capacity, lambda y: seconds(y) / unit, a.beta, a.mu, a.steps, random.Random(a.seed), propose
    )
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    stats["makespan"] = best_t * unit
    stats["start_makespan"] = stats["trace"][0][1] * unit
    stats["trace"] = [(step, round(t * unit, 6)) for step, t in stats["trace"]]
    stats["evaluator"] = "fast" if fast is not None else "simulate"
    return dict(zip(names, best)), stats


def search_notes(stats: dict, args: SearchArgs) -> list[str]:
    """The search's counters and trace as run notes."""
    if not stats:
        return []
    trace = ", ".join(f"{step}: {1e3 * t:.1f}" for step, t in stats["trace"])
    return [
        f"ETP ({args.moves} moves from {args.start}, cost in {args.cost_unit}, beta {args.beta}): "
        f"{stats['steps']} steps, {stats['accepted']} accepted ({stats['uphill']} uphill), {stats['stuck']} "
        f"without a proposal, {stats['evaluations']} placements evaluated ({stats['evaluator']}) in "
        f"{stats['seconds']:.1f} s; T' of {args.eval_iterations} profiled iterations "
        f"{1e3 * stats['start_makespan']:.1f} ms at the start, {1e3 * stats['makespan']:.1f} ms best",
        f"ETP trace (step: best T' ms): {trace}",
    ]


def graph_notes(job: Job) -> list[str]:
    """The job's graph as ``gnn_training`` recorded it (first fetch's ``tags["graph"]``)."""
    for f in job.flows:
        g = f.tags.get("graph")
        if g:
            return [
                f"graph: {g.get('dataset')} at scale {g.get('scale')} ({g.get('nodes')} nodes, {g.get('entries')} "
                f"entries, mixing {g.get('mixing')}), {g.get('partitioner')} partitions, edge cut "
                f"{g.get('edge_cut')}, home-store share of fetched bytes {g.get('home_share')}"
            ]
    return []


# ------------------------------------------------------------ rate rules
class _Gnn(Scheduler):
    """What every scheduler here shares: the job check, pipelining ``depth`` (held items), notes."""

    depth = -1

    def check(self, job, cluster):
        check_gnn_job(job)

    def prepare(self, job: Job) -> None:
        self._prev = previous_flows(job)
        self._waits = pipeline_waits(job, self.depth)
        self._graph = graph_notes(job)

    def held_by_depth(self, item, view: RunView) -> bool:
        return any(w not in view.done for w in getattr(self, "_waits", {}).get(item.id, ()))

    def on_ready(self, item, view: RunView):
        return HOLD if self.held_by_depth(item, view) else Decision()

    def notes(self) -> list[str]:
        return [*getattr(self, "_graph", []), f"pipelining depth {self.depth} (-1: unbounded)"]


class Oes(_Gnn):
    """Alg. 1 at run time over a placement chosen by a subclass: F_pend (hold a flow while its
    previous-iteration counterpart is unfinished) and OES rates for every active flow."""

    name = "oes"

    def on_ready(self, item, view: RunView):
        if self.held_by_depth(item, view):
            return HOLD
        if isinstance(item, Flow):
            prev = getattr(self, "_prev", {}).get(item.id)  # None: no previous-iteration counterpart
            if prev is not None and alg.pending(_pair(item), item.iteration, lambda _k, _n: prev not in view.done):
                return HOLD
        return Decision()

    def on_flows_changed(self, view: RunView):
        ids = list(view.active)
        pairs = [(view.active[i].src.server, view.active[i].dst.server) for i in ids]
        b = bandwidth(view.cluster)
        return dict(zip(ids, alg.oes_rates(pairs, b, b)))


class FixedOes(Oes):
    """OES over a given placement (ETP's cost evaluation)."""

    name = "oes-fixed"

    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    def place(self, job, cluster):
        self.prepare(job)
        return self.placement


# ETP runs before the clock starts (in pre-flight too): 10x the paper's settings at most. The
# fast evaluator makes 10,000 steps on the testbed job in seconds (bench/bench_dgtp.py), so the
# largest search takes minutes, not the hours an unbounded count could.
MAX_STEPS = 100_000
MAX_EVAL_ITERATIONS = 200


def _check_depth(depth: int) -> None:
    if depth < -1:
        raise SpecError("depth", f"must be -1 (unbounded) or a number of mini-batches >= 0, got {depth!r}")


def _check_args(a: SearchArgs) -> None:
    if a.cost_unit not in COST_UNITS and a.cost_unit != "percent":
        raise SpecError("cost_unit", f"must be one of percent, {', '.join(COST_UNITS)}; got {a.cost_unit!r}")
    if a.start not in STARTS:
        raise SpecError("start", f"must be one of {', '.join(STARTS)}; got {a.start!r}")
    if a.moves not in MOVES:
        raise SpecError("moves", f"must be one of {', '.join(MOVES)}; got {a.moves!r}")
    if not a.beta > 0:
        raise SpecError("beta", f"must be > 0 (§V-B), got {a.beta!r}")
    if not a.mu >= 0:
        raise SpecError("mu", f"must be >= 0 (eq. 22), got {a.mu!r}")
    if not 0 <= a.steps <= MAX_STEPS:
        raise SpecError("iterations", f"must be in 0..{MAX_STEPS} (the paper: 10000), got {a.steps!r}")
    if not 1 <= a.eval_iterations <= MAX_EVAL_ITERATIONS:
        raise SpecError(
            "eval_iterations", f"must be in 1..{MAX_EVAL_ITERATIONS} (the paper: 20), got {a.eval_iterations!r}"
        )
    if a.seed < 0:
        raise SpecError("seed", f"must be >= 0, got {a.seed!r}")
    _check_depth(a.depth)


class _DgtpPlacement(_Gnn):
    """ETP's placement (shared by dgtp, dgtp-literal, dgtp-place, omcoflow, mrtf)."""

    START, MOVES = "distdgl", "variant"

    def __init__(
        self,
        beta: float = 0.1,
        mu: float = 1.0,
        iterations: int = 10_000,
        seed: int = 0,
        eval_iterations: int = 20,
        cost_unit: str = "percent",
        depth: int = -1,
        start: str = "",
        moves: str = "",
    ) -> None:
        self.args = SearchArgs(
            beta, mu, iterations, seed, eval_iterations, cost_unit, start or self.START, moves or self.MOVES, depth
        )
        _check_args(self.args)
        self.depth = depth
        self.search: dict = {}

    def place(self, job, cluster):
        machine_of, self.search = dgtp_assignment(job, cluster, self.args)
        self.prepare(job)
        return placement_from(job, cluster, machine_of)

    def notes(self) -> list[str]:
        return [*super().notes(), *search_notes(self.search, self.args)]


class Dgtp(_DgtpPlacement, Oes):
    """DGTP (Alg. 3): ETP's placement (with the documented deviations), then OES."""

    name = "dgtp"


class DgtpLiteral(_DgtpPlacement, Oes):
    """DGTP with Alg. 2 as written: IFS's start, single-task moves over M_avail under (1 + μ) C."""

    name = "dgtp-literal"
    START, MOVES = "ifs", "literal"


class DgtpPlace(_DgtpPlacement):
    """Ablation: DGTP's placement with fair sharing."""

    name = "dgtp-place"


class DistDgl(_Gnn):
    """DistDGL's owner-compute placement, fair sharing, synchronous across iterations (``depth`` 0:
    the DGTP paper's baseline, §II-B and §VI-A)."""

    name = "distdgl"

    def __init__(self, depth: int = 0) -> None:
        _check_depth(depth)
        self.depth = depth

    def place(self, job, cluster):
        self.prepare(job)
        return placement_from(job, cluster, distdgl_assignment(job, cluster))


class DistDglPrefetch(DistDgl):
    """DistDGL as its own paper describes it: sampling one mini-batch ahead (seed 001 §4.1.4)."""

    name = "distdgl-prefetch"

    def __init__(self, depth: int = 1) -> None:
        super().__init__(depth)


class DgtpOes(Oes):
    """Ablation: DistDGL's placement with OES."""

    name = "dgtp-oes"

    def __init__(self, depth: int = -1) -> None:
        _check_depth(depth)
        self.depth = depth

    def place(self, job, cluster):
        self.prepare(job)
        return placement_from(job, cluster, distdgl_assignment(job, cluster))


def _remaining_bits(view: RunView, ids: list[str]) -> list[float]:
    return [8.0 * (view.active[i].remaining or 0) for i in ids]


class OmCoflow(_DgtpPlacement):
    """OMCoflow (§VI-B): a coflow is the flows into one task (the ``coflow`` attribute of
    ``gnn_training``); rates by :func:`schedulers.dgtp_alg.omcoflow_rates`."""

    name = "omcoflow"

    def on_flows_changed(self, view: RunView):
        ids = list(view.active)
        pairs = [(view.active[i].src.server, view.active[i].dst.server) for i in ids]
        coflows = [view.active[i].flow.coflow or i for i in ids]
        b = bandwidth(view.cluster)
        return dict(zip(ids, alg.omcoflow_rates(pairs, _remaining_bits(view, ids), coflows, b, b)))


class Mrtf(_DgtpPlacement):
    """Minimum remaining time first (§VI-B) by rate caps: :func:`schedulers.dgtp_alg.mrtf_rates`."""

    name = "mrtf"

    def on_flows_changed(self, view: RunView):
        ids = list(view.active)
        pairs = [(view.active[i].src.server, view.active[i].dst.server) for i in ids]
        b = bandwidth(view.cluster)
        return dict(zip(ids, alg.mrtf_rates(pairs, _remaining_bits(view, ids), b, b)))
