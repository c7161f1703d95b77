"""Figures, exports and provenance of a results directory, checked against the result JSON.

One simulated scenario (crosscheck-small, two schedulers) is run once for
the module; every CSV beside a figure must hold the numbers the result
JSON implies, computed here from the raw JSON, not through railbed."""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from railbed import plots, provenance
from railbed.export import NIC_TID
from railbed.results import RunResult
from scenarios.runner import Scenario, simulate_scenario
from simulator.fluid.series import LinkSeries

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    sc = Scenario.load(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml")
    simulate_scenario(sc, out, echo=lambda _: None)
    return out


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def raw(results, run):
    return json.loads((results / run / "result.json").read_text())


def assert_png(path):
    from PIL import Image

    assert path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as im:
        im.load()  # decodes every pixel
        assert im.format == "PNG" and im.size[0] >= 300 and im.size[1] >= 200


def test_standard_figures_exist_and_decode(results):
    names = {p.name for p in (results / "figures").glob("*.png")}
    for run in ("fifo", "tag-priority"):
        assert {f"timeline-{run}.png", f"links-{run}.png"} <= names
    assert {"fct-cdf.png", "cct-cdf.png", "iterations.png"} <= names
    for png in (results / "figures").glob("*.png"):
        assert_png(png)
        assert png.with_suffix(".csv").exists()


def test_timeline_csv_is_every_item_with_its_times(results):
    d = raw(results, "tag-priority")
    rows = read_csv(results / "figures" / "timeline-tag-priority.csv")
    assert {r["id"] for r in rows} == {i for i, x in d["items"].items() if x["end"] is not None}
    for r in rows:
        item = d["items"][r["id"]]
        assert float(r["start_s"]) == item["start"] and float(r["end_s"]) == item["end"]
        if item["kind"] == "flow":
            assert r["lane"] == f"h{item['server']} nic{item['src_nic']}"
            assert r["color"] == item["attrs"]["coflow_type"] and int(r["dscp"]) == item["dscp"]
        else:
            assert r["lane"] == f"h{item['server']} {item['device']}" and r["color"] == "task"
    # tag-priority marks the pipeline flows 46 (the scenario's dscp tags)
    assert {r["dscp"] for r in rows if r["color"] == "PP"} == {"46"}


def test_fct_and_cct_cdfs_match_the_json(results):
    rows = read_csv(results / "figures" / "fct-cdf.csv")
    for run in ("fifo", "tag-priority"):
        items = raw(results, run)["items"].values()
        fcts = sorted(x["end"] - x["start"] for x in items if x["kind"] == "flow" and x["server"] != x["dst_server"])
        mine = [r for r in rows if r["run"] == run]
        assert {r["scope"] for r in mine} == {"network"}  # the same-server flows took 0 s: left out
        assert [float(r["fct_s"]) for r in mine] == pytest.approx(fcts, rel=1e-12)
        assert float(mine[-1]["cdf"]) == 1.0 and float(mine[0]["cdf"]) == pytest.approx(1 / len(fcts))
        coflows = {}
        for x in items:
            if x["kind"] == "flow":
                c = coflows.setdefault(x["attrs"]["coflow"], [math.inf, -math.inf])
                c[0], c[1] = min(c[0], x["ready"]), max(c[1], x["end"])
        ccts = sorted(b - a for a, b in coflows.values())
        got = [float(r["cct_s"]) for r in read_csv(results / "figures" / "cct-cdf.csv") if r["run"] == run]
        assert got == pytest.approx(ccts, rel=1e-12)


def test_iteration_bars_match_the_json(results):
    rows = read_csv(results / "figures" / "iterations.csv")
    for run in ("fifo", "tag-priority"):
        its = raw(results, run)["iterations"]
        assert {r["iteration"]: float(r["time_s"]) for r in rows if r["run"] == run} == its


def test_link_utilisation_integrates_to_the_links_bytes(results):
    d = raw(results, "fifo")
    rows = read_csv(results / "figures" / "links-fifo.csv")
    shown = {r["link"] for r in rows}
    assert 1 <= len(shown) <= plots.BUSIEST_LINKS
    by_bytes = sorted(d["links"], key=lambda n: -d["links"][n]["bytes"])
    assert d["links"][by_bytes[0]]["bytes"] == max(d["links"][n]["bytes"] for n in shown)
    for name in shown:
        carried = sum(
            float(r["utilisation"]) * (float(r["t_end_s"]) - float(r["t_start_s"])) for r in rows if r["link"] == name
        )
        assert carried * d["links"][name]["rate"] / 8 == pytest.approx(d["links"][name]["bytes"], rel=1e-6)
        assert all(-1e-9 <= float(r["utilisation"]) <= 1 + 1e-9 for r in rows if r["link"] == name)


def test_exports_trace_and_csvs(results):
    d = raw(results, "fifo")
    trace = json.loads((results / "fifo" / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} == set(d["items"])
    for e in spans:
        item = d["items"][e["name"]]
        assert e["ts"] == pytest.approx(item["start"] * 1e6) and e["dur"] == pytest.approx(
            (item["end"] - item["start"]) * 1e6
        )
        assert e["pid"] == item["server"] + 1 and e["tid"] >= 1  # no pid or tid 0 (Perfetto's UI special-cases it)
        assert (e["tid"] >= NIC_TID) == (item["kind"] == "flow")
    names = {(e["pid"], e.get("tid"), e["args"]["name"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert (1, NIC_TID + 1, "nic1") in names
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert procs[1] == "h0" and 0 not in procs
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"} == set(d["link_series"])
    flows = read_csv(results / "fifo" / "flows.csv")
    assert len(flows) == sum(1 for x in d["items"].values() if x["kind"] == "flow")
    for r in flows:
        assert int(r["size_bytes"]) == d["items"][r["id"]]["size"]
        assert float(r["fct_s"]) == pytest.approx(d["items"][r["id"]]["end"] - d["items"][r["id"]]["start"])
    tasks = read_csv(results / "fifo" / "tasks.csv")
    assert {r["id"] for r in tasks} == {i for i, x in d["items"].items() if x["kind"] == "task"}
    links = read_csv(results / "fifo" / "links.csv")
    assert {r["link"] for r in links} == set(d["link_series"])


def test_provenance_names_code_machine_and_packages(results):
    p = json.loads((results / "provenance.json").read_text())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert p["railbed"]["commit"] == head.stdout.strip()
    assert p["machine"]["cpu_count"] >= 1 and p["machine"]["kernel"]
    assert p["scale"]["k"] is None and "simulator" in p["scale"]["chosen"]
    import numpy

    assert p["packages"]["numpy"] == numpy.__version__ and "pyroute2" in p["packages"] and "mininet" in p["packages"]
    assert provenance.find_seeds({"job": {"args": {"seed": 7}}, "x": [{"seeds": [1, 2]}]}) == {
        "job.args.seed": 7,
        "x[0].seeds": [1, 2],
    }
    assert "--scale" in provenance.scale_record(100, 100, None)["chosen"]
    assert "scenario" in provenance.scale_record(100, None, 100)["chosen"]


def test_crosscheck_scatter_and_latency_vs_load(tmp_path):
    checks = [
        {"scheduler": "fifo", "flows": [{"id": "a", "emulated": 2e-3, "simulated": 1.9e-3}]},
        {"scheduler": "tp", "flows": [{"id": "b", "emulated": 5e-4, "simulated": 5e-4}]},
    ]
    (tmp_path / "crosscheck.json").write_text(json.dumps(checks))
    png = plots.crosscheck_scatter(tmp_path / "crosscheck.json", tmp_path / "xc")
    assert_png(png)
    assert read_csv(tmp_path / "xc.csv") == [
        {"scheduler": "fifo", "flow": "a", "emulated_s": "0.002", "simulated_s": "0.0019"},
        {"scheduler": "tp", "flow": "b", "emulated_s": "0.0005", "simulated_s": "0.0005"},
    ]
    data = {"fifo": [(0.9, 2e-3, 9e-3), (0.1, 1e-3, 2e-3)], "leo": [(0.5, 1e-3, 1e-3)]}
    assert_png(plots.latency_vs_load(data, tmp_path / "lat", "offered load (share of capacity)"))
    rows = read_csv(tmp_path / "lat.csv")
    assert [(r["scheduler"], float(r["load"]), float(r["p99_s"])) for r in rows] == [
        ("fifo", 0.1, 2e-3),
        ("fifo", 0.9, 9e-3),
        ("leo", 0.5, 1e-3),
    ]


def test_link_series_bins_are_exact_and_bounded():
    s = LinkSeries(["a", "b"], np.array([10.0, 100.0]), points=4)
    bits = np.zeros(2)
    t = 0.0
    rng = np.random.default_rng(1)
    for _ in range(200):  # random steps at random rates: time grows past many bin doublings
        dt = float(rng.exponential(0.5))
        bits = bits + np.array([rng.uniform(0, 10), rng.uniform(0, 100)]) * dt
        s.update(t, t + dt, bits)
        t += dt
    out = s.result(t)
    assert set(out) == {"a", "b"}
    for name, cap, total in (("a", 10.0, bits[0]), ("b", 100.0, bits[1])):
        assert 4 <= len(out[name]) <= 8
        assert sum(u * (b - a) for a, b, u in out[name]) * cap == pytest.approx(total, rel=1e-9)
        assert out[name][-1][1] == pytest.approx(t) and all(0 <= u <= 1 + 1e-9 for _, _, u in out[name])


def test_emulator_link_series_from_counter_samples():
    pytest.importorskip("pyroute2")
    from emulator.fidelity import Sample, link_series
    from tc_policies.netlink import PortCounters

    def sample(t, nbytes):
        return Sample(t, {("s", "p"): (t, 0.0, PortCounters(nbytes, 0, 0, 0, {}))}, (0, 0))

    got = link_series([sample(10.0, 0), sample(10.5, 625_000), sample(11.0, 625_000)], {("s", "p"): 1e7}, 10.0, 100)
    assert got == {"s:p": [(0.0, 0.005, 1.0), (0.005, 0.01, 0.0)]}


def railbed(*args):
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True)


def test_plot_command_and_no_plots(results, tmp_path):
    proc = railbed("plot", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.startswith("railbed: results_dir:"), proc.stderr
    proc = railbed("plot", str(results), "--color-by", "dscp")
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(results / "figures" / "timeline-tag-priority.csv")
    assert {r["color"] for r in rows if r["kind"] == "flow"} == {"DSCP 0", "DSCP 46"}
    proc = railbed(
        "simulate",
        "examples/scenarios/crosscheck-small.yaml",
        "--out",
        str(tmp_path / "np"),
        "--no-plots",
        "--scheduler",
        "fifo",
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "np" / "provenance.json").exists() and not (tmp_path / "np" / "figures").exists()
    assert RunResult.load(tmp_path / "np" / "fifo" / "result.json").link_series


def test_timeline_keeps_the_first_lanes_in_order():
    from railbed.results import ItemRecord

    r = RunResult("simulator", "j", "fifo", "c")
    for s in range(30):  # 30 servers x (gpu2, gpu10, nic0) = 90 lanes
        for dev in ("gpu10", "gpu2"):
            r.items[f"t{s}{dev}"] = ItemRecord(f"t{s}{dev}", "task", 0.0, 0.0, 1.0, server=s, device=dev)
        r.items[f"f{s}"] = ItemRecord(f"f{s}", "flow", 0.0, 0.5, 1.0, server=s, src_nic=0, dst_server=0, dscp=8)
    rows, nlanes = plots.timeline_rows(r, max_lanes=4)
    assert nlanes == 90
    assert [row[0] for row in rows] == ["h0 gpu2", "h0 gpu10", "h0 nic0", "h1 gpu2"]
    assert rows[2][5] == "DSCP 8"  # no coflow type: coloured by DSCP


def test_the_series_kernel_agrees_with_its_numpy_twin():
    from simulator.fluid.series import _spread, spread_reference

    rng = np.random.default_rng(7)
    for _ in range(40):
        links, nbins = int(rng.integers(1, 30)), int(rng.integers(2, 40))
        width = float(rng.uniform(0.1, 2.0))
        t0 = float(rng.uniform(0, width * nbins * 0.9))
        t1 = float(min(width * nbins, t0 + rng.exponential(width * 3)))
        if t1 <= t0:
            continue
        prev = rng.uniform(0, 100, links)
        bits = prev + np.where(rng.random(links) < 0.3, 0.0, rng.uniform(0, 50, links))  # idle links too
        a_bins = rng.uniform(0, 5, (links, nbins))
        b_bins = a_bins.copy()
        a_prev, b_prev = prev.copy(), prev.copy()
        _spread(t0, t1, bits, a_prev, a_bins, width)
        spread_reference(t0, t1, bits, b_prev, b_bins, width)
        assert np.allclose(a_bins, b_bins, rtol=1e-12, atol=1e-9) and np.array_equal(a_prev, b_prev)
        assert a_bins.sum() == pytest.approx(b_bins.sum()) and (a_bins - b_bins).sum() == pytest.approx(0, abs=1e-6)
