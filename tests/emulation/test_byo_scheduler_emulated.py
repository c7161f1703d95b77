"""A scheduler from the user's own folder on the emulator: the scenario of tests/test_byo_scheduler.py
(``mysched.py:Mine`` beside the scenario file, outside the repository) run with ``railbed run`` from
that folder. Its flows carry the DSCP it chose, and the makespan is the fluid model's within the
tolerance tests/emulation/test_backends_agree.py allows a small job (a quarter)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from railbed.results import RunResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from loadcheck import tolerance_or_load  # noqa: E402
from test_byo_scheduler import ROOT, dscps, user_folder  # noqa: E402 - the fluid test's folder and scenario

pytestmark = pytest.mark.emulation


def test_a_scheduler_file_outside_the_repo_runs_on_the_emulator(tmp_path):
    folder = user_folder(tmp_path)
    with open(folder / "byo.yaml", "a") as f:
        f.write("scale: 100\ntimeout: 300\n")  # 10 Gbit/s model -> 100 Mbit/s real
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAILBED_STATE_DIR": str(tmp_path / "state")}
    out, sim = tmp_path / "emu", tmp_path / "sim"
    for command, where in (("run", out), ("simulate", sim)):
        got = subprocess.run(
            [sys.executable, "-m", "cli", command, "byo.yaml", "--out", str(where), "--no-plots"],
            cwd=folder, capture_output=True, text=True, timeout=900, env=env,
        )  # fmt: skip
        assert got.returncode == 0, got.stderr[-2000:]
    emu = RunResult.load(out / "mysched:Mine" / "result.json")
    fluid = RunResult.load(sim / "mysched:Mine" / "result.json")
    assert emu.scheduler == "mysched:Mine"
    assert dscps(emu) == dscps(fluid) and set(dscps(emu).values()) == {0, 40}
    with tolerance_or_load(emu):  # timing checks: a loaded machine's run skips, naming the load
        assert emu.fidelity_report.get("ok"), emu.fidelity_report.get("problems")
        assert abs(emu.makespan - fluid.makespan) <= 0.25 * fluid.makespan, (emu.makespan, fluid.makespan)
    assert Path(out / "fifo" / "result.json").exists()
