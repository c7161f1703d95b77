"""DGTP (seed 000) and its baselines as thin schedulers over :mod:`schedulers.dgtp_alg`.

=============  ===================================  =============================
scheduler      placement                            flow rates
=============  ===================================  =============================
``dgtp``       IFS then ETP (§V, Alg. 2)            OES (Alg. 1)
``dgtp-oes``   DistDGL's                            OES
``dgtp-place`` IFS then ETP                         fair sharing (no caps)
``distdgl``    owner-compute (seed 001 §4.1)        fair sharing
``omcoflow``   DGTP's (§VI-B: "the same placements  OMCoflow's weights
               as computed by DGTP")
``mrtf``       DGTP's                               minimum remaining time first
=============  ===================================  =============================

Every scheduler starts a task as soon as it is ready (tasks wait only for
their dependencies and a device slot), as §VI-B says of the baselines and
Alg. 1 (line 7) of OES.

The job is a ``gnn_training`` job (:mod:`workloads.gnn`) or any job with the
same roles: ``store`` endpoints pinned one per machine, ``sampler``,
``worker`` and ``ps`` endpoints with demands, and a size profile
(``tags["profile"]``) on the first flow of every (source, destination, kind)
whose sizes are revealed on ready. :meth:`check` refuses other jobs.

Machine bandwidth (B_in^m, B_out^m): the rate of the server's NIC 0, which
every placed endpoint uses (model wire bit/s); every flow counted by OES
crosses machines (same-server flows never enter the network).

ETP's cost (§V-B): the makespan of ``eval_iterations`` (20, §VI-A)
iterations of the job simulated under OES, sizes drawn from the profile
(once per search, the same draw for every candidate, so candidates differ
only by placement; the paper does not say whether it redraws). The run goes
through the core's backend seam (:mod:`railbed.backend`; ``fluid`` unless a
caller hands :func:`simulated_makespan` another backend), so this module
imports no simulator; on one switch without latency :mod:`schedulers.dgtp_eval`'s
event loop computes the same number faster.

The unit of cost (``cost_unit``, seconds): the paper does not say what
unit its β = 0.1 multiplies, and the chain's behaviour depends on it
entirely. We chose milliseconds (``cost_unit = 1e-3``) because in seconds
the chain is no MCMC at all: on ``scenarios/dgtp/sim-products.yaml`` it
accepted 94 % of 10,000 moves (a random walk) and its best placement
simulated 3.70 s, worse than DistDGL's placement (3.18 s) under the same
OES; in milliseconds it accepted 3 % (292 moves, improvements and a few
uphill ones, as §V-B describes) and found 2.47 s. We chose it from the
chain's acceptance, before running any comparison the paper reports. In
milliseconds the chain is close to greedy: on the testbed job
(``scenarios/dgtp/testbed-products.yaml``) it accepted 39 of 10,000 moves,
evaluated 446 distinct placements, and its best (2.78 s under OES) is
worse than DistDGL's co-located placement (2.56 s under the same OES),
which single-task moves from IFS's packed start did not reach.
A placement search is done once per
(job, cluster, arguments) in a process and shared (``omcoflow`` and ``mrtf``
reuse ``dgtp``'s).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import replace

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


def profile_job(job: Job, iterations: int, seed: int = 0) -> Job:
    """The job's first ``iterations`` iterations with hidden sizes drawn from the profile (§V-B)."""
    rng = random.Random(seed)
    profiles = size_profiles(job)
    out = Job(f"{job.name}-profile", job.capacity, job.default_capacity)
    out.endpoints = dict(job.endpoints)
    for item in job.items.values():
        if item.iteration >= iterations:
            continue
        if isinstance(item, Flow):
            size = item.size if item.size is not None else rng.choice(profiles[_pair(item)])
            item = replace(item, size=int(size), reveal="upfront", tags={})
        out.items[item.id] = item
    return out.validate()


def dgtp_assignment(
    job: Job, cluster: ClusterSpec, beta: float, mu: float, steps: int, seed: int, eval_iterations: int,
    cost_unit: float = 1e-3,
) -> tuple[dict[str, int], dict]:  # fmt: skip
    """IFS, then ETP with OES-simulated costs; shared by every scheduler asking with the same key."""
    key = _search_key(job, cluster, (beta, mu, steps, seed, eval_iterations, cost_unit))
    if key not in _SEARCHES:
        _SEARCHES[key] = _search(job, cluster, beta, mu, steps, seed, eval_iterations, cost_unit)
    return _SEARCHES[key]


def _search_key(job: Job, cluster: ClusterSpec, args: tuple) -> str:
    text = json.dumps([job.to_dict(), repr(cluster), args], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def simulated_makespan(job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int, backend: Backend | None = None):
    """T'_Y as a function of a placement vector (machine per :func:`_movable` endpoint): a run of
    ``eval_iterations`` profiled iterations under OES on ``backend`` (default ``fluid``, the full
    simulator; it must call every hook: OES re-rates flows), without resource limits (ETP visits
    over-full placements, eq. 22; the penalty prices them)."""
    runner = backend if backend is not None else get_backend("fluid")
    if not runner.capabilities.hooks:
        raise SpecError("backend", f"ETP's cost runs OES, which re-rates flows: {runner.name} calls no hooks")
    names = _movable(job)
    sample = profile_job(job, eval_iterations, seed)
    roomy = unlimited(cluster)

    def makespan(y: tuple[int, ...]) -> float:
        sched = FixedOes(placement_from(job, cluster, dict(zip(names, y))))
        return runner.run(sample, sched, roomy, RunOptions()).makespan

    return makespan


def fast_makespan(job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int):
    """The same T'_Y from :mod:`schedulers.dgtp_eval`'s numba event loop, or ``None`` where that
    loop's assumptions do not hold (a fabric other than one switch, latency, flows that do not
    depend on their previous-iteration counterparts)."""
    from schedulers.dgtp_eval import CompiledJob

    if cluster.fabric.kind != "single_switch" or cluster.fabric.latency > 0:
        return None
    sample = profile_job(job, eval_iterations, seed)
    prev = previous_flows(sample)
    if any(p not in sample.items[f].deps for f, p in prev.items()):
        return None
    compiled = CompiledJob(sample, cluster, bandwidth(cluster))
    names = _movable(job)
    return lambda y: compiled.makespan(placement_from(job, cluster, dict(zip(names, y))))


def evaluators(job: Job, cluster: ClusterSpec, eval_iterations: int, seed: int, backend: Backend | None = None) -> dict:
    """Every way railbed has to compute ETP's T'_Y (the benchmark compares them)."""
    out = {"simulate": simulated_makespan(job, cluster, eval_iterations, seed, backend)}
    fast = fast_makespan(job, cluster, eval_iterations, seed)
    if fast is not None:
        out["fast"] = fast
    return out


def _search(job, cluster, beta, mu, steps, seed, eval_iterations, cost_unit) -> tuple[dict[str, int], dict]:
    names = _movable(job)
    start = ifs_assignment(job, cluster, seed)
    fast = fast_makespan(job, cluster, eval_iterations, seed)
    seconds = fast if fast is not None else simulated_makespan(job, cluster, eval_iterations, seed)
    t0 = time.perf_counter()
    demands = [dict(job.endpoints[n].demands) for n in names]
    best, best_t, stats = alg.etp(
        [start[n] for n in names],
        demands,
        _capacity(cluster),
        lambda y: seconds(y) / cost_unit,
        beta,
        mu,
        steps,
        random.Random(seed),
    )
    stats["seconds"] = time.perf_counter() - t0
    stats["makespan"] = best_t * cost_unit
    stats["evaluator"] = "fast" if fast is not None else "simulate"
    return dict(zip(names, best)), stats


# ------------------------------------------------------------ rate rules
class Oes(Scheduler):
    """Alg. 1 at run time over a placement chosen by a subclass: F_pend (hold a flow while its
    previous-iteration counterpart is unfinished) and OES rates for every active flow."""

    name = "oes"

    def prepare(self, job: Job) -> None:
        self._prev = previous_flows(job)

    def on_ready(self, item, view: RunView):
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
# fast evaluator makes about 1200 steps/s on the testbed job (bench/bench_dgtp.py), so the
# largest search takes minutes, not the hours an unbounded count could.
MAX_STEPS = 100_000
MAX_EVAL_ITERATIONS = 200


def _check_args(beta: float, mu: float, iterations: int, eval_iterations: int, cost_unit: float, seed: int = 0) -> None:
    if not cost_unit > 0:
        raise SpecError("cost_unit", f"must be > 0 seconds, got {cost_unit!r}")
    if not beta > 0:
        raise SpecError("beta", f"must be > 0 (§V-B), got {beta!r}")
    if not mu >= 0:
        raise SpecError("mu", f"must be >= 0 (eq. 22), got {mu!r}")
    if not 0 <= iterations <= MAX_STEPS:
        raise SpecError("iterations", f"must be in 0..{MAX_STEPS} (the paper: 10000), got {iterations!r}")
    if not 1 <= eval_iterations <= MAX_EVAL_ITERATIONS:
        raise SpecError(
            "eval_iterations", f"must be in 1..{MAX_EVAL_ITERATIONS} (the paper: 20), got {eval_iterations!r}"
        )
    if seed < 0:
        raise SpecError("seed", f"must be >= 0, got {seed!r}")


class _DgtpPlacement:
    """IFS + ETP placement (shared by dgtp, dgtp-place, omcoflow, mrtf)."""

    def __init__(
        self,
        beta: float = 0.1,
        mu: float = 1.0,
        iterations: int = 10_000,
        seed: int = 0,
        eval_iterations: int = 20,
        cost_unit: float = 1e-3,
    ) -> None:
        _check_args(beta, mu, iterations, eval_iterations, cost_unit, seed)
        self.beta, self.mu, self.iterations, self.seed = beta, mu, iterations, seed
        self.eval_iterations, self.cost_unit = eval_iterations, cost_unit
        self.search: dict = {}

    def check(self, job, cluster):
        check_gnn_job(job)

    def place(self, job, cluster):
        machine_of, self.search = dgtp_assignment(
            job, cluster, self.beta, self.mu, self.iterations, self.seed, self.eval_iterations, self.cost_unit
        )
        if hasattr(self, "prepare"):
            self.prepare(job)
        return placement_from(job, cluster, machine_of)


class Dgtp(_DgtpPlacement, Oes):
    """DGTP (Alg. 3): ETP's placement, then OES."""

    name = "dgtp"


class DgtpPlace(_DgtpPlacement, Scheduler):
    """Ablation: DGTP's placement with fair sharing."""

    name = "dgtp-place"


class DistDgl(Scheduler):
    """DistDGL's owner-compute placement, fair sharing (§VI-A's baseline)."""

    name = "distdgl"

    def check(self, job, cluster):
        check_gnn_job(job)

    def place(self, job, cluster):
        return placement_from(job, cluster, distdgl_assignment(job, cluster))


class DgtpOes(Oes):
    """Ablation: DistDGL's placement with OES."""

    name = "dgtp-oes"

    def check(self, job, cluster):
        check_gnn_job(job)

    def place(self, job, cluster):
        self.prepare(job)
        return placement_from(job, cluster, distdgl_assignment(job, cluster))


def _remaining_bits(view: RunView, ids: list[str]) -> list[float]:
    return [8.0 * (view.active[i].remaining or 0) for i in ids]


class OmCoflow(_DgtpPlacement, Scheduler):
    """OMCoflow (§VI-B): a coflow is the flows into one task (the ``coflow`` attribute of
    ``gnn_training``); rates by :func:`schedulers.dgtp_alg.omcoflow_rates`."""

    name = "omcoflow"

    def on_flows_changed(self, view: RunView):
        ids = list(view.active)
        pairs = [(view.active[i].src.server, view.active[i].dst.server) for i in ids]
        coflows = [view.active[i].flow.coflow or i for i in ids]
        b = bandwidth(view.cluster)
        return dict(zip(ids, alg.omcoflow_rates(pairs, _remaining_bits(view, ids), coflows, b, b)))


class Mrtf(_DgtpPlacement, Scheduler):
    """Minimum remaining time first (§VI-B) by rate caps: :func:`schedulers.dgtp_alg.mrtf_rates`."""

    name = "mrtf"

    def on_flows_changed(self, view: RunView):
        ids = list(view.active)
        pairs = [(view.active[i].src.server, view.active[i].dst.server) for i in ids]
        b = bandwidth(view.cluster)
        return dict(zip(ids, alg.mrtf_rates(pairs, _remaining_bits(view, ids), b, b)))
