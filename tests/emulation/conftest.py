"""Emulation tests: real namespaces, veths, bridges and tc. They need root and mnexec.

Outside CI, without root, they are skipped with a reason; in CI (CI=true)
a missing prerequisite is a failure, so a green CI always means they ran.
"""

import os
import shutil

import pytest

from emulator.state import RunState


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/emulation" in str(item.fspath):
            item.add_marker(pytest.mark.emulation)


@pytest.fixture(autouse=True)
def _needs_root_and_no_leftovers():
    problem = None
    if os.geteuid() != 0:
        problem = "emulation tests need root"
    elif shutil.which("mnexec") is None:
        problem = "emulation tests need mnexec (apt install mininet)"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    yield
    left = RunState().leftovers()
    assert not left, f"the test left these behind: {left}"
