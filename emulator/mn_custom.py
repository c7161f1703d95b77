"""Custom topology file for Mininet's ``mn`` (the one in railbed's environment)::

    sudo /opt/railbed/venv/bin/mn --custom emulator/mn_custom.py \
        --topo railbed,examples/rail-4x4.yaml --controller none

builds the cluster with railbed's node classes (bridges in namespaces, spine
routers, HTB + DSCP priority on every port) at the default rate scale.
``mn`` runs this file with ``exec``, so it imports the installed packages.
Unlike ``railbed up``, ``mn`` keeps no run record: after a SIGKILL use
Mininet's own ``mn -c``.
"""

from emulator.topo import ClusterTopo
from railbed.spec import ClusterSpec
from railbed.topology import default_scale
from railbed.units import RateScale
from tc_policies.plan import policy_by_name


def railbed_topo(path: str, policy: str = "dscp-priority", scale: float | None = None) -> ClusterTopo:
    spec = ClusterSpec.load(path)
    k = default_scale(spec) if scale is None else RateScale(float(scale))
    return ClusterTopo(spec=spec, policy=policy_by_name(policy), scale=k)


topos = {"railbed": railbed_topo}
