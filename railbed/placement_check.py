"""Where endpoints may go: a server's devices and resources, and the check of a placement
(every endpoint on an existing server, NIC and device; pins kept; demands within resources)."""

from __future__ import annotations

from railbed.actions import SchedulerError
from railbed.errors import SpecError
from railbed.job import Job, Location, Placement
from railbed.spec import ClusterSpec, Server


def server_devices(server: Server) -> list[str]:
    """Device names an endpoint may be placed on: ``gpu<i>`` (i < gpus), ``cpu``, those its hardware model adds."""
    names = [f"gpu{g}" for g in range(server.gpus)] + ["cpu"]
    if server.host is not None:
        names += [n for n in server.host.definition().devices(server.host.spec) if n not in names]
    return names


def server_resources(server: Server) -> dict[str, float]:
    """What a server offers to endpoint ``demands``: its ``resources``, and ``gpu`` = its GPUs unless given."""
    return {"gpu": float(server.gpus), **{k: float(v) for k, v in server.resources.items()}}


def check_placement(job: Job, cluster: ClusterSpec, placement: Placement) -> None:
    """Every endpoint placed on an existing server, NIC and device; pins kept; demands within resources.

    A violation by a pinned endpoint is the job's fault (:class:`SpecError`
    naming the pin); otherwise the scheduler's (:class:`SchedulerError`)."""
    used: dict[int, dict[str, float]] = {}
    for name, ep in job.endpoints.items():
        loc = placement.locations.get(name)
        if loc is None:
            raise SchedulerError(f"placement: endpoint {name!r} was not placed")
        if ep.pin is not None and loc != ep.pin:
            raise SchedulerError(f"placement: endpoint {name!r} is pinned to {ep.pin}, placed at {loc}")
        problem = location_problem(cluster, loc)
        if problem is None:
            problem = demand_problem(ep.demands, cluster.servers[loc.server], used.setdefault(loc.server, {}))
        if problem is not None:
            if ep.pin is not None:
                raise SpecError(f"endpoints.{name}.pin", problem)
            raise SchedulerError(f"placement: endpoint {name!r}: {problem}")


def location_problem(cluster: ClusterSpec, loc: Location) -> str | None:
    if not isinstance(loc.server, int) or not 0 <= loc.server < len(cluster.servers):
        return f"server {loc.server!r} does not exist (the cluster has {len(cluster.servers)})"
    server = cluster.servers[loc.server]
    if not isinstance(loc.nic, int) or not 0 <= loc.nic < server.nics:
        return f"NIC {loc.nic!r} does not exist on server {loc.server} ({server.nics} NICs)"
    devices = server_devices(server)
    if loc.device not in devices:
        shown = ", ".join(devices[:6]) + (", ..." if len(devices) > 6 else "")
        return f"device {loc.device!r} does not exist on server {loc.server} (it has {shown})"
    return None


def demand_problem(demands, server: Server, used: dict[str, float]) -> str | None:
    """Add ``demands`` to the server's ``used`` and say what overflows (resources a server does not list are free)."""
    offered = server_resources(server)
    for res, amount in demands.items():
        used[res] = used.get(res, 0.0) + float(amount)
        if res in offered and used[res] > offered[res] * (1 + 1e-9):
            return f"{res} on server {server.name}: {used[res]:g} used, {offered[res]:g} available"
    return None
