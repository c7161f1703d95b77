"""The pure commands work on a machine where Mininet and pyroute2 cannot be imported.

``railbed check``, ``simulate`` (and later ``plot``) need neither; the CLI
imports each backend only when a command needs it. The child process gets
a meta-path finder that refuses ``mininet`` and ``pyroute2`` the way a
missing package would.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BLOCK = """
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mininet", "pyroute2"):
            raise ImportError(f"No module named {name!r} (blocked by the test)")
        return None
sys.meta_path.insert(0, _Refuse())
from cli import main
code = main(sys.argv[1:])
# a scenario's emulator keys (timeout, capture, ...) are read by the emulator's backend object (its
# Capabilities.settings, parse_settings): it and the pure modules it imports at the top, nothing more
PURE = ("emulator", "emulator.backend", "emulator.features", "emulator.sockopts", "emulator.settings",
        "emulator.capture")  # fmt: skip
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mininet", "pyroute2", "emulator") and m not in PURE)
assert not loaded, loaded
sys.exit(code)
"""


def railbed_blocked(*args):
    return subprocess.run([sys.executable, "-c", BLOCK, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_block_works():
    probe = subprocess.run(
        [sys.executable, "-c", BLOCK.split("from cli import")[0] + "import pyroute2\n"],
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "blocked by the test" in probe.stderr


def test_check_without_mininet_or_pyroute2():
    result = railbed_blocked("check", str(ROOT / "examples" / "rail-4x4.yaml"))
    assert result.returncode == 0, result.stderr
    assert "rate scale k" in result.stdout


def test_simulate_without_mininet_or_pyroute2(tmp_path):
    out = tmp_path / "out"
    scenario = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"
    result = railbed_blocked("simulate", str(scenario), "--out", str(out))
    assert result.returncode == 0, result.stderr
    index = json.loads((out / "index.json").read_text())
    assert index["runs"] and all(r["makespan"] > 0 for r in index["runs"])


def test_plot_without_mininet_or_pyroute2(tmp_path):
    out = tmp_path / "out"
    scenario = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"
    assert railbed_blocked("simulate", str(scenario), "--out", str(out), "--no-plots").returncode == 0
    assert not (out / "figures").exists()
    result = railbed_blocked("plot", str(out))
    assert result.returncode == 0, result.stderr
    assert list((out / "figures").glob("*.png"))
