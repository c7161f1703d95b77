"""Flow traces with arrivals (issue 44, item 4): the coflow-benchmark and CSV importers, their
rack-to-server rule, same-rack flows, errors naming the line and field, the scenario and CLI
entries, and what the analysis of a replay says (no compute)."""

from pathlib import Path

import pytest
import yaml

from cli import main
from railbed.backend import RunOptions, backend
from railbed.errors import SpecError
from railbed.job import Job
from railbed.results import analysis_lines
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from scenarios.runner import Scenario
from schedulers import by_name
from workloads.traces import MIB, RACK_RATE, import_trace, split_bytes, trace_cluster

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "traces" / "tiny-coflow-benchmark.txt"


def cluster(n: int, rate: float = RACK_RATE, **server) -> ClusterSpec:
    doc = trace_cluster(n, rate)
    doc["servers"][0].update(server)
    return ClusterSpec.from_dict(doc)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ coflow-benchmark
def test_tiny_trace_gives_one_flow_per_mapper_and_reducer_rack_with_its_arrival_and_coflow():
    job = import_trace(TINY)
    assert not job.tasks  # no dummy compute
    got = {f.id: (f.src, f.dst, f.size, f.coflow, f.at) for f in job.flows}
    assert got == {
        "c1.m0.r2": ("rack0.up", "rack2.down", 2 * MIB, "1", 0.0),  # 4 MB over 2 mappers
        "c1.m1.r2": ("rack1.up", "rack2.down", 2 * MIB, "1", 0.0),
        "c1.m0.r3": ("rack0.up", "rack3.down", MIB, "1", 0.0),
        "c1.m1.r3": ("rack1.up", "rack3.down", MIB, "1", 0.0),
        "c2.m2.r2": ("rack2.up", "rack2.down", MIB, "2", 0.010),  # a rack to itself: still two servers
        "c3.m0.r0": ("rack0.up", "rack0.down", MIB, "3", 0.025),
        "c3.m1.r0": ("rack1.up", "rack0.down", MIB, "3", 0.025),
        "c3.m3.r0": ("rack3.up", "rack0.down", MIB, "3", 0.025),
    }
    pins = {name: ep.pin.server for name, ep in job.endpoints.items()}
    assert pins["rack2.up"] == 2 and pins["rack2.down"] == 4 + 2  # split: rack i sends on i, receives on R + i


def test_mappers_and_reducers_in_one_rack_are_coalesced_as_coflowsim_does(tmp_path):
    path = write(tmp_path, "t.txt", "3 1\n7 5 3 0 0 1 2 2:1.0 2:2.0\n")
    job = import_trace(path)
    sizes = {f.id: f.size for f in job.flows}
    assert sizes == {"c7.m0.r2": 3 * MIB // 2, "c7.m1.r2": 3 * MIB // 2}  # 3 MB summed, over 2 mapper racks
    assert {f.at for f in job.flows} == {0.005}


def test_split_keeps_every_byte_exactly_and_coflowsim_rounds_up_to_whole_mib():
    assert split_bytes(1.0, 3) == [349526, 349525, 349525] and sum(split_bytes(1.0, 3)) == MIB
    assert split_bytes(1.0, 3, "coflowsim") == [MIB, MIB, MIB]  # rounded up to 3 MiB: 1 MiB per mapper
    assert split_bytes(6.0, 3, "coflowsim") == split_bytes(6.0, 3) == [2 * MIB] * 3  # a multiple: the same


def test_rack_layout_refuses_a_rack_sending_to_itself_naming_the_line(tmp_path):
    with pytest.raises(SpecError) as err:
        import_trace(TINY, args={"layout": "rack"})
    assert err.value.field == "tiny-coflow-benchmark.txt:3.reducers" and "sends to itself" in err.value.message
    path = write(tmp_path, "ok.txt", "2 1\n1 0 1 0 1 1:1.0\n")
    job = import_trace(path, args={"layout": "rack"})
    assert [(ep.pin.server) for ep in job.endpoints.values()] == [0, 1]


def test_a_cluster_with_fewer_servers_than_the_layout_needs_is_refused():
    import_trace(TINY, cluster=cluster(8))
    with pytest.raises(SpecError) as err:
        import_trace(TINY, cluster=cluster(7))
    assert err.value.field == "job.trace" and "need 8 servers" in err.value.message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("4\n", "t.txt:1"),
        ("4 2\n1 0 1 0 1 1:1.0\n", "t.txt:1.coflows"),
        ("4 1\n1 0 x 0 1 1:1.0\n", "t.txt:2.mappers"),
        ("4 1\n1 0 2 0\n", "t.txt:2.mappers[1]"),
        ("4 1\n1 0 1 9 1 1:1.0\n", "t.txt:2.mappers[0]"),
        ("4 1\n1 0 1 0 1 1:lots\n", "t.txt:2.reducers[0].MB"),
        ("4 1\n1 -5 1 0 1 1:1.0\n", "t.txt:2.arrival"),
        ("4 1\n1 0 1 0 1 1:1.0 extra\n", "t.txt:2"),
        ("4 2\n1 0 1 0 1 1:1.0\n1 3 1 0 1 1:1.0\n", "t.txt:3.id"),
    ],
)
def test_bad_coflow_benchmark_lines_name_the_line_and_field(tmp_path, text, field):
    with pytest.raises(SpecError) as err:
        import_trace(write(tmp_path, "t.txt", text))
    assert err.value.field == field


# ------------------------------------------------------------------ CSV
CSV = "src,dst,bytes,start,coflow\n0,1,1MB,0,a\n1:1,2:1,2000000,1ms,a\n2,0,500000,0.002,\n"


def test_csv_flows_get_their_release_coflow_and_server_gpu_endpoints(tmp_path):
    job = import_trace(write(tmp_path, "f.csv", CSV), cluster=cluster(3, 1e9, gpus=2, nics=2))
    assert not job.tasks
    got = [(f.src, f.dst, f.size, f.at, f.coflow) for f in job.flows]
    assert got == [
        ("h0.gpu0", "h1.gpu0", 1_000_000, 0.0, "a"),
        ("h1.gpu1", "h2.gpu1", 2_000_000, 0.001, "a"),
        ("h2.gpu0", "h0.gpu0", 500_000, 0.002, None),
    ]
    assert job.endpoints["h1.gpu1"].pin.nic == 1  # GPU g on NIC g % nics


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("src,dst,bytes,start\n0,1,1,0\n", "f.csv:1"),
        ("src,dst,bytes,start,coflow,x\n", "f.csv:1"),
        ("src,dst,bytes,start,coflow\n0,1,1\n", "f.csv:2"),
        ("src,dst,bytes,start,coflow\n0,1,1,0,\nzero,1,1,0,\n", "f.csv:3.src"),
        ("src,dst,bytes,start,coflow\n0,5,1,0,\n", "f.csv:2.dst"),  # the cluster has 3 servers
        ("src,dst,bytes,start,coflow\n0,1,-1,0,\n", "f.csv:2.bytes"),
        ("src,dst,bytes,start,coflow\n0,1,1,soon,\n", "f.csv:2.start"),
        ("src,dst,bytes,start,coflow\n1,1,1,0,\n", "f.csv:2.dst"),  # to itself
        ("src,dst,bytes,start,coflow\n1:0,1:1,1,0,\n", "f.csv:2.dst"),  # same server, no host model: 0 s
    ],
)
def test_bad_csv_rows_name_the_line_and_field(tmp_path, text, field):
    with pytest.raises(SpecError) as err:
        import_trace(write(tmp_path, "f.csv", text), cluster=cluster(3, gpus=2))
    assert err.value.field == field


# ------------------------------------------------------------------ runs
def test_a_same_rack_flow_takes_its_bytes_over_the_rack_port_rate_not_0_s(tmp_path):
    """A coflow from rack 2 to itself, released at 10 ms: it crosses rack 2's uplink (server 2)
    and downlink (server 3 + 2) like any other flow, as in CoflowSim's port model."""
    job = import_trace(write(tmp_path, "self.txt", "3 1\n9 10 1 2 1 2:1.0\n"))
    for name in ("fluid", "fluid-reference"):
        res = backend(name).run(job, by_name("fifo"), cluster(6), RunOptions(analysis=False))
        rec = res.items["c9.m2.r2"]
        assert rec.start == 0.010 and (rec.server, rec.dst_server) == (2, 5)  # two servers: through the switch
        assert rec.end - rec.start == pytest.approx(8 * wire_bytes(MIB) / RACK_RATE, rel=1e-9)
        assert not any("same-server" in n for n in res.notes)


def test_the_analysis_of_a_replay_claims_no_compute():
    job = import_trace(TINY)
    for name in ("fluid", "fluid-rules"):
        a = backend(name).run(job, by_name("fifo"), cluster(8), RunOptions(analysis=True)).analysis
        assert a["network_free_makespan"] == pytest.approx(0.025)  # the last release: flows take 0 s
        assert a["max_speedup"] is None  # no compute: no bound on what a scheduler could gain
        assert a["critical_path"]["time"]["compute"] == 0.0 and a["critical_path"]["time"]["release"] == 0.025
        text = "\n".join(analysis_lines(a))
        assert "no compute" in text and "max speedup" not in text
        assert any("no compute" in n for n in a["notes"])


def test_a_scenario_names_a_trace_relative_to_its_file(tmp_path):
    doc = {
        "name": "tiny",
        "cluster": trace_cluster(8),
        "job": {"trace": str(TINY.relative_to(ROOT)), "format": "coflow-benchmark", "args": {"layout": "split"}},
        "schedulers": ["fifo"],
    }
    sc = Scenario.from_dict(doc, base=ROOT)
    assert len(sc.job.flows) == 8
    doc["job"]["args"] = {"layuot": "split"}
    with pytest.raises(SpecError) as err:
        Scenario.from_dict(doc, base=ROOT)
    assert err.value.field == "job.args.layuot"
    doc["job"] = {"trace": "tiny.txt", "generator": "x"}
    with pytest.raises(SpecError) as err:
        Scenario.from_dict(doc, base=ROOT)
    assert err.value.field == "job.generator"
    doc["job"] = {"trace": "examples/traces/none.txt"}
    with pytest.raises(SpecError) as err:
        Scenario.from_dict(doc, base=ROOT)
    assert err.value.field == "job.trace" and "no trace file" in err.value.message
    doc["cluster"] = trace_cluster(4)
    doc["job"] = {"trace": str(TINY.relative_to(ROOT))}
    with pytest.raises(SpecError) as err:
        Scenario.from_dict(doc, base=ROOT)
    assert err.value.field == "job.trace"


def test_import_trace_command_writes_a_job_and_a_cluster_that_fit(tmp_path, capsys):
    out, cl = tmp_path / "job.json", tmp_path / "cluster.yaml"
    assert main(["import-trace", str(TINY), "-o", str(out), "--cluster", str(cl)]) == 0
    job = Job.load(out)
    spec = ClusterSpec.from_dict(yaml.safe_load(cl.read_text()))
    assert len(job.flows) == 8 and len(spec.servers) == 8 and spec.servers[0].nic_rates == (RACK_RATE,)
    assert main(["import-trace", str(TINY), "-o", str(tmp_path / "no.json"), "--layout", "rack"]) == 2
    assert not (tmp_path / "no.json").exists()
    assert "tiny-coflow-benchmark.txt:3.reducers" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["fluid", "fluid-reference"])
def test_the_example_replay_sebf_serves_the_small_coflow_first(name):
    """examples/scenarios/coflow-trace.yaml. Coflow 2 (1 MiB, rack 2 to itself, released at
    10 ms) shares rack 2's downlink with coflow 1's two flows into rack 2 (each over 1.3 MiB
    left then): fair sharing gives it a third of the port for its whole life, 3 T; SEBF
    (Gamma T, the smallest) the whole port, T. Coflows 1 and 3 end as under fair sharing, so
    the mean CCT drops by 2T/3."""
    from railbed.metrics import coflow_completion_times
    from schedulers import make

    sc = Scenario.load(ROOT / "examples" / "scenarios" / "coflow-trace.yaml")
    t = 8 * wire_bytes(MIB) / RACK_RATE
    cct = {}
    for spec in sc.schedulers:
        res = backend(name).run(sc.job, make(spec), sc.cluster, RunOptions(analysis=False))
        cct[spec.run_label] = coflow_completion_times(res)
    assert cct["fifo"]["2"] == pytest.approx(3 * t, rel=1e-9)
    for label in ("sebf", "sebf-greedy"):
        assert cct[label]["2"] == pytest.approx(t, rel=1e-5)
        # to what a held flow's floor rate (1e-6 of a port) moves: well under a microsecond here
        assert cct[label]["1"] == pytest.approx(cct["fifo"]["1"], abs=1e-6)
        assert cct[label]["3"] == pytest.approx(cct["fifo"]["3"], abs=1e-6)
        mean = {k: sum(v.values()) / 3 for k, v in cct.items()}
        assert mean["fifo"] - mean[label] == pytest.approx(2 * t / 3, rel=1e-4)
