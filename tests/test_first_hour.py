"""A researcher's first hour without root (issue 46): honest statistics, listings, warnings for
values that are almost surely mistakes, errors that name what the user wrote."""

import math
from pathlib import Path

import pytest

from cli import main
from railbed import metrics, plots
from railbed.errors import SpecError
from railbed.results import ItemRecord, RunResult

ROOT = Path(__file__).resolve().parent.parent


def _result() -> RunResult:
    """Two flows between servers (1 ms, 3 ms) and three inside one (0 s: no host model)."""
    items = {
        "n1": ItemRecord("n1", "flow", 0.0, 0.0, 1e-3, server=0, dst_server=1),
        "n2": ItemRecord("n2", "flow", 0.0, 0.0, 3e-3, server=1, dst_server=0),
        **{f"l{i}": ItemRecord(f"l{i}", "flow", 0.0, 0.0, 0.0, server=0, dst_server=0) for i in range(3)},
    }
    return RunResult("simulator", "j", "fifo", "c", items=items, makespan=3e-3)


def test_fct_percentiles_count_only_flows_between_servers():
    r = _result()
    assert metrics.metric(r, "fct_p50") == pytest.approx(3e-3)  # all five: 0 s
    assert metrics.metric(r, "fct_p99") == pytest.approx(3e-3)
    assert metrics.metric(r, "fct_local_p99") == 0.0
    assert metrics.metric(r, "fct_all_p99") == pytest.approx(3e-3)
    assert metrics.metric(r, "flows") == 5
    text = r.summary()
    assert "5: 2 between servers, 3 inside one" in text
    assert "FCT (network)   median 3 ms, p99 3 ms" in text
    assert "0 s: no host model" in text


def test_comparison_table_fct_is_the_networks():
    from railbed.results import comparison_table

    table = comparison_table([_result()])
    assert "3 ms" in table.splitlines()[2].split("fifo", 1)[1]
    assert "flows between servers only" in table


def test_fct_cdf_leaves_out_free_flows_and_says_so(tmp_path):
    r = _result()
    rows = plots.fct_rows({"fifo": r})
    assert [row[1] for row in rows] == [1e-3, 3e-3] and {row[3] for row in rows} == {"network"}
    # timed by a host model, the same-server flows get their own (dashed) line
    r.items["l0"].end = 2e-3
    rows = plots.fct_rows({"fifo": r})
    assert {row[0] for row in rows if row[3] == "local"} == {"fifo (in server)"}
    assert plots.fct_cdf({"fifo": _result()}, tmp_path / "fct").exists()


A2A = """name: a2a3
cluster:
  servers: [{count: 1, gpus: 2, nic_rate: 100Gbit}]
  fabric: {type: single_switch}
job: {generator: all_to_all, args: {n: 3}}
schedulers: [fifo]
"""


def test_default_placement_sharing_a_gpu_is_warned_and_strict_refuses(tmp_path, capsys):
    sc = tmp_path / "a2a.yaml"
    sc.write_text(A2A)
    assert main(["simulate", str(sc), "--out", str(tmp_path / "o1"), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "railbed: warning: job.args: 3 unpinned endpoints on a cluster of 2 GPUs" in err
    assert "placement: 3 unpinned endpoints" in (tmp_path / "o1" / "fifo" / "summary.txt").read_text()
    assert main(["simulate", str(sc), "--out", str(tmp_path / "o2"), "--strict"]) == 2
    assert "job.args:" in capsys.readouterr().err and not (tmp_path / "o2").exists()
    # enough GPUs: no word
    sc.write_text(A2A.replace("gpus: 2", "gpus: 3"))
    assert main(["simulate", str(sc), "--out", str(tmp_path / "o3"), "--no-plots", "--strict"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_percentile_of_nothing_is_nan():
    assert math.isnan(metrics.metric(RunResult("simulator", "j", "fifo", "c"), "fct_p50"))


# ------------------------------------------------------------ listings, --version, check
def test_list_prints_every_registered_name_with_its_defaults(capsys):
    from railbed.backend import BACKENDS
    from schedulers import REGISTRY
    from workloads import GENERATORS

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in [*GENERATORS, *REGISTRY, *BACKENDS.names(), "dgx1-v100", "bf-3"]:
        assert any(line.startswith(f"{name} ") for line in out.splitlines()), name
    assert main(["list", "generators"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("all_to_all "))
    assert "endpoints" in lines[at] and "n=4, size=4MiB, compute=0.0, iterations=1" in lines[at + 1]
    assert main(["list", "schedulers"]) == 0
    assert "beta=0.1, mu=1.0" in capsys.readouterr().out  # dgtp's constructor defaults


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("railbed ")


def test_check_takes_a_scenario_as_a_dry_run(tmp_path, capsys):
    assert main(["check", str(ROOT / "examples" / "scenarios" / "llm-small.yaml")]) == 0
    out = capsys.readouterr().out
    assert "job llm-dp2-pp4-mb4: 128 tasks, 128 flows; schedulers fifo, tag-priority" in out
    assert "rate scale k = 1000 (given)" in out and "nothing was run or written" in out
    # a pin off the cluster: refused as a run would refuse it, nothing written
    bad = tmp_path / "bad.yaml"
    bad.write_text(A2A.replace("{n: 3}", "{n: 3}").replace("all_to_all", "hybrid_parallel").replace("n: 3", "dp: 4"))
    before = set(tmp_path.iterdir())
    assert main(["check", str(bad)]) == 2
    assert set(tmp_path.iterdir()) == before


# ------------------------------------------------------------ values that are almost surely mistakes
SLIP = """name: slip
cluster:
  servers: [{count: 2, gpus: 1, nic_rate: NIC}]
  fabric: {type: single_switch, latency: LAT}
job: {generator: hybrid_parallel, args: {dp: 2, gpus_per_server: 1, fwd: FWD, gradient: 1MB}}
schedulers: [fifo]
"""


def _slip(tmp_path, nic="100Gbit", lat="1us", fwd="1ms") -> str:
    path = tmp_path / "slip.yaml"
    path.write_text(SLIP.replace("NIC", nic).replace("LAT", lat).replace("FWD", fwd))
    return str(path)


@pytest.mark.parametrize(
    "nic, lat, fwd, field",
    [
        ("400", "1us", "1ms", "cluster.servers[0].nic_rate: 400 bit/s, below 1 Mbit/s"),
        ("100Gbit", "1", "1ms", "cluster.fabric.latency: 1 s per link"),
        ("100Gbit", "1us", "1", "job.args.fwd: 1 s of compute per task"),
    ],
)
def test_doubtful_values_warn_one_line_each_and_strict_refuses(tmp_path, capsys, nic, lat, fwd, field):
    sc = _slip(tmp_path, nic, lat, fwd)
    assert main(["check", sc]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "warning" in line] == [f"railbed: warning: {field}" + err[0].split(field)[1]]
    assert main(["check", sc, "--strict"]) == 2
    assert field.split(":")[0] in capsys.readouterr().err
    assert main(["simulate", sc, "--strict", "--out", str(tmp_path / "o")]) == 2 and not (tmp_path / "o").exists()


def test_plausible_values_say_nothing(tmp_path, capsys):
    assert main(["check", _slip(tmp_path), "--strict"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_makespan_a_million_times_its_bound_is_doubted():
    from railbed.doubts import result_doubts
    from railbed.spec import ClusterSpec

    cluster = ClusterSpec.rail_optimized(servers=2, rails=1, spines=1, nic_rate=1e9)
    r = RunResult("simulator", "j", "fifo", "c")
    r.items["f"] = ItemRecord("f", "flow", 0.0, 0.0, 1.0, server=0, dst_server=1, size=1000)
    r.makespan = 1.0  # 8000 bits over 2 Gbit/s: 4 us; 1 s is 250,000 times that
    assert result_doubts(r, cluster, "fifo: makespan") == []
    r.makespan = 10.0  # 2.5 million times
    (d,) = result_doubts(r, cluster, "fifo: makespan")
    assert d.field == "fifo: makespan" and "2.5e+06 times" in d.message
    r.items["t"] = ItemRecord("t", "task", 0.0, 0.0, 9.0)  # a 9 s task explains it
    assert result_doubts(r, cluster, "fifo: makespan") == []


def test_check_of_a_cluster_file_warns_too(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("servers: [{count: 2, gpus: 1, nic_rate: 1e5}, {nic_rate: 1e5}]\nfabric: {type: single_switch}\n")
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "servers[0].nic_rate: 100 kbit/s" in err and "servers[1].nic_rate" in err and err.count("warning") == 2
    assert main(["check", str(path), "--strict"]) == 2


# ------------------------------------------------------------ errors in the terms the user wrote
HP = """name: hp
cluster:
  servers: [{count: 4, gpus: GPUS, nics: GPUS, nic_rate: 100Gbit}]
  fabric: {type: rail_optimized, spines: 2}
job: {generator: GEN, args: ARGS}
schedulers: [fifo]
"""


@pytest.mark.parametrize(
    "gpus, gen, args, message",
    [
        (8, "hybrid_parallel", "{dp: 4, pp: 16, gpus_per_server: 8}",
         "job.args: hybrid_parallel {dp: 4, pp: 16, gpus_per_server: 8} needs dp x pp x tp = 64 GPUs on 8 servers"
         " (8 per server), the cluster has 32 GPUs on 4 servers"),
        (4, "hybrid_parallel", "{dp: 4, pp: 4, gpus_per_server: 8}",
         "needs dp x pp x tp = 16 GPUs on 2 servers (8 per server), the cluster has 16 GPUs on 4 servers (up to 4"),
        (2, "gnn_fullgraph", "{gpus: 16, gpus_per_server: 2, max_edges: 2000}",
         "job.args: gnn_fullgraph {gpus: 16, gpus_per_server: 2} needs gpus = 16 GPUs on 8 servers"),
        (2, "moe_training", "{dp: 2, pp: 2, tp: 4, gpus_per_server: 8, layers: 2, experts: 2, topk: 1, "
         "hidden: 64, ffn: 64, ep: 2, seq: 8, mbs: 1, microbatches: 2}",
         "job.args: moe_training {dp: 2, pp: 2, tp: 4, gpus_per_server: 8} needs dp x pp x tp = 16 GPUs on 2 servers"),
    ],
)  # fmt: skip
def test_a_job_too_large_for_the_cluster_names_the_args(tmp_path, capsys, gpus, gen, args, message):
    path = tmp_path / "hp.yaml"
    path.write_text(HP.replace("GPUS", str(gpus)).replace("GEN", gen).replace("ARGS", args))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "endpoints" not in err


# ------------------------------------------------------------ the Python API page
def test_python_api_page_runs_as_written(monkeypatch):
    import doctest

    monkeypatch.chdir(ROOT)
    failed, tried = doctest.testfile(str(ROOT / "docs" / "python-api.md"), module_relative=False)
    assert tried >= 20 and failed == 0


# ------------------------------------------------------------ the analysis switch and the results level
SMALL = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"


def test_results_levels_and_the_analysis_switch(tmp_path):
    out = str(tmp_path / "s")
    assert main(["simulate", str(SMALL), "--out", out, "--results", "summary", "--analysis", "off"]) == 0
    saved = RunResult.load(tmp_path / "s" / "fifo" / "result.json")
    assert saved.items == {} and saved.events == [] and saved.analysis == {} and saved.makespan > 0
    assert "item records left out (results: summary)" in saved.notes[-1]
    assert not (tmp_path / "s" / "figures").exists() and not (tmp_path / "s" / "fifo" / "flows.csv").exists()
    assert main(["simulate", str(SMALL), "--out", str(tmp_path / "f"), "--results", "flows"]) == 0
    run = tmp_path / "f" / "fifo"
    assert (run / "flows.csv").exists() and not (run / "trace.json").exists()
    assert not (tmp_path / "f" / "figures").exists()
    full = RunResult.load(run / "result.json")
    assert full.items and full.analysis.get("max_speedup")


def test_a_scenario_sets_analysis_and_results(tmp_path):
    import yaml

    from scenarios.runner import Scenario, simulate_scenario

    data = yaml.safe_load(SMALL.read_text()) | {"analysis": False, "results": "summary"}
    data["cluster"] = str(ROOT / "examples" / "rail-4x4.yaml")
    sc = Scenario.from_dict(data)
    said = []
    import scenarios.runner as runner

    old, runner.LARGE_RESULTS = runner.LARGE_RESULTS, 0
    try:
        (r, _) = simulate_scenario(sc, tmp_path / "o", echo=said.append)
    finally:
        runner.LARGE_RESULTS = old
    assert r.analysis == {} and any(line.startswith("writing fifo's results: about") for line in said)
    with pytest.raises(Exception, match="results"):
        Scenario.from_dict(data | {"results": "everything"})


def test_estimated_sizes_grow_with_records():
    from railbed.results import estimated_bytes

    r = _result()
    small, big = estimated_bytes(r, "all"), estimated_bytes(r, "summary")
    assert set(small) == {"result.json", "csv", "trace.json"} and small["result.json"] == 5 * 690
    assert set(big) == {"result.json"} and set(estimated_bytes(r, "flows")) == {"result.json", "csv"}


# ------------------------------------------------------------ figures
def test_a_coflow_type_has_one_colour_whatever_else_is_drawn():
    assert plots._colors(["task", "PP"])["PP"] == plots._colors(["DP", "EP", "PP", "task"])["PP"]
    assert plots.category_color("compute") == plots.category_color("task")  # critical path and timeline
    odd = plots.category_color("my-type")
    assert odd == plots.category_color("my-type") and odd != plots.category_color("other-type")


def test_iteration_axis_shows_small_differences():
    rows = [["fifo", 0, 1.00], ["fifo", 1, 1.00], ["mine", 0, 0.98], ["mine", 1, 0.98]]
    lo, hi = plots.iteration_limits(rows)
    assert 0.9 < lo < 0.98 and 1.0 < hi < 1.02  # the 2 % difference fills most of the axis
    assert plots.iteration_limits([["a", 0, 1.0], ["b", 0, 0.3]])[0] == 0.0  # a large spread: from 0


def test_comparison_has_a_relative_column():
    from railbed.results import comparison_table

    a, b = _result(), _result()
    b.scheduler, b.makespan = "mine", 2.94e-3
    lines = comparison_table([a, b]).splitlines()
    assert "vs first" in lines[0] and "baseline" in lines[2] and "-2.0 %" in lines[3]
    assert "makespan against fifo's" in lines[4]


def test_speedup_and_packet_figures(tmp_path):
    from railbed.compare_plots import packet_ports, packet_rows, speedup, speedup_rows

    a, b = _result(), _result()
    b.makespan = 2e-3
    assert speedup_rows({"fifo": a, "mine": b}) == [["fifo", 3e-3, 1.0], ["mine", 2e-3, pytest.approx(1.5)]]
    assert (
        speedup({"fifo": a, "mine": b}, tmp_path / "speedup").exists() and speedup({"fifo": a}, tmp_path / "x") is None
    )
    assert packet_ports(a, tmp_path / "p") is None  # a fluid run: no ports
    a.backend = "packet"  # its backend's own counters (RunResult.own)
    a.counters["packet"] = {"drops": 7, "ports": {
        "rail0:rail0-eth1": {"packets": 10, "drops": 0, "marks": 0, "queue_peak_packets": 3, "queue_peak_bytes": 4500},
        "h0:h0-eth0": {"packets": 20, "drops": 7, "marks": 1, "queue_peak_packets": 9, "queue_peak_bytes": 13500},
    }}  # fmt: skip
    assert [row[0] for row in packet_rows(a)] == ["h0:h0-eth0", "rail0:rail0-eth1"]
    assert packet_ports(a, tmp_path / "p").exists()
    a.backend = "fluid"  # another backend's counters are not this run's
    assert packet_rows(a) == [] and packet_ports(a, tmp_path / "q") is None


def test_a_cut_timeline_names_the_lanes_it_leaves_out(tmp_path):
    r = RunResult("simulator", "j", "fifo", "c", makespan=1.0)
    for s in range(60):
        r.items[f"t{s}"] = ItemRecord(f"t{s}", "task", 0.0, 0.0, 1.0, server=s, device="gpu0")
    rows, lanes = plots.timeline_rows(r)
    assert lanes == 60 and plots._missing(r, {row[0] for row in rows}) == "12 lanes of h48-h59"
    plots.timeline(r, tmp_path / "timeline")


# ------------------------------------------------------------ names, wording, exports
def test_ports_are_said_in_words():
    from railbed.topology import port_label

    assert port_label("h0:h0-eth1") == "server 0, NIC 1, egress"
    assert port_label("rail0:rail0-sp1") == "rail0 to spine 1"
    assert port_label("spine1:spine1-eth0") == "spine 1 to switch 0"
    assert port_label("rail0:rail0-eth2") == "rail0's port 2, towards a server"
    assert port_label("odd") == "odd"
    r = _result()
    r.links = {"h0:h0-eth1": {"rate": 1e11, "peak_util": 0.5}}
    text = r.summary()
    assert "peak link       h0:h0-eth1 (server 0, NIC 1, egress): highest peak, 50% of 100 Gbit/s" in text
    assert "(model time)" in text.splitlines()[0] and "k = 1" not in text  # a simulated run has no k


def test_wording_of_rates_and_sizes():
    from railbed.errors import SpecError
    from railbed.machine import rate_problems
    from railbed.spec import ClusterSpec
    from railbed.topology import Topology
    from railbed.units import RateScale, parse_rate, parse_size

    cluster = ClusterSpec.rail_optimized(servers=2, rails=1, spines=1, nic_rate=400e9)
    (field, why), *_ = rate_problems(Topology(cluster), RateScale(1e9))
    assert "the slowest link (model 400 Gbit/s) 400 bit/s real" in why
    with pytest.raises(SpecError) as size:
        parse_size("4mb", "job.args.size")
    with pytest.raises(SpecError) as rate:
        parse_rate("4mbps", "nic_rate")
    assert "tc" not in str(size.value) and "tc reads bps" in str(rate.value)


def test_flows_csv_names_columns_as_the_json_and_rounds(tmp_path):
    from railbed.export import FLOW_COLUMNS, flow_rows

    r = _result()
    r.items["n1"].end = 1e-3 + 1e-17 * 3  # float noise
    r.items["n1"].spine, r.items["n1"].rate = 1, 1.23e10 + 0.4
    row = dict(zip(FLOW_COLUMNS, flow_rows(r)[0]))
    assert "src_server" not in FLOW_COLUMNS and row["server"] == 0 and row["dst_server"] == 1
    assert row["spine"] == 1 and row["parent"] == "" and row["rate_bps"] == 12300000000
    assert row["end_s"] == 1e-3 and row["fct_s"] == 1e-3


def test_provenance_records_default_seeds():
    from scenarios.catalog import default_seeds

    doc = {"job": {"generator": "gnn_fullgraph", "args": {"gpus": 8}}, "schedulers": ["fifo", {"name": "dgtp"}]}
    assert default_seeds(doc) == {"job.args.seed": 0, "schedulers[1].args.seed": 0}
    doc["job"]["args"]["seed"] = 3  # given: provenance's find_seeds has it already
    assert "job.args.seed" not in default_seeds(doc)


def test_readme_lists_every_scheduler_and_standard_figure():
    from schedulers import REGISTRY

    text = (ROOT / "README.md").read_text()
    assert [n for n in REGISTRY if f"`{n}`" not in text] == []
    from railbed import compare_plots

    doc = plots.__doc__ + compare_plots.__doc__
    figures = {w.strip("`") for w in doc.split() if w.startswith("``") and w.endswith(".png``")}
    assert len(figures) >= 12 and [f for f in figures if f"`{f}`" not in text] == []


# ------------------------------------------------------------ local sweeps
def test_a_local_sweep_runs_without_ray_and_only_narrows_it(tmp_path, monkeypatch):
    from scenarios import sweep as sweep_module
    from scenarios.sweep import Sweep, run_sweep

    monkeypatch.setattr(sweep_module, "start_ray", lambda *a, **k: pytest.fail("Ray started for a local sweep"))
    data = {
        "name": "t",
        "scenario": str(ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"),
        "axes": {"rate": ["50Gbit", "100Gbit"], "job.args.gradient": ["1MB", "2MB"]},
        "metrics": ["makespan"],
    }
    sw = Sweep.from_dict(data, ROOT)
    lines = []
    rows = run_sweep(sw, tmp_path / "a", echo=lines.append, cpus=2, only=["rate=50Gbit"])
    assert {r["rate"] for r in rows} == {"50Gbit"} and len(rows) == 2 * 2  # 2 points x 2 schedulers
    assert all(r["status"] == "ok" for r in rows) and "on this machine" in lines[0]
    rows1 = run_sweep(sw, tmp_path / "b", echo=lines.append, cpus=1, only=["rate=50Gbit", "gradient=1MB"])
    assert len(rows1) == 2 and rows1[0]["makespan"] in [r["makespan"] for r in rows]  # in-process: the same
    with pytest.raises(SpecError, match="--only"):
        run_sweep(sw, tmp_path / "c", echo=lines.append, only=["rate=7Gbit"])


def test_load_narrows_an_offered_load_scenario(tmp_path, capsys):
    path = tmp_path / "loads.yaml"
    cluster = ROOT / "scenarios" / "leo" / "cluster-f-nic-off-path.yaml"
    path.write_text(
        f"name: kv\ncluster: {cluster}\njob: {{generator: requests, args: {{preset: kvs-c, requests: 30}}}}\n"
        "loads: [1e5, 2e5, 4e5]\nschedulers: [fifo]\n"
    )
    out = tmp_path / "o"
    assert main(["simulate", str(path), "--out", str(out), "--load", "2e5", "--results", "summary"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["fifo@200000"]
    assert main(["simulate", str(path), "--out", str(tmp_path / "x"), "--load", "3e5"]) == 2
    assert "--load: 300000 is not one of the scenario's loads (100000, 200000, 400000)" in capsys.readouterr().err


def test_a_users_module_shadowing_a_railbed_package_is_named(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "workloads.py").write_text("x = 1\n")  # a notebook's own workloads.py
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "from cli import version; print(version())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("railbed ") and lines[1:] == [
        f"warning: workloads imports from {tmp_path / 'workloads.py'}, not railbed's (rename yours)"
    ], out


def test_a_sweep_figure_per_run_and_other_axes(tmp_path):
    from railbed.compare_plots import sweep_figure, sweep_rows

    table = [
        {"point": f"p{r}{g}", "status": "ok", "rate": r, "job.args.gradient": g, "seed": 1, "run": run, "makespan": m}
        for (r, g, run, m) in [("50Gbit", "1MB", "fifo", 2.0), ("100Gbit", "1MB", "fifo", 1.0),
                               ("50Gbit", "2MB", "fifo", 4.0), ("100Gbit", "2MB", "fifo", 2.0)]
    ]  # fmt: skip
    table.append({"point": "bad", "status": "error", "rate": "25Gbit", "job.args.gradient": "1MB", "makespan": None})
    rows = sweep_rows(table, ["rate", "job.args.gradient", "seed"], "makespan")
    assert rows == [
        ["fifo, gradient=1MB", "50Gbit", 0, 2.0], ["fifo, gradient=1MB", "100Gbit", 1, 1.0],
        ["fifo, gradient=2MB", "50Gbit", 0, 4.0], ["fifo, gradient=2MB", "100Gbit", 1, 2.0],
    ]  # fmt: skip
    assert sweep_figure(table, ["rate", "job.args.gradient", "seed"], "makespan", tmp_path / "s").exists()
    assert sweep_rows(table[:1], ["rate"], "makespan") == []  # nothing varies


def test_timeline_draws_rare_classes_on_top(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn = []
    real = Axes.broken_barh
    monkeypatch.setattr(Axes, "broken_barh", lambda ax, spans, y, **kw: drawn.append(kw) or real(ax, spans, y, **kw))
    rows = [["h0 nic0", f"e{i}", "flow", i, i + 1, "EP", "", "EP", 1] for i in range(2500)]
    rows += [["h0 nic0", "d", "flow", 3, 9, "DP", "", "DP", 1], ["h0 gpu0", "t", "task", 0, 1, "task", "", "", ""]]
    plots.draw_timeline(rows, tmp_path / "t.png", "t")
    order = [plots.category_color("EP") == kw["facecolors"] for kw in drawn]
    assert drawn[0]["facecolors"] == plots.category_color("task") and order[1] and not order[2]  # EP under DP
    assert all(kw["edgecolor"] == "none" for kw in drawn)  # no white edges over 2,500 bars
