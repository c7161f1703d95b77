"""The CPU priority of the emulator's own processes: traffic agents, the load generator's
senders and sinks (``emulator.loadtest``), and the controller's thread during a run.

An emulated run measures with the machine's CPU; on a machine busy with other work its
processes must not wait behind it (docs/testing.md, "Emulation on a busy machine")."""

from __future__ import annotations

import os
from pathlib import Path

# The agents (each in a session of its own) and the controller's thread run at this nice value,
# and so do the agents' autogroups where the kernel groups processes by session
# (``kernel.sched_autogroup_enabled``: then a nice value only counts inside its session, and every
# session gets an equal share). On a machine busy with others' work (load 7-9 on 2 cores, every
# session its own autogroup) the agents waited 2.0-2.4 s per second for a CPU and ran 0.09-0.13 s,
# and flows ran at 30-37 % of their rate (docs/performance.md, "Where a packet's time goes"). They
# are idle but for the traffic, so the priority costs others little.
RUN_NICE = -10


def raise_priority(pid: int) -> tuple[int, str | None] | None:
    """Set ``pid``'s (0: this thread's) nice value and its autogroup's to :data:`RUN_NICE`; what
    they were (for :func:`restore_priority`), or ``None`` where they may not be raised. The
    controller's autogroup is its session's (the shell's that started it): restored after the run."""
    proc = Path(f"/proc/{pid or 'self'}/autogroup")
    try:
        before = os.getpriority(os.PRIO_PROCESS, pid)
        os.setpriority(os.PRIO_PROCESS, pid, min(before, RUN_NICE))
    except OSError:
        return None
    group = None
    try:
        group = proc.read_text().split()[-1]  # "/autogroup-9 nice 0"
        proc.write_text(str(min(int(group), RUN_NICE)))
    except (OSError, ValueError, IndexError):
        group = None  # no autogroups in this kernel: the nice value is what counts
    return before, group


def restore_priority(saved: tuple[int, str | None]) -> None:
    nice, group = saved
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    if group is not None:
        try:
            Path("/proc/self/autogroup").write_text(group)
        except OSError:
            pass
