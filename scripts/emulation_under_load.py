"""The emulation tests beside CPU hogs (needs root): each must pass, or skip naming the load.

    sudo /opt/railbed/venv/bin/python scripts/emulation_under_load.py [--hogs 2] [TEST ...]

Starts ``--hogs`` busy processes (each in a session of its own, at nice 0: another user's work,
as a laptop's browser or a shared machine's jobs are), runs pytest on the given emulation tests
(default: the ones that failed under load before, issue 47) and prints one line per test:
passed, skipped with its reason, or failed. Exit status 1 when any test failed. The load average
is printed before and after: on a machine already busy the hogs add to it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = [
    "tests/emulation/test_backends_agree.py",
    "tests/emulation/test_dgcl_emulated.py",
    "tests/emulation/test_gnn_systems_emulated.py",
    "tests/emulation/test_loss_verdict.py",
    "tests/emulation/test_mtu.py",
]
HOG = "while True: pass"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def outcomes(junit: Path) -> list[tuple[str, str, str]]:
    """(test, passed | skipped | failed, reason) of a pytest junit file."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        state, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                state, reason = "failed", (child.get("message") or "").splitlines()[0][:200]
            elif child.tag == "skipped":
                state, reason = "skipped", (child.get("message") or "")[:300]
        out.append((name, state, reason))
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")
    p.add_argument("tests", nargs="*", default=DEFAULT_TESTS)
    args = p.parse_args()
    print(f"load average before the hogs: {loadavg()} ({os.cpu_count()} cores); {args.hogs} hogs")
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(args.hogs)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "junit.xml"
            subprocess.run(
                [sys.executable, "-m", "pytest", *args.tests, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                cwd=ROOT, stdout=subprocess.DEVNULL, check=False,
            )  # fmt: skip
            results = outcomes(junit) if junit.exists() else []
    finally:
        print(f"load average at the end: {loadavg()}")
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    for name, state, reason in results:
        print(f"  {state:8} {name}" + (f": {reason}" if reason else ""))
    failed = [r for r in results if r[1] == "failed"]
    print(f"{len(results)} tests: {len(failed)} failed, {sum(r[1] == 'skipped' for r in results)} skipped")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
