"""The rules engine (backend ``fluid-rules``; "the compact engine"): a whole simulated run in
one numba kernel, for schedulers whose decisions are pure functions of the flow.

:func:`simulator.simulate` calls the :class:`~railbed.dispatch.Dispatcher`
and the scheduler at every event: about 80 us of Python per item, minutes
at 1024 GPUs (issue 14, ``bench/bench_compact.py``). When a scheduler can
say up front what ``on_ready`` answers for every flow
(:meth:`railbed.scheduler.Scheduler.rule`: DSCP, cap, and when a flow
waits for a better one on its source NIC), the run needs no Python per
event. :func:`compact` turns a :class:`~railbed.job.Job` after placement
into a :class:`CompactJob` (arrays in the job's item order: devices and
durations of tasks; routes, wire bits, class, cap and wait rule of flows;
the dependency graph as CSR), and :func:`run_compact` runs it in
:func:`~simulator.rules.kernel.run_kernel`, which reproduces :class:`simulator.fluid.run.Simulation` over
the Dispatcher step by step:

* events in :data:`railbed.actions.EVENT_ORDER`: the network advances to the earliest of its
  next finish and the next timer (the step of :func:`simulator.fluid.network.advance_kernel`,
  computed as :mod:`simulator.rules.network` does: only the flows an event changes are
  re-rated); finished flows are reported one by one in the network's
  order, then timers in (time, order set);
* each report settles like ``Dispatcher._settle``: newly ready items join
  the held list in item order; the held list is offered in order (tasks
  queue on their device FIFO, flows start unless their :class:`Rule` holds
  them); device queues start tasks in device order; the flows started
  join the network after their route's latency; same-server flows are one
  wait of 0 s (the compact engine refuses servers with a hardware model,
  ``intra_host``, ``datapath`` or any kind of :mod:`railbed.hosts`);
* a :class:`Rule` holds a flow while a network flow active on its source
  NIC has a smaller key than its bar, or (``queued``) while a held queued
  flow there had one when the offer round began: exactly Hermod's and
  Lina's ``on_ready`` (with the scheduler's ``hold_by_class``, "its source
  NIC" is its source NIC and class-selector, ``dscp >> 3``).

* **gates** (:class:`Rule` ``gate``): a flow is held until every flow of its
  gate is held when a round begins; at the first of them in the held list
  (the list keeps only that one, and members whose key counts for a NIC's
  best, so a settling looks at a gate once, not at each of its flows)
  the gate is split (``Dispatcher._split``): the originals start, the
  sub-flows without dependencies start (after the sub-flows made ready by
  this report and before the next held item), the rest start when their
  dependencies end, without rules; an original ends with its last sub-flow,
  and then its dependents become ready. The sub-flows are
  :meth:`Scheduler.gate_split_arrays`' (every gate at once, as arrays) or
  else :meth:`Scheduler.gate_split`'s per gate, checked and appended with
  numpy by :func:`~simulator.rules.gates.add_gates` (for :func:`compact` and
  :func:`compact_arrays` alike) before the run, as items after the job's.
  Hermod's EP coflows between servers are gates and its split is Alg. 3
  (seed 004, §5.3.2: Hungarian matchings of the coflow's byte matrix as
  sub-phases, each sub-flow after its sender's and receiver's previous
  one), a pure function of the coflow once it is ready.

Its slow twin is :func:`simulator.simulate` itself: ``tests/test_compact.py``
runs random jobs and the MoE generator's under ``megatron``, ``lina``,
``hermod`` (with its Alg. 3 splits), ``hermod-intra`` and more on both and
requires every item's (and sub-flow's) ready, start and end times to be
equal; ``tests/test_differential.py`` runs random jobs on random clusters of every
fabric under every registered scheduler it supports against ``fluid-reference`` (the
Dispatcher over the plain-Python network). ``rule`` and ``gate_split`` get each flow as
``on_ready`` would see it (a ``hidden`` size stays ``None``). What it does not do (those
runs need :func:`simulator.simulate`): splits other than gated ones of sub-flows between the
original's ends, wake-ups, path options and intra-host models, the per-link time series
(``link_series``); a scheduler with its own ``on_flows_changed`` (re-rating), ``on_done``,
``choose_path`` or job hooks (:data:`UNCALLED_HOOKS`), or without a rule, is refused before ``place``.
Release times (items' ``at``) are honoured: an item is ready at the later of its dependencies'
ends and its release (a timer, as the Dispatcher's release wait).

**Jobs as arrays** (issue 14: Mixtral-8x22B at 8192 GPUs is 27 million items,
about 22 GB as a :class:`Job`): :func:`compact_arrays` makes the same
:class:`CompactJob` from a :class:`workloads.arrays.ArrayJob`
(:func:`workloads.moe.moe_arrays`), with numpy; its results are arrays
(:meth:`CompactResult.save_items`, :func:`load_items`) and a record-less
:class:`RunResult` (:meth:`CompactResult.summary_result`). Item indices are
int32 in the kernel's work arrays (about 16 bytes per item there: the work lists grow as needed).

The package, by concern:

* :mod:`~simulator.rules.model`: :class:`CompactJob` (a placed job as columns) and the column
  helpers the builder and the gates share;
* :mod:`~simulator.rules.build`: the builder, :func:`compact` (a :class:`~railbed.job.Job`) and
  :func:`compact_arrays` (an :class:`~workloads.arrays.ArrayJob`), one module: both make the same
  columns, the second with numpy over rule classes;
* :mod:`~simulator.rules.gates`: gated flows' sub-flows, split, checked and appended;
* :mod:`~simulator.rules.kernel`: the run in numba;
* :mod:`~simulator.rules.run`: :func:`run_compact`, :func:`network_free_run`, :func:`simulate_compact`;
* :mod:`~simulator.rules.report`: :class:`CompactResult` and its forms (RunResult, arrays, analysis);
* :mod:`~simulator.rules.backend`: the ``fluid-rules`` backend (:data:`FLUID_RULES`).
"""

from simulator.rules.build import UNCALLED_HOOKS, compact, compact_arrays
from simulator.rules.model import LOCAL, NET, TASK, CompactJob
from simulator.rules.report import MAX_ANALYSIS_ITEMS, CompactResult, load_items, timeline_of_compact
from simulator.rules.run import network_free_run, run_compact, simulate_compact

__all__ = [
    "LOCAL", "MAX_ANALYSIS_ITEMS", "NET", "TASK", "UNCALLED_HOOKS", "CompactJob", "CompactResult", "compact",
    "compact_arrays", "load_items", "network_free_run", "run_compact", "simulate_compact", "timeline_of_compact",
]  # fmt: skip
