"""The reproduction report: claims files, verdicts, the report's form, the README block.

The report generator runs on a tiny claims file in a temporary papers
directory; ``railbed reproduce all --quick`` (simulated rows only, 2-3
minutes) runs once and its report is checked for form, not numbers."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from railbed.errors import SpecError
from railbed.metrics import metric
from railbed.results import RunResult
from scenarios.reproduce import BEGIN, END, PAPERS, load_claims, reproduce

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"

CLAIMS = f"""
title: a tiny paper
claims:
  - claim: priority helps
    paper: "-10 %"
    scenario: {SCENARIO}
    scheduler: tag-priority
    relative_to: fifo
    metric: makespan
    bound: {{max: 0.0}}
    quick: {{job.args.gradient: 1MB}}
  - claim: FIFO makespan is under a microsecond
    paper: "< 1 us"
    scenario: {SCENARIO}
    scheduler: fifo
    metric: makespan
    unit: time
    bound: {{max: 1.0e-6}}
    quick: {{job.args.gradient: 1MB}}
  - claim: emulator agrees
    paper: "10 %"
    scenario: {SCENARIO}
    backend: crosscheck
    metric: makespan_rel
"""


ROW = re.compile(r"^\| (.+) \| (.+) \| (.+) \| (.+) \| (.+) \| `(.+)` \|$")


def rows_of(markdown: str, section: str) -> list[tuple]:
    body = markdown.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0] == "| claim | paper | railbed | verdict | fidelity | command |"
    return [ROW.match(line).groups() for line in lines[1:]]


def test_report_from_a_tiny_claims_file(tmp_path):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(CLAIMS)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{BEGIN}\nold typed table\n{END}\nafter\n")
    out = tmp_path / "out"
    report = reproduce("all", out, quick=True, echo=lambda _: None, readme=readme, claims_dir=papers)
    text = report.read_text()
    rows = rows_of(text, "dgtp")
    assert [r[0] for r in rows] == ["priority helps", "FIFO makespan is under a microsecond", "emulator agrees"]
    # both simulated rows read one run (same scenario, backend and overrides)
    [run_dir] = list((out / "dgtp").iterdir())
    runs = {n: RunResult.load(run_dir / n / "result.json") for n in ("fifo", "tag-priority")}
    rel = metric(runs["tag-priority"], "makespan") / metric(runs["fifo"], "makespan") - 1
    assert rows[0][2] == f"{100 * rel:+.1f} %" and rows[0][3] == ("holds" if rel <= 0 else "does not hold")
    assert rows[1][3] == "does not hold" and rows[1][4] == "simulated"
    assert rows[2][3] == "skipped" and "--emulate" in rows[2][5]
    assert rows[0][5] == f"railbed simulate dgtp/{run_dir.name}/scenario.yaml"
    # the run's scenario.yaml is self-contained and has the quick override
    sc = (run_dir / "scenario.yaml").read_text()
    assert "gradient: 1MB" in sc and "nic_rate" in sc
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).exists()
    for paper in PAPERS:
        if paper != "dgtp":
            assert f"Not built yet: no `scenarios/{paper}/claims.yaml`" in text
    new = readme.read_text()
    assert "old typed table" not in new and new.startswith("# x\n\nbefore\n") and new.endswith(f"{END}\nafter\n")
    assert "| priority helps | -10 % |" in new and "`railbed reproduce dgtp --quick`" in new
    assert json.loads((out / "provenance.json").read_text())["railbed"]["path"]


@pytest.mark.parametrize(
    "claim, field",
    [
        ("{claim: x, paper: y, scenario: nope.yaml, metric: makespan}", "claims[0].scenario"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: speed}}", "claims[0].metric"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan_rel}}", "claims[0].metric"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, backend: gpu}}", "claims[0].backend"),
        (f"{{claim: x, scenario: {SCENARIO}, metric: makespan}}", "claims[0].paper"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, bound: {{most: 1}}}}", "claims[0].bound"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, colour: red}}", "claims[0].colour"),
        (f"{{claim: x, paper: y, scenario: {SCENARIO}, metric: makespan, set: [1]}}", "claims[0].set"),
    ],
)
def test_bad_claims_name_the_field(tmp_path, claim, field):
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n  - {claim}\n")
    with pytest.raises(SpecError) as err:
        load_claims(path)
    assert err.value.field == field


def test_reproduce_quick_writes_a_well_formed_report(tmp_path):
    """What CI checks: the command succeeds and the report has every section and well-formed rows."""
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "railbed.cli", "reproduce", "all", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    text = (out / "REPRODUCTION.md").read_text()
    assert text.startswith("# railbed reproduction report")
    for paper in PAPERS:
        assert f"\n## {paper}: " in text
    rows = rows_of(text, "platform")
    _, claims = load_claims(ROOT / "scenarios" / "platform" / "claims.yaml")
    assert len(rows) == len(claims)
    for claim, row in zip(claims, rows):
        assert row[0] == claim.claim
        if claim.backend == "simulate":
            assert row[3] in ("holds", "does not hold", "measured") and row[2] != "-" and row[4] == "simulated"
        else:
            assert row[3] == "skipped"
    assert re.search(r"!\[timeline-fifo\]\(platform/[^)]+/figures/timeline-fifo.png\)", text)


def test_ratio_unit_reports_one_metric_over_another(tmp_path):
    from scenarios.reproduce import fmt_value, measure, verdict

    path = tmp_path / "claims.yaml"
    path.write_text(
        f"title: t\nclaims:\n  - {{claim: r, paper: 2x, scenario: {SCENARIO}, scheduler: a, relative_to: b,"
        " metric: makespan, unit: ratio, bound: {min: 1.5, max: 2.5}}\n"
    )
    _, [claim] = load_claims(path)
    runs = []
    for name, makespan in (("a", 3.0), ("b", 1.5)):
        r = RunResult("simulator", "j", name, "c", 1.0)
        r.makespan = makespan
        runs.append(r)
    value, fidelity = measure(claim, {"runs": runs})
    assert value == 2.0 and fmt_value(claim, value) == "2x" and verdict(claim, value) == "holds"
    assert fidelity == "simulated"
    path.write_text(
        f"title: t\nclaims:\n  - {{claim: r, paper: 2x, scenario: {SCENARIO}, metric: makespan, unit: ratio}}\n"
    )
    with pytest.raises(SpecError, match="relative_to"):
        load_claims(path)  # a plain makespan shown as "2x" would read as a ratio


SET_CLAIM = f"""
claims:
  - claim: FIFO alone
    paper: "-"
    scenario: {SCENARIO}
    scheduler: fifo
    metric: makespan
    set: {{schedulers: [fifo]}}
    quick: {{job.args.gradient: 1MB}}
"""


def test_set_overrides_every_run_and_resume_reads_a_finished_run(tmp_path):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(SET_CLAIM)
    out = tmp_path / "out"
    said = []
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers)
    [run_dir] = list((out / "dgtp").iterdir())
    assert sorted(p.name for p in run_dir.iterdir() if (p / "result.json").exists()) == ["fifo"]  # set: one run
    first = (run_dir / "fifo" / "result.json").read_text()
    # --resume reads the finished run: the result file is not rewritten, the row is the same
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert any("--resume" in line for line in said)
    assert (run_dir / "fifo" / "result.json").read_text() == first
    # an unfinished run (PARTIAL marker) is run again, not read
    (run_dir / "PARTIAL").write_text("killed\n")
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert not any("--resume" in line for line in said) and not (run_dir / "PARTIAL").exists()
    # another scenario under the same key (its saved scenario.yaml differs) is run again too
    (run_dir / "scenario.yaml").write_text((run_dir / "scenario.yaml").read_text().replace("1MB", "2MB"))
    said.clear()
    reproduce("dgtp", out, quick=True, echo=said.append, claims_dir=papers, resume=True)
    assert not any("--resume" in line for line in said)


TINY_MOE = """
name: tiny-moe
cluster: {servers: [{count: 2, gpus: 2, nics: 1, nic_rate: 100Gbit}], fabric: {type: single_switch}}
job:
  generator: moe_training
  args: {dp: 2, pp: 2, ep: 2, layers: 2, hidden: 256, ffn: 512, seq: 128, experts: 4, topk: 2, microbatches: 2,
         gpus_per_server: 2, nics_per_server: 1}
schedulers: [megatron, hermod]
"""


def test_a_row_on_the_compact_engine_reads_the_same_number_as_on_numba(tmp_path):
    (tmp_path / "moe.yaml").write_text(TINY_MOE)
    row = "{{claim: {0}, paper: y, scenario: {1}, scheduler: hermod, relative_to: megatron, metric: makespan{2}}}"
    papers = tmp_path / "papers"
    (papers / "hermod").mkdir(parents=True)
    (papers / "hermod" / "claims.yaml").write_text(
        "claims:\n"
        f"  - {row.format('numba', tmp_path / 'moe.yaml', '')}\n"
        f"  - {row.format('compact', tmp_path / 'moe.yaml', ', engine: compact')}\n"
    )
    from scenarios.reproduce import reproduce_paper

    skipped = reproduce_paper("hermod", tmp_path / "out", False, False, lambda _m: None, papers)[1][1]
    assert skipped.verdict == "skipped" and "--full-size" in skipped.paper_command and skipped.run_dir is None
    _, (numba, compact) = reproduce_paper(
        "hermod", tmp_path / "out", False, False, lambda _m: None, papers, full_size=True
    )
    assert numba.run_dir != compact.run_dir and numba.value == pytest.approx(compact.value, abs=1e-12)
    assert compact.command.endswith("--backend fluid-rules") and "--backend" not in numba.command
    assert compact.claim.engine == "fluid-rules"  # the old spelling ``engine: compact`` still reads
    assert (compact.run_dir / "hermod" / "items.npz").exists()  # built as arrays: no per-item JSON
    bad = tmp_path / "bad.yaml"
    for engine, backend in (("cuda", "simulate"), ("compact", "emulate"), ("emulate", "simulate")):
        extra = f", engine: {engine}, backend: {backend}"
        bad.write_text(f"claims:\n  - {row.format('x', tmp_path / 'moe.yaml', extra)}\n")
        with pytest.raises(SpecError) as err:
            load_claims(bad)
        assert err.value.field == "claims[0].engine"
