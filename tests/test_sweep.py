"""Sweeps: the grid, resume, failed points, and a small simulated sweep in Ray's local mode."""

import csv
import json
from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.metrics import metric
from railbed.results import RunResult
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


def test_small_simulated_sweep_on_local_ray_resumes_and_records_failures(tmp_path, monkeypatch):
    """Four tiny points on a local Ray instance (2 CPUs). dp = 8 pins pipeline stages to
    servers the 4-server cluster lacks: valid input, but the run fails at placement."""
    pytest.importorskip("ray")
    sw = sweep(axes={"rate": ["50Gbit", "100Gbit"], "job.args.dp": [2, 8], "job.args.gradient": ["1MB"]})
    lines = []
    rows = run_sweep(sw, tmp_path, echo=lines.append, cpus=2)
    bad = [r for r in rows if r["status"] != "ok"]
    assert len(bad) == 2 and all(r["job.args.dp"] == 8 and "cluster has 4" in r["error"] for r in bad)
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
    assert run_sweep(sw, tmp_path, echo=lines.append, cpus=2) == rows
    assert "2 done already" in lines[0]
    after = {p.name: (p / "point.json").stat().st_mtime_ns for p in (tmp_path / "points").iterdir()}
    assert sorted(n for n in before if before[n] != after[n]) == sorted({r["point"] for r in bad})
    # nothing left to run: no Ray at all
    sw.axes["job.args.dp"] = [2]
    monkeypatch.setattr("scenarios.sweep.start_ray", lambda *a, **k: pytest.fail("Ray started with nothing to do"))
    assert len(run_sweep(sw, tmp_path, echo=lines.append)) == 4
