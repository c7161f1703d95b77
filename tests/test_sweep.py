"""Sweeps: the grid, every point checked before anything runs, the grid limit, resume, failed
points, and a small simulated sweep in Ray's local mode (a real cluster: test_sweep_cluster.py)."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from cli import main
from railbed.errors import SpecError
from railbed.metrics import metric
from railbed.results import RunResult
from scenarios import sweep as sweep_module
from scenarios.sweep import Sweep, point_id, run_sweep

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml")


def sweep(**extra) -> Sweep:
    data = {
        "name": "t",
        "scenario": SCENARIO,
        "axes": {"rate": ["50Gbit", "100Gbit"], "job.args.gradient": ["1MB", "2MB"], "seed": [3]},
        "metrics": ["makespan", "fct_p99"],
    }
    data.update(extra)
    return Sweep.from_dict(data, ROOT)


def test_points_are_the_grid_with_values_applied():
    points = sweep().points()
    assert len(points) == 4 and len({p.id for p in points}) == 4
    p = points[1]
    assert p.values == {"rate": "50Gbit", "job.args.gradient": "2MB", "seed": 3} and p.seed == 3
    assert p.scenario["job"]["args"]["gradient"] == "2MB"
    assert {g["nic_rate"] for g in p.scenario["cluster"]["servers"]} == {"50Gbit"}
    assert p.scenario["cluster"]["fabric"]["uplink_rate"] == "50Gbit"
    assert point_id(p.values) == p.id  # stable: the resume key


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"backend": "both"}, "backend"),
        ({"metrics": ["speed"]}, "metrics[0]"),
        ({"axes": {"rate": []}}, "axes.rate"),
        ({"axes": {"job.args.gradient": ["-1MB"]}}, "point"),
        ({"axes": {"schedulers": [["nope"]]}}, "point"),
        ({"colour": 1}, "colour"),
    ],
)
def test_bad_sweep_names_the_field(extra, field):
    with pytest.raises(SpecError) as err:
        sweep(**extra).points()
    assert err.value.field.startswith(field)


def no_ray(*args, **kwargs):
    pytest.fail("Ray started although the sweep should have ended before")


def cli(tmp_path: Path, data: dict, *extra: str) -> int:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return main(["sweep", str(path), "--out", str(tmp_path / "out"), *extra])


def test_a_sweep_as_the_scenario_is_refused_naming_the_field(tmp_path, capsys):
    inner = tmp_path / "inner.yaml"
    inner.write_text(yaml.safe_dump({"name": "inner", "scenario": SCENARIO, "axes": {"rate": ["50Gbit"]}}))
    assert cli(tmp_path, {"name": "outer", "scenario": str(inner), "axes": {"rate": ["50Gbit"]}}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("railbed: scenario: ")
    assert "inner.yaml is a sweep file (it has axes, scenario), not a scenario" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "axes, field, says",
    [
        ({"job.args.colour": ["red"]}, "job.args", "colour"),  # an unknown job argument
        ({"rate": ["100Gbit", "-5Gbit"]}, "cluster.servers[0].nic_rate", "-5Gbit"),  # a negative rate
        ({"job.args.dp": [2, 8]}, "job.args", "hybrid_parallel {dp: 8, pp: 4"),  # only the run's preflight sees it
        ({"schedulers": [["fifo"], ["fifo", {"name": "small-first", "args": {"limit": 0}}]]}, "schedulers[1]", ""),
    ],
)
def test_every_point_is_checked_before_anything_runs_or_is_written(tmp_path, capsys, monkeypatch, axes, field, says):
    monkeypatch.setattr(sweep_module, "start_ray", no_ray)
    data = {"name": "bad", "scenario": SCENARIO, "axes": {"job.args.gradient": ["1MB", "2MB"], **axes}}
    assert cli(tmp_path, data) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("railbed: point ") and f": {field}" in err[0] and says in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_grid_above_the_limit_is_refused_at_once_with_its_size(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep_module, "start_ray", no_ray)
    monkeypatch.setattr(Sweep, "grid", lambda self: pytest.fail("the grid was made"))
    values = [f"{i}MB" for i in range(1, 101)]
    data = {"name": "huge", "scenario": SCENARIO, "axes": {"job.args.gradient": values, "seed": list(range(1000))}}
    assert cli(tmp_path, data) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "axes: 100000 points (100 job.args.gradient x 1000 seed)" in err[0]
    assert "more than --max-points 1000; pass --max-points 100000" in err[0]
    assert not (tmp_path / "out").exists()
    assert sweep(axes={"seed": list(range(6))}).size() == 6
    with pytest.raises(SpecError, match="6 points"):
        run_sweep(sweep(axes={"seed": list(range(6))}), tmp_path / "out", echo=print, max_points=5)


def test_checking_the_points_prints_an_estimate_then_progress(tmp_path, monkeypatch):
    """An estimate after the second check, progress every PROGRESS_SECONDS (0 here: every
    check); scenarios that differ only in seed are checked once."""
    monkeypatch.setattr(sweep_module, "PROGRESS_SECONDS", 0.0)
    checked = []
    real = sweep_module._check_point
    monkeypatch.setattr(sweep_module, "_check_point", lambda sc, *a: (checked.append(sc), real(sc, *a)))
    lines = []
    axes = {"job.args.gradient": ["1MB", "2MB", "3MB", "4MB"], "seed": [1, 2, 3]}
    points = sweep(axes=axes).points(lines.append, tmp_path)
    assert len(points) == 12 and len(checked) == 4
    assert lines[0].startswith("  checking 4 scenarios first: about ") and "s for one)" in lines[0]
    assert [x.split(" (")[0] for x in lines[1:]] == ["  checked 3/4", "  checked 4/4"]
    assert lines[-1].endswith("about 0 s left)")


def test_small_simulated_sweep_on_local_ray_resumes_and_records_failures(tmp_path, monkeypatch):
    """Four tiny points on a local Ray instance (2 CPUs). dp = 8 pins pipeline stages to
    servers the 4-server cluster lacks: the check before the sweep refuses it, so that check
    is skipped here to stand for a failure only the run finds (the worker's placement fails)."""
    pytest.importorskip("ray")
    real = sweep_module._check_point
    monkeypatch.setattr(
        sweep_module, "_check_point", lambda sc, *a: None if sc["job"]["args"]["dp"] == 8 else real(sc, *a)
    )
    sw = sweep(axes={"rate": ["50Gbit", "100Gbit"], "job.args.dp": [2, 8], "job.args.gradient": ["1MB"]})
    lines = []
    rows = run_sweep(sw, tmp_path, echo=lines.append, cpus=2, use_ray=True)
    bad = [r for r in rows if r["status"] != "ok"]
    assert len(bad) == 2 and all(r["job.args.dp"] == 8 and "on 4 servers" in r["error"] for r in bad)
    good = [r for r in rows if r["status"] == "ok"]
    assert len(good) == 2 * 2  # two points x two schedulers
    for r in good:
        pdir = tmp_path / "points" / r["point"]
        res = RunResult.load(pdir / r["run"] / "result.json")
        assert r["makespan"] == metric(res, "makespan") and r["fct_p99"] == metric(res, "fct_p99")
        assert res.scheduler == r["run"]
        prov = json.loads((pdir / "provenance.json").read_text())
        assert prov["command"]["sweep_point"] == r["point"] and prov["scale"]["k"] is None
    ms = {(r["rate"], r["run"]): r["makespan"] for r in good}
    assert ms[("100Gbit", "fifo")] < ms[("50Gbit", "fifo")]  # faster links, same job
    with open(tmp_path / "sweep.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) == len(json.loads((tmp_path / "sweep.json").read_text())) == 6
    assert "2 of 4 points ok" in lines[-3]

    # resume: the finished points are skipped, the failed ones run again (and fail again)
    before = {p.name: (p / "point.json").stat().st_mtime_ns for p in (tmp_path / "points").iterdir()}
    lines.clear()
    assert run_sweep(sw, tmp_path, echo=lines.append, cpus=2, use_ray=True) == rows
    assert any("2 done already, 2 to run" in line for line in lines)
    after = {p.name: (p / "point.json").stat().st_mtime_ns for p in (tmp_path / "points").iterdir()}
    assert sorted(n for n in before if before[n] != after[n]) == sorted({r["point"] for r in bad})
    # nothing left to run: no Ray at all
    sw.axes["job.args.dp"] = [2]
    monkeypatch.setattr("scenarios.sweep.start_ray", lambda *a, **k: pytest.fail("Ray started with nothing to do"))
    assert len(run_sweep(sw, tmp_path, echo=lines.append)) == 4


def test_an_address_space_limit_shrinks_rays_object_store():
    """Under ``ulimit -v`` Ray's default object store (30 % of the machine's memory, mapped into
    every worker) made local sweeps hang or fail; the store is then an eighth of the limit, not
    under Ray's 75 MiB, and Ray's default without a limit (a child process lowers the limit)."""
    import subprocess
    import sys

    code = (
        "import resource, sys; from scenarios.sweep import object_store_bytes as f; "
        "lim = int(sys.argv[1]); lim and resource.setrlimit(resource.RLIMIT_AS, (lim, lim)); "
        "print(f())"
    )
    root = Path(__file__).resolve().parent.parent
    out = {}
    for lim in (0, 8 * 10**9, 4 * 10**8):
        run = subprocess.run(
            [sys.executable, "-c", code, str(lim)], capture_output=True, text=True, cwd=root, timeout=120
        )
        assert run.returncode == 0, run.stderr
        out[lim] = run.stdout.strip()
    assert out[0] == str(sweep_module.object_store_bytes())  # this process's limit, usually none: None
    assert out[8 * 10**9] == str(10**9) and out[4 * 10**8] == str(75 * 2**20)
