"""The ``packet`` backend (:mod:`railbed.backend`): :mod:`simulator.packet`, the Dispatcher's run
carried by ns-3 (TCP connections, strict-priority drop-tail queues); ns-3 is imported when a run
starts."""

from __future__ import annotations

from railbed.backend import Capabilities, ModelBackend, RunOptions
from railbed.job import Job
from railbed.results import RunResult
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec


class Packet(ModelBackend):
    """ns-3 carries the packets (:mod:`simulator.packet`); the Dispatcher and every hook as ``fluid``."""

    name = "packet"
    summary = "packet-level simulation on ns-3: TCP, drop-tail strict-priority queues, ECN (railbed[packet])"
    # max_gpus: bench/bench_packet.py's Hermod testbed iteration (reduced) at 128 GPUs took 45 s here; a
    # 128-GPU all-to-all of 1 MB a pair 15-30 min (extrapolated): docs/packet.md, "Speed"
    capabilities = Capabilities(packets=True, max_gpus=128, settings=("packet",))  # host models: the Dispatcher's legs

    def parse_settings(self, block: dict, cluster: ClusterSpec):
        from simulator.packet.options import parse_packet  # pure: no ns-3

        return parse_packet(block.get("packet"))

    def check(self, cluster: ClusterSpec, options: RunOptions) -> None:
        """ns-3 installed (without importing it: 10 s), the cluster within the address plan."""
        from railbed.topology import Topology
        from simulator.packet.engine import require
        from simulator.packet.fabric import check_fits
        from simulator.packet.options import check_tcp

        check_tcp(options.tcp, options.own(self.name))
        require()
        check_fits(Topology(cluster))
        return None

    def run(self, job: Job, scheduler: Scheduler, cluster: ClusterSpec, options: RunOptions) -> RunResult:
        from dataclasses import replace

        from simulator.packet.options import PacketOptions, check_tcp
        from simulator.packet.run import simulate_packets

        check_tcp(options.tcp, options.own(self.name))
        packet = replace(options.own(self.name, PacketOptions()), tcp=options.tcp)
        return simulate_packets(job, scheduler, cluster, options.policy, packet, options.progress, options.analysis)


PACKET = Packet()
