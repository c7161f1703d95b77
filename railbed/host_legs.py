"""The host side of a run's flows: each server's hardware model (:mod:`railbed.hosts`) asked
for the legs of flows inside a server or on either side of the network, for the
:class:`~railbed.dispatch.Dispatcher` (its module docstring, "Host models").

Each leg is asked of its server's model (:mod:`railbed.hosts`: the kind the cluster file names
gives one model per server for the run) once, when it starts, with the current model time: a
stateful model (LEO's ``datapath``) keeps its queues for the whole run, so concurrent requests
wait in them (eqs. 6.1/6.2); a stateless one (an ``intra_host`` graph) times a leg as if alone.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.hosts import KINDS, HostLeg, HostModel
from railbed.job import Flow, Placement
from railbed.results import ItemRecord
from railbed.spec import ClusterSpec


class HostLegs:
    """The host models of one run (made per server on first use) and the legs they timed."""

    def __init__(self, cluster: ClusterSpec, placement: Placement) -> None:
        self.cluster, self.placement = cluster, placement
        self.models: dict[int, HostModel | None] = {}  # server -> its model for this run
        self.legs: dict[tuple[str, str], tuple[float, float]] = {}
        self.local_no_model = 0  # same-server flows timed 0 s: their server has no model

    def model(self, server: int) -> HostModel | None:
        """The server's model for this run (made by its kind on first use), ``None`` without one."""
        if server not in self.models:
            host = self.cluster.servers[server].host
            self.models[server] = None if host is None else host.definition().model(host.spec, server)
        return self.models[server]

    def leg_time(self, flow: Flow, leg, side: str, now: float, rec: ItemRecord) -> tuple[float, float]:
        """(seconds, inject rate bit/s) of an option's leg on the ``side`` server, asked once,
        when the leg starts (``now``): a datapath model queues it behind earlier legs. The
        flow's record ``rec`` adds the seconds to its ``intra``."""
        key = (flow.id, side)
        if key not in self.legs:
            self.legs[key] = self._compute_leg(flow, leg, side, now, rec.option)
            rec.intra = (rec.intra or 0.0) + self.legs[key][0]
        return self.legs[key]

    def _compute_leg(self, flow: Flow, leg, side: str, now: float, option: str | None) -> tuple[float, float]:
        if leg.duration is not None:
            return float(leg.duration), float("inf")
        server = self.placement[flow.src if side == "src" else flow.dst].server
        model = self.model(server)
        where = f"items.{flow.id}.options.{option}.{side}_leg"
        if model is None:
            kinds = ", ".join(KINDS.names())
            raise SpecError(where, f"no duration and server h{server} has no host model ({kinds})")
        try:
            timing = model.leg(HostLeg(leg.src, leg.dst, float(flow.size or 0), now, leg.work))
        except KeyError as exc:  # a function the server's datapath does not time
            raise SpecError(f"{where}.work", f"on server h{server}: {exc.args[0]}") from None
        except ValueError as exc:
            raise SpecError(where, f"on server h{server}: {exc}") from None
        return float(timing.duration), float(timing.inject_rate)

    def jitter(self, flow: Flow) -> float:
        """The delay a flow with path options meets at the NICs it crosses: each endpoint's host
        model's ``nic_delay`` (LEO's datapath: §6.4's 3-9 us), asked in the order flows start."""
        total = 0.0
        for ep in (flow.src, flow.dst):
            delay = getattr(self.model(self.placement[ep].server), "nic_delay", None)
            if delay is not None:
                total += delay()
        return total

    def time_local(self, batch: list[tuple[Flow, int, str, str]], now: float) -> list[float]:
        """Seconds of the same-server flows started in one batch (flow, server, source device,
        destination device): the flows of one server that start together are concurrent legs of
        its intra-host model (they share its links); 0 s without a model, or between endpoints
        on one device."""
        seconds = [0.0] * len(batch)
        for server in sorted({b[1] for b in batch}):
            model = self.model(server)
            mine = [k for k, b in enumerate(batch) if b[1] == server]
            if model is None:
                self.local_no_model += len(mine)
                continue
            legs = [k for k in mine if batch[k][2] != batch[k][3]]
            if legs:
                try:
                    timings = model.legs(
                        [HostLeg(batch[k][2], batch[k][3], float(batch[k][0].size or 0), now) for k in legs]
                    )
                except ValueError as exc:  # a datapath server has no device-to-device leg
                    raise SpecError(f"items.{batch[legs[0]][0].id}", f"same-server flow on h{server}: {exc}") from None
                for k, t in zip(legs, timings):
                    seconds[k] = float(t.duration)
        return seconds
