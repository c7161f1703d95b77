"""The flow-level simulator as backends (:mod:`railbed.backend`): two ways to run one fluid model.

* ``fluid`` (:data:`FLUID`): :class:`simulator.fluid.run.Simulation`, the Dispatcher and every scheduler
  hook at every event, max-min rates in numba (:class:`~simulator.fluid.network.NumbaNetwork`);
* ``fluid-reference`` (:data:`FLUID_REFERENCE`): the same loop over the plain-Python network
  (:class:`~simulator.fluid.network.ReferenceNetwork`), the oracle the tests compare with.

The other simulated backends have folders of their own: ``fluid-rules`` :mod:`simulator.rules`,
``packet`` :mod:`simulator.packet` (their ``backend.py``).
"""

from __future__ import annotations

from railbed.backend import Capabilities, ModelBackend, RunOptions
from railbed.job import Job
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from simulator.fluid.network import NumbaNetwork, ReferenceNetwork
from simulator.fluid.run import simulate


class Fluid(ModelBackend):
    """Every hook at every event (:func:`simulator.simulate`) over ``network``."""

    def __init__(self, name: str, summary: str, network: type, max_gpus: int) -> None:
        self.name, self.summary, self.network = name, summary, network
        self.capabilities = Capabilities(max_gpus=max_gpus)

    def run(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        result = simulate(
            job,
            scheduler,
            cluster,
            options.policy,
            network=self.network,
            progress=options.progress,
            analysis=options.analysis,
        )
        result.backend = self.name
        return result


# max_gpus: one Hermod training iteration measured (bench/bench_simulator.py, bench/bench_compact.py)
FLUID = Fluid("fluid", "the flow-level simulator: every scheduler hook, max-min rates in numba", NumbaNetwork, 8192)
FLUID_REFERENCE = Fluid(
    "fluid-reference", "fluid over the plain-Python network: the slow, obviously correct twin", ReferenceNetwork, 1024
)
