"""Flow-level simulator: the emulator's jobs, schedulers and results at thousands of GPUs.

Public: :func:`simulate` and :class:`Simulation` (:mod:`simulator.fluid.run`),
:func:`maxmin` / :func:`maxmin_reference` (:mod:`railbed.maxmin`). Two backends' results of one
job are compared in :mod:`scenarios.crosscheck`.
"""

from railbed.maxmin import maxmin, maxmin_reference
from simulator.fluid.run import Simulation, simulate

__all__ = ["Simulation", "maxmin", "maxmin_reference", "simulate"]
