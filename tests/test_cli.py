"""The railbed command on bad input: exit 2, one line naming the field, nothing created."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.state import root_interfaces

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "malformed": ("servers: [\n  {nic_rate: 1e9\nfabric: {type: single_switch}\n", "line"),
    "unknown-fabric": ("servers: [{nic_rate: 1Gbit}]\nfabric: {type: hypercube}\n", "fabric.type"),
    "negative-rate": ("servers: [{nic_rate: -10Gbit}]\nfabric: {type: single_switch}\n", "servers[0].nic_rate"),
    "zero-rate": ("servers: [{nic_rate: 0}]\nfabric: {type: single_switch}\n", "servers[0].nic_rate"),
    "rails-vs-nics": (
        "servers: [{count: 2, nics: 2, nic_rate: 1Gbit}]\nfabric: {type: rail_optimized, rails: 4}\n",
        "fabric.rails",
    ),
}


def railbed(*args):
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("command", ["check", "up"])
def test_bad_cluster_file(tmp_path, name, command):
    if command == "up" and os.geteuid() != 0:
        pytest.skip("railbed up needs root")
    text, field = CASES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    before = root_interfaces(), os.listdir("/proc")
    result = railbed(command, str(path), "--no-cli") if command == "up" else railbed(command, str(path))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], result.stderr
    assert root_interfaces() == before[0]


def test_bad_scale_and_unknown_command():
    assert railbed("check", str(ROOT / "examples" / "rail-4x4.yaml"), "--scale", "-3").returncode == 2
    assert railbed("frobnicate").returncode == 2


def test_check_prints_summary():
    result = railbed("check", str(ROOT / "examples" / "rail-4x4.yaml"))
    assert result.returncode == 0
    assert "4 rails, 2 spines" in result.stdout and "rate scale k" in result.stdout


def test_scale_too_large_for_slowest_link_is_bad_input(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("railbed up needs root")
    result = railbed("up", str(ROOT / "examples" / "dgtp-testbed.yaml"), "--scale", "1e6", "--no-cli")
    assert result.returncode == 2 and result.stderr.startswith("railbed: scale:"), result.stderr


@pytest.mark.parametrize("flag", ["--high-dscp", "--low-dscp"])
def test_dscp_out_of_range_is_bad_input(flag):
    before = root_interfaces()
    result = railbed("demo", flag, "64")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and flag[2:].replace("-", "_") in lines[0] and "0..63" in lines[0], result.stderr
    assert root_interfaces() == before


SCENARIO_CASES = {
    "unknown-scheduler": ("schedulers: [fifo, magic]", "schedulers[1]"),
    "unknown-generator": ("job: {generator: nope}", "job.generator"),
    "bad-generator-arg": ("job: {generator: all_to_all, args: {size: lots}}", "job.args.size"),
    "unknown-scheduler-arg": ("schedulers: [fifo, {name: small-first, args: {lim: 2}}]", "schedulers[1].args.lim"),
    "bad-scheduler-arg": ("schedulers: [{name: small-first, args: {limit: 0}}]", "schedulers[0].args.limit"),
    "duplicate-label": ("schedulers: [fifo, {name: small-first, label: fifo}]", "schedulers[1]"),
    "negative-scale": ("scale: -4", "scale"),
    "unknown-key": ("colour: blue", "colour"),
    "bad-cluster": (
        "cluster: {servers: [{nic_rate: -1}], fabric: {type: single_switch}}",
        "cluster.servers[0].nic_rate",
    ),
}
GOOD_SCENARIO = {
    "cluster": "cluster: {servers: [{count: 2, nic_rate: 1Gbit}], fabric: {type: single_switch}}",
    "job": "job: {generator: all_to_all, args: {n: 2, size: 1MB}}",
    "schedulers": "schedulers: [fifo]",
}


@pytest.mark.parametrize("name", sorted(SCENARIO_CASES))
@pytest.mark.parametrize("command", ["run", "simulate", "crosscheck"])
def test_bad_scenario_file(tmp_path, name, command):
    line, field = SCENARIO_CASES[name]
    key = line.split(":")[0]
    lines = [v for k, v in GOOD_SCENARIO.items() if k != key] + [line]
    path = tmp_path / "s.yaml"
    path.write_text("\n".join(lines) + "\n")
    before = root_interfaces(), os.listdir("/proc")
    proc = railbed(command, str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"railbed: {field}:"), err
    assert root_interfaces() == before[0]
    assert not (tmp_path / "out").exists()


def test_simulate_writes_a_results_directory_without_root(tmp_path):
    path = tmp_path / "s.yaml"
    lines = [*GOOD_SCENARIO.values(), "schedulers: [fifo, {name: small-first, args: {limit: 1}, label: sf1}]"]
    path.write_text("\n".join(lines) + "\n")
    proc = railbed("simulate", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    from railbed.results import RunResult

    res = RunResult.load(tmp_path / "out" / "fifo" / "result.json")
    assert res.backend == "fluid" and res.makespan > 0
    # all-to-all of 2 x 1 MB on 1 Gbit/s NICs: each NIC sends and receives 1 MB
    from railbed.units import wire_bytes

    assert res.makespan == pytest.approx(wire_bytes(10**6) * 8 / 1e9, rel=1e-9)
    assert "sf1" in (tmp_path / "out" / "comparison.txt").read_text()  # the label names the run
    assert RunResult.load(tmp_path / "out" / "sf1" / "result.json").scheduler == "sf1"
    assert "n/a (simulated)" in proc.stdout


def test_check_notes_a_cluster_this_machine_cannot_emulate(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("servers: [{count: 10000, nic_rate: 100Gbit}]\nfabric: {type: single_switch}\n")
    result = railbed("check", str(path))
    assert result.returncode == 0, result.stderr
    assert "10001 namespaces" in result.stdout and "note: railbed run and up would refuse" in result.stdout
    assert "note:" not in railbed("check", str(ROOT / "examples" / "rail-4x4.yaml")).stdout
