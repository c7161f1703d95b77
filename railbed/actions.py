"""The Dispatcher's vocabulary with the backends: the actions it asks them to carry out, the
errors a run may end with, and the checks of a scheduler's DSCP and rate answers.

A backend carries out :class:`StartWait` (time a task, a leg of a flow, a wake-up) and
:class:`StartFlow` (a network transfer), and applies :class:`SetRate` and :class:`SetDscp` to
active flows; it reports back with :meth:`railbed.dispatch.Dispatcher.wait_done` and
:meth:`~railbed.dispatch.Dispatcher.flow_done`.
"""

from __future__ import annotations

from dataclasses import dataclass

WAKE_PREFIX = "/wake/"
RELEASE_PREFIX = "/release/"
# A cap under this share of the flow's slower NIC holds the flow on the packet backends (the
# emulator's agents, ns-3's senders stop writing it): a pacing rate that low stalls a socket long
# after it is raised. The fluid model's counterpart is a rate of almost nothing (MRTF's floor).
HOLD_FRACTION = 1e-3


class SchedulerError(RuntimeError):
    """A scheduler returned something the run cannot carry out."""


class RunStalled(RuntimeError):
    """Nothing runs and the scheduler holds every ready item: the run cannot progress."""


@dataclass(frozen=True)
class StartWait:
    """Wait ``seconds`` (model) on ``server``: a task, or a leg of a flow. Report with ``wait_done(key)``."""

    key: str
    server: int
    seconds: float


@dataclass(frozen=True)
class StartFlow:
    """Send ``size`` payload bytes from NIC ``src`` to NIC ``dst`` (``(server, nic)``).

    ``index`` is a small integer unique in the run (the agents' wire id);
    ``spine`` the ECMP choice for a flow between leaves
    (:meth:`railbed.topology.Topology.ecmp_spine`), else ``None``.
    Report with ``flow_done(id, received)``."""

    id: str
    index: int
    src: tuple[int, int]
    dst: tuple[int, int]
    size: int
    dscp: int
    rate: float | None  # model wire bit/s
    spine: int | None = None


@dataclass(frozen=True)
class SetRate:
    """Change an active flow's cap (model wire bit/s; ``None``: uncapped)."""

    id: str
    rate: float | None


@dataclass(frozen=True)
class SetDscp:
    """Re-mark an active flow: the emulator sets ``IP_TOS`` on its socket, the simulator moves it to that class."""

    id: str
    dscp: int


Action = StartWait | StartFlow | SetRate | SetDscp

EVENT_ORDER = ("flows", "timers")
"""Which of simultaneous events the fluid engines report first: defined here once, followed by the
simulator's loop (:mod:`simulator.fluid.run`), the rules engine's kernel (:mod:`simulator.rules`),
the network-free runs (:func:`railbed.analysis.network_free_makespan`,
:func:`simulator.rules.network_free_run`); ``tests/test_event_order.py`` checks each on a job with
ties. The clock advances to the earliest of the network's next finish and the next timer (a tie
goes to the network); at that instant, batch by batch, each report settling the Dispatcher before
the next:

``flows``   the network flows that finish then (those within a factor ``1 + EPS`` of the
            earliest finish together, :mod:`simulator.fluid.network`), reported one by one
            (``flow_done``) in the network's order; again while flows finish at that instant
            (zero bits, no latency: a network-free run's flows end at the step after their start);
``timers``  then, once no flow finishes there, every timer due (:class:`StartWait`: a task, a
            leg, a route's latency, a wake-up, a release), in (time, order set), those set during
            the batch and due then included (``wait_done``); a flow a timer's report starts comes after.

Within a report the Dispatcher settles in its own order (:mod:`railbed.dispatch`: newly ready items
in item order, held items offered in the order they became ready, device queues FIFO).
:mod:`schedulers.dgtp_eval` (ETP's cost, no hooks) differs on exact ties: it reports an instant's
flows and tasks as one batch and readies their dependents in job order (the test shows where)."""


def check_dscp(dscp, item_id: str, who: str) -> None:
    """``dscp`` (scheduler ``who``'s answer for ``item_id``) is a DSCP, 0..63, or :class:`SchedulerError`."""
    if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
        raise SchedulerError(f"{who}: DSCP {dscp!r} for {item_id} is not in 0..63")


def check_spine(answer, ecmp: int, spines: int, flow_id: str, who: str) -> int:
    """A scheduler's ``choose_spine`` answer: a spine index below ``spines``, or ``None`` for ``ecmp``."""
    if answer is None:
        return ecmp
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < spines:
        raise SchedulerError(f"{who}.choose_spine({flow_id}) returned {answer!r}, not a spine index < {spines}")
    return answer


def check_rate(rate, item_id: str, who: str) -> None:
    """``rate`` (scheduler ``who``'s cap for ``item_id``) is ``None`` or positive, or :class:`SchedulerError`."""
    if rate is not None and not rate > 0:
        raise SchedulerError(f"{who}: rate {rate!r} for {item_id} must be positive")
