"""ETP's fast cost evaluation (seed 000 §V-B): a job under OES on a fixed placement, in numba.

ETP evaluates thousands of placements of one job. :class:`CompiledJob`
turns the profiled job into arrays once; :meth:`CompiledJob.makespan` then
maps a placement to each item's machines and device and runs
:func:`_oes_kernel`, an event loop specialised to what OES on a
single-switch fabric without latency does in railbed's simulator:

* a task starts when its dependencies are done and its device has a free
  slot (``job.capacity_of(device)``, FIFO in order of readiness, ties in
  job order) and runs for its duration;
* a flow whose endpoints share a server takes 0 s (no intra-host model);
* every other flow is capped at its OES rate ``min(B_in^dst / Δ_in^dst,
  B_out^src / Δ_out^src)`` (Alg. 1; rates recomputed at every event) and
  carries ``8 * wire_bytes(size)`` bits as the simulator's flows do. The
  simulator then shares the ports max-min under those caps
  (:mod:`railbed.maxmin`); on a single switch without latency a flow
  contends only on its source machine's egress and its destination's
  ingress, and OES's caps never over-fill them (the ``Δ_out^m`` flows out
  of machine ``m`` take at most ``B_out^m / Δ_out^m`` each), so max-min
  gives every flow its cap: the kernel takes the cap as the rate (the one
  max-min solver per event would cost 3.8x the evaluation time, measured);
  its twin runs the solver (:func:`railbed.maxmin.maxmin_reference` over
  :func:`schedulers.dgtp_alg.oes_rates`' caps), and the tests require the
  two to be equal;
* simultaneous events: an instant's finished flows and tasks are one batch, their dependents
  readied in job order; the simulator reports flows first, each settling before the next
  (:data:`railbed.actions.EVENT_ORDER`). On an exact tie of a flow's and a task's end whose
  dependents share a device the two may differ (``tests/test_event_order.py``); kept, as ETP's
  placements (and the reproduction's rows) were chosen with it;
* F_pend (eq. 11) is the job's dependencies: :func:`compile_job` refuses a
  job whose flows do not depend on their previous-iteration counterparts.

:func:`oes_makespan_reference` is the plain-Python twin (the same event
loop, lists and dicts; the caps from :func:`schedulers.dgtp_alg.oes_rates`,
the rates from :func:`railbed.maxmin.maxmin_reference`). Tests check both
agree on random placements, that both agree with :func:`simulator.simulate`
under ``FixedOes``, and that max-min under OES's caps gives the caps.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from railbed.job import Flow, Job, Task
from railbed.maxmin import maxmin_reference
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers.dgtp_alg import oes_rates

INSTANT = 1 + 1e-12  # flows finishing within this factor of the earliest finish end together (as the simulator)


class CompiledJob:
    """A job as arrays: kinds, durations, bits, endpoints, dependents (see the module docstring)."""

    def __init__(self, job: Job, cluster: ClusterSpec, bandwidth: list[float]) -> None:
        self.job, self.cluster = job, cluster
        ids = list(job.items)
        index = {i: k for k, i in enumerate(ids)}
        eps = list(job.endpoints)
        self.endpoint_index = {e: k for k, e in enumerate(eps)}
        n = len(ids)
        self.is_flow = np.zeros(n, dtype=np.bool_)
        self.duration = np.zeros(n)
        self.bits = np.zeros(n)
        self.src = np.zeros(n, dtype=np.int64)
        self.dst = np.zeros(n, dtype=np.int64)
        for k, i in enumerate(ids):
            item = job.items[i]
            if isinstance(item, Flow):
                self.is_flow[k] = True
                self.bits[k] = 8.0 * wire_bytes(int(item.size or 0))
                self.src[k], self.dst[k] = self.endpoint_index[item.src], self.endpoint_index[item.dst]
            else:
                assert isinstance(item, Task)
                self.duration[k] = item.duration
                self.src[k] = self.dst[k] = self.endpoint_index[item.endpoint]
        self.ndeps = np.array([len(job.items[i].deps) for i in ids], dtype=np.int64)
        dependents = job.dependents()
        self.dep_ptr = np.zeros(n + 1, dtype=np.int64)
        self.dep_ptr[1:] = np.cumsum([len(dependents[i]) for i in ids])
        self.dep_idx = np.array([index[j] for i in ids for j in dependents[i]], dtype=np.int64)
        self.bandwidth = np.asarray(bandwidth, dtype=np.float64)

    def arrays(self, placement) -> tuple[np.ndarray, ...]:
        """(machine of each endpoint, device of each endpoint, slots of each device)."""
        devices: dict[tuple[int, str], int] = {}
        machine = np.zeros(len(self.endpoint_index), dtype=np.int64)
        device = np.zeros(len(self.endpoint_index), dtype=np.int64)
        for e, k in self.endpoint_index.items():
            loc = placement[e]
            machine[k] = loc.server
            device[k] = devices.setdefault((loc.server, loc.device), len(devices))
        slots = np.array([self.job.capacity_of(name) for (_, name) in devices], dtype=np.int64)
        return machine, device, slots

    def makespan(self, placement) -> float:
        machine, device, slots = self.arrays(placement)
        return float(
            _oes_kernel(
                self.is_flow, self.duration, self.bits, machine[self.src], machine[self.dst],
                device[self.src], slots, self.dep_ptr, self.dep_idx, self.ndeps, self.bandwidth,
            )
        )  # fmt: skip

    def makespan_reference(self, placement) -> float:
        machine, device, slots = self.arrays(placement)
        return oes_makespan_reference(
            self.is_flow.tolist(), self.duration.tolist(), self.bits.tolist(),
            machine[self.src].tolist(), machine[self.dst].tolist(), device[self.src].tolist(), slots.tolist(),
            self.dep_ptr.tolist(), self.dep_idx.tolist(), self.ndeps.tolist(), self.bandwidth.tolist(),
        )  # fmt: skip


def oes_makespan_reference(is_flow, duration, bits, src_m, dst_m, dev, slots, dep_ptr, dep_idx, ndeps, bw) -> float:
    """The obviously correct twin of :func:`_oes_kernel`: the same event loop in plain Python."""
    missing = list(ndeps)
    queues: dict[int, list[int]] = {}
    busy = [0] * len(slots)
    running: list[tuple[float, int]] = []  # heap of (end, item)
    active: dict[int, float] = {}  # flow item -> bits left
    end = 0.0
    now = 0.0
    newly = [i for i, m in enumerate(missing) if m == 0]
    while True:
        instant = []
        for i in sorted(newly):
            if not is_flow[i]:
                queues.setdefault(dev[i], []).append(i)
            elif src_m[i] == dst_m[i]:
                instant.append(i)
            else:
                active[i] = bits[i]
        newly = []
        for d, q in queues.items():
            while q and busy[d] < slots[d]:
                i = q.pop(0)
                busy[d] += 1
                heapq.heappush(running, (now + duration[i], i))
        done = instant + _pop_due(running, now)
        if not done:
            rates = _reference_rates(active, src_m, dst_m, bw)
            t_flow = min((now + active[i] / rates[i] for i in active), default=float("inf"))
            t_task = running[0][0] if running else float("inf")
            t = min(t_flow, t_task)
            if t == float("inf"):
                break
            if t_flow <= t_task:
                done = [i for i in active if now + active[i] / rates[i] <= t_flow * INSTANT]
            for i in active:
                active[i] -= rates[i] * (t - now)
            now = t
            for i in done:
                del active[i]
            done += _pop_due(running, now)
        for i in done:
            end = max(end, now)
            if not is_flow[i]:
                busy[dev[i]] -= 1
            for j in dep_idx[dep_ptr[i] : dep_ptr[i + 1]]:
                missing[j] -= 1
                if missing[j] == 0:
                    newly.append(j)
    return end


def _pop_due(running: list, now: float) -> list[int]:
    out = []
    while running and running[0][0] <= now:
        out.append(heapq.heappop(running)[1])
    return out


def _reference_rates(active: dict, src_m, dst_m, bw) -> dict[int, float]:
    """OES's caps (:func:`schedulers.dgtp_alg.oes_rates`) as the simulator applies them: flows
    capped, sharing each machine's egress (link ``m``) and ingress (link ``M + m``) max-min."""
    flows = list(active)
    caps = oes_rates([(src_m[i], dst_m[i]) for i in flows], bw, bw)
    links = [[src_m[i], len(bw) + dst_m[i]] for i in flows]
    rates = maxmin_reference(list(bw) + list(bw), links, [0] * len(flows), caps)
    return dict(zip(flows, rates))


@njit(cache=True)
def _oes_kernel(is_flow, duration, bits, src_m, dst_m, dev, slots, dep_ptr, dep_idx, ndeps, bw):  # pragma: no cover
    n = len(ndeps)
    nm = len(bw)
    missing = ndeps.copy()
    busy = np.zeros(len(slots), dtype=np.int64)
    # per-device FIFO queues as linked lists
    q_head = np.full(len(slots), -1, dtype=np.int64)
    q_tail = np.full(len(slots), -1, dtype=np.int64)
    q_next = np.full(n, -1, dtype=np.int64)
    run_item = np.empty(n, dtype=np.int64)
    run_end = np.empty(n)
    nrun = 0
    act_item = np.empty(n, dtype=np.int64)
    act_left = np.empty(n)
    nact = 0
    rate = np.empty(n)
    d_in = np.zeros(nm, dtype=np.int64)
    d_out = np.zeros(nm, dtype=np.int64)
    newly = np.empty(n, dtype=np.int64)
    nnew = 0
    for i in range(n):
        if missing[i] == 0:
            newly[nnew] = i
            nnew += 1
    done = np.empty(n, dtype=np.int64)
    now = 0.0
    end = 0.0
    while True:
        ndone = 0
        order = np.sort(newly[:nnew])
        nnew = 0
        for i in order:
            if not is_flow[i]:
                d = dev[i]
                if q_tail[d] < 0:
                    q_head[d] = i
                else:
                    q_next[q_tail[d]] = i
                q_tail[d] = i
            elif src_m[i] == dst_m[i]:
                done[ndone] = i
                ndone += 1
            else:
                act_item[nact] = i
                act_left[nact] = bits[i]
                nact += 1
        for d in range(len(slots)):
            while q_head[d] >= 0 and busy[d] < slots[d]:
                i = q_head[d]
                q_head[d] = q_next[i]
                if q_head[d] < 0:
                    q_tail[d] = -1
                busy[d] += 1
                run_item[nrun] = i
                run_end[nrun] = now + duration[i]
                nrun += 1
        nrun, ndone = _take_due(run_item, run_end, nrun, now, done, ndone)
        if ndone == 0:
            d_in[:] = 0
            d_out[:] = 0
            for k in range(nact):
                i = act_item[k]
                d_out[src_m[i]] += 1
                d_in[dst_m[i]] += 1
            t_flow = np.inf
            for k in range(nact):  # OES's caps (Alg. 1): max-min under them gives each its cap (module doc)
                i = act_item[k]
                rate[k] = min(bw[dst_m[i]] / d_in[dst_m[i]], bw[src_m[i]] / d_out[src_m[i]])
                t_flow = min(t_flow, now + act_left[k] / rate[k])
            t_task = np.inf
            for k in range(nrun):
                t_task = min(t_task, run_end[k])
            t = min(t_flow, t_task)
            if t == np.inf:
                break
            k = 0
            while k < nact:
                finishing = t_flow <= t_task and now + act_left[k] / rate[k] <= t_flow * INSTANT
                if finishing:
                    done[ndone] = act_item[k]
                    ndone += 1
                    nact -= 1
                    act_item[k] = act_item[nact]
                    act_left[k] = act_left[nact]
                    rate[k] = rate[nact]
                else:
                    act_left[k] -= rate[k] * (t - now)
                    k += 1
            now = t
            nrun, ndone = _take_due(run_item, run_end, nrun, now, done, ndone)
        for q in range(ndone):
            i = done[q]
            end = max(end, now)
            if not is_flow[i]:
                busy[dev[i]] -= 1
            for p in range(dep_ptr[i], dep_ptr[i + 1]):
                j = dep_idx[p]
                missing[j] -= 1
                if missing[j] == 0:
                    newly[nnew] = j
                    nnew += 1
    return end


@njit(cache=True)
def _take_due(run_item, run_end, nrun, now, done, ndone):  # pragma: no cover - numba
    k = 0
    while k < nrun:
        if run_end[k] <= now:
            done[ndone] = run_item[k]
            ndone += 1
            nrun -= 1
            run_item[k] = run_item[nrun]
            run_end[k] = run_end[nrun]
        else:
            k += 1
    return nrun, ndone
