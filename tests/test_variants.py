"""Scenario runs with their own job (a scheduler entry's ``job`` overrides): built, checked, saved."""

from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.results import RunResult
from scenarios.runner import Scenario, simulate_scenario
from workloads.synthetic import all_to_all

CLUSTER = {"servers": [{"count": 4, "gpus": 1, "nics": 1, "nic_rate": "10Gbit"}], "fabric": {"type": "single_switch"}}


def scenario(schedulers, job=None, base=Path(".")):
    data = {"name": "v", "cluster": CLUSTER, "schedulers": schedulers,
            "job": job or {"generator": "all_to_all", "args": {"n": 4, "size": "1MB"}}}  # fmt: skip
    return Scenario.from_dict(data, base)


def test_a_variant_runs_its_own_job_and_the_others_the_scenarios(tmp_path):
    sc = scenario(["fifo", {"name": "fifo", "label": "big", "job": {"size": "4MB"}}])
    (a, job_a), (b, job_b) = sc.points(sc.schedulers)
    assert job_a is sc.job and b.run_label == "big" and job_b is not sc.job
    assert {f.size for f in job_a.flows} == {1_000_000} and {f.size for f in job_b.flows} == {4_000_000}
    runs = simulate_scenario(sc, tmp_path / "out", echo=lambda _m: None, plots=False)
    assert runs[1].makespan == pytest.approx(4 * runs[0].makespan, rel=0.01)  # 4x the bytes, same flows
    assert (tmp_path / "out" / "big" / "job.json").exists() and (tmp_path / "out" / "job.json").exists()
    assert RunResult.load(tmp_path / "out" / "big" / "result.json").makespan == runs[1].makespan


def test_a_variant_may_bring_a_job_of_its_own():
    sc = scenario(["fifo", {"name": "fifo", "label": "other", "job": {"generator": "all_to_all", "args": {"n": 3}}}])
    job = sc.job_of(sc.schedulers[1])
    assert len(job.endpoints) == 3 and len(sc.job.endpoints) == 4
    with pytest.raises(SpecError) as exc:
        scenario([{"name": "fifo", "job": {"generator": "all_to_all", "args": {"n": 0}}}])
    assert exc.value.field == "schedulers[0].job.args.n"
    with pytest.raises(SpecError) as exc:
        scenario([{"name": "fifo", "job": {"generator": "nope"}}])
    assert exc.value.field == "schedulers[0].job.generator"
    with pytest.raises(SpecError) as exc:
        scenario([{"name": "fifo", "job": {"generator": "all_to_all", "n": 3}}])
    assert exc.value.field == "schedulers[0].job.n"


def test_bad_overrides_name_the_entry(tmp_path):
    with pytest.raises(SpecError) as exc:
        scenario(["fifo", {"name": "fifo", "label": "x", "job": {"bogus": 1}}])
    assert exc.value.field == "schedulers[1].job.bogus"
    with pytest.raises(SpecError) as exc:
        scenario([{"name": "fifo", "job": {"n": 1}}])
    assert exc.value.field == "schedulers[0].job.n"
    with pytest.raises(SpecError) as exc:
        scenario([{"name": "fifo", "job": [1]}])
    assert exc.value.field == "schedulers[0].job"
    all_to_all(3).save(tmp_path / "saved.json")
    with pytest.raises(SpecError, match="file") as exc:
        scenario([{"name": "fifo", "job": {"n": 3}}], job={"file": "saved.json"}, base=tmp_path)
    assert exc.value.field == "schedulers[0].job"
