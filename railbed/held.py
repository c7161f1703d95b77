"""The held items of a run and what they wait for, for the :class:`~railbed.dispatch.Dispatcher`
(its module docstring, "Held items").

A ready item is held until the scheduler lets it go. A plain ``HOLD`` keeps it due: offered
again at every settling. A hold that names its wake-up events (:func:`railbed.scheduler.hold`)
parks it until the first of them happens (:meth:`HeldItems.wake`); an event during an offer
round wakes an item later in the round in time for that round, as a re-offer would have seen
it. Offers keep the order items became ready (their rank).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator

from railbed.actions import WAKE_PREFIX, SchedulerError, StartWait
from railbed.scheduler import OnFewer, OnTime, Wake


class HeldItems:
    """Held items in ready order, the due ones, and the events the others wait for. ``sending``
    is the run's flows sending per NIC (``view.sending``), which :class:`OnFewer` waits read."""

    def __init__(self, sending: dict[tuple[int, int], int] | None = None) -> None:
        self.rank: dict[str, int] = {}  # held item -> its rank in ready order (the dict keeps that order)
        self._next_rank = 0
        self.due: dict[str, None] = {}  # held items to offer at the next round: not waiting for an event
        self.waiting: dict[str, tuple[Wake, ...]] = {}  # held item -> the events it waits for
        self.waiters: dict[Wake, set[str]] = {}  # event -> the held items waiting for it
        self.timers: dict[str, float] = {}  # OnTime waits: wait key -> model time
        self.sending = {} if sending is None else sending
        self.fewer: dict[tuple[int, int], dict[OnFewer, list[tuple[int, str]]]] = {}  # NIC -> wait -> (rank, item) heap
        self._fewer_woken: dict[str, tuple[int, int]] = {}  # items an OnFewer woke -> its NIC: the next wakes after
        self._woken: list[str] | None = None  # during an offer round: the items events woke
        self.version = 0  # bumped when an item joins or leaves: the held list is made again only then

    def __len__(self) -> int:
        return len(self.rank)

    def __iter__(self) -> Iterator[str]:
        return iter(self.rank)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.rank

    def add(self, item_id: str) -> None:
        """A newly ready item joins the held items, last in ready order, to be offered."""
        self.rank[item_id] = self._next_rank
        self.version += 1
        self._next_rank += 1
        self.due[item_id] = None

    def take(self, item_id: str) -> None:
        """The item is no longer held (started, or split away): forget it and its waits."""
        del self.rank[item_id]
        self.version += 1
        self.due.pop(item_id, None)
        for w in self.waiting.pop(item_id, ()):
            self.waiters[w].discard(item_id)

    def offer_round(self, offer: Callable[[str], None]) -> None:
        """Call ``offer`` on every due held item in ready order (and on those an offer's events wake
        after their place)."""
        due, rank = self.due, self.rank
        order = [(r, i) for i, r in rank.items()] if len(due) == len(rank) else sorted((rank[i], i) for i in due)
        self.due, self._woken = {}, (woken := [])
        later: list[tuple[int, str]] = []  # a heap: items woken during the round, after their place
        k = 0
        while k < len(order) or later:
            if later and (k == len(order) or later[0] < order[k]):
                r, i = heapq.heappop(later)
            else:
                r, i = order[k]
                k += 1
            if i in rank:  # not started or split away earlier in this round
                offer(i)
            if i in self._fewer_woken:  # the next waiter of its NIC, if the count is still under its limit
                self.freed(self._fewer_woken.pop(i), after=r)
            for w in woken:  # an event of this offer woke them: those after it join this round
                if rank[w] > r:
                    heapq.heappush(later, (rank[w], w))
                else:
                    self.due[w] = None
            woken.clear()
        self._woken = None

    def keep(self, item_id: str) -> None:
        """A plain hold: offered again at the next round."""
        self.due[item_id] = None

    def wait_for(self, item_id: str, until: tuple[Wake, ...], now: float, who: str) -> list[StartWait]:
        """Register a held item's wake-up events (scheduler ``who``'s hold); a wait for each model
        time not yet asked for."""
        if not isinstance(until, tuple) or not until:
            raise SchedulerError(f"{who}.on_ready({item_id}) held until {until!r}: use hold(...)")
        out: list[StartWait] = []
        self.waiting[item_id] = until
        for w in until:
            if isinstance(w, OnTime) and w not in self.waiters:
                if not isinstance(w.t, (int, float)) or not math.isfinite(w.t):
                    raise SchedulerError(f"{who}: {item_id} held until {w!r}, not a finite time")
                key = f"{WAKE_PREFIX}t{len(self.timers)}-{w.t!r}"
                self.timers[key] = w.t
                out.append(StartWait(key, 0, max(w.t - now, 0.0)))
            elif isinstance(w, OnFewer):
                heap = self.fewer.setdefault((w.server, w.nic), {}).setdefault(w, [])
                heapq.heappush(heap, (self.rank[item_id], item_id))
            self.waiters.setdefault(w, set()).add(item_id)
        return out

    def freed(self, nic: tuple[int, int], after: int = -1) -> None:
        """A flow stopped sending from ``nic`` (or an item an :class:`OnFewer` woke there was
        offered, ranked ``after``): wake the first in ready order (after ``after``) of the items
        waiting for fewer flows there than now send, one."""
        waits = self.fewer.get(nic)
        if not waits:
            return
        count, best = self.sending.get(nic, 0), None
        for w, heap in waits.items():
            if w.limit <= count:
                continue
            waiting, skipped = self.waiters.get(w, ()), []
            while heap and (heap[0][1] not in waiting or heap[0][0] <= after):
                entry = heapq.heappop(heap)
                if entry[1] in waiting:  # offered earlier in this round: stays, not woken again now
                    skipped.append(entry)
            if heap and (best is None or heap[0] < best[0]):
                best = (heap[0], w)
            for entry in skipped:
                heapq.heappush(heap, entry)
        if best is not None:
            (_, item), w = best
            heapq.heappop(waits[w])
            self._fewer_woken[item] = nic
            self._wake_one(item, w)

    def wake(self, event: Wake) -> None:
        """``event`` happened: the items waiting for it are offered at the next settling."""
        for i in self.waiters.pop(event, ()):
            self._wake_one(i, event, popped=True)

    def _wake_one(self, i: str, event: Wake, popped: bool = False) -> None:
        """Item ``i`` waiting for ``event`` (among others) is woken: offered at the next round, or in
        this one after its place."""
        keys = self.waiting.pop(i, ())
        for w in keys:
            if w != event or not popped:
                self.waiters[w].discard(i)
        if self._woken is not None:  # during an offer round: placed by the round
            self._woken.append(i)
        else:
            self.due[i] = None
