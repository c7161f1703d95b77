"""The fabric's MTU on the emulator: every port of every node (hosts, bridges, spines) gets it,
and a jumbo fabric sends the same bytes in 1/6.18 of the packets (tc's packet counters of the
sender's NIC port), at its rate (the run's time against the fabric's wire bytes)."""

import os
import re
import subprocess

import pytest
from loadcheck import tolerance_or_load

from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from schedulers import by_name
from tc_policies.plan import shaping_params

SIZE = 8948 * 1448  # 12.96 MB: whole segments at both MTUs
RATE = 1e9  # model; k = 10: 100 Mbit/s real


def cluster(mtu: int) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": 2, "nics": 2, "nic_rate": RATE}], "fabric": {"type": "rail_optimized", "spines": 1,
                                                                            "mtu": mtu}}
    )  # fmt: skip


def one_flow() -> Job:
    job = Job("one")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    job.flow("f", "a", "b", SIZE)
    return job


def mtus(tb: Testbed, node: str) -> dict[str, int]:
    out = tb.popen(node, ["ip", "-o", "link", "show"], stdout=subprocess.PIPE, text=True).communicate(timeout=30)[0]
    return {m[0]: int(m[1]) for m in re.findall(r"^\d+: ([^:@]+)[^\n]*? mtu (\d+)", out, re.M) if m[0] != "lo"}


@pytest.mark.parametrize("mtu", [9000, 4096])
def test_every_port_of_a_jumbo_fabric_has_its_mtu(mtu):
    with Testbed(cluster(mtu), scale=10) as tb:
        nodes = [*tb.topology.hosts, *tb.topology.switches, *tb.topology.spines]
        seen = {node: mtus(tb, node) for node in nodes}
    for node, by_if in seen.items():
        assert by_if and set(by_if.values()) == {mtu}, f"{node}: {by_if}"
    assert "br0" in seen["rail0"]


def test_a_jumbo_fabric_sends_a_sixth_of_the_packets_for_the_same_bytes():
    packets, spec_of = {}, {}
    for mtu in (1500, 9000):
        spec_of[mtu] = spec = cluster(mtu)
        with Testbed(spec, policy="fifo", scale=10) as tb:
            before = tb.counters("h0", "h0-eth0")
            res = run(one_flow(), by_name("fifo"), tb)
            after = tb.counters("h0", "h0-eth0")
        packets[mtu] = after.packets - before.packets
        framing = spec.fabric.framing
        # the full data segments (the agents' 16-byte header rides in them) and a few more: the
        # handshake, the FIN, ARP (measured: +9 at MTU 1500 on a quiet machine), what TCP resent,
        # and short segments where the sender ran dry (a loaded machine: +27 of 1449 at MTU 9000)
        least = framing.packets(SIZE + 16)
        resent = res.fidelity_report.get("tcp_retransmits", 0)
        assert least <= packets[mtu] <= 1.03 * least + 16 + resent, (mtu, packets[mtu], least, resent)
        ideal = framing.wire_bytes(SIZE + 16) * 8 / RATE
        # HTB lets a burst through unshaped (1 ms of bytes) at each of the two shaped ports on the
        # way: the run may end that much before the wire time (under 2 CPU hogs it ended below it, 1.000 at 3 digits)
        early = 2 * shaping_params(RATE / 10, framing.frame)[1] * 8 / RATE
        assert ideal - early <= res.makespan <= 1.08 * ideal, f"MTU {mtu}: {res.makespan / ideal:.4f} of its wire time"
    assert packets[1500] / packets[9000] == pytest.approx(8948 / 1448, rel=0.05)  # 6.18: 5.87..6.49


def test_agents_run_at_the_run_priority_and_zero_byte_flows_share_one_connection():
    """The agents' nice value and autogroup are RUN_NICE during a run (on a busy machine they
    otherwise wait for a CPU); the controller's session gets its autogroup back after the run.
    Three zero-byte flows one after another between one pair ride one persistent connection."""
    from emulator.priority import RUN_NICE

    job = Job("zeros")
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b", Location(1, "gpu0", 0))
    prev = []
    for i in range(3):
        prev = [job.flow(f"z{i}", "a", "b", 0, prev)]
    seen = {}

    def on_agents(pids):
        for s, pid in pids.items():
            group = open(f"/proc/{pid}/autogroup").read().split()[-1]
            seen[s] = (os.getpriority(os.PRIO_PROCESS, pid), int(group))

    mine = open("/proc/self/autogroup").read()
    with Testbed(cluster(1500), scale=10) as tb:
        res = run(job, by_name("fifo"), tb, on_agents=on_agents)
    assert seen and all(v == (RUN_NICE, RUN_NICE) for v in seen.values()), seen
    assert open("/proc/self/autogroup").read() == mine
    assert all(res.items[f"z{i}"].end is not None for i in range(3))
    assert "3 zero-byte flows on 1 persistent connections" in " ".join(res.notes), res.notes


def test_a_payload_only_fabric_gives_the_payload_its_declared_rate():
    """``framing: none``: the links are shaped at rate x 1514/1448, so the flow's payload (not its
    frames) moves at the declared rate, as the fluid model counts it."""
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "nic_rate": RATE}], "fabric": {"type": "single_switch", "framing": "none"}}
    )
    with Testbed(spec, policy="fifo", scale=10) as tb:
        assert tb.real_rate("h0", "h0-eth0") == pytest.approx(RATE / 10 * 1514 / 1448)
        res = run(one_flow(), by_name("fifo"), tb)
    ideal = (SIZE + 16) * 8 / RATE  # payload only
    with tolerance_or_load(res):
        assert ideal <= res.makespan <= 1.08 * ideal, f"{res.makespan / ideal:.3f} of the payload's time"
