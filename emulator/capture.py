"""Packet captures of an emulated run: ``tcpdump`` inside a node's namespace.

A scenario asks for them with the key ``capture``, either a list of ports
or a mapping with limits::

    capture: [rail0:rail0-eth2, h0:h0-eth0]       # node:interface, as Topology names them
    capture:
      ports: [rail0:rail0-eth2]
      snaplen: 128        # bytes kept of each packet (64..65535; default 128: every header)
      max_bytes: 64MB     # size limit of each pcap file (default 64MB)

During each scheduler's run, one ``tcpdump -i IFNAME -s SNAPLEN -c COUNT
--immediate-mode -U -w -`` per port runs in the port's node (``Testbed.popen``), writing
to ``<run>/capture-<node>-<ifname>.pcap`` in the results directory (tcpdump
writes to a file railbed opened, so its privilege drop and AppArmor
profile do not matter). The size limit is a packet count: a pcap record
is at most ``16 + snaplen`` bytes, so ``COUNT = (max_bytes - 24) // (16 +
snaplen)`` packets never exceed ``max_bytes``; when tcpdump stops there,
the run's notes say the capture is incomplete. Packets keep their original
length in the record header and their IP/TCP headers in the snap, so the
DSCP marks and every connection's byte count can be read from a truncated
capture (``tests/emulation/test_capture.py`` does, with scapy).

Importing this module needs neither Mininet nor pyroute2 (the scenario
loader parses ``capture`` on machines without them).
"""

from __future__ import annotations

import re
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railbed.errors import EnvironmentProblem, SpecError
from railbed.topology import Topology
from railbed.units import parse_size

PCAP_HEADER = 24
RECORD_HEADER = 16
DEFAULT_SNAPLEN = 128
DEFAULT_MAX_BYTES = 64 * 10**6
READY_TIMEOUT = 10.0


@dataclass(frozen=True)
class CaptureSpec:
    ports: tuple[tuple[str, str], ...]
    snaplen: int = DEFAULT_SNAPLEN
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def max_packets(self) -> int:
        return (self.max_bytes - PCAP_HEADER) // (RECORD_HEADER + self.snaplen)


def parse_capture(raw: Any, topology: Topology, field: str = "capture") -> CaptureSpec | None:
    """The scenario's ``capture`` value (module docstring), its ports checked against ``topology``."""
    if raw is None:
        return None
    opts: dict[str, Any] = {"ports": raw} if isinstance(raw, list) else raw
    if not isinstance(opts, dict):
        raise SpecError(field, "expected a list of node:interface or {ports, snaplen, max_bytes}")
    unknown = set(opts) - {"ports", "snaplen", "max_bytes"}
    if unknown:
        raise SpecError(f"{field}.{sorted(unknown)[0]}", "unknown key (known: ports, snaplen, max_bytes)")
    ports_raw = opts.get("ports")
    where = field if isinstance(raw, list) else f"{field}.ports"
    if not isinstance(ports_raw, list) or not ports_raw:
        raise SpecError(where, "expected a non-empty list of node:interface")
    ports = tuple(_port(p, topology, f"{where}[{i}]") for i, p in enumerate(ports_raw))
    if len(set(ports)) != len(ports):
        raise SpecError(where, "a port is listed twice")
    snaplen = opts.get("snaplen", DEFAULT_SNAPLEN)
    if isinstance(snaplen, bool) or not isinstance(snaplen, int) or not 64 <= snaplen <= 65535:
        raise SpecError(f"{field}.snaplen", f"expected an integer in 64..65535, got {snaplen!r}")
    max_bytes = parse_size(opts.get("max_bytes", DEFAULT_MAX_BYTES), f"{field}.max_bytes")
    spec = CaptureSpec(ports, snaplen, max_bytes)
    if spec.max_packets < 1:
        raise SpecError(f"{field}.max_bytes", f"too small for one packet of {snaplen} bytes")
    return spec


def _port(raw: Any, topology: Topology, field: str) -> tuple[str, str]:
    node, sep, ifname = str(raw).partition(":")
    if not sep or not node or not ifname:
        raise SpecError(field, f"expected node:interface (e.g. rail0:rail0-eth2), got {raw!r}")
    if (node, ifname) not in topology.ports:
        known = sorted(i for n, i in topology.ports if n == node)
        hint = f"ports of {node}: {', '.join(known)}" if known else f"no node {node!r}"
        raise SpecError(field, f"unknown port {raw!r} ({hint})")
    return node, ifname


def pcap_name(node: str, ifname: str) -> str:
    return f"capture-{node}-{ifname}.pcap"


class Capture:
    """Captures running during one run: ``start()`` before it, ``stop()`` after (returns notes)."""

    def __init__(self, tb, spec: CaptureSpec, out_dir: Path) -> None:
        self.tb = tb
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.procs: list[tuple[str, subprocess.Popen, Any]] = []

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for node, ifname in self.spec.ports:
            f = open(self.out_dir / pcap_name(node, ifname), "wb")  # closed in stop()
            argv = ["tcpdump", "-i", ifname, "-n", "-s", str(self.spec.snaplen)]
            # --immediate-mode: without it libpcap hands packets over in blocks or after 1 s,
            # and the packets of a run's last second were lost when tcpdump was stopped
            argv += ["-c", str(self.spec.max_packets), "--immediate-mode", "-U", "-w", "-"]
            proc = self.tb.popen(node, argv, stdout=f, stderr=subprocess.PIPE)
            self.procs.append((f"{node}:{ifname}", proc, f))
        for port, proc, _ in self.procs:
            _wait_listening(port, proc)

    def stop(self) -> list[str]:
        notes = []
        for port, proc, f in self.procs:
            early = proc.poll() is not None
            if not early:
                proc.send_signal(signal.SIGINT)  # tcpdump flushes and reports its counts
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            f.close()
            notes.append(_note(port, err.decode(errors="replace"), early, self.spec))
        self.procs = []
        return notes


def _wait_listening(port: str, proc: subprocess.Popen) -> None:
    """Block until tcpdump says it is listening (else packets of the run's start are missed)."""
    deadline = time.monotonic() + READY_TIMEOUT
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.1)
        if ready:
            chunk = proc.stderr.read1(4096) if hasattr(proc.stderr, "read1") else proc.stderr.readline()
            seen += chunk
            if b"listening on" in seen:
                return
            if not chunk:
                break
    raise EnvironmentProblem(f"tcpdump on {port} did not start: {seen.decode(errors='replace').strip()}")


def _note(port: str, stderr: str, early: bool, spec: CaptureSpec) -> str:
    got = re.search(r"(\d+) packets? captured", stderr)
    dropped = re.search(r"(\d+) packets? dropped by kernel", stderr)
    text = f"capture {port}: {got.group(1) if got else '?'} packets (snaplen {spec.snaplen})"
    if dropped and dropped.group(1) != "0":
        text += f", {dropped.group(1)} dropped by the kernel"
    if early and (got is None or int(got.group(1)) < spec.max_packets):
        last = stderr.strip().splitlines()[-1:] or ["no message"]
        text += f"; tcpdump exited during the run: {last[0]}"
    elif early:
        text += f"; stopped at its limit of {spec.max_packets} packets ({spec.max_bytes} bytes): later packets missing"
    return text
