"""A Chakra trace on the emulator: the hand-built 4-rank trace of tests/test_chakra.py (compute,
send/recv, a ring all-reduce) named by a scenario (``job: {chakra: ...}``) and run with ``railbed
run``. Every flow delivers its bytes and the makespan is the closed form's within the quarter
tests/emulation/test_byo_scheduler_emulated.py allows a small job."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from railbed.results import RunResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra is not installed (railbed[chakra])")
from loadcheck import tolerance_or_load  # noqa: E402
from test_chakra import ROOT, N, hand_closed_form, hand_trace, star  # noqa: E402

pytestmark = pytest.mark.emulation


def test_a_chakra_trace_runs_on_the_emulator(tmp_path):
    hand_trace(tmp_path / "t")
    scenario = {"name": "chakra-hand", "cluster": star(N).to_dict(), "job": {"chakra": "t/hand"},
                "schedulers": ["fifo"], "scale": 100, "timeout": 300}  # fmt: skip
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAILBED_STATE_DIR": str(tmp_path / "state")}
    got = subprocess.run(
        [sys.executable, "-m", "cli", "run", "s.yaml", "--out", str(tmp_path / "out"), "--no-plots"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    res = RunResult.load(tmp_path / "out" / "fifo" / "result.json")
    flows = [r for r in res.items.values() if r.kind == "flow"]
    assert flows and all(r.received == r.size for r in flows)
    with tolerance_or_load(res):  # timing checks: a loaded machine's run skips, naming the load
        assert res.fidelity_report.get("ok"), res.fidelity_report.get("problems")
        assert abs(res.makespan - hand_closed_form()) <= 0.25 * hand_closed_form(), res.makespan
