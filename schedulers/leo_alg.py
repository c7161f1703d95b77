"""LEO's path selection as pure functions (seed 004, §6.2.2): the toll heuristic and the k-step MILP.

Costs of a request type on a path (§6.2.2, "Heuristic multi-path selection"):
``T(p, r)`` = sum of the links' base traverse times and the compute nodes'
T_c on the path, and the communication toll ``Q_toll(p, r)`` = sum of T_c and
S(r)/BW(l): the work the request leaves in the path's queues.
:func:`request_costs` sums them over a request's legs on both hosts.

Toll heuristic (eq. 6.5)
    ``T_total(p) = k_hat[p] * Q_toll(p, r) + T(p, r)``; the allowed path of
    least ``T_total`` wins (ties: the earlier path). ``k_hat[p]`` starts at
    0; on each completion on p, if the measured intra-host JCT exceeds
    ``T(p, r)`` the path queues and ``k_hat[p] += 1``, otherwise it is reset
    to 0 (:func:`update_khat`). :func:`toll_choice` is the numba kernel,
    :func:`toll_choice_reference` its plain twin.

Where the thesis is silent: three documented variants (``leo``; ``leo-literal`` has none)
    The text defines k_hat as "the number of requests that will experience queue
    latency caused by the current request" and Q_toll as the queue latency the
    request adds "according to (6.3)"; it does not say how k_hat behaves under
    sustained load, what a request adds on a node of K parallel servers, or how
    paths that share a device see each other's queues. Each variant answers one
    of those silences from the definitions (docs/leo.md has the argument):

    * ``parallel`` (:func:`toll_matrix`): on a compute node of K servers a
      request's T_c raises the queue every later request finds by T_c / K
      (the K servers drain it K times as fast: the parallel extension of (6.1)
      the thesis's "Discussion" names, as in the MILP below), so its toll on
      that node is T_c / K. Literal: T_c.
    * ``shared`` (:func:`path_penalty`, :func:`update_khat_elements`): k_hat is a
      property of a queue, so it is kept per element (device or link, on
      either host) and a path's penalty is ``sum_e k_hat[e] * toll[p, e]``:
      two paths through one device see one queue, counted once. A completion
      on p updates every element of p as the literal rule updates p.
      Literal: one k_hat per path, ``k_hat[p] * sum_e toll[p, e]``.
    * ``bound`` (:func:`bound_khat`): k_hat never exceeds the number of
      requests in progress over the path (or element), which the requester's
      request state table holds (§6.2.4); k_hat * Q_toll then never claims
      more queued work than is outstanding there. Literal: unbounded, so under
      sustained load k_hat grows with the path's completion count, fastest on
      the fastest path.

Capacity: does compute bind? (:func:`max_rate`, :func:`single_path_rate`, :func:`network_rate`)
    The most requests per second the datapath can serve with the best split
    over paths: maximise lambda subject to ``sum_p x[r, p] = share_r * lambda``
    and, for every element e, ``sum_{r,p} w[r, p, e] x[r, p] <= K_e`` (a node of
    K servers does K seconds of work per second, a link one), an LP (HiGHS);
    a single-path policy's rate is ``1 / max_e sum_r share_r w[r, p_r, e] / K_e``.
    The network's rate is each direction's line rate over the bits a request
    puts on the wire in that direction. A split can only help where the
    network's rate exceeds the datapath's: otherwise the row is network-bound.

k-step optimum (eqs. 6.1-6.4)
    For the next ``k`` requests (arrival, type), from the queues found now,
    choose one allowed path each (6.4) minimising the sum of intra-host JCTs
    (6.3). Every element's backlog follows (6.1)/(6.2); we read the queue a
    request waits for as the one it finds (Q_{t-1}, see :mod:`hwmodels.leo`)
    and linearise with big-M: ``B[t+1,e] >= B[t,e] + sum_p X[t,p] w[r_t,p,e] -
    K_e dt_t``, ``B >= 0``, ``W[t,p] >= sum_{e in p} B[t,e] / K_e - M (1 - X[t,p])``,
    minimise ``sum W + X T``. A compute node of capacity K is a single queue
    drained K times as fast whose wait is its backlog / K (the thesis only says
    the equations are "easily extended"; this is exact for K = 1). A request's
    whole work enters the queues at its arrival, as in (6.1)/(6.2).
    :func:`lp_choose` solves it with ``scipy.optimize.milp`` (HiGHS);
    :func:`lp_cost` evaluates an assignment and :func:`brute_force` tries
    them all (the test: equal optima on tiny instances).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import lil_matrix

# ------------------------------------------------------------------ the toll heuristic


@njit(cache=True)
def _toll_kernel(base, toll, khat, allowed):  # pragma: no cover - numba
    best = -1
    best_cost = np.inf
    for x in range(allowed.shape[0]):
        p = allowed[x]
        cost = khat[p] * toll[p] + base[p]
        if cost < best_cost:
            best_cost = cost
            best = p
    return best


def toll_choice(base: np.ndarray, toll: np.ndarray, khat: np.ndarray, allowed: np.ndarray) -> int:
    """Eq. 6.5: the allowed path (index) of least ``khat * toll + base`` (numba)."""
    return int(_toll_kernel(base, toll, khat, allowed))


def toll_choice_reference(base, toll, khat, allowed) -> int:
    """Plain eq. 6.5: min over the allowed paths, the first on ties."""
    costs = [(float(khat[p]) * float(toll[p]) + float(base[p]), i) for i, p in enumerate(allowed)]
    return int(allowed[min(costs)[1]])


def update_khat(khat: np.ndarray, path: int, measured: float, base: float, rel: float = 1e-9) -> None:
    """§6.2.2: a completion on ``path`` whose intra-host JCT exceeds ``T(p, r)`` adds 1, otherwise resets."""
    if is_late(measured, base, rel):
        khat[path] += 1
    else:
        khat[path] = 0


def is_late(measured: float, base: float, rel: float = 1e-9) -> bool:
    """§6.2.2: a completion whose intra-host JCT exceeds ``T(p, r)`` found a queue."""
    return measured > base * (1 + rel) + 1e-15


def toll_matrix(work: np.ndarray, cap: np.ndarray, parallel: bool) -> np.ndarray:
    """Q_toll per (path, element) of a request type: the work it adds (``work[p, e]``: T_c on
    compute nodes, S/BW on links), divided by the element's parallel servers when ``parallel``."""
    return work / cap[None, :] if parallel else work.copy()


def path_penalty(khat: np.ndarray, toll: np.ndarray, shared: bool) -> np.ndarray:
    """Eq. 6.5's ``k_hat * Q_toll`` per path: ``khat[p] * sum_e toll[p, e]`` (per-path k_hat, the
    thesis), or ``sum_e khat[e] * toll[p, e]`` (``shared``: k_hat per element, a device counted once)."""
    return toll @ khat if shared else khat * toll.sum(axis=1)


def bound_khat(khat: np.ndarray, inflight: np.ndarray) -> np.ndarray:
    """k_hat capped by the requests in progress over each path (or element)."""
    return np.minimum(khat, inflight)


def update_khat_elements(khat: np.ndarray, elements: np.ndarray, late: bool) -> None:
    """``shared``: a completion on a path updates each of its elements as :func:`update_khat` a path."""
    if late:
        khat[elements] += 1
    else:
        khat[elements] = 0


# ------------------------------------------------------------------ capacity


def max_rate(work: np.ndarray, cap: np.ndarray, shares: np.ndarray, allowed: np.ndarray) -> tuple[float, np.ndarray]:
    """The datapath's best split (see the module docstring): (requests/s, rate x[r, p]).

    ``work[r, p, e]``: seconds of element e's time a request of type r on path p takes
    (T_c on a compute node, 8 S / BW on a link); ``cap[e]``: its parallel servers;
    ``shares[r]``: the types' mix (sums to 1); ``allowed[r, p]``: bool."""
    nr, npth, ne = work.shape
    nx = nr * npth
    c = np.zeros(nx + 1)
    c[-1] = -1.0  # maximise lambda
    a_eq = np.zeros((nr, nx + 1))
    for r in range(nr):
        a_eq[r, r * npth : (r + 1) * npth] = 1.0
        a_eq[r, -1] = -shares[r]
    a_ub = np.zeros((ne, nx + 1))
    a_ub[:, :nx] = work.reshape(nx, ne).T
    bounds = [(0.0, None if allowed.reshape(-1)[i] else 0.0) for i in range(nx)] + [(0.0, None)]
    res = linprog(c, A_ub=a_ub, b_ub=cap, A_eq=a_eq, b_eq=np.zeros(nr), bounds=bounds, method="highs")
    if not res.success:  # pragma: no cover - feasible (x = 0) and bounded (work > 0 on every path)
        raise RuntimeError(f"linprog: {res.message}")
    return float(res.x[-1]), res.x[:nx].reshape(nr, npth)


def single_path_rate(work: np.ndarray, cap: np.ndarray, shares: np.ndarray, paths: list[int]) -> float:
    """Requests/s when every request of type r takes ``paths[r]``: the busiest element's limit."""
    load = sum(shares[r] * work[r, p] for r, p in enumerate(paths)) / cap
    return float(1.0 / load.max()) if load.max() > 0 else math.inf


def saturated(work: np.ndarray, cap: np.ndarray, x: np.ndarray, rel: float = 1e-6) -> np.ndarray:
    """Elements at their capacity under the split ``x[r, p]`` (what binds)."""
    used = np.einsum("rpe,rp->e", work, x)
    return np.flatnonzero(used >= cap * (1 - rel))


def network_rate(bits: np.ndarray, line: np.ndarray) -> float:
    """Requests/s the network carries: per direction d, ``line[d]`` bit/s over the ``bits[d]``
    a request puts on the wire that way; the tighter direction."""
    used = bits > 0
    return float(np.min(line[used] / bits[used])) if used.any() else math.inf


# ------------------------------------------------------------------ the k-step optimum


@dataclass(frozen=True)
class LpInstance:
    """A k-step path-selection problem: per type r and path p the base time ``T[r, p]`` and the
    work ``w[r, p, e]`` it adds to element e (``nan`` in T: path not allowed); ``cap[e]`` the
    elements' capacities; ``backlog[e]`` the queues found by the first request; the requests'
    ``arrival`` times and ``rtype`` s."""

    T: np.ndarray  # (R, P)
    w: np.ndarray  # (R, P, E)
    cap: np.ndarray  # (E,)
    backlog: np.ndarray  # (E,)
    arrival: np.ndarray  # (k,)
    rtype: np.ndarray  # (k,)

    def allowed(self, t: int) -> list[int]:
        return [p for p in range(self.T.shape[1]) if not np.isnan(self.T[self.rtype[t], p])]


def drain(backlog: np.ndarray, cap: np.ndarray, dt: float) -> np.ndarray:
    return np.maximum(backlog - cap * dt, 0.0)


def lp_cost(inst: LpInstance, choice) -> float:
    """Sum of intra-host JCTs (6.3) of the assignment ``choice`` (a path per request)."""
    b = inst.backlog.astype(float).copy()
    total = 0.0
    for t, p in enumerate(choice):
        r = inst.rtype[t]
        on = inst.w[r, p] > 0
        total += float(np.sum(b[on] / inst.cap[on])) + float(inst.T[r, p])
        b = b + inst.w[r, p]
        if t + 1 < len(choice):
            b = drain(b, inst.cap, float(inst.arrival[t + 1] - inst.arrival[t]))
    return total


def brute_force(inst: LpInstance) -> tuple[float, tuple[int, ...]]:
    """Every assignment of allowed paths, the cheapest (first on ties)."""
    options = [inst.allowed(t) for t in range(len(inst.rtype))]
    return min((lp_cost(inst, c), c) for c in itertools.product(*options))


@contextmanager
def _quiet_stdout():
    """HiGHS (scipy 1.17) prints a debugging line from C on some MIPs; keep it off the run's output."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def lp_choose(inst: LpInstance) -> tuple[float, list[int]]:
    """The MILP of eqs. 6.1-6.4 (see the module docstring) with HiGHS: (optimum, path per request)."""
    k, ne = len(inst.rtype), inst.w.shape[2]
    xs = [(t, p) for t in range(k) for p in inst.allowed(t)]
    nx, nb, nw = len(xs), k * ne, len(xs)  # X[t,p], B[t,e] (found by request t), W[t,p]
    xi = {tp: i for i, tp in enumerate(xs)}
    bi = lambda t, e: nx + t * ne + e  # noqa: E731
    wi = lambda i: nx + nb + i  # noqa: E731
    n = nx + nb + nw
    big = float(np.sum((inst.backlog + inst.w.max(axis=(0, 1)) * k) / inst.cap)) + 1.0
    c = np.zeros(n)
    for i, (t, p) in enumerate(xs):
        c[i] = inst.T[inst.rtype[t], p]
        c[wi(i)] = 1.0
    rows, lo, hi = [], [], []
    a = lil_matrix((k + (k - 1) * ne + nw, n))
    row = 0
    for t in range(k):  # (6.4): one path per request
        for p in inst.allowed(t):
            a[row, xi[(t, p)]] = 1.0
        lo.append(1.0), hi.append(1.0)
        row += 1
    for t in range(k - 1):  # (6.1)/(6.2): B[t+1,e] - B[t,e] - sum_p w X[t,p] >= -K dt
        dt = float(inst.arrival[t + 1] - inst.arrival[t])
        r = inst.rtype[t]
        for e in range(ne):
            a[row, bi(t + 1, e)] = 1.0
            a[row, bi(t, e)] = -1.0
            for p in inst.allowed(t):
                if inst.w[r, p, e] > 0:
                    a[row, xi[(t, p)]] = -inst.w[r, p, e]
            lo.append(-inst.cap[e] * dt), hi.append(np.inf)
            row += 1
    for i, (t, p) in enumerate(xs):  # W[t,p] - sum_{e in p} B[t,e] / K_e - M X[t,p] >= -M
        a[row, wi(i)] = 1.0
        for e in np.flatnonzero(inst.w[inst.rtype[t], p] > 0):
            a[row, bi(t, e)] = -1.0 / inst.cap[e]
        a[row, i] = -big
        lo.append(-big), hi.append(np.inf)
        row += 1
    rows.append(LinearConstraint(a.tocsr(), lo, hi))
    lb, ub = np.zeros(n), np.full(n, np.inf)
    ub[:nx] = 1.0
    lb[nx : nx + ne] = ub[nx : nx + ne] = inst.backlog  # the queues found now are given
    integrality = np.zeros(n)
    integrality[:nx] = 1
    with _quiet_stdout():
        res = milp(c, constraints=rows, integrality=integrality, bounds=Bounds(lb, ub))
    if not res.success:  # pragma: no cover - HiGHS solves every feasible instance
        raise RuntimeError(f"milp: {res.message}")
    choice = [0] * k
    for i, (t, p) in enumerate(xs):
        if res.x[i] > 0.5:
            choice[t] = p
    return float(res.fun), choice
