"""The fluid backends, ``fluid`` and ``fluid-reference`` (:mod:`simulator.fluid.backend`): the
Dispatcher and every scheduler hook at every event (:mod:`simulator.fluid.run`) over the fluid
network, max-min rates in numba or in plain Python (:mod:`simulator.fluid.network`), and the
per-link time series (:mod:`simulator.fluid.series`)."""
