"""DGTP's algorithms (seed 000) as pure functions: OES rates, IFS, ETP, and the baselines' rate rules.

Nothing here runs a job: inputs are machine indices, byte counts, resource
tables and, for ETP, a cost-evaluation callable. :mod:`schedulers.dgtp`
calls them from the scheduler hooks.

Conventions: machines are ``0..M-1``; a rate is bit/s; ``b_in[m]`` and
``b_out[m]`` are machine ``m``'s NIC bandwidth in and out (B_in^m, B_out^m);
resources are ``{name: amount}`` per machine (C_m^r) and per task (w_j^r).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence

Resources = Mapping[str, float]


# ------------------------------------------------------------------- OES
def oes_rates(flows: Sequence[tuple[int, int]], b_in: Sequence[float], b_out: Sequence[float]) -> list[float]:
    """Alg. 1, lines 18-21: every active inter-machine flow ``(src machine, dst machine)``
    gets ``min(B_in^dst / Δ_in^dst, B_out^src / Δ_out^src)``, Δ the machine's
    active ingress / egress flow degree (eqs. 18-19)."""
    d_in: dict[int, int] = {}
    d_out: dict[int, int] = {}
    for s, d in flows:
        d_out[s] = d_out.get(s, 0) + 1
        d_in[d] = d_in.get(d, 0) + 1
    return [min(b_in[d] / d_in[d], b_out[s] / d_out[s]) for s, d in flows]


def pending(flow_key: tuple, iteration: int, unfinished: Callable[[tuple, int], bool]) -> bool:
    """Alg. 1, lines 9-11: a flow ``(j, n) -> (j', n')`` goes to F_pend while its
    previous-iteration counterpart ``(j, n-1) -> (j', n'-1)`` is in F_act or
    F_pend (``unfinished(key, n - 1)``); it is started otherwise."""
    return iteration > 0 and unfinished(flow_key, iteration - 1)


# ------------------------------------------------------------------- IFS
def _within(used: float, cap: float, slack: float = 0.0) -> bool:
    """``used`` fits in ``(1 + slack) cap``, with a relative tolerance of 1e-12 for sums of floats."""
    return used <= (1.0 + slack) * cap * (1 + 1e-12)


def fits(counts: Sequence[int], demands: Sequence[Resources], capacity: Resources, slack: float = 0.0) -> bool:
    """``counts[k]`` tasks of kind ``k`` (each demanding ``demands[k]``) fit in ``(1 + slack) capacity``.
    Resources the machine does not list are not limited."""
    for r, cap in capacity.items():
        if not _within(sum(q * d.get(r, 0.0) for q, d in zip(counts, demands)), cap, slack):
            return False
    return True


def _per_machine_bound(demands: Resources, capacity: Resources, total: int) -> int:
    """η of §V-A for one machine: the most tasks of one kind it holds alone, capped by how many
    exist (``total``). Per resource the task demands (w > 0) and the machine lists, the largest q
    with q w within the capacity by :func:`fits`'s own test, so the bound never cuts off a count
    ``fits`` accepts (``0.3 // 0.1`` is 2.0 in floats, yet three tasks of 0.1 fit in 0.3); the
    tightest resource wins. The paper takes the maximum of this over machines (one η per kind);
    per machine is tighter and prunes nothing :func:`fits` would keep on that machine."""
    bound = total
    for r, w in demands.items():
        cap = capacity.get(r)
        if w <= 0 or cap is None:
            continue
        q = total if cap / w >= total else max(0, math.floor(cap / w))  # then exact, by _within
        while q < total and _within((q + 1) * w, cap):
            q += 1
        while q > 0 and not _within(q * w, cap):
            q -= 1
        bound = min(bound, q)
    return max(bound, 0)


def ifs(
    totals: Sequence[int], demands: Sequence[Resources], capacity: Sequence[Resources], order: Sequence[int]
) -> list[tuple[int, ...]] | None:
    """§V-A's dynamic program: per machine (indexed like ``capacity``), how many tasks of each kind
    (``totals[k]`` tasks of kind ``k``, e.g. samplers, workers, PSs) it hosts, or ``None`` if no
    placement fits.

    Machines are visited in ``order`` (the paper's random order m_1..m_M).
    Ω(i) holds every count vector packable into m_1..m_i, each with one
    exact placement A; at machine m_i, for every [q, i-1] in Ω(i-1) (in the
    order found) we first try to fit all the rest into m_i and return the
    first complete solution; otherwise every feasible q' on m_i extends it
    to [q + q', i] if that vector is new. Capacities are what is left after
    the graph store (C''_m)."""
    kinds = len(totals)
    omega: dict[tuple[int, ...], list[tuple[int, ...]]] = {(0,) * kinds: []}
    for m in order:
        nxt: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        bounds = [_per_machine_bound(demands[k], capacity[m], totals[k]) for k in range(kinds)]
        for q, placed in omega.items():
            rest = tuple(t - a for t, a in zip(totals, q))
            if fits(rest, demands, capacity[m]):
                return _spread(placed + [rest], order, len(capacity))
            ranges = [range(min(rest[k], bounds[k]) + 1) for k in range(kinds)]
            for extra in itertools.product(*ranges):
                if not fits(extra, demands, capacity[m]):
                    continue
                key = tuple(a + e for a, e in zip(q, extra))
                if key not in nxt:
                    nxt[key] = placed + [extra]
        omega = nxt
    return None


def _spread(per_visit: list[tuple[int, ...]], order: Sequence[int], machines: int) -> list[tuple[int, ...]]:
    kinds = len(per_visit[0])
    out = [(0,) * kinds] * machines
    for m, counts in zip(order, per_visit):
        out[m] = counts
    return out


# ------------------------------------------------------------------- ETP
def violation(used: Sequence[Resources], capacity: Sequence[Resources]) -> float:
    """Eq. (21)'s penalty: the sum over machines and resources of max((used - C) / C, 0)."""
    total = 0.0
    for u, c in zip(used, capacity):
        for r, cap in c.items():
            if cap > 0:
                total += max((u.get(r, 0.0) - cap) / cap, 0.0)
            elif u.get(r, 0.0) > 0:
                total += math.inf
    return total


def usage(assign: Sequence[int], demands: Sequence[Resources], machines: int) -> list[dict[str, float]]:
    """Summed demands per machine of tasks placed by ``assign`` (task -> machine)."""
    out: list[dict[str, float]] = [{} for _ in range(machines)]
    for m, d in zip(assign, demands):
        for r, w in d.items():
            out[m][r] = out[m].get(r, 0.0) + w
    return out


def cost(makespan: float, penalty: float) -> float:
    """Eq. (21): cost(Y) = T'_Y (1 + penalty)."""
    return makespan * (1.0 + penalty)


def acceptance(cost_now: float, cost_new: float, beta: float) -> float:
    """Eq. (23): π(Y_z -> Y') = min{1, exp(β cost(Y_z) - β cost(Y'))}."""
    if cost_new <= cost_now:
        return 1.0
    return math.exp(beta * (cost_now - cost_new))


def available(
    task: int, assign: Sequence[int], demands: Sequence[Resources], capacity: Sequence[Resources], mu: float
) -> list[int]:
    """M_avail (§V-B): machines other than the task's own that can take it under eq. (22)'s
    relaxed capacities (1 + μ) C_m^r."""
    used = usage(assign, demands, len(capacity))
    here = assign[task]
    out = []
    for m, cap in enumerate(capacity):
        if m == here:
            continue
        ok = all(
            used[m].get(r, 0.0) + w <= (1.0 + mu) * cap[r] * (1 + 1e-12) for r, w in demands[task].items() if r in cap
        )
        if ok:
            out.append(m)
    return out


def propose_move(
    y: tuple[int, ...], demands: Sequence[Resources], capacity: Sequence[Resources], mu: float, rng: random.Random
) -> tuple[int, ...] | None:
    """Alg. 2, lines 4-7: a task uniformly, a machine of its M_avail uniformly; ``None`` when the
    task's M_avail is empty (the paper does not say; the step still counts)."""
    j = rng.randrange(len(y))
    choices = available(j, y, demands, capacity, mu)
    if not choices:
        return None
    return y[:j] + (rng.choice(choices),) + y[j + 1 :]


def propose_swap(
    y: tuple[int, ...], demands: Sequence[Resources], capacity: Sequence[Resources], rng: random.Random
) -> tuple[int, ...] | None:
    """Deviation (``dgtp``): two tasks on different machines exchange machines, drawn uniformly among
    the pairs with the first task fixed whose exchange keeps both machines within capacity
    (feasible-only); ``None`` if there is none."""
    j = rng.randrange(len(y))
    used = usage(y, demands, len(capacity))
    ok = [k for k in range(len(y)) if y[k] != y[j] and _swap_fits(j, k, y, used, demands, capacity)]
    if not ok:
        return None
    k = rng.choice(ok)
    out = list(y)
    out[j], out[k] = y[k], y[j]
    return tuple(out)


def _swap_fits(j: int, k: int, y, used, demands, capacity) -> bool:
    for a, b in ((j, k), (k, j)):  # machine y[b] loses b, gains a
        m = y[b]
        for r, cap in capacity[m].items():
            if used[m].get(r, 0.0) - demands[b].get(r, 0.0) + demands[a].get(r, 0.0) > cap * (1 + 1e-12):
                return False
    return True


def propose_variant(
    y: tuple[int, ...], demands: Sequence[Resources], capacity: Sequence[Resources], rng: random.Random
) -> tuple[int, ...] | None:
    """Deviation (``dgtp``): feasible-only proposals, half single-task moves (M_avail at μ = 0, the
    original capacities) and half swaps (:func:`propose_swap`); the other kind if one has none."""
    kinds = [lambda: propose_move(y, demands, capacity, 0.0, rng), lambda: propose_swap(y, demands, capacity, rng)]
    if rng.random() < 0.5:
        kinds.reverse()
    for propose in kinds:
        y_new = propose()
        if y_new is not None:
            return y_new
    return None


def etp(
    initial: Sequence[int],
    demands: Sequence[Resources],
    capacity: Sequence[Resources],
    makespan: Callable[[tuple[int, ...]], float],
    beta: float = 0.1,
    mu: float = 1.0,
    steps: int = 10_000,
    rng: random.Random | None = None,
    propose: Callable | None = None,
) -> tuple[tuple[int, ...], float, dict]:
    """Alg. 2: the MCMC search from ``initial`` (feasible). Returns (best feasible placement seen,
    its simulated makespan T'_Y, counters and the trace of improvements).

    Each step proposes a placement (``propose(y, rng)``; Alg. 2's
    :func:`propose_move` with ``mu`` by default) and accepts it with
    :func:`acceptance` of the costs (eq. 21); an accepted placement with no
    violation and a smaller T' becomes the best (lines 12-14). A step with
    no proposal leaves the state as it is ("stuck"). ``makespan`` is
    evaluated once per distinct placement (memoised; a revisit costs
    nothing), in whatever unit the caller chose (the unit sets what β
    means). ``trace`` lists (step, best T') at every improvement."""
    rng = rng or random.Random(0)
    machines = len(capacity)
    if propose is None:
        propose = lambda y, r: propose_move(y, demands, capacity, mu, r)  # noqa: E731
    memo: dict[tuple[int, ...], float] = {}

    def cost_of(y: tuple[int, ...]) -> tuple[float, float, float]:
        if y not in memo:
            memo[y] = makespan(y)
        pen = violation(usage(y, demands, machines), capacity)
        return cost(memo[y], pen), memo[y], pen

    y = tuple(initial)
    c_now, best_t, _ = cost_of(y)
    best = y
    stats: dict = {"steps": 0, "accepted": 0, "uphill": 0, "stuck": 0, "trace": [(0, best_t)]}
    for step in range(1, steps + 1):
        stats["steps"] += 1
        y_new = propose(y, rng)
        if y_new is None:
            stats["stuck"] += 1
            continue
        c_new, t_new, pen_new = cost_of(y_new)
        if rng.random() <= acceptance(c_now, c_new, beta):
            stats["accepted"] += 1
            stats["uphill"] += c_new > c_now
            y, c_now = y_new, c_new
            if pen_new == 0 and t_new < best_t:
                best, best_t = y, t_new
                stats["trace"].append((step, best_t))
    stats["evaluations"] = len(memo)
    return best, best_t, stats


# ------------------------------------------------------- baselines' rates
def weighted_port_rates(
    flows: Sequence[tuple[int, int]], weights: Sequence[float], b_in: Sequence[float], b_out: Sequence[float]
) -> list[float]:
    """Each flow's share of its source's egress and its destination's ingress in proportion to
    its weight; it gets the smaller of the two (OES is the case of equal weights)."""
    w_in: dict[int, float] = {}
    w_out: dict[int, float] = {}
    for (s, d), w in zip(flows, weights):
        w_out[s] = w_out.get(s, 0.0) + w
        w_in[d] = w_in.get(d, 0.0) + w
    return [min(b_in[d] * w / w_in[d], b_out[s] * w / w_out[s]) for (s, d), w in zip(flows, weights)]


def omcoflow_rates(
    flows: Sequence[tuple[int, int]],
    remaining_bits: Sequence[float],
    coflows: Sequence[str],
    b_in: Sequence[float],
    b_out: Sequence[float],
) -> list[float]:
    """OMCoflow as §VI-B describes it: a flow's weight is 1 / its predicted finish time
    supposing its coflow were alone in the network (its remaining bits over its fair share
    of its ports among its coflow's flows); ports are then shared by weight. The paper
    gives no more; this is our reading."""
    alone: list[float] = []
    n_out: dict[tuple[str, int], int] = {}
    n_in: dict[tuple[str, int], int] = {}
    for (s, d), c in zip(flows, coflows):
        n_out[c, s] = n_out.get((c, s), 0) + 1
        n_in[c, d] = n_in.get((c, d), 0) + 1
    for (s, d), c, bits in zip(flows, coflows, remaining_bits):
        share = min(b_out[s] / n_out[c, s], b_in[d] / n_in[c, d])
        alone.append(max(bits, 1.0) / share)
    return weighted_port_rates(flows, [1.0 / t for t in alone], b_in, b_out)


def mrtf_rates(
    flows: Sequence[tuple[int, int]],
    remaining_bits: Sequence[float],
    b_in: Sequence[float],
    b_out: Sequence[float],
    floor: float = 1e-6,
) -> list[float]:
    """Minimum remaining time first: flows in order of remaining time alone (remaining bits over
    the smaller of its ports' bandwidth) each take all that is left at both its ports. A flow
    left with nothing gets ``floor`` times its ports' bandwidth (a cap must be positive)."""
    left_in, left_out = list(b_in), list(b_out)
    order = sorted(range(len(flows)), key=lambda i: (remaining_bits[i] / min(b_out[flows[i][0]], b_in[flows[i][1]]), i))
    rates = [0.0] * len(flows)
    for i in order:
        s, d = flows[i]
        r = min(left_out[s], left_in[d])
        left_out[s] -= r
        left_in[d] -= r
        rates[i] = max(r, floor * min(b_out[s], b_in[d]))
    return rates
