"""What a :class:`~railbed.scheduler.Rule` means, written once for every backend.

A scheduler whose decisions are pure functions of the flow writes :meth:`Scheduler.rule`
(and, when its rules name gates, :meth:`Scheduler.gate_split`) and no ``on_ready``
(:func:`decides_by_rule`). The :class:`~railbed.dispatch.Dispatcher` then answers each offer
with :meth:`RuleBook.decide` instead of asking ``on_ready``, so the fluid backends, the packet
backend and the emulator run the rules through this one reading, and the compact engine's
kernel (:mod:`simulator.rules`) re-implements it in numba; ``tests/test_differential.py``
holds the kernel to it (random jobs, ``fluid-reference`` against ``fluid-rules``, every time
equal) and this reading to the :class:`Rule` docstring (random views).

The reading (the :class:`Rule` docstring; the kernel's, ``_run_kernel``'s offer loop):

* a task starts (queues for its device);
* a flow whose rule names a ``gate`` is held until every flow whose rule names that gate is
  held when the offer round begins (``view.held`` then); the first of them offered then answers
  the scheduler's ``gate_split`` of the gate's flows in job order, as the view shows them;
* any other flow is held (a plain ``HOLD``: offered again at every settling) while, on its
  slot (its source NIC; with the scheduler's ``hold_by_class`` also its class-selector
  ``dscp >> 3``, the rule's DSCP), a flow held when the round began with a ``queued`` rule
  has ``key < bar`` (only if the flow's own rule is ``queued``), or a network flow active
  there (at its current DSCP) has ``key < bar``; a sub-flow counts with its original's key.
  ``bar = 0`` never holds. Otherwise it starts with the rule's DSCP and cap.

The holds are the host-side waits of the schedulers that have rules: Hermod's per-NIC
priority queue (seed 004, §5.4; with ``hold_by_class`` per switch queue, the reading
:mod:`schedulers.hermod` argues for), Lina's DP behind backward EP (§5.1.3), and the gate is
Hermod's EP coflow split by Alg. 3 once the whole coflow is ready (§5.3.2). Where the
sources are silent on the moment a hold is looked at, this reading chooses the offer round
(the held set and best keys as the round began; active flows as the offer finds them), the
Dispatcher's settling.

Where the kernel reads differently (no job of the schedulers that have rules shows it): it
places an active sub-flow on its original's source NIC (here, its own; the gated splits of
Hermod keep each original's ends) and at the DSCP it started with (here, the current one;
``on_flows_changed`` cannot re-mark on the compact engine, which refuses schedulers that
have it).
"""

from __future__ import annotations

from collections.abc import Iterable

from railbed.actions import SchedulerError
from railbed.job import Flow, Item, Placement, edited
from railbed.scheduler import HOLD, Decision, OnDone, OnNic, OnReady, Rule, RunView, Scheduler, Split, hold
from railbed.spec import ClusterSpec


def decides_by_rule(scheduler: Scheduler) -> bool:
    """The scheduler writes ``rule`` and no ``on_ready``: its offers are :meth:`RuleBook.decide`'s."""
    mine = type(scheduler)
    return mine.rule is not Scheduler.rule and mine.on_ready is Scheduler.on_ready


def as_offered(flow: Flow) -> Flow:
    """The flow as ``on_ready`` sees it in the Dispatcher (the view's job, :meth:`Job.public`,
    with ``on_ready`` sizes revealed by then): a ``hidden`` size stays ``None``. ``rule`` and
    ``gate_split`` stand for ``on_ready``, so they get this, never a size it could not read."""
    return edited(flow, size=None) if flow.reveal == "hidden" else flow


class RuleBook:
    """The rules of ``scheduler`` for ``flows`` (as offered, :func:`as_offered`; asked in that
    order, once each), read as the module docstring says. ``placement`` and ``cluster`` are
    the run's; a flow not among ``flows`` (another job's, in a run of several) gets its rule
    when it is first looked at."""

    def __init__(self, scheduler: Scheduler, flows: Iterable[Flow], placement: Placement, cluster: ClusterSpec) -> None:
        self.scheduler, self.placement, self.cluster = scheduler, placement, cluster
        self.by_class = bool(getattr(scheduler, "hold_by_class", False))
        self.rules: dict[str, Rule] = {}
        self.gates: dict[str, list[str]] = {}  # gate -> its flows, in job order
        self._gate_of: dict[str, str] = {}  # a gate's flow -> its gate
        for f in flows:
            rule = self._rule(f)
            if rule.gate is not None:
                self.gates.setdefault(rule.gate, []).append(f.id)
                self._gate_of[f.id] = rule.gate
        self._round: list[str] | None = None  # the view.held list of the current offer round
        self._complete: set[str] = set()  # gates whose every flow was held when the round began
        self._held_gated: set[str] = set()  # the gates' flows held when the round began
        self._lead: dict[str, str] = {}  # gate -> its first flow offered (the lowest in ready order)
        self._best: dict[tuple, int] = {}  # slot -> the best key of a queued flow held at round start
        # an active flow's class cannot change without an event unless on_flows_changed re-marks it
        remarks = type(scheduler).on_flows_changed is not Scheduler.on_flows_changed
        self._nic_wakes = not (self.by_class and remarks)

    def _rule(self, flow: Flow) -> Rule:
        rule = self.rules.get(flow.id)
        if rule is None:
            rule = self.scheduler.rule(flow, self.placement, self.cluster)
            if not isinstance(rule, Rule):
                who = self.scheduler.name
                raise SchedulerError(
                    f"{who}.rule({flow.id}) returned {rule!r}: without on_ready, every flow needs a Rule"
                )
            self.rules[flow.id] = rule
        return rule

    def _slot(self, server: int, nic: int, dscp: int) -> tuple:
        """What a hold looks at: the source NIC, and with ``hold_by_class`` the class-selector."""
        return (server, nic, dscp >> 3) if self.by_class else (server, nic)

    def _begin_round(self, view: RunView) -> None:
        """Once per offer round (a new ``view.held`` list): the complete gates and the best queued
        keys, in one pass over the held items (a gate's flows are counted, never looked up)."""
        self._round, best, held_of, gated = view.held, {}, {}, set()
        items = view.job.items
        for i in view.held:
            f = items[i]
            if not isinstance(f, Flow):
                continue
            gate = self._gate_of.get(i)
            if gate is not None:
                held_of[gate] = held_of.get(gate, 0) + 1
                gated.add(i)
            rule = self._rule(f)
            if rule.queued:
                src = view.placement[f.src]
                slot = self._slot(src.server, src.nic, rule.dscp)
                if slot not in best or rule.key < best[slot]:
                    best[slot] = rule.key
        self._best, self._held_gated = best, gated
        self._complete = {g for g, n in held_of.items() if n == len(self.gates[g])}

    def decide(self, item: Item, view: RunView) -> Decision | Split:
        """The answer to offering ``item`` (held, as the view shows it) in ``view``."""
        if not isinstance(item, Flow):
            return Decision()
        if self._round is not view.held:
            self._begin_round(view)
        rule = self._rule(item)
        if rule.gate is not None:
            if rule.gate not in self.gates:
                raise SchedulerError(
                    f"{self.scheduler.name}.rule({item.id}) names gate {rule.gate!r}, which no flow of the run's "
                    "jobs named when the run began"
                )
            if rule.gate not in self._complete:
                return self._gate_wait(rule.gate, item.id)
            self._lead.pop(rule.gate, None)
            flows = [view.job.items[i] for i in self.gates[rule.gate]]
            return self.scheduler.gate_split(flows, self.placement, self.cluster)
        if rule.bar > 0:
            src = view.placement[item.src]
            mine = self._slot(src.server, src.nic, rule.dscp)
            if rule.queued and self._best.get(mine, rule.bar) < rule.bar:
                return HOLD  # the round's best key (it may have started since): asked again next round
            for a in view.active.values():
                if self._slot(a.src.server, a.src.nic, a.dscp) == mine and self._key(a.flow, view) < rule.bar:
                    return hold(OnNic(src.server, src.nic)) if self._nic_wakes else HOLD
        return Decision(dscp=rule.dscp, rate=rule.rate)

    def _gate_wait(self, gate: str, flow: str) -> Decision:
        """A flow of an incomplete gate waits for what can complete it. The gate is split at its
        first flow offered in the round it is complete, its lead (the lowest in ready order, the
        first this book is offered): the lead waits for a flow of the gate not yet held, the
        others for the lead (the split takes them first; woken only if it left them held)."""
        lead = self._lead.setdefault(gate, flow)
        if lead != flow and lead in self._held_gated:
            return hold(OnDone(lead))
        self._lead[gate] = flow
        missing = next(f for f in reversed(self.gates[gate]) if f not in self._held_gated)
        return hold(OnReady(missing))

    def _key(self, flow: Flow, view: RunView) -> int:
        """An active flow's key: its rule's, a sub-flow's its original's."""
        if flow.parent is not None:
            rule = self.rules.get(flow.parent)
            return (rule or self._rule(view.job.items[flow.parent])).key
        return self._rule(flow).key
