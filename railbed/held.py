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
from railbed.scheduler import OnTime, Wake


class HeldItems:
    """Held items in ready order, the due ones, and the events the others wait for."""

    def __init__(self) -> None:
        self.rank: dict[str, int] = {}  # held item -> its rank in ready order (the dict keeps that order)
        self._next_rank = 0
        self.due: dict[str, None] = {}  # held items to offer at the next round: not waiting for an event
        self.waiting: dict[str, tuple[Wake, ...]] = {}  # held item -> the events it waits for
        self.waiters: dict[Wake, set[str]] = {}  # event -> the held items waiting for it
        self.timers: dict[str, float] = {}  # OnTime waits: wait key -> model time
        self._woken: list[str] | None = None  # during an offer round: the items events woke

    def __len__(self) -> int:
        return len(self.rank)

    def __iter__(self) -> Iterator[str]:
        return iter(self.rank)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.rank

    def add(self, item_id: str) -> None:
        """A newly ready item joins the held items, last in ready order, to be offered."""
        self.rank[item_id] = self._next_rank
        self._next_rank += 1
        self.due[item_id] = None

    def take(self, item_id: str) -> None:
        """The item is no longer held (started, or split away): forget it and its waits."""
        del self.rank[item_id]
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
            self.waiters.setdefault(w, set()).add(item_id)
        return out

    def wake(self, event: Wake) -> None:
        """``event`` happened: the items waiting for it are offered at the next settling."""
        for i in self.waiters.pop(event, ()):
            keys = self.waiting.pop(i, ())
            if len(keys) > 1:
                for w in keys:
                    if w != event:
                        self.waiters[w].discard(i)
            if self._woken is not None:  # during an offer round: placed by the round
                self._woken.append(i)
            else:
                self.due[i] = None
