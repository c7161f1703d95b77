"""The multi-job workload generator (workloads/multijob.py)."""

from __future__ import annotations

import numpy as np
import pytest

from railbed.errors import SpecError
from workloads import generate
from workloads.multijob import MODELS, gpus_of, multijob


def test_same_seed_same_workload_other_seed_other():
    assert multijob(jobs=20, seed=7) == multijob(jobs=20, seed=7)
    assert multijob(jobs=20, seed=7) != multijob(jobs=20, seed=8)


def test_poisson_arrivals_and_size_mix_have_their_means():
    """Over 20,000 jobs the mean gap is 1 / rate and the mean size the table's, within 3 %
    (the standard error of either is under 1 % at this count)."""
    entries = multijob(jobs=20_000, rate=4.0, seed=1, sizes={8: 1, 16: 1, 64: 2})
    arrivals = np.array([e["arrival"] for e in entries])
    assert np.all(np.diff(arrivals) >= 0)
    assert np.mean(np.diff(arrivals, prepend=0.0)) == pytest.approx(0.25, rel=0.03)
    assert np.mean([gpus_of(e) for e in entries]) == pytest.approx((8 + 16 + 2 * 64) / 4, rel=0.03)
    gaps = np.diff(arrivals, prepend=0.0)
    assert np.std(gaps) == pytest.approx(0.25, rel=0.05)  # exponential: sd = mean


def test_models_fit_their_sizes_and_iterations_range():
    entries = multijob(jobs=300, seed=2, sizes={2: 1, 3: 1}, iterations=[2, 4])
    for e in entries:
        assert gpus_of(e) in (2, 3)
        if gpus_of(e) == 3:  # only the data-parallel model has one GPU per replica
            assert e["name"].split("-", 1)[1].startswith("dense-dp")
        assert 2 <= e["iterations"] <= 4
    assert {e["iterations"] for e in entries} == {2, 3, 4}


def test_every_entry_is_a_job_workloads_generate_accepts():
    entries = multijob(jobs=12, seed=3, sizes={8: 1, 16: 1}, iterations=2, placement="random")
    assert {e["generator"] for e in entries} <= {m.generator for m in MODELS.values()}
    for e in entries:
        job = generate(e["generator"], dict(e["args"], iterations=e["iterations"]), field=e["name"])
        assert len(job.endpoints) == gpus_of(e)
        assert e["placement"]["policy"] == "random" and isinstance(e["placement"]["seed"], int)
        assert set(e) == {"name", "generator", "args", "arrival", "iterations", "placement"}


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"jobs": 0}, "jobs"),
        ({"rate": 0}, "rate"),
        ({"rate": float("inf")}, "rate"),
        ({"sizes": {8: -1}}, "sizes.8"),
        ({"sizes": {"x": 1}}, "sizes.x"),
        ({"sizes": {8: 0}}, "sizes"),
        ({"models": {"gpt9": 1}}, "models.gpt9"),
        ({"sizes": {3: 1}, "models": {"moe": 1}}, "sizes.3"),
        ({"iterations": [5, 2]}, "iterations"),
        ({"placement": "tight"}, "placement"),
        ({"max_gpus": 16}, "sizes.32"),
        ({"start": -1}, "start"),
    ],
)
def test_bad_arguments_name_their_field(kwargs, field):
    with pytest.raises(SpecError) as err:
        multijob(**kwargs)
    assert err.value.field == field


def test_a_trace_file_gives_arrivals_and_sizes(tmp_path):
    from workloads.multijob import from_trace

    trace = tmp_path / "t.csv"
    trace.write_text("submit,gpu_num,user\n130.5,16,u1\n100,8,u2\n160,32,u3\n")
    entries = from_trace(str(trace), arrival="submit", gpus="gpu_num", start=5.0)
    assert [e["arrival"] for e in entries] == [5.0, 35.5, 65.0]  # sorted, from the first arrival
    assert [gpus_of(e) for e in entries] == [8, 16, 32]
    assert from_trace(str(trace), arrival="submit", gpus="gpu_num", limit=2)[-1]["arrival"] == 30.5
    with pytest.raises(SpecError, match="no column 'gpus'"):
        from_trace(str(trace), arrival="submit")
    trace.write_text("arrival,gpus\n1,8\nsoon,8\n")
    with pytest.raises(SpecError) as err:
        from_trace(str(trace))
    assert err.value.field == "trace line 3.arrival"
    trace.write_text("arrival,gpus\n1,2.5\n")
    with pytest.raises(SpecError, match="GPU count"):
        from_trace(str(trace))
