"""``railbed up`` without a terminal: builds, waits, and tears down on SIGINT / SIGTERM."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.state import RunState, root_interfaces

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_up_until_signal(sig, code):
    before = root_interfaces()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "up", str(ROOT / "examples" / "dgtp-testbed.yaml")],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "until Ctrl-C" in line:
            break
    assert any("built in" in x for x in lines), "".join(lines) + proc.stderr.read()
    assert len(RunState().nodes()) == 4 + 1  # four servers and the switch
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "every namespace, link and process it created was removed" in err
    assert not RunState().leftovers() and root_interfaces() == before
