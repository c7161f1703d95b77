"""The ``intra_host`` kind (:class:`railbed.hosts.HostKind`): a server group's interconnect graph,
named by preset (``intra_host: dgx1-v100``; ``hwmodels/presets/``, :func:`hwmodels.graph.load_preset`).

Its model is :class:`hwmodels.plugin.GraphHostModel`: stateless (a leg as if alone; concurrent
legs share links max-min), so one per preset serves every server of every run. The preset's
nodes are devices endpoints may be placed on; its GPUs must be the server's ``gpus``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hwmodels.graph import load_preset, presets
from hwmodels.plugin import GraphHostModel
from railbed.errors import SpecError
from railbed.safeload import describe


class IntraHost:
    field = "intra_host"

    def parse(self, raw: Any, where: str, gpus: int) -> str:
        if not isinstance(raw, str) or raw not in presets():
            raise SpecError(where, f"unknown preset {describe(raw)} (known: {', '.join(presets())})")
        preset_gpus = len(load_preset(raw).gpus)
        if preset_gpus != gpus:
            raise SpecError(f"{where.rsplit('.', 1)[0]}.gpus", f"{gpus} GPUs but intra_host {raw} has {preset_gpus}")
        return raw

    def to_doc(self, spec: str) -> str:
        return spec

    def describe(self, spec: str) -> str:
        return spec

    def devices(self, spec: str) -> tuple[str, ...]:
        return _nodes(spec)

    def model(self, spec: str, server: int) -> GraphHostModel:
        return _model(spec)


@cache
def _nodes(preset: str) -> tuple[str, ...]:
    return tuple(load_preset(preset).nodes)


@cache
def _model(preset: str) -> GraphHostModel:
    return GraphHostModel(load_preset(preset))


KIND = IntraHost()
