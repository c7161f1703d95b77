"""The fluid network: active flows, their rates, and time advancing to the next finish.

Two engines with one interface:

* :class:`NumbaNetwork` keeps flows in slot arrays and runs ``advance_kernel`` (rates
  with :func:`railbed.maxmin.maxmin_kernel` when the flow set or a cap changed,
  the earliest finish, every flow's remaining bits moved on) in numba;
* :class:`ReferenceNetwork` does the same with a dict of flows and
  :func:`railbed.maxmin.maxmin_reference`: slow and plain, the oracle the
  tests compare the numba engine with.

The caller (:mod:`simulator.fluid.run`) owns the clock and the timers (task ends,
legs, link latency): it calls ``advance(now, t_limit)``, which either reaches
``t_limit`` with nothing finished or stops at the earliest flow finish. Flows
whose finish time is within a factor ``1 + EPS`` of the earliest one finish
together (a ring's steps end at once; float rounding must not split them).

Rates are bit/s and sizes are bits on the wire: the caller converts payload
with :func:`railbed.units.wire_bytes`, as the emulator's shaped links count
frames.

With ``meter=True`` both engines also measure contention
(:mod:`simulator.contention`): each flow is added with its coflow type's id,
and ``meter`` accumulates, per type, the seconds flows were active and were
rate-limited by a link shared with another type.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from railbed.maxmin import EPS, maxmin_kernel, maxmin_reference
from simulator.contention import Meter, meter_step, step_reference


class NoProgress(RuntimeError):
    """Active flows have no rate and nothing else can happen (a link of capacity 0)."""


@njit(cache=True, inline="always")
def finish_time(now, rem, rate):  # pragma: no cover - numba
    """When a flow with ``rem`` bits left at ``rate`` finishes (``now`` if none left, inf if starved)."""
    if rem <= 0.0:
        return now
    return now + rem / rate if rate > 0.0 else np.inf


def peak_utilisation(peak_load: np.ndarray, link_cap: np.ndarray) -> np.ndarray:
    """Each link's highest load over its capacity (0 where it never carried anything). The
    highest of the loads' quotients is the quotient of the highest load (a correctly rounded
    division by a positive number is monotonic), so dividing once at the end is exact."""
    with np.errstate(divide="ignore"):  # a load on a link of capacity 0: inf, as the quotients were
        return np.divide(peak_load, link_cap, out=np.zeros_like(peak_load), where=peak_load > 0)


@njit(cache=True)
def advance_kernel(
    now, t_limit, dirty, link_cap, flow_links, nhops, prio, cap, rem, rates, act, n,
    left, count, state, link_load, link_bits, peak_load, finished,
):  # fmt: skip  # pragma: no cover - numba
    """Advance from ``now`` to the earliest flow finish or ``t_limit`` (public: the compact
    engine's kernel, :mod:`simulator.rules`, runs this same step inside numba).

    ``link_load`` is scratch, all 0 between calls; ``peak_load`` each link's highest load
    (bit/s; :func:`peak_utilisation`). Returns (time reached, number of finished flows
    written to ``finished``, new number of active flows; ``act`` is compacted in order)."""
    if dirty:
        maxmin_kernel(link_cap, flow_links, nhops, prio, cap, act, n, rates, left, count, state)
        for i in range(n):  # loads summed in act order
            f = act[i]
            for h in range(nhops[f]):
                link_load[flow_links[f, h]] += rates[f]
        for i in range(n):
            f = act[i]
            for h in range(nhops[f]):
                lk = flow_links[f, h]
                peak_load[lk] = max(peak_load[lk], link_load[lk])
                link_load[lk] = 0.0
    t_min = np.inf
    for i in range(n):
        f = act[i]
        t = finish_time(now, rem[f], rates[f])
        if t < t_min:
            t_min = t
    if t_min == np.inf and t_limit == np.inf:
        return np.inf, 0, n
    if t_min > t_limit:
        dt = t_limit - now
        for i in range(n):
            f = act[i]
            moved = rates[f] * dt
            rem[f] -= moved
            for h in range(nhops[f]):
                link_bits[flow_links[f, h]] += moved
        return t_limit, 0, n
    limit = t_min * (1.0 + EPS)
    dt = t_min - now
    nfin = 0
    keep = 0
    for i in range(n):
        f = act[i]
        t = finish_time(now, rem[f], rates[f])
        if t <= limit:
            moved = max(rem[f], 0.0)
            rem[f] = 0.0
            finished[nfin] = f
            nfin += 1
        else:
            moved = rates[f] * dt
            rem[f] -= moved
            act[keep] = f
            keep += 1
        for h in range(nhops[f]):
            link_bits[flow_links[f, h]] += moved
    return t_min, nfin, keep


class NumbaNetwork:
    """Flows in slot arrays; rates and time in numba (see the module docstring)."""

    def __init__(self, capacity: np.ndarray, max_hops: int = 4, slots: int = 1024, meter: bool = False) -> None:
        self.link_cap = np.asarray(capacity, dtype=np.float64)
        nlinks = len(self.link_cap)
        self.meter = Meter(nlinks) if meter else None
        self.left = np.zeros(nlinks)
        self.count = np.zeros(nlinks, dtype=np.int64)
        self.link_load = np.zeros(nlinks)
        self.link_bits = np.zeros(nlinks)
        self.peak_load = np.zeros(nlinks)
        self.max_hops = max_hops
        self._alloc(slots)
        self.n = 0
        self.dirty = False
        self._fresh = False  # rates computed for progress() since the flow set last changed
        self._free: list[int] = list(range(slots - 1, -1, -1))

    def _alloc(self, slots: int) -> None:
        def grow(old: np.ndarray | None, shape, dtype, fill=0) -> np.ndarray:
            new = np.full(shape, fill, dtype=dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        get = self.__dict__.get
        self.flow_links = grow(get("flow_links"), (slots, self.max_hops), np.int64, -1)
        self.nhops = grow(get("nhops"), slots, np.int64)
        self.prio = grow(get("prio"), slots, np.int64)
        self.cap = grow(get("cap"), slots, np.float64, math.inf)
        self.rem = grow(get("rem"), slots, np.float64)
        self.rates = grow(get("rates"), slots, np.float64)
        self.act = grow(get("act"), slots, np.int64)
        self.state = grow(get("state"), slots, np.int8)
        self.finished = grow(None, slots, np.int64)
        self.ftype = grow(get("ftype"), slots, np.int64)
        self.contended = grow(get("contended"), slots, np.bool_)

    @property
    def active(self) -> int:
        return self.n

    @property
    def link_peak(self) -> np.ndarray:
        """Each link's highest utilisation so far."""
        return peak_utilisation(self.peak_load, self.link_cap)

    def add(self, links: tuple[int, ...], prio: int, cap: float | None, bits: float, ftype: int = 0) -> int:
        if not self._free:
            old = len(self.rem)
            self._alloc(2 * old)
            self._free = list(range(2 * old - 1, old - 1, -1))
        slot = self._free.pop()
        if len(links) > self.max_hops:
            raise ValueError(f"a route of {len(links)} hops; the network was built for {self.max_hops}")
        self.flow_links[slot, :] = -1
        self.flow_links[slot, : len(links)] = links
        self.nhops[slot] = len(links)
        self.prio[slot] = prio
        self.cap[slot] = math.inf if cap is None else cap
        self.rem[slot] = bits
        self.ftype[slot] = ftype
        self.act[self.n] = slot
        self.n += 1
        self.dirty = True
        self._fresh = False
        return slot

    def set_cap(self, slot: int, cap: float | None) -> None:
        self.cap[slot] = math.inf if cap is None else cap
        self.dirty = True
        self._fresh = False

    def set_class(self, slot: int, prio: int) -> None:
        """Move an active flow to another priority class (a re-marked DSCP)."""
        self.prio[slot] = prio
        self.dirty = True
        self._fresh = False

    def rates_of_active(self) -> dict[int, float]:
        """Slot -> rate of every active flow (rates of the last ``advance``)."""
        return {int(s): float(self.rates[s]) for s in self.act[: self.n]}

    def progress(self, slot: int) -> tuple[float, float]:
        """(bits left, rate now) of an active flow. Rates are recomputed if the flow set changed
        since the last advance; that changes nothing the next advance computes."""
        if self.dirty and not self._fresh:
            maxmin_kernel(
                self.link_cap, self.flow_links, self.nhops, self.prio, self.cap, self.act, self.n, self.rates,
                self.left, self.count, self.state,
            )  # fmt: skip
            self._fresh = True
        return float(self.rem[slot]), float(self.rates[slot])

    def advance(self, now: float, t_limit: float) -> tuple[float, list[int]]:
        if self.n == 0:
            return t_limit, []
        recompute = self.dirty
        t, nfin, n = advance_kernel(
            now, t_limit, self.dirty, self.link_cap, self.flow_links, self.nhops, self.prio, self.cap, self.rem,
            self.rates, self.act, self.n, self.left, self.count, self.state, self.link_load, self.link_bits,
            self.peak_load, self.finished,
        )  # fmt: skip
        if t == math.inf:
            raise NoProgress(f"{self.n} active flows have no rate and nothing else is pending")
        if self.meter is not None:
            m = self.meter
            meter_step(
                self.link_cap, self.flow_links, self.nhops, self.prio, self.cap, self.rates, self.act, n,
                self.finished, nfin, self.ftype, recompute, self.contended, t - now, m.hit, m.total, m.load, m.mask,
                m.top, m.nhit, m.ntot, m.classes,
            )  # fmt: skip
        self.dirty = nfin > 0
        self._fresh = False
        self.n = n
        done = [int(s) for s in self.finished[:nfin]]
        self._free.extend(done)
        return t, done


class ReferenceNetwork:
    """The same engine with plain Python containers and :func:`maxmin_reference`."""

    def __init__(self, capacity, max_hops: int = 4, slots: int = 0, meter: bool = False) -> None:
        self.capacity = [float(c) for c in capacity]
        self.meter = Meter(len(self.capacity)) if meter else None
        self._contended: dict[int, bool] = {}
        self.flows: dict[int, dict] = {}  # insertion order = the numba engine's ``act`` order
        self.link_bits = [0.0] * len(self.capacity)
        self.link_peak = [0.0] * len(self.capacity)
        self._next = 0
        self._rates: dict[int, float] = {}
        self._dirty = False

    @property
    def active(self) -> int:
        return len(self.flows)

    def add(self, links: tuple[int, ...], prio: int, cap: float | None, bits: float, ftype: int = 0) -> int:
        slot = self._next
        self._next += 1
        self.flows[slot] = {
            "links": tuple(links), "prio": prio, "cap": math.inf if cap is None else cap, "rem": bits, "type": ftype,
        }  # fmt: skip
        self._dirty = True
        return slot

    def set_cap(self, slot: int, cap: float | None) -> None:
        self.flows[slot]["cap"] = math.inf if cap is None else cap
        self._dirty = True

    def set_class(self, slot: int, prio: int) -> None:
        self.flows[slot]["prio"] = prio
        self._dirty = True

    def rates_of_active(self) -> dict[int, float]:
        return {s: self._rates[s] for s in self.flows}

    def progress(self, slot: int) -> tuple[float, float]:
        if self._dirty:
            fl = list(self.flows.values())
            rates = maxmin_reference(
                self.capacity, [f["links"] for f in fl], [f["prio"] for f in fl], [f["cap"] for f in fl]
            )
            return self.flows[slot]["rem"], rates[list(self.flows).index(slot)]
        return self.flows[slot]["rem"], self._rates[slot]

    def _compute_rates(self) -> None:
        slots = list(self.flows)
        fl = [self.flows[s] for s in slots]
        rates = maxmin_reference(
            self.capacity, [f["links"] for f in fl], [f["prio"] for f in fl], [f["cap"] for f in fl]
        )
        self._rates = dict(zip(slots, rates))
        load: dict[int, float] = {}
        for s, f in zip(slots, fl):
            for lk in f["links"]:
                load[lk] = load.get(lk, 0.0) + self._rates[s]
        for lk, x in load.items():
            self.link_peak[lk] = max(self.link_peak[lk], x / self.capacity[lk])
        if self.meter is not None:
            flags = step_reference(
                self.capacity, [f["links"] for f in fl], [f["prio"] for f in fl], [f["cap"] for f in fl],
                [self._rates[s] for s in slots], [f["type"] for f in fl],
            )  # fmt: skip
            self._contended = dict(zip(slots, flags))
        self._dirty = False

    def advance(self, now: float, t_limit: float) -> tuple[float, list[int]]:
        if not self.flows:
            return t_limit, []
        if self._dirty:
            self._compute_rates()

        def finish_time(s: int) -> float:
            f, r = self.flows[s], self._rates[s]
            if f["rem"] <= 0:
                return now
            return now + f["rem"] / r if r > 0 else math.inf

        times = {s: finish_time(s) for s in self.flows}
        t_min = min(times.values())
        if t_min == math.inf and t_limit == math.inf:
            raise NoProgress(f"{len(self.flows)} active flows have no rate and nothing else is pending")
        if t_min > t_limit:
            reached, done = t_limit, set()
        else:
            reached, done = t_min, {s for s in self.flows if times[s] <= t_min * (1 + EPS)}
        for s, f in self.flows.items():
            if self.meter is not None and reached > now:
                self.meter.add(reached - now if self._contended[s] else 0.0, reached - now, f["type"])
            moved = max(f["rem"], 0.0) if s in done else self._rates[s] * (reached - now)
            f["rem"] = 0.0 if s in done else f["rem"] - moved
            for lk in f["links"]:
                self.link_bits[lk] += moved
        finished = [s for s in self.flows if s in done]
        for s in finished:
            del self.flows[s]
        self._dirty = self._dirty or bool(finished)
        return reached, finished
