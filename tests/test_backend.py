"""The backend seam (railbed/backend.py): names decoded once, capabilities instead of names,
every fluid backend giving the same times, bad choices refused before anything is written."""

import subprocess
import sys
from pathlib import Path

import pytest

from railbed.backend import BACKENDS, RunOptions, backend
from railbed.errors import SpecError
from railbed.spec import ClusterSpec
from scenarios.runner import Scenario, simulate_scenario
from schedulers import by_name
from workloads.llm import hybrid_parallel

ROOT = Path(__file__).resolve().parent.parent


def test_names_old_spellings_and_unknown_names():
    assert BACKENDS.names() == ("emulate", "fluid", "fluid-reference", "fluid-rules", "packet")
    for old, new in (("numba", "fluid"), ("reference", "fluid-reference"), ("compact", "fluid-rules")):
        assert backend(old) is backend(new) and backend(new).name == new
        assert new in BACKENDS.note(old)
    assert BACKENDS.note("fluid") is None
    with pytest.raises(SpecError) as err:
        backend("fast", "--backend")
    assert err.value.field == "--backend" and "fluid-rules" in str(err.value)


def test_capabilities_say_what_each_backend_models():
    caps = {name: backend(name).capabilities for name in BACKENDS.names()}
    assert [n for n, c in caps.items() if c.needs_root] == ["emulate"]
    assert [n for n, c in caps.items() if c.packets] == ["emulate", "packet"]
    assert [n for n, c in caps.items() if c.array_jobs] == ["fluid-rules"]
    assert [n for n, c in caps.items() if not c.hooks] == ["fluid-rules"]
    assert all(c.max_gpus > 0 for c in caps.values())


def test_naming_a_backend_imports_nothing_it_needs_until_it_runs():
    """The emulator's backend object is read (name, capabilities) where Mininet and pyroute2 are missing."""
    code = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mininet', 'pyroute2'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from railbed.backend import backend\n"
        "assert 'simulator' not in sys.modules and 'emulator' not in sys.modules\n"
        "assert backend('emulate').capabilities.needs_root\n"
        "assert 'emulator.testbed' not in sys.modules and 'simulator' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["megatron", "hermod", "fifo"])
def test_every_fluid_backend_gives_the_same_times(name):
    cluster = ClusterSpec.rail_optimized(4, 4, spines=2, nic_rate=100e9)
    job = hybrid_parallel(dp=4, pp=2, tp=2, microbatches=2, gpus_per_server=4)
    runs = {}
    for be in ("fluid", "fluid-reference", "fluid-rules"):
        runs[be] = backend(be).run(job, by_name(name), cluster, RunOptions())
        assert runs[be].scheduler == name and runs[be].cluster == cluster.name
    ends = {be: {i: r.end for i, r in res.items.items()} for be, res in runs.items()}
    assert ends["fluid-reference"] == pytest.approx(ends["fluid"], rel=1e-9)
    assert ends["fluid-rules"] == pytest.approx(ends["fluid"], rel=1e-12)


SCENARIO = {
    "name": "seam",
    "cluster": {
        "servers": [{"count": 2, "gpus": 2, "nics": 2, "nic_rate": "10Gbit"}],
        "fabric": {"type": "single_switch"},
    },
    "job": {"generator": "hybrid_parallel", "args": {"dp": 2, "pp": 2, "microbatches": 2, "gpus_per_server": 2}},
    "schedulers": ["fifo", "small-first"],
}


def test_a_scheduler_without_rules_is_refused_before_anything_is_written(tmp_path):
    sc = Scenario.from_dict(SCENARIO)
    with pytest.raises(SpecError) as err:
        simulate_scenario(sc, tmp_path / "out", echo=lambda _: None, backend="fluid-rules")
    assert err.value.field == "schedulers[1]" and "small-first" in str(err.value)
    assert not (tmp_path / "out").exists()
    assert [r.scheduler for r in simulate_scenario(sc, tmp_path / "ok", echo=lambda _: None, backend="fluid")] == [
        "fifo",
        "small-first",
    ]


def test_a_hardware_model_is_refused_by_a_backend_without_them(tmp_path):
    data = dict(SCENARIO, schedulers=["fifo"])
    data["cluster"] = {
        "servers": [{"count": 2, "gpus": 8, "nics": 8, "nic_rate": "10Gbit", "intra_host": "pcie8"}],
        "fabric": {"type": "single_switch"},
    }
    data["job"] = {"generator": "hybrid_parallel", "args": {"dp": 2, "pp": 2, "gpus_per_server": 8}}
    sc = Scenario.from_dict(data)
    with pytest.raises(SpecError) as err:
        simulate_scenario(sc, tmp_path / "out", echo=lambda _: None, backend="fluid-rules")
    assert err.value.field == "cluster.servers[0].intra_host"
    assert not (tmp_path / "out").exists()


def railbed(*args):
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_command_decodes_the_backend_and_its_old_spelling(tmp_path):
    scenario = str(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml")
    old = railbed("simulate", scenario, "--engine", "reference", "--out", str(tmp_path / "old"), "--no-plots")
    assert old.returncode == 0, old.stderr
    assert "--engine reference is now --backend fluid-reference" in old.stderr
    refused = railbed("simulate", scenario, "--backend", "emulate", "--out", str(tmp_path / "x"))
    assert refused.returncode == 2 and refused.stderr.startswith("railbed: --backend: emulate builds a cluster")
    assert not (tmp_path / "x").exists()
