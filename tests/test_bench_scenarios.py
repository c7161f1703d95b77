"""The probes' scenario files under bench/scenarios/ (kept out of scenarios/<paper>/, whose every
file is an input of that paper's reproduction sections) still load: cluster, job and schedulers."""

from pathlib import Path

import pytest

from scenarios.runner import Scenario
from schedulers import make

FILES = sorted((Path(__file__).resolve().parents[1] / "bench" / "scenarios").glob("*.yaml"))


def test_there_are_probe_files():
    assert FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_probe_file_loads_with_every_scheduler(path):
    sc = Scenario.load(path)
    assert sc.cluster is not None and sc.schedulers
    labels = [spec.run_label for spec in sc.schedulers]
    assert len(set(labels)) == len(labels), labels
    for spec in sc.schedulers:
        assert make(spec) is not None
