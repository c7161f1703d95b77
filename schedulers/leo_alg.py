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
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.optimize import Bounds, LinearConstraint, milp
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
    if measured > base * (1 + rel) + 1e-15:
        khat[path] += 1
    else:
        khat[path] = 0


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
