"""Sweeps on a real Ray cluster (issue 30): a head started here with ``ray start --head`` on a
free port, token authentication on (Ray's default once a token file exists), reached through
``--address`` with the token from ``~/.ray/auth_token``; a wrong token and a port with nothing
listening end in exit 1 and one line, writing nothing.

The head runs as ``ray start --block`` in its own session and temp dir, with its own HOME: on
SIGTERM it stops the processes it started (``ray stop`` would stop every Ray on the machine);
whatever is left after that is killed by the session id, and the test checks none is left."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")

from scenarios.sweep import object_store_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).with_name("ray")
SCENARIO = str(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(home: Path, **extra) -> dict:
    """This process's environment without Ray's variables (a local ray.init in this session
    sets RAY_AUTH_MODE), with ``home`` as HOME and ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def session_pids(sid: int) -> list[int]:
    """Processes of session ``sid`` (the head's ``ray start`` and what it started), from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getsid(int(d.name)) == sid:
                    out.append(int(d.name))
            except ProcessLookupError:
                pass
    return out


@pytest.fixture(scope="module")
def head():
    """A Ray head with token authentication on a free port: (address, HOME with the token)."""
    tmp = Path(tempfile.mkdtemp(prefix="rb-ray-", dir="/tmp"))  # short: Ray's socket paths have a limit
    home = tmp / "home"
    home.mkdir()
    env = clean_env(home)
    subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=60)
    port = free_port()
    argv = [str(RAY), "start", "--head", "--port", str(port), "--temp-dir", str(tmp / "ray"), "--block"]
    argv += ["--num-cpus", "2", "--disable-usage-stats", "--include-dashboard=false"]
    if (store := object_store_bytes()) is not None:  # a run under ulimit -v: Ray's default store does not fit
        argv += ["--object-store-memory", str(store)]
    log = open(tmp / "head.log", "w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while "Ray runtime started" not in (tmp / "head.log").read_text():
            assert proc.poll() is None, (tmp / "head.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the head did not start in 90 s"
            time.sleep(0.2)
        assert "Token authentication is enabled" in (tmp / "head.log").read_text()
        yield f"127.0.0.1:{port}", home
    finally:
        proc.send_signal(signal.SIGTERM)  # ray start --block drains and stops what it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        for _ in range(50):
            if not session_pids(proc.pid):
                break
            time.sleep(0.2)
        for pid in session_pids(proc.pid):
            os.kill(pid, signal.SIGKILL)
        log.close()
        left = session_pids(proc.pid)
        shutil.rmtree(tmp, ignore_errors=True)
        assert not left, f"processes of the head left running: {left}"


def write_sweep(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    data = {
        "name": "on-cluster",
        "scenario": SCENARIO,
        "axes": {"rate": ["50Gbit", "100Gbit"], "job.args.gradient": ["1MB"]},
        "metrics": ["makespan"],
    }
    path.write_text(yaml.safe_dump(data))
    return path


def sweep(tmp_path: Path, address: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "cli", "sweep", str(write_sweep(tmp_path)), "--out", str(tmp_path / "out")]
    return subprocess.run([*argv, "--address", address], env=env, capture_output=True, text=True, timeout=timeout)


def test_a_sweep_runs_on_a_head_that_requires_the_token(head, tmp_path):
    """The issue's case: the token is in ~/.ray/auth_token and RAY_AUTH_MODE is unset on the
    driver (Ray 2.60's ray.init(address=...) would send no token and give up after 20 s)."""
    address, home = head
    done = sweep(tmp_path, address, clean_env(home))
    assert done.returncode == 0, done.stderr[-3000:]
    table = yaml.safe_load((tmp_path / "out" / "sweep.json").read_text())
    assert len(table) == 2 * 2 and all(r["status"] == "ok" and r["makespan"] > 0 for r in table)
    assert {r["rate"] for r in table} == {"50Gbit", "100Gbit"} and {r["run"] for r in table} == {"fifo", "tag-priority"}
    assert "2 of 2 points ok" in done.stdout


@pytest.mark.parametrize(
    "extra, says",
    [
        ({"RAY_AUTH_TOKEN": "not-the-token"}, "it sent the token from RAY_AUTH_TOKEN"),
        ({}, "it sent no token (none in RAY_AUTH_TOKEN"),  # a HOME without a token file
        ({"RAY_AUTH_MODE": "disabled"}, "it sent no token (RAY_AUTH_MODE=disabled)"),
    ],
)
def test_a_refused_token_is_one_line_and_writes_nothing(head, tmp_path, extra, says):
    address, home = head
    if not extra:
        home = tmp_path / "empty-home"
        home.mkdir()
    t0 = time.monotonic()
    done = sweep(tmp_path, address, clean_env(home, **extra), timeout=60)
    assert done.returncode == 1 and time.monotonic() - t0 < 60
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"the Ray cluster at {address} refused this driver" in lines[0] and says in lines[0]
    assert not (tmp_path / "out").exists()


def test_nothing_listening_is_one_line_and_writes_nothing(tmp_path):
    port = free_port()  # bound and closed again: nothing listens there
    done = sweep(tmp_path, f"127.0.0.1:{port}", clean_env(tmp_path), timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"railbed: cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused")
    assert not (tmp_path / "out").exists()


def test_an_address_that_is_not_host_port_is_bad_input(tmp_path):
    done = sweep(tmp_path, "head-without-port", clean_env(tmp_path), timeout=60)
    assert done.returncode == 2 and done.stderr.strip().startswith("railbed: --address:")
    assert not (tmp_path / "out").exists()
