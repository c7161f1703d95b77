"""What a run created, on disk, so a run killed with SIGKILL can be cleaned up.

A run holds ``/run/railbed/lock`` (flock) while it lives and records, as it
creates them:

* ``run.json``: run id, controller pid, the interface names it planned
  (veth ends pass through the root namespace while Mininet creates them);
* ``nodes.jsonl``: one line per emulated node: name, shell pid and the inode
  of its network namespace (``/proc/<pid>/ns/net``), appended the moment the
  node exists;
* ``pids.jsonl``: processes the run started inside its nodes.

The run-time adds the control socket ``ctl-<run>.sock`` and the agents'
logs ``agent-<run>-<host>.log``; a new run that takes the lock removes those
of dead runs (:meth:`RunState.remove_stale_files`).

:func:`clean` removes exactly these: every process still inside a recorded
namespace (which makes the namespace, and its veths and qdiscs, go away),
recorded processes, and planned interface names left in the root
namespace. It never touches anything the files do not name.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from railbed.errors import EnvironmentProblem

STATE_DIR = Path(os.environ.get("RAILBED_STATE_DIR", "/run/railbed"))
STALE_PATTERNS = ("ctl-*.sock", "agent-*.log")  # a run's control socket and its agents' stderr


def netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """Every live pid whose network namespace is one of ``inodes``."""
    out = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        ino = netns_inode(int(entry))
        if ino is not None and ino in inodes:
            out.append(int(entry))
    return out


def root_interfaces() -> set[str]:
    return set(os.listdir("/sys/class/net"))


@dataclass
class RunState:
    """The record of one run (see module docstring)."""

    directory: Path = field(default_factory=lambda: STATE_DIR)
    _lock_fd: int | None = None

    # -------------------------------------------------------------- run side
    def acquire(self, run_id: str, planned_ifnames: list[str]) -> None:
        """Take the lock and start a fresh record; refuse if a run lives or left debris."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            other = self.read().get("pid", "?")
            raise EnvironmentProblem(
                f"another railbed testbed is running (pid {other}); one testbed per machine"
            ) from None
        self._lock_fd = fd
        if self.leftovers():
            self.release(keep_files=True)
            raise EnvironmentProblem(
                "a previous run left namespaces or processes behind; run `sudo railbed clean` first"
            )
        for name in ("nodes.jsonl", "pids.jsonl"):
            (self.directory / name).unlink(missing_ok=True)
        self.remove_stale_files()
        # Names that already exist belong to someone else: never ours to delete.
        ours = sorted(set(planned_ifnames) - root_interfaces())
        self._write("run.json", {"run_id": run_id, "pid": os.getpid(), "started": time.time(), "planned_ifnames": ours})

    def remove_stale_files(self) -> int:
        """Remove control sockets and agent logs of dead runs (``ctl-*.sock``,
        ``agent-*.log``). Called with the lock held, when no run lives: none of
        them can belong to a live run. Returns how many were removed."""
        n = 0
        for pattern in STALE_PATTERNS:
            for path in self.directory.glob(pattern):
                try:
                    path.unlink()
                    n += 1
                except OSError:
                    pass
        return n

    @property
    def held(self) -> bool:
        """Whether this object holds the run lock (and so owns the record)."""
        return self._lock_fd is not None

    def add_node(self, name: str, pid: int) -> None:
        self._append("nodes.jsonl", {"name": name, "pid": pid, "netns": netns_inode(pid)})

    def add_pid(self, pid: int, what: str) -> None:
        self._append("pids.jsonl", {"pid": pid, "what": what})

    def release(self, keep_files: bool = False) -> None:
        if not keep_files:
            for name in ("run.json", "nodes.jsonl", "pids.jsonl"):
                (self.directory / name).unlink(missing_ok=True)
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------- read side
    def read(self) -> dict:
        try:
            return json.loads((self.directory / "run.json").read_text())
        except (OSError, ValueError):
            return {}

    def _lines(self, name: str) -> list[dict]:
        try:
            text = (self.directory / name).read_text()
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill mid-write
        return out

    def nodes(self) -> list[dict]:
        return self._lines("nodes.jsonl")

    def leftovers(self) -> dict[str, list]:
        """What of the recorded run still exists: {"processes": [...], "interfaces": [...]}."""
        nodes = self.nodes()
        inodes = {n["netns"] for n in nodes if n.get("netns")}
        procs = set(pids_in_netns(inodes)) if inodes else set()
        for rec in nodes + self._lines("pids.jsonl"):
            if _alive(rec["pid"]) and _is_ours(rec, inodes):
                procs.add(rec["pid"])
        planned = set(self.read().get("planned_ifnames", []))
        ifaces = sorted(planned & root_interfaces())
        out: dict[str, list] = {}
        if procs:
            out["processes"] = sorted(procs)
        if ifaces:
            out["interfaces"] = ifaces
        return out

    # ---------------------------------------------------------------- helpers
    def _write(self, name: str, data: dict) -> None:
        tmp = self.directory / (name + ".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.directory / name)

    def _append(self, name: str, data: dict) -> None:
        with open(self.directory / name, "a") as fh:
            fh.write(json.dumps(data) + "\n")
            fh.flush()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _is_ours(rec: dict, inodes: set[int]) -> bool:
    """A recorded pid is still ours if it sits in one of our namespaces, or, for a
    node shell, still runs the shell Mininet started for that node name."""
    ino = netns_inode(rec["pid"])
    if ino is not None and ino in inodes:
        return True
    if "name" in rec:
        try:
            cmdline = Path(f"/proc/{rec['pid']}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"mininet:{rec['name']}".encode() in cmdline
    return False


def clean(directory: Path | None = None, wait: float = 5.0) -> dict[str, int]:
    """Remove what a dead run left behind (see module docstring). Returns counts.

    Refuses (EnvironmentProblem) while the run that wrote the record still holds
    the lock: ``railbed clean`` is for runs that are gone.
    """
    state = RunState(directory or STATE_DIR)
    if not state.directory.exists():
        return {"processes": 0, "interfaces": 0}
    fd = os.open(state.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EnvironmentProblem(
                f"railbed run pid {state.read().get('pid', '?')} is still running; stop it instead"
            ) from None
        found = state.leftovers()
        for pid in found.get("processes", []):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and state.leftovers().get("processes"):
            time.sleep(0.05)
        for ifname in found.get("interfaces", []):
            subprocess.run(["ip", "link", "del", ifname], capture_output=True, check=False, timeout=10)
        remaining = state.leftovers()
        if remaining:
            raise EnvironmentProblem(f"could not remove everything: {remaining}")
        state.release()  # remove the record files
        return {"processes": len(found.get("processes", [])), "interfaces": len(found.get("interfaces", []))}
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
