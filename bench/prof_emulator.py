"""Where a packet's time goes in the emulator (needs root): the concurrent-flow case of
bench_runtime.py, profiled.

    sudo /opt/railbed/venv/bin/python bench/prof_emulator.py --flows 64 --scale 2500 [--mtu 9000] [--perf]

One testbed (64 GPUs: 8 servers x 8 rails, 2 spines), one run of ``--flows`` equal flows (flow i
from NIC i to the same rail on the next server), ``--seconds`` of ideal real time. Around the run:

* per CPU, /proc/stat (user, system, softirq, idle) and /proc/softirqs (NET_RX, NET_TX, TIMER);
* the agents' and the controller's CPU (utime/stime from /proc/<pid>/stat);
* ``tc -s qdisc`` of every port, summed per stage (host NICs, rail switch ports, spine ports):
  packets, drops, overlimits, requeues; TCP's retransmissions (the agents' namespaces);
* with ``--perf``, ``perf record -a -e cpu-clock`` for the first 6 s after the agents start: every
  CPU's kernel samples by stage (HTB/qdisc, bridge, veth, TCP, IP, ...), the agents' user space.

The machine is shared: the load average is printed beside every figure. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.runtime import run  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from railbed.job import Job, Location  # noqa: E402
from railbed.results import percentile  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from schedulers import by_name  # noqa: E402

NIC_RATE = 100e9
PERF_SECONDS = 6.0  # from the agents' start: the flows start 1-3 s later on a loaded machine
STAGES = [  # (stage, symbol prefixes): first match wins
    ("qdisc (HTB, u32, pfifo)", ("htb_", "qdisc_", "__qdisc", "pfifo", "u32_", "tcf_", "sch_", "dev_qdisc",
                                  "__dev_xmit_skb", "psched", "netem")),
    ("bridge", ("br_", "nbp_", "__br")),
    ("veth", ("veth_",)),
    ("TCP", ("tcp_", "__tcp", "inet_csk", "tcp4")),
    ("IP and routing", ("ip_", "__ip", "ipv4", "fib_", "ip4_", "rt_", "dst_", "inet_", "raw_", "nf_", "icmp")),
    ("netdev core and skb", ("__netif", "netif_", "__dev_queue", "dev_", "process_backlog", "net_rx", "__napi",
                             "napi_", "skb_", "__skb", "kfree_skb", "__alloc_skb", "consume_skb", "kmem_", "__kmalloc",
                             "kmalloc", "kfree", "__slab", "slab_", "___slab", "page_", "__page", "eth_",
                             "validate_xmit",
                             "__build_skb", "build_skb", "sk_", "__sk", "sock_", "__sock", "lock_sock", "release_sock",
                             "__release_sock", "__local_bh", "do_softirq", "__do_softirq", "handle_softirqs")),
    ("copy to/from user", ("copy_", "_copy", "__copy", "rep_mov", "memcpy", "__memcpy", "memset", "csum", "skb_copy")),
    ("locks", ("_raw_spin", "queued_spin", "native_queued", "__raw_spin", "_raw_read", "_raw_write")),
    ("syscalls, epoll, scheduler", ("ep_", "do_epoll", "__x64_sys", "do_syscall", "entry_SYSCALL", "syscall_",
                                    "__schedule", "schedule", "pick_", "enqueue_", "dequeue_", "update_", "try_to_wake",
                                    "__wake", "hrtimer", "__hrtimer", "ktime", "read_tsc", "finish_task", "switch_",
                                    "__switch", "psi_", "select_task", "ttwu", "set_next", "restore_", "fdget",
                                    "__fget", "fput", "__fsnotify", "rw_verify", "vfs_", "sock_read", "sock_write",
                                    "__sys_", "sys_", "exit_to_user", "irqentry", "native_", "clear_bhb")),
]


def stage_of(sym: str, dso: str) -> str:
    if "python" in dso or "libc" in dso or "ld-linux" in dso:
        return "user space (Python, libc)"
    for stage, prefixes in STAGES:
        if sym.startswith(prefixes):
            return stage
    return "other kernel"


class _Ethernet:
    """MTU 1500's framing, for a tree without ``railbed.units.Framing`` (an A/B against an old one)."""

    mtu, goodput_fraction = 1500, 1448 / 1514

    @staticmethod
    def wire_bytes(payload: int) -> int:
        return payload + -(-payload // 1448) * 66


def concurrent_job(c: int, size: int, servers: int = 8, rails: int = 8) -> Job:
    """bench_runtime.py's concurrency job: ``c`` flows of ``size`` bytes, flow i from NIC i % 64."""
    nics = [(s, n) for s in range(servers) for n in range(rails)]
    job = Job(f"concurrent-{c}", default_capacity=c)
    for i, (s, n) in enumerate(nics):
        job.endpoint(f"src{i}", Location(s, f"gpu{n}", n))
        job.endpoint(f"dst{i}", Location((s + 1) % servers, f"gpu{n}", n))
    for i in range(c):
        job.flow(f"f{i}", f"src{i % len(nics)}", f"dst{i % len(nics)}", size)
    return job


# ------------------------------------------------------------------ counters
def cpu_lines() -> dict[str, list[int]]:
    with open("/proc/stat") as f:
        return {p[0]: [int(x) for x in p[1:]] for p in (ln.split() for ln in f) if p[0].startswith("cpu")}


def softirqs() -> dict[str, list[int]]:
    with open("/proc/softirqs") as f:
        rows = [ln.split() for ln in f.read().splitlines()[1:]]
    return {r[0].rstrip(":"): [int(x) for x in r[1:]] for r in rows}


def schedstat(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns waiting on a run queue) of a process's main thread."""
    try:
        ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0, 0
    return int(ran), int(waited)


def ksoftirqd_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(p).startswith("ksoftirqd/")]


def _comm(p: Path) -> str:
    try:
        return (p / "comm").read_text().strip()
    except OSError:
        return ""


def proc_cpu(pid: int) -> tuple[int, int]:
    """(utime, stime) jiffies of a process and its waited-for children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0
    return int(fields[11]), int(fields[12])


TC_LINE = re.compile(r"qdisc (\S+) (\S+) (?:dev \S+ )?(root|parent \S+).*?\n\s*Sent (\d+) bytes (\d+) pkt "
                     r"\(dropped (\d+), overlimits (\d+) requeues (\d+)\)", re.S)  # fmt: skip


def tc_stats(tb: Testbed) -> dict[str, list[int]]:
    """Per stage: [packets, drops, overlimits, requeues] summed over the root qdiscs (drops also
    over the leaves, where pfifo counts them)."""
    out: dict[str, list[int]] = {}
    for node in [*tb.topology.hosts, *tb.topology.switches, *tb.topology.spines]:
        stage = "host NICs" if node in tb.topology.hosts else "spine ports" if node in tb.topology.spines else (
            "switch ports")  # fmt: skip
        text = tb.popen(node, ["tc", "-s", "qdisc", "show"], stdout=subprocess.PIPE, text=True).communicate(30)[0]
        acc = out.setdefault(stage, [0, 0, 0, 0])
        for kind, _h, where, _b, pkts, drops, over, req in TC_LINE.findall(text):
            if where == "root":
                acc[0] += int(pkts)
                acc[2] += int(over)
                acc[3] += int(req)
            if kind in ("pfifo", "netem"):
                acc[1] += int(drops)
    return out


def tcp_retrans(tb: Testbed) -> int:
    total = 0
    for host in tb.topology.hosts:
        text = tb.popen(host, ["nstat", "-az", "TcpRetransSegs"], stdout=subprocess.PIPE, text=True).communicate(30)[0]
        total += sum(int(m) for m in re.findall(r"TcpRetransSegs\s+(\d+)", text))
    return total


class Sampler:
    """/proc/stat, /proc/softirqs, the agents' CPU and run-queue waits every ``interval`` s, in a
    process of its own (own session, nice -10, as the agents: a thread of the controller's process
    starved beside it), so that the flows' own window can be cut out afterwards."""

    def __init__(self, agents: int, interval: float = 0.25) -> None:
        self.out = Path(f"/tmp/prof_emulator.samples.{os.getpid()}")
        argv = [sys.executable, __file__, "--sample", str(self.out), str(interval), str(agents)]
        self.proc = subprocess.Popen(argv, start_new_session=True)
        try:
            os.setpriority(os.PRIO_PROCESS, self.proc.pid, -10)
            Path(f"/proc/{self.proc.pid}/autogroup").write_text("-10")
        except OSError:
            pass

    def stop(self) -> list:
        self.proc.terminate()
        self.proc.wait(30)
        samples = [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]
        self.out.unlink()
        return samples


def agent_pids() -> list[int]:
    """The traffic agents running now (``python -m emulator.agent``)."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if b"emulator.agent" in (p / "cmdline").read_bytes():
                    found.append(int(p.name))
            except OSError:
                pass
    return sorted(found)


def sample_forever(out: str, interval: float, expected: int) -> None:
    pids: list[int] = []
    softirqd = ksoftirqd_pids()
    with open(out, "w") as f:
        while True:
            if len(pids) < expected:
                pids = agent_pids()
            sched = [schedstat(p) for p in [*pids, *softirqd]]
            row = [time.monotonic(), cpu_lines(), softirqs(), [proc_cpu(p) for p in pids], sched]
            f.write(json.dumps(row) + "\n")
            f.flush()
            time.sleep(interval)


def window(samples: list):
    """The first and last sample of the traffic: where NET_RX softirqs ran at over a fifth of
    their busiest rate (the sampler starts seconds before the flows and ends after them)."""
    rates = [sum(b[2]["NET_RX"]) - sum(a[2]["NET_RX"]) for a, b in zip(samples, samples[1:])]
    busy = [i for i, r in enumerate(rates) if r > 0.2 * max(rates, default=0)]
    if len(samples) < 3 or not busy:
        return samples[0], samples[-1]
    return samples[busy[0]], samples[busy[-1] + 1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ------------------------------------------------------------------ perf
def perf_report(data: str, pids: list[int], seconds: float, top: int) -> None:
    """Every CPU's samples: the kernel's by stage (the network's softirq work runs in whatever
    process it interrupts, other helpers' included, so it is counted wherever it ran), the
    agents' user space, the rest; in cores (samples / rate / seconds)."""
    def rows(*filt: str) -> list[tuple[int, str, str]]:
        text = subprocess.run(
            ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym",
             "-F", "sample,dso,sym", *filt], capture_output=True, text=True,
        ).stdout  # fmt: skip
        found = re.findall(r"^\s*(\d+)\s+(\S+)\s+\[([k.])\]\s+(\S+)", text, re.M)
        return [(int(n), dso, sym) for n, dso, _, sym in found]

    every = rows()
    agents = rows("--pid", ",".join(map(str, pids)))
    total = sum(n for n, _, _ in every) or 1
    rate = total / seconds / (os.cpu_count() or 1)  # samples per second per CPU, as recorded
    by_stage: dict[str, int] = {}
    for n, dso, sym in every:
        if "kernel" in dso:
            stage = stage_of(sym, dso)
            by_stage[stage] = by_stage.get(stage, 0) + n
    by_stage["agents' user space (Python)"] = sum(n for n, dso, _ in agents if "kernel" not in dso)
    by_stage["everything else (other processes' user space)"] = total - sum(by_stage.values())
    print(f"  perf (cpu-clock, all CPUs, {total} samples, {seconds:.1f} s): cores per stage")
    for stage, n in sorted(by_stage.items(), key=lambda x: -x[1]):
        print(f"    {n / rate / seconds:5.2f} cores  {100 * n / total:5.1f} %  {stage}")
    kernel = sorted(((n, sym) for n, dso, sym in every if "kernel" in dso), reverse=True)[:top]
    print("    top kernel symbols: " + ", ".join(f"{sym} {100 * n / total:.1f}%" for n, sym in kernel))


# ------------------------------------------------------------------ one case
def profile(tb: Testbed, flows: int, seconds: float, perf: bool, top: int) -> None:
    real = tb.scale.real_rate(NIC_RATE)
    framing = getattr(tb.spec.fabric, "framing", None) or _Ethernet()
    per_nic = math.ceil(flows / 64)
    size = int(seconds * real * framing.goodput_fraction / 8 / per_nic)
    job = concurrent_job(flows, size)
    agents: dict[int, int] = {}
    state: dict[str, object] = {}

    def on_agents(pids: dict[int, int]) -> None:
        agents.update(pids)
        state["tc0"], state["rx0"] = tc_stats(tb), tcp_retrans(tb)
        state["t0"] = time.monotonic()
        if perf:
            state["perf"] = subprocess.Popen(
                ["perf", "record", "-a", "-e", "cpu-clock", "-F", "499", "-o", "/tmp/prof_emulator.data",
                 "--", "sleep", str(PERF_SECONDS)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip

    load_before = loadavg()
    state["sampler"] = Sampler(len(tb.topology.hosts))  # warmed up before the agents exist (it finds them)
    res = run(job, by_name("fifo"), tb, on_agents=on_agents)
    samples = state["sampler"].stop()
    if perf:
        state["perf"].wait(60)
    tc1, rx1 = tc_stats(tb), tcp_retrans(tb)
    busy = tb.scale.real_time(res.makespan)  # the flows' real time
    (ta, cpu0, irq0, ag0, sc0), (tb_, cpu1, irq1, ag1, sc1) = window(samples)
    wall = tb_ - ta
    ratios = sorted(
        per_nic * framing.wire_bytes(size) * 8 / NIC_RATE / d for d in res.flow_completion_times().values()
    )
    f = res.fidelity_report
    verdict = "ok" if f["ok"] else "BROKEN: " + "; ".join(f["problems"])
    offered = min(flows, 64) * real
    print(f"\n{flows} flows, k = {tb.scale.k:g}, MTU {framing.mtu}: offered {offered / 1e9:.2f} Gbit/s real; flows "
          f"{busy:.1f} s real, counters over {wall:.1f} s of it; load average before {load_before}, after {loadavg()}")
    print(f"  ideal/achieved median {percentile(ratios, 50):.3f}, worst {ratios[0]:.3f}; fidelity {verdict}; "
          f"cpu mean {f['cpu_mean']:.2f}, saturated {f['cpu_saturated_share']:.2f}")  # fmt: skip
    for cpu in sorted(c for c in cpu1 if c != "cpu"):
        d = [b - a for a, b in zip(cpu0[cpu], cpu1[cpu])]
        total = sum(d[:8]) or 1
        user, nice, system, idle, iowait, irq, soft, steal = d[:8]
        print(f"  {cpu}: user {100 * (user + nice) / total:4.1f} %, system {100 * system / total:4.1f} %, "
              f"softirq {100 * soft / total:4.1f} %, irq {100 * irq / total:4.1f} %, idle {100 * idle / total:4.1f} %, "
              f"steal {100 * steal / total:4.1f} %")  # fmt: skip
    for name in ("NET_RX", "NET_TX", "TIMER", "HRTIMER"):
        d = [b - a for a, b in zip(irq0[name], irq1[name])]
        print(f"  softirq {name}: " + ", ".join(f"{x / wall:.0f}/s" for x in d))
    hz = os.sysconf("SC_CLK_TCK")
    ut = sum(b[0] - a[0] for a, b in zip(ag0, ag1)) / hz
    st = sum(b[1] - a[1] for a, b in zip(ag0, ag1)) / hz
    print(f"  agents ({len(agents)}): user {ut / wall:.2f} cores, system {st / wall:.2f} cores")
    n = len(agents)
    d = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(sc0, sc1)]
    print(f"  run queue: agents ran {sum(r for r, _ in d[:n]) / 1e9 / wall:.2f} s/s and waited "
          f"{sum(w for _, w in d[:n]) / 1e9 / wall:.2f} s/s for a CPU; ksoftirqd ran "
          f"{sum(r for r, _ in d[n:]) / 1e9 / wall:.2f} s/s, waited {sum(w for _, w in d[n:]) / 1e9 / wall:.2f} s/s")
    for stage in tc1:
        d = [b - a for a, b in zip(state["tc0"][stage], tc1[stage])]
        print(f"  tc {stage}: {d[0] / busy:.0f} pkt/s, drops {d[1]}, overlimits {d[2]}, requeues {d[3]}")
    print(f"  TCP retransmitted segments: {rx1 - state['rx0']}")
    if perf:
        perf_report("/tmp/prof_emulator.data", list(agents.values()), PERF_SECONDS, top)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--sample":  # the sampler's own process
        sample_forever(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("--flows", type=int, action="append", help="repeatable; default 32 and 64")
    p.add_argument("--scale", type=float, default=5000)
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--perf", action="store_true")
    p.add_argument("--policy", default="dscp-priority", help="tc policy (tc_policies.plan.POLICIES)")
    p.add_argument("--top", type=int, default=12)
    args = p.parse_args()
    jumbo = {"mtu": args.mtu} if args.mtu != 1500 else {}  # (so that this file also runs on a tree without MTUs)
    spec = ClusterSpec.rail_optimized(servers=8, rails=8, spines=2, nic_rate=NIC_RATE, uplink_rate=400e9, **jumbo)
    with Testbed(spec, scale=args.scale, policy=args.policy) as tb:
        print(f"64 GPUs, NIC links {tb.scale.real_rate(NIC_RATE) / 1e6:.0f} Mbit/s real, policy {args.policy}, "
              f"{os.cpu_count()} cores; "
              f"built in {tb.build_seconds:.1f} s")  # fmt: skip
        for flows in args.flows or [32, 64]:
            profile(tb, flows, args.seconds, args.perf, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
