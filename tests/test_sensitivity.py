"""``railbed reproduce PAPER --sensitivity``: the unstated parameters swept on a local Ray (2 CPUs),
one figure per claim, and the point at the scenario's own value is the report's number."""

import csv
from pathlib import Path

import pytest

from railbed.errors import SpecError
from scenarios.claims import load_claims
from scenarios.reproduce import reproduce_paper
from scenarios.sensitivity import cases, sensitivity, values_per_path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"

CLAIMS = f"""
title: tiny
unstated:
  - name: activation size
    set: job.args.activation
    value: 2MB
    reason: crosscheck-small's activation; the tiny paper gives no size at all
    range: [1MB, 2MB, 8MB]
    claims: [prio]
  - name: compute times
    set: [job.args.fwd, job.args.bwd]
    value: [200us, 400us]
    reason: crosscheck-small's compute; the tiny paper gives no time at all
    range: [[100us, 200us], [200us, 400us]]
    claims: [prio]
claims:
  - id: prio
    claim: priority helps
    paper: {{value: -10, unit: '%', source: Fig. 1}}
    scenario: {SCENARIO}
    scheduler: tag-priority
    relative_to: fifo
    metric: makespan
"""


def test_unstated_parameters_are_checked(tmp_path):
    path = tmp_path / "claims.yaml"
    base = CLAIMS.split("claims:\n  - id")[1]
    for bad, field in (
        ("  - {name: x, set: job.args.activation, value: 1, reason: short, range: [1, 2], claims: [prio]}",
         "unstated[0].reason"),
        ("  - {name: x, set: job.args.activation, value: 1, reason: long enough to say why, range: [1], "
         "claims: [prio]}", "unstated[0].range"),
        ("  - {name: x, set: job.args.activation, value: 1, reason: long enough to say why, range: [1, 2], "
         "claims: [nope]}", "unstated[0].claims[0]"),
    ):  # fmt: skip
        path.write_text(f"unstated:\n{bad}\nclaims:\n  - id{base}")
        with pytest.raises(SpecError) as err:
            load_claims(path)
        assert err.value.field == field


def test_cases_set_every_path():
    _, claims, unstated = load_claims(_write(Path("/tmp"), "railbed-sensitivity-cases.yaml"))
    got = cases(claims, unstated, quick=False, base=Path("."))
    assert len(got) == 5  # 3 sizes + 2 compute pairs, one point each
    compute = [c for c in got if c.param.name == "compute times"]
    assert [c.sweep_point.scenario["job"]["args"]["bwd"] for c in compute] == ["200us", "400us"]
    assert values_per_path(unstated[1], ["1us", "2us"]) == ["1us", "2us"]
    assert values_per_path(unstated[0], "3MB") == ["3MB"]


def _write(where: Path, name: str = "claims.yaml") -> Path:
    path = where / name
    path.write_text(CLAIMS)
    return path


def test_sensitivity_runs_on_ray_and_draws_a_figure_per_claim(tmp_path):
    pytest.importorskip("ray")
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    _write(papers / "dgtp")
    out = tmp_path / "out"
    figures = sensitivity("dgtp", out, echo=lambda _m: None, cpus=2, claims_dir=papers)
    assert [f.name for f in figures] == ["prio.png"] and figures[0].stat().st_size > 10_000
    rows = list(csv.DictReader(open(out / "sensitivity" / "dgtp" / "prio.csv")))
    sizes = [r for r in rows if r["parameter"] == "activation size"]
    assert [r["value"] for r in sizes] == ["1MB", "2MB", "8MB"]
    # at the scenario's own value the sweep gives the report's number
    _, [row] = reproduce_paper("dgtp", tmp_path / "report", False, False, lambda _m: None, papers, plots=False)
    at_chosen = float(next(r for r in sizes if r["value"] == "2MB")["claim_%"])
    assert at_chosen == pytest.approx(row.value, rel=1e-9)
    assert len({r["claim_%"] for r in sizes}) > 1  # the parameter moves the claim
    assert "![prio](sensitivity/dgtp/prio.png)" in (out / "SENSITIVITY.md").read_text()
