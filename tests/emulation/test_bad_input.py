"""Each defect class of bad input, through ``railbed run``: exit 2, one line naming the
field, before any namespace exists, nothing written to ``--out``.

"Before any namespace exists" is observed through the run record: the command
runs with its own ``RAILBED_STATE_DIR``, and a testbed takes the lock (creating
``lock`` there) before it creates its first namespace; no ``lock`` file means
no namespace was ever created. The last tests run real (tiny) clusters: a run
the lock refuses writes nothing, a run that fails after starting leaves a
directory marked ``PARTIAL``, and a new run removes what a dead run left in the
state directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.state import root_interfaces

ROOT = Path(__file__).resolve().parent.parent.parent
RAIL = (ROOT / "examples" / "rail-4x4.yaml").read_text()
GOOD_JOB = {
    "endpoints": [{"name": "a", "pin": {"server": 0}}, {"name": "b", "pin": {"server": 1}}],
    "items": [{"kind": "flow", "id": "f", "src": "a", "dst": "b", "size": "2MB", "tags": {"dscp": 46}}],
}
TINY = "servers: [{count: 2, nic_rate: 1Gbit}]\nfabric: {type: single_switch}\n"


def alias_bomb(levels: int) -> str:
    value = "&a0 [" + ", ".join(["1"] * 9) + "]"
    for i in range(1, levels):
        value = f"&a{i} [{value}, " + ", ".join([f"*a{i - 1}"] * 8) + "]"
    return value


def job_with(**change) -> dict:
    job = json.loads(json.dumps(GOOD_JOB))
    for path, value in change.items():
        target = job
        *parents, last = path.split("__")
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        target[int(last) if last.isdigit() else last] = value
    return job


# name -> (files beside the scenario: {file name: text or bytes or job dict}, scenario text, field in the message)
CASES = {
    # 1. hangs
    "alias-bomb-count": (
        {"c.yaml": f"servers: [{{nic_rate: 1Gbit, count: {alias_bomb(12)}}}]\nfabric: {{type: single_switch}}\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "c.yaml: expands to more than",
    ),
    "alias-bomb-small": (
        {"c.yaml": f"servers: [{{nic_rate: 1Gbit, count: {alias_bomb(6)}}}]\nfabric: {{type: single_switch}}\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "servers[0].count: expected a whole number",
    ),
    # 2. tracebacks
    "binary-cluster": (
        {"c.yaml": b"\x89PNG\r\n\x1a\n\x00\xff"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "not a text file",
    ),
    "deep-json": (
        {"deep.json": "[" * 100_000 + "]" * 100_000},
        "cluster: c.yaml\njob: {file: deep.json}\nschedulers: [fifo]\n",
        "job.file: nested deeper",
    ),
    "dscp-EF": (
        {"j.json": job_with(items__0__tags={"dscp": "EF"})},
        "cluster: c.yaml\njob: {file: j.json}\nschedulers: [tag-priority]\n",
        "job.items.f.tags.dscp",
    ),
    "items-mapping": (
        {"j.json": {"items": {"a": 1}}},
        "cluster: c.yaml\njob: {file: j.json}\nschedulers: [fifo]\n",
        "job.items",
    ),
    "generator-args-list": (
        {},
        "cluster: c.yaml\njob: {generator: all_to_all, args: [1, 2, 3]}\nschedulers: [fifo]\n",
        "job.args",
    ),
    # 3. validated too late
    "dscp-64": (
        {"j.json": job_with(items__0__tags={"dscp": 64})},
        "cluster: c.yaml\njob: {file: j.json}\nschedulers: [fifo, tag-priority]\n",
        "job.items.f.tags.dscp",
    ),
    "dscp-minus-1": (
        {"j.json": job_with(items__0__tags={"dscp": -1})},
        "cluster: c.yaml\njob: {file: j.json}\nschedulers: [tag-priority]\n",
        "job.items.f.tags.dscp",
    ),
    "pin-server-99": (
        {"j.json": job_with(endpoints__1__pin={"server": 99})},
        "cluster: c.yaml\njob: {file: j.json}\nschedulers: [fifo]\n",
        "job.endpoints.b.pin.server",
    ),
    "scheduler-argument": (
        {},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [{name: small-first, args: {chunk: 0}}]\n",
        "schedulers[0].args.chunk",
    ),
    "deep-yaml": (
        {"c.yaml": "servers: " + "[" * 5000 + "]" * 5000 + "\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "nested deeper",
    ),
    # 4. accepted but unusable
    "rate-1e30": (
        {"c.yaml": "servers: [{count: 4, nic_rate: 1e30bit}]\nfabric: {type: single_switch}\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "servers[0].nic_rate",
    ),
    "10000-servers": (
        {"c.yaml": "servers: [{count: 10000, nic_rate: 100Gbit}]\nfabric: {type: single_switch}\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "servers: ",
    ),
    # 5. wrong units
    "gbps-ambiguous": (
        {"c.yaml": "servers: [{count: 4, nic_rate: 100gbps}]\nfabric: {type: single_switch}\n"},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n",
        "ambiguous",
    ),
    "mb-ambiguous": (
        {},
        "cluster: c.yaml\njob: {generator: all_to_all, args: {size: 4mb}}\nschedulers: [fifo]\n",
        "job.args.size",
    ),
    # 6. a TCP the emulated hosts cannot run: an unknown name, one this kernel lacks, dctcp (no ECN marking)
    "tcp-vegas-typo": (
        {},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\ntcp: vegass\n",
        "tcp: one of cubic, reno, bbr, dctcp",
    ),
    "tcp-dctcp": (
        {},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\ntcp: dctcp\n",
        "tcp: dctcp needs ECN marking",
    ),
    # 7. confusing messages: 1e12 is a number now, and too large a scale for these links
    "scale-1e12": (
        {},
        "cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\nscale: 1e12\n",
        "scale: scale 1e+12 makes the slowest link",
    ),
}


def railbed(*args: str, state: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAILBED_STATE_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def write(directory: Path, files: dict) -> None:
    for name, content in {"c.yaml": RAIL, "job.json": GOOD_JOB, **files}.items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, dict):
            path.write_text(json.dumps(content))
        else:
            path.write_text(content)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_exits_2_before_anything_exists(tmp_path, name):
    files, scenario, expected = CASES[name]
    write(tmp_path, files)
    (tmp_path / "s.yaml").write_text(scenario)
    state, out = tmp_path / "state", tmp_path / "out"
    interfaces = root_interfaces()
    t0 = time.monotonic()
    result = railbed("run", str(tmp_path / "s.yaml"), "--out", str(out), state=state)
    elapsed = time.monotonic() - t0
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and expected in lines[0] and len(lines[0]) < 500, lines
    assert not (state / "lock").exists(), "a testbed started (it took the lock)"
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    assert root_interfaces() == interfaces
    assert elapsed < 20, f"took {elapsed:.1f} s"


def test_an_out_directory_under_a_file_exits_2_before_anything_exists(tmp_path):
    write(tmp_path, {})
    (tmp_path / "s.yaml").write_text("cluster: c.yaml\njob: {file: job.json}\nschedulers: [fifo]\n")
    (tmp_path / "f").write_text("a file\n")
    state = tmp_path / "state"
    result = railbed("run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "f" / "out"), state=state)
    assert result.returncode == 2 and result.stderr.strip().startswith("railbed: --out:"), result.stderr[-2000:]
    assert not (state / "lock").exists() and (tmp_path / "f").read_text() == "a file\n"


def tiny_scenario(directory: Path, extra: str = "") -> Path:
    (directory / "c.yaml").write_text(TINY)
    path = directory / "s.yaml"
    path.write_text(
        "cluster: c.yaml\njob: {generator: all_to_all, args: {n: 2, size: 1MB}}\nschedulers: [fifo]\nscale: 100\n"
        + extra
    )
    return path


def test_a_run_the_lock_refuses_writes_nothing(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "another run"
        result = railbed("run", str(tiny_scenario(tmp_path)), "--out", str(out), state=state)
    finally:
        os.close(fd)
    assert result.returncode == 1 and "another railbed testbed is running" in result.stderr
    assert not out.exists()


def test_a_run_that_fails_after_starting_leaves_a_partial_directory(tmp_path):
    out = tmp_path / "out"
    result = railbed("run", str(tiny_scenario(tmp_path, "timeout: 0.001\n")), "--out", str(out), state=tmp_path / "st")
    assert result.returncode == 1, result.stderr
    assert (out / "PARTIAL").read_text().startswith("this run did not finish: RunFailed")
    assert (out / "job.json").exists() and not (out / "index.json").exists()


def test_a_new_run_clears_what_dead_runs_left(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    dead = [state / "ctl-0123456789ab.sock", state / "agent-0123456789ab-h0.log"]
    for path in dead:
        path.write_text("left by a run killed with SIGKILL\n")
    result = railbed("run", str(tiny_scenario(tmp_path)), "--out", str(out), state=state)
    assert result.returncode == 0, result.stderr
    assert not any(p.exists() for p in dead)
    assert not (out / "PARTIAL").exists() and json.loads((out / "index.json").read_text())["runs"]
    assert not list(state.glob("ctl-*.sock"))
