"""railbed core data model, shared by every layer: ClusterSpec, Topology, units.

Pure code: no root, no Mininet, no sockets.
"""

from railbed.errors import EnvironmentProblem, RailbedError, SpecError
from railbed.spec import ClusterSpec, Fabric, Server
from railbed.topology import Topology
from railbed.units import RateScale

__all__ = [
    "ClusterSpec",
    "EnvironmentProblem",
    "Fabric",
    "RailbedError",
    "RateScale",
    "Server",
    "SpecError",
    "Topology",
]
