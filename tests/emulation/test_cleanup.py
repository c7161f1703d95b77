"""Clean-up: nothing of a run survives normal exit, an exception, SIGINT, SIGTERM;
after SIGKILL, ``railbed clean`` removes it, and only it."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.state import RunState, root_interfaces

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("child_run.py")


def namespaces_in_use() -> set[int]:
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
            except OSError:
                pass
    return out


def snapshot():
    named = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return root_interfaces(), named


def run_namespaces() -> set[int]:
    """The namespaces the running child recorded, all alive."""
    recorded = {n["netns"] for n in RunState().nodes()}
    assert len(recorded) == 2 + 2 + 2, RunState().nodes()  # hosts, rails, spines
    assert recorded <= namespaces_in_use()
    return recorded


def start_child(mode):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    assert line.strip() == "READY", line + proc.stderr.read()
    return proc


def assert_nothing_left(before, created):
    ifs_before, named_before = before
    ifs_after, named_after = snapshot()
    assert not (created & namespaces_in_use()), "namespaces of the run are still alive"
    assert ifs_after == ifs_before
    assert named_after == named_before
    assert not RunState().leftovers()


@pytest.mark.parametrize(
    "mode, sig, code, message",
    [
        ("exit", None, 0, "EXITED"),
        ("raise", None, 3, "CAUGHT boom inside the run"),
        ("wait", signal.SIGINT, 130, "CAUGHT SIGINT"),
        ("wait", signal.SIGTERM, 143, "CAUGHT interrupted by SIGTERM"),
    ],
)
def test_run_cleans_up(mode, sig, code, message):
    before = snapshot()
    proc = start_child(mode)
    created = run_namespaces()
    if sig is not None:
        proc.send_signal(sig)
    out, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == code, err
    assert message in out
    assert_nothing_left(before, created)


def test_sigkill_then_railbed_clean_removes_only_the_run():
    # a bystander: a namespace with a process and a veth pair in the root namespace
    bystander = subprocess.Popen(["unshare", "--net", "sleep", "600"])
    subprocess.run(["ip", "link", "add", "rbtest-a", "type", "veth", "peer", "name", "rbtest-b"], check=True)
    try:
        before = snapshot()
        proc = start_child("wait")
        created = run_namespaces()
        proc.kill()
        proc.wait(timeout=10)
        assert RunState().leftovers().get("processes"), "SIGKILL should leave the node shells behind"
        result = subprocess.run(
            [sys.executable, "-m", "cli", "clean"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert "removed" in result.stdout
        assert bystander.poll() is None, "clean killed a process it did not create"
        assert {"rbtest-a", "rbtest-b"} <= root_interfaces()
        assert_nothing_left(before, created)
    finally:
        bystander.kill()
        bystander.wait()
        subprocess.run(["ip", "link", "del", "rbtest-a"], check=False)


def test_stop_of_an_unstarted_testbed_leaves_a_live_run_alone():
    from emulator.testbed import Testbed
    from railbed.spec import ClusterSpec

    before = snapshot()
    proc = start_child("wait")
    created = run_namespaces()
    other = Testbed(ClusterSpec.rail_optimized(servers=2, rails=2, spines=1, nic_rate=10e9), scale=100)
    other.stop()  # never started: must not touch the child's run
    assert created <= namespaces_in_use() and RunState().read().get("pid") == proc.pid
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert_nothing_left(before, created)
