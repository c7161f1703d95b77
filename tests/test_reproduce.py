"""The reproduction report: claims files, bands and verdicts, labels, notes, REPRODUCTION.md's block.

The report generator runs on tiny claims files in a temporary papers
directory; the committed claims files are checked for form (they load,
their notes type no measurement, their claim texts do not describe the
run, every seed system has a row, every unstated value is what runs).
``tests/test_reproduction_md.py`` regenerates the committed quick tables."""

import math
import re
from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.metrics import metric
from railbed.results import RunResult
from scenarios.claims import Band, fmt, load_claims, verdict
from scenarios.reproduce import (
    BEGIN,
    END,
    PAPERS,
    fidelity,
    render_note,
    reproduce,
    reproduce_paper,
    room,
    write_block,
)
from simulator.packet import engine as packet_engine

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"
HEAD = "| claim | ran | paper | railbed | verdict | room (baseline) | fidelity | command |"

CLAIMS = f"""
title: a tiny paper
claims:
  - id: prio
    claim: priority helps
    paper: {{value: -10, unit: '%', source: Fig. 1}}
    scenario: {SCENARIO}
    scheduler: tag-priority
    relative_to: fifo
    metric: makespan
    quick: {{job.args.gradient: 1MB}}
    experiment: one run of both
    note: 'railbed {{value}}; FIFO took {{run:fifo.makespan}}, {{prio.value}} again, {{fidelity:fifo.drops}}'
  - id: fifo-time
    claim: FIFO makespan
    paper: {{value: 1, unit: us, source: Table 2}}
    scenario: {SCENARIO}
    scheduler: fifo
    metric: makespan
    quick: {{job.args.gradient: 1MB}}
    experiment: one run of both
  - id: agree
    claim: emulator agrees
    paper: {{value: 0, unit: '%', source: ours}}
    scenario: {SCENARIO}
    backend: crosscheck
    metric: makespan_rel
  - claim: an outside system
    paper: {{value: 2, unit: x}}
    not_reproduced: not here
"""

ROW = re.compile(r"^\| (.+) \| (.+) \| (.+) \| (.+) \| (.+) \| (.+) \| (.+) \| `(.+)` \|$")


def rows_of(markdown: str, section: str) -> list[tuple]:
    body = markdown.split(f"### {section}", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0] == HEAD
    return [ROW.match(line).groups() for line in lines[1:]]


def test_report_from_a_tiny_claims_file(tmp_path):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(CLAIMS)
    md = tmp_path / "REPRODUCTION.md"
    md.write_text(f"# x\n\nbefore\n{BEGIN}\nold typed table\n{END}\nafter\n")
    out = tmp_path / "out"
    report = reproduce("all", out, quick=True, echo=lambda _: None, write=md, claims_dir=papers,
                       papers=("platform", "dgtp"))  # fmt: skip
    text = report.read_text()
    rows = rows_of(text, "dgtp")
    assert [r[0] for r in rows] == ["priority helps", "FIFO makespan", "emulator agrees", "an outside system"]
    [run_dir] = list((out / "dgtp").iterdir())  # both simulated rows read one run (one experiment)
    runs = {n: RunResult.load(run_dir / n / "result.json") for n in ("fifo", "tag-priority")}
    change = 100 * (metric(runs["tag-priority"], "makespan") / metric(runs["fifo"], "makespan") - 1)
    assert rows[0][3] == f"{change:+.1f} %"
    assert rows[0][4] == "quick: no verdict"  # a quick section is a smoke test
    assert rows[0][2] == "-10 % (Fig. 1); holds in [-20.0 %, -5.0 %]"  # 10 points, and half the effect
    # the label is generated from the run: the quick override shows, the GPUs are the job's
    assert rows[0][1] == "dp 2 x pp 4 x tp 1 (8 GPUs), 2 microbatches, 1 iteration; simulated; quick"
    assert rows[1][4] == "quick: no verdict" and rows[1][6] == "simulated"
    assert rows[2][4] == "skipped" and "--emulate" in rows[2][7] and rows[2][1] == "-"
    assert rows[3][4] == "not reproduced here" and rows[3][6] == "not here"
    assert rows[0][7] == f"railbed simulate dgtp/{run_dir.name}/scenario.yaml"
    # notes take their numbers from the run; a report without the field reads n/a
    fifo = metric(runs["fifo"], "makespan")
    assert f"railbed {change:+.1f} %; FIFO took {fmt('s', fifo)}, {change:+.1f} % again, n/a" in text
    sc = (run_dir / "scenario.yaml").read_text()
    assert "gradient: 1MB" in sc and "nic_rate" in sc
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).exists()
    assert "Not built yet: no `scenarios/platform/claims.yaml`" in text
    new = md.read_text()
    assert "old typed table" not in new and new.startswith("# x\n\nbefore\n") and new.endswith(f"{END}\nafter\n")
    assert "<!-- reproduce:section dgtp --quick -->" in new and "`railbed reproduce dgtp --quick`" in new
    assert "Made with `railbed reproduce dgtp --quick`; without --emulate" in new
    assert "figures" not in new.lower().split(BEGIN)[1]  # the block has no figures
    # another flag set is its own section; the quick one stays
    write_block(md, [("dgtp", "a tiny paper", [])], " --emulate")
    both = md.read_text()
    assert "<!-- reproduce:section dgtp --quick -->" in both and "<!-- reproduce:section dgtp --emulate -->" in both


@pytest.mark.parametrize(
    "claim, field",
    [
        ("{claim: x, paper: y, scenario: nope.yaml, metric: makespan}", "claims[0].scenario"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: speed}}", "claims[0].metric"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan_rel}}", "claims[0].metric"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, backend: gpu}}", "claims[0].backend"),
        (f"{{claim: x, scenario: {SCENARIO}, metric: makespan}}", "claims[0].paper"),
        (
            f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, kind: direction, bound: {{most: 1}}}}",
            "claims[0].bound",
        ),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, colour: red}}", "claims[0].colour"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, set: [1]}}", "claims[0].set"),
        (
            f"{{claim: x, paper: {{value: 2, unit: x}}, scenario: {SCENARIO}, metric: makespan}}",
            "claims[0].relative_to",
        ),
        (
            f"{{claim: x, paper: {{value: 2, unit: furlongs}}, scenario: {SCENARIO}, metric: makespan}}",
            "claims[0].paper.unit",
        ),
        # a number is judged on magnitude: no bound beside it, and no direction-only claim with one
        (
            f"{{claim: x, paper: {{value: 2, unit: ms}}, scenario: {SCENARIO}, metric: makespan, bound: {{max: 3}}}}",
            "claims[0].bound",
        ),
        (
            f"{{claim: x, paper: {{value: 2, unit: ms}}, scenario: {SCENARIO}, metric: makespan, kind: direction}}",
            "claims[0].kind",
        ),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, kind: up_to}}", "claims[0].paper.value"),
        (
            f"{{claim: x, paper: {{value: 2, unit: ms}}, scenario: {SCENARIO}, metric: makespan, band: {{wide: 1}}}}",
            "claims[0].band",
        ),
        (
            f"{{claim: x, paper: {{value: 2, unit: ms}}, scenario: {SCENARIO}, metric: makespan, kind: mean}}",
            "claims[0].sweep",
        ),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, note: 'took {{runtime}}'}}", "claims[0].note"),
        ("{claim: x, paper: y, id: Bad_Id, not_built: z}", "claims[0].id"),
    ],
)
def test_bad_claims_name_the_field(tmp_path, claim, field):
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n  - {claim}\n")
    with pytest.raises(SpecError) as err:
        load_claims(path)
    assert err.value.field == field


def test_two_rows_on_one_run_must_be_one_experiment(tmp_path):
    """One run, one row: two claims reading the same run need the same ``experiment``."""
    row = "{{claim: {0}, paper: y, scenario: " + str(SCENARIO) + ", scheduler: {0}, metric: makespan{1}}}"
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n  - {row.format('fifo', '')}\n  - {row.format('tag-priority', '')}\n")
    with pytest.raises(SpecError) as err:
        load_claims(path)
    assert err.value.field == "claims[1].experiment"
    same = ", experiment: Fig. 3"
    path.write_text(f"claims:\n  - {row.format('fifo', same)}\n  - {row.format('tag-priority', same)}\n")
    assert len(load_claims(path)[1]) == 2
    # their own runs (a different set) need nothing
    own = ", set: {job.args.iterations: 1}"
    path.write_text(f"claims:\n  - {row.format('fifo', '')}\n  - {row.format('tag-priority', own)}\n")
    assert len(load_claims(path)[1]) == 2


def _claim(tmp_path, body: str):
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n  - {{claim: c, scenario: {SCENARIO}, metric: makespan, {body}}}\n")
    return load_claims(path)[1][0]


def test_bands_units_and_verdicts(tmp_path):
    speedup = _claim(tmp_path, "paper: {value: 1.44, unit: speedup}, scheduler: a, relative_to: b")
    assert speedup.to_unit(2.0, 3.0) == 1.5  # relative_to's time over the scheduler's
    assert speedup.interval() == pytest.approx((1.22, 1.728))  # 20 % of a ratio, half the effect (1.152 is less)
    assert verdict(speedup, 1.5) == "holds" and verdict(speedup, 1.02) == "does not hold"
    assert verdict(speedup, 1.5, quick=True) == "quick: no verdict"
    assert verdict(speedup, math.nan) == "no value"
    ratio = _claim(tmp_path, "paper: {value: 2, unit: x}, scheduler: a, relative_to: b, band: {factor: 1.4}, "
                             "band_reason: 'Fig. 3 reads to a factor of 1.4'")  # fmt: skip
    assert ratio.to_unit(3.0, 1.5) == 2.0 and ratio.interval() == pytest.approx((1.5, 2.8))  # half of 2x: 1.5 > 2 / 1.4
    change = _claim(tmp_path, "paper: {value: -31.75, unit: '%'}, scheduler: a, relative_to: b")
    assert change.to_unit(1.0, 2.0) == -50 and change.interval() == pytest.approx((-41.75, -21.75))
    assert verdict(change, 5.0) == "does not hold" and verdict(change, -25.0) == "holds"
    time = _claim(tmp_path, "paper: {value: 7.84, unit: ms}")
    assert time.to_unit(0.01) == pytest.approx(10.0) and verdict(time, 10.0) == "does not hold"
    span = _claim(tmp_path, "paper: {value: [1.2, 2.0], unit: x}, scheduler: a, relative_to: b")
    assert span.interval() == pytest.approx((1.1, 2.4))  # half of the smaller effect (1.2x), not 0.96x
    assert verdict(span, 1.0) == "does not hold" and verdict(span, 1.09) == "does not hold"
    assert verdict(span, 1.1) == "holds"
    small = _claim(tmp_path, "paper: {value: 1.18, unit: speedup}, scheduler: a, relative_to: b")
    assert verdict(small, 0.967) == "does not hold"  # 20 % of 1.18x reaches 0.944x: a slowdown is not a speedup
    same = _claim(tmp_path, "paper: {value: 1.0, unit: x}, band: {absolute: 0.05}, scheduler: a, relative_to: b")
    assert verdict(same, 1.0) == "holds" and verdict(same, 0.96) == "holds"
    direction = _claim(tmp_path, "paper: no number, kind: direction, bound: {max: 0}, scheduler: a, relative_to: b")
    assert verdict(direction, -3.0) == "holds (direction only)"
    assert verdict(direction, 3.0) == "does not hold (direction only)"
    assert Band("absolute", 0.05).interval(1.0, 1.0) == pytest.approx((0.95, 1.05))


def test_up_to_takes_the_best_point_and_mean_the_average(tmp_path):
    up = _claim(tmp_path, "paper: {value: 1.5, unit: speedup}, kind: up_to, scheduler: a, relative_to: b, "
                          "sweep: {job.args.dp: [1, 2]}")  # fmt: skip
    assert up.best([1.02, 1.3, math.nan]) == 1.3 and len(up.points()) == 2
    down = _claim(tmp_path, "paper: {value: -33, unit: '%'}, kind: up_to, scheduler: a, relative_to: b")
    assert down.best([-3.0, -12.0, 4.0]) == -12.0  # the largest reduction
    mean = _claim(tmp_path, "paper: {value: 4.45, unit: x}, kind: mean, scheduler: a, relative_to: b, "
                            "sweep: {job.args.dp: [1, 2, 3]}")  # fmt: skip
    assert mean.best([2.0, 4.0, 6.0]) == 4.0


def test_fidelity_placeholders_read_the_emulated_runs_own_counters():
    """``{fidelity:<label>.<key>}`` reads the run's fidelity report, in its backend's counters."""
    from types import SimpleNamespace

    from scenarios.reproduce import _field

    run = RunResult("emulate", "j", "fifo", "c", counters={"emulate": {"fidelity": {"drops": 1234, "cpu_mean": 0.5}}})
    row = SimpleNamespace(best=SimpleNamespace(runs={"fifo": run}))
    assert _field("fidelity:fifo.drops", row, {}) == "1,234" and _field("fidelity:fifo.cpu_mean", row, {}) == "0.5"
    run.counters = {"packet": run.counters["emulate"]}  # not its backend's: no report
    with pytest.raises(KeyError):
        _field("fidelity:fifo.drops", row, {})


def test_missing_fidelity_reads_na_and_room_reads_the_analysis():
    emulated = RunResult("emulator", "j", "fifo", "c")
    assert fidelity([emulated]) == "n/a"  # no report: never "ok"
    emulated.counters["emulator"] = {"fidelity": {"ok": True}}  # its backend's counters (an old name's too)
    assert fidelity([emulated]) == "ok"
    emulated.counters["emulator"]["fidelity"] = {"ok": False, "problems": ["leak"]}
    assert fidelity([emulated]) == "BROKEN: fifo: leak"
    assert fidelity([RunResult("simulator", "j", "fifo", "c")]) == "simulated"
    run = RunResult("simulator", "j", "megatron", "c")
    assert room(run) == "n/a"
    run.analysis = {"max_speedup": 1.0213, "overlap": {"DP/EP": 0.08, "PP/DP": 0.02, "DP/DP": 0.3}}
    assert room(run) == "max speedup 1.02x; overlap DP/DP 30 %, DP/EP 8 %"
    share = {"DP": {"DP": 0.0, "graph-data": 0.05}, "graph-data": {"DP": 0.05, "graph-data": 0.18}}
    run.analysis["overlap"] = {"types": ["DP", "graph-data"], "share": share, "links": {}, "links_with_overlap": 4}
    assert room(run) == "max speedup 1.02x; overlap graph-data/graph-data 18 %, DP/graph-data 5 %"
    run.analysis = {"max_speedup": 4.603, "room": 1.549, "busiest_port": {"port": "h0:h0-eth1", "share": 0.646}}
    assert room(run) == "max speedup 4.6x; room 1.55x (busiest port 65 %)"  # the port binds tighter
    run.analysis["room"] = 4.60
    assert room(run) == "max speedup 4.6x"  # compute binds: the room says nothing more


def test_a_row_on_the_compact_engine_reads_the_same_number_as_on_numba(tmp_path):
    (tmp_path / "moe.yaml").write_text(TINY_MOE)
    row = ("{{claim: c, paper: y, scenario: {1}, scheduler: hermod, relative_to: megatron, metric: makespan, "
           "experiment: e{2}}}")  # fmt: skip
    papers = tmp_path / "papers"
    (papers / "hermod").mkdir(parents=True)
    (papers / "hermod" / "claims.yaml").write_text(
        "claims:\n"
        f"  - {row.format('numba', tmp_path / 'moe.yaml', '')}\n"
        f"  - {row.format('compact', tmp_path / 'moe.yaml', ', engine: compact')}\n"
        f"  - {row.format('big', tmp_path / 'moe.yaml', ', engine: compact, full_size: true')}\n"
    )
    numba, compact, skipped = reproduce_paper("hermod", tmp_path / "out", False, False, lambda _m: None, papers)[1]
    assert skipped.verdict == "skipped" and "--full-size" in skipped.paper_command and skipped.run_dir is None
    assert "--full-size" not in compact.paper_command  # the engine alone does not make a row full-size
    assert numba.run_dir != compact.run_dir and numba.value == pytest.approx(compact.value, abs=1e-12)
    assert compact.command.endswith("--backend fluid-rules") and "--backend" not in numba.command
    assert compact.claim.engine == "fluid-rules"  # the old spelling ``engine: compact`` still reads
    _, (_, _, big) = reproduce_paper("hermod", tmp_path / "out", False, False, lambda _m: None, papers, full_size=True)
    assert big.value == pytest.approx(compact.value, abs=1e-12)
    assert (big.run_dir / "hermod" / "items.npz").exists()  # built as arrays: no per-item JSON
    assert big.ran == "moe, all 2 layers, 4 GPUs, 2 microbatches, 1 iteration; simulated (fluid-rules backend)"
    bad = tmp_path / "bad.yaml"
    for extra in (", full_size: yes please", ", full_size: true", ", engine: packet, full_size: true"):
        bad.write_text(f"claims:\n  - {row.format('x', tmp_path / 'moe.yaml', extra)}\n")
        with pytest.raises(SpecError) as err:
            load_claims(bad)
        assert err.value.field == "claims[0].full_size", extra
    bad = tmp_path / "bad.yaml"
    for engine, backend in (("cuda", "simulate"), ("compact", "emulate"), ("emulate", "simulate")):
        extra = f", engine: {engine}, backend: {backend}"
        bad.write_text(f"claims:\n  - {row.format('x', tmp_path / 'moe.yaml', extra)}\n")
        with pytest.raises(SpecError) as err:
            load_claims(bad)
        assert err.value.field == "claims[0].engine"


@pytest.mark.skipif(not packet_engine.available(), reason="the ns3 package is not installed (railbed[packet])")
def test_a_row_on_the_packet_backend_runs_there_and_reports_its_drops(tmp_path):
    """``engine: packet`` on a simulated row: its own run on ns-3 beside the fluid row's, the
    fidelity cell and ``{packet:...}`` note fields from the packet counters; refused on an emulated row."""
    row = ("{{claim: c{0}, paper: y, scenario: " + str(SCENARIO) + ", scheduler: tag-priority, relative_to: fifo, "
           "metric: makespan, quick: {{job.args.gradient: 1MB}}{1}}}")  # fmt: skip
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    note = ", note: 'fifo lost {packet:fifo.drops} ({packet:fifo.timeouts} timeouts)'"
    (papers / "dgtp" / "claims.yaml").write_text(
        f"claims:\n  - {row.format(0, '')}\n  - {row.format(1, ', engine: packet' + note)}\n"
    )
    _, (fluid, packet) = reproduce_paper("dgtp", tmp_path / "out", True, False, lambda _m: None, papers, plots=False)
    assert packet.run_dir != fluid.run_dir and packet.claim.engine == "packet"
    runs = {n: RunResult.load(packet.run_dir / n / "result.json") for n in ("fifo", "tag-priority")}
    assert {r.backend for r in runs.values()} == {"packet"}
    change = 100 * (runs["tag-priority"].makespan / runs["fifo"].makespan - 1)
    assert packet.value == pytest.approx(change) and packet.value != fluid.value
    drops = sum(r.counters["packet"]["drops"] for r in runs.values())
    timeouts = sum(r.counters["packet"]["tcp"]["timeouts"] for r in runs.values())
    assert packet.fidelity == f"simulated (packets: {drops:,} drops, {timeouts:,} timeouts)"
    assert fluid.fidelity == "simulated"
    assert packet.ran.endswith("; simulated (packet backend); quick") and packet.command.endswith("--backend packet")
    fifo = runs["fifo"].counters["packet"]
    assert render_note(packet, {}) == f"fifo lost {fifo['drops']:,} ({fifo['tcp']['timeouts']:,} timeouts)"
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"claims:\n  - {row.format(0, ', engine: packet, backend: emulate')}\n")
    with pytest.raises(SpecError) as err:
        load_claims(bad)
    assert err.value.field == "claims[0].engine"


TINY_MOE = """
name: tiny-moe
cluster: {servers: [{count: 2, gpus: 2, nics: 1, nic_rate: 100Gbit}], fabric: {type: single_switch}}
job:
  generator: moe_training
  args: {dp: 2, pp: 2, ep: 2, layers: 2, hidden: 256, ffn: 512, seq: 128, experts: 4, topk: 2, microbatches: 2,
         gpus_per_server: 2, nics_per_server: 1}
schedulers: [megatron, hermod]
"""


def test_labels_say_what_ran():
    from scenarios.labels import run_label

    src = {"job": {"generator": "moe_training", "args": {"model": "gpt3-13b", "dp": 2, "layers": 4,
                                                         "microbatches": 4, "iterations": 2}}}  # fmt: skip
    assert run_label(src, None, "simulate", "fluid", None, True) == (
        "gpt3-13b, 4 of 40 layers, 32 GPUs, 4 microbatches, 2 iterations; simulated; quick"
    )
    src["job"]["args"].pop("layers")
    assert run_label(src, None, "emulate", "fluid", 1000.0, False).startswith("gpt3-13b, all 40 layers, 32 GPUs")
    assert run_label(src, None, "emulate", "fluid", 1000.0, False).endswith("; emulated, k = 1000")
    kvs = {"job": {"generator": "requests", "args": {"preset": "kvs-c", "duration": "1.2ms"}}}
    want = "kvs-c, 1.2 ms of arrivals per load; simulated; quick"
    assert run_label(kvs, None, "simulate", "fluid", None, True) == want
    kvs["job"]["args"] = {"preset": "kvs-c", "requests": 400}
    assert run_label(kvs, None, "simulate", "fluid", None, False).startswith("kvs-c, 400 requests per load")
    gnn = {"job": {"generator": "gnn_training", "args": {"dataset": "reddit", "iterations": 2}}, "loads": None}
    assert run_label(gnn, None, "simulate", "fluid", None, False).startswith(
        "reddit (graph at scale 0.01, metis), 4 machines"
    )


def test_set_overrides_every_run_and_resume_reads_a_finished_run(tmp_path):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(
        f"claims:\n  - {{claim: FIFO alone, paper: '-', scenario: {SCENARIO}, scheduler: fifo, metric: makespan, "
        "set: {schedulers: [fifo]}, quick: {job.args.gradient: 1MB}}\n"
    )
    out = tmp_path / "out"
    said = []
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers)
    [run_dir] = list((out / "dgtp").iterdir())
    assert sorted(p.name for p in run_dir.iterdir() if (p / "result.json").exists()) == ["fifo"]  # set: one run
    first = (run_dir / "fifo" / "result.json").read_text()
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert any("--resume" in line for line in said)
    assert (run_dir / "fifo" / "result.json").read_text() == first
    (run_dir / "PARTIAL").write_text("killed\n")
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert not any("--resume" in line for line in said) and not (run_dir / "PARTIAL").exists()
    (run_dir / "scenario.yaml").write_text((run_dir / "scenario.yaml").read_text().replace("1MB", "2MB"))
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert not any("--resume" in line for line in said)
    made = (run_dir / "inputs.txt").read_text()  # made by other code (another digest): run again
    (run_dir / "inputs.txt").write_text("v2_000000000000\n")
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert any("made from other inputs (v2_000000000000" in line for line in said), said
    assert (run_dir / "inputs.txt").read_text() == made
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert any("--resume" in line for line in said)


# --------------------------------------------------------- the committed claims files
CLAIM_FILES = sorted((ROOT / "scenarios").glob("*/claims.yaml"))
# a measurement typed into a note: a number with a unit, a share, a ratio or a count of events
TYPED = re.compile(r"(?<![\w.§-])[-+]?\d[\d,]*(\.\d+)?\s*(%|x\b|ms\b|us\b|s\b|minutes|drops|timeouts|packets)")


def test_every_paper_has_a_claims_file_and_every_file_loads():
    assert {p.parent.name for p in CLAIM_FILES} == set(PAPERS) - {"mechanisms"}
    for path in CLAIM_FILES:
        load_claims(path)


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_notes_and_claim_texts_of_the_committed_files(path):
    """Notes type no measurement (numbers come from the runs' fields); a claim's text states the
    paper's claim, never what ran (the generated label does)."""
    _, claims, _ = load_claims(path)
    for c in claims:
        bare = re.sub(r"\{[^{}]*\}", "", c.note or "")
        assert not TYPED.search(bare), (c.id, TYPED.search(bare).group(0))
        assert not re.search(r"EMULATED|REDUCED|FULL|every layer|full size|quick", c.claim), c.claim


def test_every_seed_system_has_a_row():
    """Each seed system has its own section with measured rows, or a "not built yet" row."""
    built = {p.parent.name: load_claims(p) for p in CLAIM_FILES}
    _, unbuilt, _ = built.pop("unbuilt")
    assert all(verdict(c, None) == "not built yet" and c.paper.value is not None for c in unbuilt)
    for system in ("DistDGL", "ByteGNN", "SANCUS", "AdaGL", "DGS", "G3", "DGTP", "Hermod", "LEO", "DGCL"):
        own = [c for title, claims, _ in built.values() if system in title for c in claims if c.measured]
        assert own or any(system in c.claim for c in unbuilt), system


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_unstated_values_are_what_the_scenarios_run(path):
    from scenarios.sensitivity import current_value, normal

    _, claims, unstated = load_claims(path)
    by_id = {c.id: c for c in claims}
    for param in unstated:
        for cid in param.claims:
            assert current_value(by_id[cid], param) == pytest.approx(normal(param.value)), (param.name, cid)


def test_a_note_reads_an_argument_the_scenario_leaves_to_the_generators_default():
    import inspect

    from scenarios.reproduce import _generator_default
    from workloads.gnn_fullgraph import gnn_fullgraph

    defaults = inspect.signature(gnn_fullgraph).parameters
    source = {"job": {"generator": "gnn_fullgraph", "args": {"dataset": "web-google"}}}
    assert _generator_default(source, "job.args.locality") == defaults["locality"].default is not None
    assert _generator_default(source, "job.args.partitioner") == defaults["partitioner"].default
    assert _generator_default(source, "job.args.no_such_argument") is None
    assert _generator_default(source, "cluster.name") is None
    assert _generator_default({"job": {"generator": "no-such-generator"}}, "job.args.locality") is None


def test_a_skipped_rows_note_says_it_did_not_run_instead_of_printing_n_a():
    from scenarios.reproduce import Row, notes

    _, claims, _ = load_claims(Path(__file__).parent.parent / "scenarios" / "dgtp" / "claims.yaml")
    claim = next(c for c in claims if c.note and "{fidelity:" in c.note)
    row = Row(claim, verdict="skipped", fidelity="needs --emulate (root)")
    (line,) = notes([row])[2:-1]
    assert "n/a" not in line and "needs --emulate (root)" in line, line
    row.verdict = "holds"  # a row that ran but lost its run still says n/a, as the report's rules ask
    assert "n/a" in notes([row])[2]


def _sweep_runs(*labels: str) -> dict:
    """Runs ``<label>@<load>`` at loads 1-4 (what measure() is given; their curves are patched in)."""
    return {"runs": [RunResult("simulator", "j", f"{x}@{load:g}", "c") for x in labels for load in (1, 2, 3, 4)]}


def test_a_load_sweeps_knee_and_median_are_read_as_the_thesis_reads_them(tmp_path, monkeypatch):
    """knee: each scheduler's highest load whose median stays within KNEE_MULTIPLE (1.5) of its
    lowest load's; p50_at_knee: both medians at the reference's knee (speedup: its over ours)."""
    import railbed.metrics as m
    from scenarios.reproduce import measure

    medians = {"leo": [10, 11, 12, 30], "acc-only": [10, 12, 20, 40]}  # knees 3 and 2
    curve = {n: [{"load": float(i + 1), "p50": p} for i, p in enumerate(ps)] for n, ps in medians.items()}
    monkeypatch.setattr(m, "load_curve", lambda runs: curve)
    knee = _claim(tmp_path, "paper: {value: 1.5, unit: x}, scheduler: leo, relative_to: acc-only")
    knee.metric = "knee"
    assert measure(knee, _sweep_runs("leo", "acc-only")) == pytest.approx(1.5)
    latency = _claim(tmp_path, "paper: {value: 1.3, unit: speedup}, scheduler: leo, relative_to: acc-only")
    latency.metric = "p50_at_knee"
    assert measure(latency, _sweep_runs("leo", "acc-only")) == pytest.approx(12 / 11)
    knee.relative_to = "cpu-only"  # not a sweep of this scenario: the field and the sweeps it has
    with pytest.raises(SpecError, match="cpu-only") as err:
        measure(knee, _sweep_runs("leo", "acc-only"))
    assert err.value.field == "relative_to"
    knee.scheduler, knee.relative_to = "greedy", "acc-only"
    with pytest.raises(SpecError, match="greedy") as err:
        measure(knee, _sweep_runs("leo", "acc-only"))
    assert err.value.field == "scheduler"


@pytest.mark.parametrize("body", ["scheduler: leo@9e+07, relative_to: acc-only", "scheduler: leo, relative_to: a@1"])
def test_a_curve_metric_names_the_sweep_not_one_run_of_it(tmp_path, body):
    path = tmp_path / "claims.yaml"
    row = f"{{claim: c, scenario: {SCENARIO}, metric: knee, paper: {{value: 2, unit: x}}, {body}}}"
    path.write_text(f"claims:\n  - {row}\n")
    with pytest.raises(SpecError) as err:
        load_claims(path)
    assert err.value.field == ("claims[0].scheduler" if "@9" in body else "claims[0].relative_to")


def test_a_request_streams_room_is_its_capacity_check_at_the_lowest_load():
    from railbed.spec import ClusterSpec
    from scenarios.reproduce import _lowest_load
    from schedulers.leo import capacity_check
    from workloads.requests import requests

    leo = Path(__file__).resolve().parents[1] / "scenarios" / "leo"
    cluster = ClusterSpec.load(leo / "cluster-f-nic-off-path.yaml")
    check = capacity_check(requests("kvs-c", load=1e6, requests=50), cluster)
    runs = {f"acc-only@{x:g}": RunResult("simulator", "j", f"acc-only@{x:g}", "c") for x in (5e5, 5e6, 1e6)}
    runs["acc-only@500000"].notes = ["leo: something else", check.note()]
    assert _lowest_load(runs, "acc-only") is runs["acc-only@500000"] and _lowest_load(runs, "leo") is None
    assert room(runs["acc-only@500000"]) == "a split can add +66.7 % over the best single path (the datapath binds)"
    assert room(runs["acc-only@5e+06"]) == "n/a"  # no capacity note and no analysis


def test_a_tie_between_points_goes_to_the_first_not_to_the_last_bits(tmp_path):
    """Points equal within the engines' agreement (1e-9): the row reads the first of them, so
    the point a row names does not change with the engine's rounding."""
    from scenarios.reproduce import PointRun, Row, _judge

    up = _claim(tmp_path, "paper: {value: 1.5, unit: speedup}, kind: up_to, scheduler: a, relative_to: b, "
                          "sweep: {job.args.dp: [1, 2, 4]}")  # fmt: skip
    row = Row(up)
    for dp, value in ((1, 1.0), (2, 1.0 + 1e-13), (4, 0.99)):
        row.points.append(PointRun({"job.args.dp": dp}, value, tmp_path / str(dp), f"dp {dp}", {}, {}))
    _judge(row, quick=True)
    assert row.best.point == {"job.args.dp": 1} and row.value == 1.0
    row.points[1].value = 1.01  # a real difference still wins
    _judge(row, quick=True)
    assert row.best.point == {"job.args.dp": 2} and row.value == 1.01


def test_a_row_whose_every_baseline_lacks_the_room_says_so(tmp_path):
    """_judge reads each point's baseline (relative_to) room: a bound on every point explains an
    "up to" row that does not hold; one point with room enough leaves it unexplained."""
    from scenarios.claims import EXPLAINED
    from scenarios.reproduce import PointRun, Row, _judge

    up = _claim(tmp_path, "paper: {value: 1.5, unit: speedup}, kind: up_to, scheduler: a, relative_to: b, "
                          "sweep: {job.args.dp: [1, 2]}")  # fmt: skip

    def judged(rooms: list[float]) -> str:
        row = Row(up)
        for dp, r in zip((1, 2), rooms):
            base = RunResult("simulator", "j", "b", "c")
            base.analysis = {"max_speedup": r + 0.5, "room": r}
            runs = {"b": base, "a": RunResult("simulator", "j", "a", "c")}
            row.points.append(PointRun({"job.args.dp": dp}, 1.01, tmp_path / str(dp), f"dp {dp}", runs, {}))
        _judge(row)
        return row.verdict

    assert judged([1.08, 1.2]) == f"{EXPLAINED} the setup's room, 1.2x, is under the 1.25x that holds)"
    assert judged([1.08, 1.3]) == "does not hold"
