"""The emulator's own settings: its keys of a scenario, parsed without Mininet, pyroute2 or root.

:data:`KEYS` (the scenario file's top-level keys, as ``scenarios/runner.py``'s docstring shows
them) are the ``settings`` of the emulator's :class:`~railbed.backend.Capabilities`; its
``parse_settings`` is :func:`parse`, and a run reads them as ``RunOptions.own("emulate", EmulateSettings())``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from railbed.safeload import boolean, choice, positive
from railbed.spec import ClusterSpec

LATENCY_MODES = ("auto", "netem", "agents")
KEYS = ("latency", "trace", "strict", "timeout", "flow_progress", "capture")


@dataclass(frozen=True)
class EmulateSettings:
    latency: str = "auto"  # how the emulator makes link latency: auto | netem | agents
    trace: float = 0.0  # s between received-bytes samples per flow (0: off)
    strict: bool = False  # a broken fidelity report fails the run
    timeout: float | None = None  # real seconds per run
    flow_progress: float = 0.01  # model s between the emulator's reports of flow bytes (0: off)
    capture: Any = None  # packet captures around each run (emulator.capture.CaptureSpec)


def parse(block: dict[str, Any], cluster: ClusterSpec) -> EmulateSettings:
    """The emulator's keys a scenario gives (``block``) -> :class:`EmulateSettings`, the others at
    their defaults; a ``SpecError`` names the key."""
    return EmulateSettings(
        latency=choice(block.get("latency", "auto"), "latency", LATENCY_MODES),
        trace=positive(block.get("trace"), "trace", allow_zero=True) or 0.0,
        strict=boolean(block.get("strict", False), "strict"),
        timeout=positive(block.get("timeout"), "timeout"),
        flow_progress=positive(block.get("flow_progress", 0.01), "flow_progress", allow_zero=True) or 0.0,
        capture=_capture(block.get("capture"), cluster),
    )


def _capture(raw: Any, cluster: ClusterSpec):
    if raw is None:
        return None
    from emulator.capture import parse_capture  # pure: no Mininet, no pyroute2
    from railbed.topology import Topology

    return parse_capture(raw, Topology(cluster))
