"""A scheduler from the user's own folder: ``file.py:Class``, ``module:Class`` and an entry point,
named in a scenario file, on the command line and in a sweep, run on the fluid backend without
touching railbed; bad names are one line naming the field (exit 2). The emulated run of the same
scenario is in tests/emulation/test_byo_scheduler_emulated.py."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.results import RunResult
from scenarios.runner import Scenario, simulate_scenario
from schedulers import SchedulerSpec, by_name, make, scheduler_class

ROOT = Path(__file__).resolve().parent.parent

# Flows at or above ``threshold`` bytes get DSCP ``high``, the rest 0: what the run records shows it ran.
SCHED = """
from railbed.job import Flow
from railbed.scheduler import Decision, Scheduler, default_placement


class Mine(Scheduler):
    name = "mine"

    def __init__(self, threshold: int = 1 << 20, high: int = 46) -> None:
        self.threshold, self.high = threshold, high

    def place(self, job, cluster):
        return default_placement(job, cluster)

    def on_ready(self, item, view):
        if isinstance(item, Flow) and (item.size or 0) >= self.threshold:
            return Decision(dscp=self.high)
        return Decision(dscp=0)
"""

SCENARIO = """
name: byo
cluster: {servers: [{count: 4, nic_rate: 10Gbit}], fabric: {type: single_switch}}
job:
  generator: hybrid_parallel
  args: {dp: 2, pp: 2, microbatches: 2, fwd: 1ms, bwd: 1ms, activation: 256KB, gradient: 4MB, gpus_per_server: 1}
schedulers:
  - fifo
  - {name: SCHED, args: {threshold: 1048576, high: 40}}
"""


def user_folder(tmp_path: Path, sched: str = "mysched.py:Mine") -> Path:
    """A folder outside the repository with the scheduler file and a scenario naming it."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "mysched.py").write_text(SCHED)
    (folder / "byo.yaml").write_text(SCENARIO.replace("SCHED", sched))
    return folder


def railbed(*args, cwd):
    """``railbed ARGS`` run from ``cwd`` (the user's folder), with this checkout's packages."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def dscps(result: RunResult) -> dict[int, int]:
    """Flow size -> the DSCP it ran with (one size per class in this job)."""
    return {rec.size: rec.dscp for rec in result.items.values() if rec.kind == "flow"}


def test_a_scheduler_file_outside_the_repo_runs_from_the_scenario_on_the_fluid_backend(tmp_path):
    folder = user_folder(tmp_path)
    out = tmp_path / "out"
    got = railbed("simulate", "byo.yaml", "--out", str(out), "--no-plots", cwd=folder)
    assert got.returncode == 0, got.stderr
    mine = RunResult.load(out / "mysched:Mine" / "result.json")
    fifo = RunResult.load(out / "fifo" / "result.json")
    assert mine.scheduler == "mysched:Mine"
    sizes = dscps(mine)
    assert {s: d for s, d in sizes.items() if s >= 1 << 20} and all(
        d == (40 if s >= 1 << 20 else 0) for s, d in sizes.items()
    ), sizes
    assert set(dscps(fifo).values()) == {0}
    # --scheduler selects it by the file the scenario names, or by its label
    for name in ("mysched.py:Mine", "mysched:Mine"):
        got = railbed("simulate", "byo.yaml", "--out", str(tmp_path / name), "--no-plots", "--scheduler", name,
                      cwd=folder)  # fmt: skip
        assert got.returncode == 0, got.stderr
        assert sorted(p.name for p in (tmp_path / name).iterdir() if p.is_dir() and p.name != "figures") == [
            "mysched:Mine"
        ]


def test_the_scenario_file_is_relative_to_the_scenario_not_the_current_directory(tmp_path, monkeypatch):
    folder = user_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    sc = Scenario.load(folder / "byo.yaml")
    assert sc.schedulers[1].name == f"{folder / 'mysched.py'}:Mine"
    assert sc.schedulers[1].run_label == "mysched:Mine"
    results = simulate_scenario(sc, tmp_path / "out", echo=lambda s: None, plots=False)
    assert [r.scheduler for r in results] == ["fifo", "mysched:Mine"]
    assert set(dscps(results[1]).values()) == {0, 40}


def test_module_colon_class_on_the_python_path(tmp_path, monkeypatch):
    folder = user_folder(tmp_path, "mysched:Mine")
    monkeypatch.syspath_prepend(str(folder))
    sc = Scenario.load(folder / "byo.yaml")
    assert sc.schedulers[1].run_label == "mysched:Mine"
    sched = make(sc.schedulers[1], "schedulers[1]")
    assert type(sched).__name__ == "Mine" and sched.threshold == 1 << 20 and sched.high == 40


def test_an_entry_point_of_an_installed_package(tmp_path, monkeypatch):
    """A distribution on sys.path (a ``.dist-info`` with ``entry_points.txt``) registers ``mine``."""
    folder = user_folder(tmp_path)
    dist = folder / "mysched-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mysched\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[railbed.schedulers]\nmine = mysched:Mine\n")
    monkeypatch.syspath_prepend(str(folder))
    assert scheduler_class("mine", "schedulers[0]").__name__ == "Mine"
    assert by_name("mine").high == 46
    sc = Scenario.from_dict({**_scenario(folder), "schedulers": [{"name": "mine", "args": {"high": 8}}]})
    assert sc.schedulers[0].run_label == "mine" and make(sc.schedulers[0]).high == 8


def _scenario(folder: Path) -> dict:
    import yaml

    return yaml.safe_load((folder / "byo.yaml").read_text())


@pytest.mark.parametrize(
    "name, field, says",
    [
        ("mysched.py:Other", "schedulers[1].name", "no class 'Other' in "),
        ("nofile.py:Mine", "schedulers[1].name", "no such file "),
        ("no_such_module_xyz:Mine", "schedulers[1].name", "no module 'no_such_module_xyz'"),
        ("broken.py:Mine", "schedulers[1].name", "failed to load: ZeroDivisionError"),
        ("mysched.py:Decision", "schedulers[1].name", "is not a Scheduler subclass"),
        ("magic", "schedulers[1]", "unknown scheduler 'magic'"),
    ],
)
def test_a_bad_module_file_or_class_is_one_line_naming_the_field(tmp_path, name, field, says):
    folder = user_folder(tmp_path, name)
    (folder / "broken.py").write_text("x = 1 / 0\n")
    got = railbed("simulate", "byo.yaml", "--out", str(tmp_path / "out"), cwd=folder)
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"railbed: {field}: ") and says in lines[0], got.stderr
    assert not (tmp_path / "out").exists()


def test_arguments_are_checked_like_a_registered_schedulers(tmp_path):
    folder = user_folder(tmp_path)
    name = f"{folder / 'mysched.py'}:Mine"
    with pytest.raises(SpecError) as e:
        make(SchedulerSpec(name, {"threshold": "big"}), "schedulers[1]")
    assert e.value.field == "schedulers[1].args.threshold" and "expected int" in e.value.message
    with pytest.raises(SpecError) as e:
        make(SchedulerSpec(name, {"limit": 2}), "schedulers[1]")
    assert e.value.field == "schedulers[1].args.limit" and "(known: threshold, high)" in e.value.message
    with pytest.raises(SpecError) as e:
        by_name("mysched.py:Mine", "--scheduler[0]")  # relative to the current directory: not here
    assert e.value.field == "--scheduler[0]" and "no such file" in e.value.message


def test_a_sweep_over_the_users_scheduler(tmp_path):
    """The sweep's checks, then each point as its worker runs it (``run_point``, in this process)."""
    from scenarios.sweep import Sweep, run_point

    folder = user_folder(tmp_path)
    sweep = Sweep.from_dict(
        {"scenario": "byo.yaml", "axes": {"schedulers": [["mysched.py:Mine"], ["fifo", "mysched.py:Mine"]],
                                          "rate": ["10Gbit", "20Gbit"]}},
        folder,
    )  # fmt: skip
    points = sweep.points(out=tmp_path / "sweep")
    makespans = {}
    for p in points:
        answer = run_point(p.scenario, str(sweep.base), "simulate", None, False, ["makespan"])
        assert answer["status"] == "ok", answer["error"]
        for row in answer["rows"]:
            makespans[(p.values["rate"], len(p.values["schedulers"]), row["run"])] = row["makespan"]
    assert sorted({k[2] for k in makespans}) == ["fifo", "mysched:Mine"]
    for n in (1, 2):
        assert makespans[("20Gbit", n, "mysched:Mine")] < makespans[("10Gbit", n, "mysched:Mine")]
    assert makespans[("10Gbit", 1, "mysched:Mine")] == makespans[("10Gbit", 2, "mysched:Mine")]


def test_a_sweep_on_local_ray(tmp_path):
    pytest.importorskip("ray")
    from scenarios.sweep import Sweep, run_sweep

    folder = user_folder(tmp_path)
    sweep = Sweep.from_dict({"scenario": "byo.yaml", "axes": {"rate": ["10Gbit", "20Gbit"]}}, folder)
    rows = run_sweep(sweep, tmp_path / "sweep", echo=lambda s: None, cpus=2)
    assert {r["status"] for r in rows} == {"ok"} and sorted({r["run"] for r in rows}) == ["fifo", "mysched:Mine"]
    point = json.loads((tmp_path / "sweep" / "points" / rows[0]["point"] / "point.json").read_text())
    assert point["status"] == "ok"


def test_the_readme_shows_a_scheduler_in_the_users_own_folder():
    text = (ROOT / "README.md").read_text()
    section = text.split("### Adding a scheduler", 1)[1].split("\n## ", 1)[0]
    assert "mysched.py:Mine" in section and "railbed.schedulers" in section and "class Mine(Scheduler)" in section
    assert textwrap.dedent("Register it in `REGISTRY`") not in section.split("Inside railbed")[0]
