"""LEO's scenarios: offered-load sweeps (loads), request metrics, latency/throughput figures, claims."""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from railbed.errors import SpecError
from railbed.metrics import request_latencies, request_throughput, steady_latencies
from railbed.spec import ClusterSpec
from scenarios.reproduce import load_claims, reproduce_paper
from scenarios.runner import Scenario, simulate_scenario
from schedulers import by_name
from simulator import simulate
from workloads.requests import requests

LEO = Path(__file__).resolve().parent.parent / "scenarios" / "leo"


def tiny(loads=(2e6, 4e6), n=120):
    data = yaml.safe_load((LEO / "kvs.yaml").read_text())
    data["job"]["args"]["duration"] = f"{n / 2e6!r}s"  # n requests at the first load
    data["loads"] = list(loads)
    data["schedulers"] = ["leo", "acc-only"]
    return Scenario.from_dict(data, LEO)


def test_loads_make_one_run_per_scheduler_and_load():
    sc = tiny()
    points = sc.points(sc.schedulers)
    assert [s.run_label for s, _ in points] == ["leo@2e+06", "acc-only@2e+06", "leo@4e+06", "acc-only@4e+06"]
    assert points[0][1].name == "kvs-c-2e+06rps" and points[2][1].name == "kvs-c-4e+06rps"
    for bad, field in (([], "loads"), ([1e6, -1.0], "loads[1]"), ([1e6, 1e6], "loads")):
        with pytest.raises(SpecError) as err:
            tiny(bad)
        assert err.value.field == field


def test_sweep_writes_the_curve_and_its_figures(tmp_path):
    sc = tiny()
    results = simulate_scenario(sc, tmp_path / "out", echo=lambda _m: None)
    curve = json.loads((tmp_path / "out" / "curve.json").read_text())
    assert set(curve) == {"leo", "acc-only"}
    assert [p["load"] for p in curve["leo"]] == [2e6, 4e6]
    run = {r.scheduler: r for r in results}["acc-only@4e+06"]
    assert len(request_latencies(run)) == 240  # 60 us of arrivals at 4 Mrps
    arrivals = [run.items[f"a{i}"].end for i in range(240)]
    late = [i for i in range(240) if arrivals[i] >= 0.2 * max(arrivals)]  # the warm-up: the first 20 %
    lat = sorted(steady_latencies(run))  # the curve's medians are steady-state
    assert lat == sorted(run.items[f"q{i}.1b"].end - arrivals[i] for i in late)
    n = len(lat)
    assert curve["acc-only"][1]["p50"] == lat[n // 2] and curve["acc-only"][1]["p99"] == lat[int(0.99 * n)]
    assert [p["knee"] for p in curve["acc-only"]].count(1.0) == 1
    with open(tmp_path / "out" / "figures" / "latency-load.csv") as f:
        rows = list(csv.DictReader(f))
    got = {(r["scheduler"], float(r["load"])): (float(r["p50_s"]), float(r["p99_s"])) for r in rows}
    assert got[("acc-only", 4e6)] == (curve["acc-only"][1]["p50"], curve["acc-only"][1]["p99"])
    assert (tmp_path / "out" / "figures" / "throughput-load.png").exists()
    assert not list((tmp_path / "out" / "figures").glob("timeline-*"))  # no per-run timelines in a sweep


def test_throughput_is_the_offered_load_below_capacity_and_capped_above():
    cluster = ClusterSpec.load(LEO / "cluster-f-nic-off-path.yaml")
    low = simulate(requests("kvs-c", load=3e6, requests=1500, arrival="constant"), by_name("cpu-only"), cluster)
    assert request_throughput(low) == pytest.approx(3e6, rel=0.02)
    high = simulate(requests("kvs-c", load=40e6, requests=1500, arrival="constant"), by_name("cpu-only"), cluster)
    assert request_throughput(high) == pytest.approx(5e6 / 1.5, rel=0.03)  # the CPU path's 3.33 Mops (DrTM-KV's)


def test_leo_claims_parse_and_outside_systems_are_not_reproduced(tmp_path):
    title, claims, _ = load_claims(LEO / "claims.yaml")
    assert title.startswith("LEO")
    outside = [c for c in claims if c.not_reproduced]
    assert {re.split(r"[:,( ]", c.claim)[0] for c in outside} >= {"KVS", "DML"}
    (tmp_path / "leo").mkdir()
    (tmp_path / "leo" / "claims.yaml").write_text(
        "claims:\n- {claim: over NCCL, paper: 4.08x, not_reproduced: NCCL is not built here}\n"
    )
    _, rows = reproduce_paper("leo", tmp_path / "out", False, False, lambda _m: None, claims_dir=tmp_path)
    assert (rows[0].verdict, rows[0].fidelity, rows[0].value) == ("not reproduced here", "NCCL is not built here", None)


def test_report_reads_knees_and_ratios_from_curves():
    from scenarios.leo.report import Curve, best_other, deep_dive_section, kvs_section

    loads = [0.5e6, 5e6, 6e6, 7e6, 8e6]

    def curve(name, p50):
        return Curve(name, loads, p50, loads)

    cs = {
        "leo": curve("leo", [30, 31, 32, 35, 60]),  # knee 7 M (35 <= 45)
        "leo-literal": curve("leo-literal", [30, 32, 40, 50, 90]),  # knee 6 M
        "acc-only": curve("acc-only", [30, 40, 90, 200, 300]),  # knee 5 M
        "drtm-kv-model": curve("drtm-kv-model", [30, 100, 200, 300, 400]),  # knee 0.5 M
        "greedy-intra": curve("greedy-intra", [30, 31, 44, 46, 80]),  # knee 6 M
        "greedy-e2e": curve("greedy-e2e", [30, 31, 46, 46, 80]),  # knee 5 M
        "leo-lp": curve("leo-lp", [30, 30, 31, 33, 40]),  # knee 8 M
    }
    assert best_other(cs) == ("greedy-intra", 6e6)
    text = "\n".join(kvs_section(cs))
    assert "| 1.2-2x | 1.40x | 1.20x |" in text  # 7 / 5 and 6 / 5
    assert "at acc-only's knee (5 M/s) | 1.3x | 1.29x | 1.25x |" in text  # 40 / 31 and 40 / 32
    dive = "\n".join(deep_dive_section(cs))
    assert "| leo | 1.17x | 1.40x | 0.88x | 1.50x |" in dive  # 7/6, 7/5, 7/8; at 8 M: 60 / 40


def test_report_names_the_scenarios_it_ran():
    from scenarios.leo.report import SCENARIOS, command

    assert command(False) == "python -m scenarios.leo.report"
    assert command(True, ("kvs", "dfs")) == "python -m scenarios.leo.report --quick --only kvs --only dfs"
    assert command(False, SCENARIOS[:1]) == "python -m scenarios.leo.report --only kvs"


def test_report_writes_its_named_block_from_finished_runs(tmp_path):
    import json

    from scenarios.leo.report import main

    pts = [{"load": x, "p50": 1e-5, "throughput": x} for x in (1000.0, 5000.0)]
    (tmp_path / "dml").mkdir()
    (tmp_path / "dml" / "curve.json").write_text(json.dumps({"leo": pts, "acc-only": pts[:1]}))
    page = tmp_path / "page.md"
    blocks = "<!-- leo-report:begin -->\nold\n<!-- leo-report:end -->\n<!-- q:begin -->\nold\n<!-- q:end -->\n"
    page.write_text("a\n" + blocks)
    main(["--out", str(tmp_path), "--resume", "--only", "dml", "--docs", str(page), "--block", "q"])
    text = page.read_text()
    assert "<!-- leo-report:begin -->\nold\n" in text  # the default block untouched
    assert "Generated by `python -m scenarios.leo.report --only dml`" in text.split("<!-- q:begin -->")[1]
    assert "leo's knee 5,000/s against the best single path or greedy baseline (acc-only, 1,000/s)" in text
