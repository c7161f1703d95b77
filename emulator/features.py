"""Probe what this kernel's traffic control can do, by trying it.

Each qdisc and classifier is created for real on a veth inside a throwaway
network namespace (``railbed-probe-<pid>``, removed afterwards); module
lists and ``modinfo`` can lie (built-in, blacklisted, missing in a
container), a real ``tc ... add`` cannot.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from functools import cache, lru_cache

from emulator.sockopts import set_congestion
from railbed.backend import TCP_CONGESTION
from railbed.errors import SpecError

DEV = "probe0"

QDISC_PROBES: dict[str, list[str]] = {
    "htb": ["root", "handle", "1:", "htb"],
    "tbf": ["root", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "50ms"],
    "prio": ["root", "prio"],
    "netem": ["root", "netem", "delay", "1ms"],
    "fq": ["root", "fq"],
    "fq_codel": ["root", "fq_codel"],
    "sfq": ["root", "sfq"],
    "red": [
        "root",
        "red",
        "limit",
        "400000",
        "min",
        "30000",
        "max",
        "90000",
        "avpkt",
        "1000",
        "burst",
        "55",
        "probability",
        "0.02",
        "bandwidth",
        "10mbit",
    ],
    "ets": ["root", "ets", "bands", "3"],
    "pfifo": ["root", "pfifo"],
    "clsact": ["clsact"],
    "ingress": ["ingress"],
}

CLASSIFIER_PROBES: dict[str, list[str]] = {
    "u32": ["u32", "match", "ip", "dsfield", "0x00", "0xfc", "flowid", "1:1"],
    "matchall": ["matchall", "classid", "1:1"],
    "basic": ["basic", "classid", "1:1"],
    "flower": ["flower", "ip_proto", "tcp", "classid", "1:1"],
    "fw": ["handle", "1", "fw", "classid", "1:1"],
}

MEANING = {
    "netem": (
        "netem: link latencies are applied with netem",
        "no netem: link latencies are applied in the traffic agents",
    ),
    "prio": (
        "prio: available as policy dscp-priority-prio; strict priority uses HTB prio classes by default "
        "(measured better: docs/vm-lane.md)",
        "no prio: strict priority via HTB prio classes (tiny rate, ceil = link, prio 0..7)",
    ),
    "fq": (
        "fq: per-flow pacing can also use the fq qdisc",
        "no fq: per-flow rates use SO_MAX_PACING_RATE with TCP's internal pacing",
    ),
    "htb": ("htb: every egress port is shaped with HTB", "no htb: railbed cannot shape links on this kernel (fatal)"),
    "u32": (
        "u32: DSCP classes are matched on the DS field",
        "no u32: DSCP priority classes cannot be selected (fatal for priority policies)",
    ),
}


@dataclass(frozen=True)
class KernelFeatures:
    qdiscs: frozenset[str]
    classifiers: frozenset[str]
    missing_qdiscs: frozenset[str]
    missing_classifiers: frozenset[str]

    def has(self, name: str) -> bool:
        return name in self.qdiscs or name in self.classifiers

    def meaning(self) -> list[str]:
        """What the probe results mean for railbed, one line each."""
        return [yes if self.has(name) else no for name, (yes, no) in MEANING.items()]


def _tc(ns: str, *args: str) -> bool:
    result = subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True, timeout=10, check=False)
    return result.returncode == 0


@lru_cache(maxsize=1)
def probe() -> KernelFeatures:
    """Try every qdisc and classifier of the tables above (needs root; cached)."""
    if os.geteuid() != 0:
        raise PermissionError("probing kernel features needs root")
    ns = f"railbed-probe-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=10)
    try:
        subprocess.run(
            ["ip", "-n", ns, "link", "add", DEV, "type", "veth", "peer", "name", "probe1"],
            check=True,
            capture_output=True,
            timeout=10,
        )
        subprocess.run(["ip", "-n", ns, "link", "set", DEV, "up"], check=True, capture_output=True, timeout=10)
        have_q, have_c = set(), set()
        for name, args in QDISC_PROBES.items():
            if _tc(ns, "qdisc", "add", "dev", DEV, *args):
                have_q.add(name)
            _tc(ns, "qdisc", "del", "dev", DEV, args[0])  # "root", "clsact" or "ingress"
        if "htb" in have_q:
            for name, args in CLASSIFIER_PROBES.items():
                _tc(ns, "qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb")
                if _tc(ns, "filter", "add", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", "1", *args):
                    have_c.add(name)
                _tc(ns, "qdisc", "del", "dev", DEV, "root")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10, check=False)
    return KernelFeatures(
        frozenset(have_q), frozenset(have_c), frozenset(QDISC_PROBES) - have_q, frozenset(CLASSIFIER_PROBES) - have_c
    )


@cache
def congestion_control(name: str) -> str | None:
    """None if a socket can run ``name`` here, else why not (the kernel's error)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            set_congestion(sock, name)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def check_congestion(tcp: str) -> None:
    """The emulated hosts can run congestion control ``tcp`` (``SpecError("tcp")`` if not)."""
    if tcp == "dctcp":
        raise SpecError("tcp", "dctcp needs ECN marking, which the emulated switches do not do (use packet)")
    why = congestion_control(tcp) if os.geteuid() == 0 else None  # without root the run stops sooner
    if why:
        raise SpecError("tcp", f"this kernel cannot run {tcp!r} ({why}); `railbed doctor` lists those it can")


def doctor_report() -> tuple[list[str], bool]:
    """Lines for ``railbed doctor`` and whether the machine can run emulations."""
    lines: list[str] = []
    ok = True
    root = os.geteuid() == 0
    lines.append(f"root: {'yes' if root else 'NO (emulation needs root: use sudo)'}")
    ok &= root
    for tool, pkg in (("mnexec", "mininet"), ("tc", "iproute2"), ("ethtool", "ethtool"), ("tcpdump", "tcpdump")):
        path = shutil.which(tool)
        lines.append(f"{tool}: {path or f'MISSING (apt install {pkg})'}")
        ok &= path is not None or tool == "tcpdump"
    lines.append(f"cpus: {os.cpu_count()}")
    if not root:
        lines.append("kernel features: not probed (needs root)")
        return lines, False
    feats = probe()
    lines.append("qdiscs that work: " + ", ".join(sorted(feats.qdiscs)))
    lines.append("qdiscs missing: " + (", ".join(sorted(feats.missing_qdiscs)) or "none"))
    lines.append("classifiers that work: " + ", ".join(sorted(feats.classifiers)))
    lines.append("classifiers missing: " + (", ".join(sorted(feats.missing_classifiers)) or "none"))
    lines += ["  " + m for m in feats.meaning()]
    runs = [n for n in TCP_CONGESTION if congestion_control(n) is None]
    lines.append("TCP congestion controls a run can use (scenario `tcp`): " + (", ".join(runs) or "none"))
    ok &= feats.has("htb") and feats.has("u32")
    return lines, ok
