"""Issue 41's rules: the effect must show, quick sections give no verdict, inputs are not results,
tuned parameters are listed with their value before, stale sections say so, the summary on top."""

import re
from pathlib import Path

import pytest
import yaml

from railbed.errors import SpecError
from scenarios import block
from scenarios.claims import EXPLAINED, explain, load_claims, load_tuned, verdict
from scenarios.reproduce import BEGIN, END, PAPERS, write_block

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"
COMMITTED = ROOT / "REPRODUCTION.md"


def _claim(tmp_path, body: str):
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n  - {{claim: c, scenario: {SCENARIO}, metric: makespan, {body}}}\n")
    return load_claims(path)[1][0]


def test_the_effect_must_be_at_least_half_the_papers(tmp_path):
    ratio = _claim(tmp_path, "paper: {value: 1.20, unit: speedup}, scheduler: a, relative_to: b")
    assert verdict(ratio, 1.001) == "does not hold"  # inside 20 % of 1.20x, but no effect
    assert verdict(ratio, 1.12) == "holds" and verdict(ratio, 1.099) == "does not hold"  # (r-1) >= 0.1
    assert verdict(ratio, 1.44) == "holds" and verdict(ratio, 1.45) == "does not hold"  # the band still binds
    slower = _claim(tmp_path, "paper: {value: 0.8, unit: x}, scheduler: a, relative_to: b")
    assert verdict(slower, 0.91) == "does not hold" and verdict(slower, 0.9) == "holds"  # the paper's side: below
    up_to = _claim(tmp_path, "paper: {value: -11, unit: '%'}, kind: up_to, scheduler: a, relative_to: b, "
                             "sweep: {job.args.dp: [1, 2]}")  # fmt: skip
    best = up_to.best([-1.0, -3.4])
    assert best == -3.4 and verdict(up_to, best) == "does not hold"  # -3.4 % against up to -11 %
    assert verdict(up_to, -5.5) == "holds" and verdict(up_to, -5.4) == "does not hold"
    # a number that is not a comparison keeps its band (no effect to halve)
    time = _claim(tmp_path, "paper: {value: 10, unit: ms}")
    assert verdict(time, 8.5) == "holds"


def test_a_row_short_of_the_effect_is_explained_by_its_setups_room_or_a_measured_reason(tmp_path):
    """Item 7's "explained": the baseline's room (the most any scheduler could speed its run up) under
    the least speedup that holds is the setup's shortfall, measured on the run; else the claim's own
    ``explained``, which must name where it is measured."""
    ratio = _claim(tmp_path, "paper: {value: 1.50, unit: speedup}, scheduler: a, relative_to: b")
    short = verdict(ratio, 1.01)
    assert short == "does not hold"
    assert explain(ratio, short, room=1.08) == f"{EXPLAINED} the setup's room, 1.08x, is under the 1.25x that holds)"
    assert explain(ratio, short, room=1.30) == "does not hold"  # room enough: the scheduler fell short
    assert explain(ratio, short, room=None) == "does not hold"
    assert explain(ratio, "holds", room=1.01) == "holds"  # only a row that does not hold is explained
    slower = _claim(tmp_path, "paper: {value: 0.8, unit: x}, scheduler: a, relative_to: b")
    assert explain(slower, "does not hold", room=1.01) == "does not hold"  # a room bounds speedups only
    told = _claim(tmp_path, "paper: {value: 1.50, unit: speedup}, scheduler: a, relative_to: b, "
                            "explained: 'the layers alone leave what hermod takes (docs/hermod.md)'")  # fmt: skip
    assert explain(told, short, room=1.30).startswith(f"{EXPLAINED} the layers alone")
    assert explain(told, short, room=1.08).startswith(f"{EXPLAINED} the setup's room")  # the measured one first
    with pytest.raises(SpecError) as err:
        _claim(tmp_path, "paper: {value: 1.50, unit: speedup}, scheduler: a, relative_to: b, "
                         "explained: 'the baseline is below line rate there'")  # fmt: skip
    assert err.value.field == "claims[0].explained"


def test_a_wider_band_needs_its_reason_and_shows_it(tmp_path):
    with pytest.raises(SpecError) as err:
        _claim(tmp_path, "paper: {value: 1.45, unit: x}, scheduler: a, relative_to: b, band: {relative: 0.3}")
    assert err.value.field == "claims[0].band_reason"
    from scenarios.claims import paper_cell

    wide = _claim(tmp_path, "paper: {value: 1.45, unit: x}, scheduler: a, relative_to: b, band: {relative: 0.3}, "
                            "band_reason: 'Table 4 gives the rates to 30 %'")  # fmt: skip
    assert "(band 30 %: Table 4 gives the rates to 30 %)" in paper_cell(wide)
    assert verdict(wide, 1.07) == "does not hold"  # the effect rule binds inside any band
    narrow = _claim(tmp_path, "paper: {value: 1.45, unit: x}, scheduler: a, relative_to: b, band: {relative: 0.1}")
    assert narrow.band_reason is None


def test_input_checks_and_stand_ins_never_hold(tmp_path):
    check = _claim(tmp_path, "paper: {value: -25, unit: '%'}, scheduler: a, relative_to: b, "
                             "input_check: 'remote_keep and N_f are given, the bytes follow'")  # fmt: skip
    assert verdict(check, -25.0) == "input check" and verdict(check, -25.0, quick=True) == "input check"
    stand = _claim(tmp_path, "paper: {value: 1.3, unit: x}, scheduler: a, relative_to: b, "
                             "stand_in: 'DGS as a parameterised surrogate'")  # fmt: skip
    assert stand.label == "c [stand-in: DGS as a parameterised surrogate]"


TUNED = f"""
tuned:
  - name: iterations
    value: 8
    before: 2
    set: {{job.args.iterations: 2}}
    commit: f9cc124
    why: two iterations are both edges of the pipeline; the rows lost on three draws
    claims: [a]
  - name: scheduler option
    value: nic
    before: gpu
    scheduler_args: {{match: gpu}}
    commit: 25f8221
    why: the GPU matching still sent two flows into one NIC on the testbed
    claims: []
claims:
  - {{id: a, claim: c, scenario: {SCENARIO}, metric: makespan, scheduler: tag-priority, relative_to: fifo,
     paper: {{value: 1.2, unit: speedup}}, set: {{job.args.gradient: 1MB}}}}
"""


def test_a_tuned_parameter_adds_its_row_at_the_value_before(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(TUNED)
    _title, claims, _ = load_claims(path)
    assert [c.id for c in claims] == ["a", "a-before-0"]
    before = claims[1]
    assert before.set == {"job.args.gradient": "1MB", "job.args.iterations": 2}
    assert before.label == "c [value before tuning: iterations = 2]"
    assert before.run_key({}, False) != claims[0].run_key({}, False)  # its own run
    assert [t.commit for t in load_tuned(path)] == ["f9cc124", "25f8221"]
    path.write_text(TUNED.replace("commit: f9cc124", "commit: later"))
    with pytest.raises(SpecError) as err:
        load_claims(path)
    assert err.value.field == "tuned[0].commit"


def test_a_scheduler_option_value_before_runs_the_two_runs_of_the_row(tmp_path):
    from scenarios.reproduce import _planned

    path = tmp_path / "claims.yaml"
    path.write_text(TUNED.replace("claims: []", "claims: [a]"))
    before = load_claims(path)[1][2]
    assert before.set["scheduler_args"] == {"match": "gpu"}
    data = yaml.safe_load(SCENARIO.read_text())
    from scenarios.reproduce import _scheduler_args

    _scheduler_args(data, before, {"host_wait": "off"})
    assert data["schedulers"] == [{"name": "fifo"}, {"name": "tag-priority", "args": {"host_wait": "off"},
                                                      "label": "tag-priority"}]  # fmt: skip
    assert callable(_planned)


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*/claims.yaml")), ids=lambda p: p.parent.name)
def test_nothing_was_tuned_only_with_an_empty_tuned_list(path):
    text = path.read_text()
    tuned = load_tuned(path)
    if re.search(r"nothing was tuned", text, re.I):
        assert not tuned, f"{path}: says nothing was tuned but lists {[t.name for t in tuned]}"
    for t in tuned:  # each commit is one of this repository's (the value before is in its history)
        assert re.fullmatch(r"[0-9a-f]{7,40}", t.commit)


def test_a_stale_section_is_listed_and_marked(tmp_path):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    claims = papers / "dgtp" / "claims.yaml"
    claims.write_text("title: t\nclaims:\n  - {claim: an outside system, paper: {value: 2, unit: x}, "
                      "not_reproduced: not here}\n")  # fmt: skip
    md = tmp_path / "REPRODUCTION.md"
    md.write_text(f"# x\n{block.SUMMARY_BEGIN}\n{block.SUMMARY_END}\n{BEGIN}\n{END}\n")
    from scenarios.reproduce import reproduce

    reproduce("dgtp", tmp_path / "out", quick=True, echo=lambda _: None, write=md, claims_dir=papers,
              papers=("dgtp",))  # fmt: skip
    said: list[str] = []
    assert block.check(md, papers, said.append) == 0 and said == ["every section is current"]
    claims.write_text(claims.read_text().replace("not here", "not here either"))
    said.clear()
    assert block.check(md, papers, said.append) == 1
    commit = block.head_commit()
    assert said[0] == f"stale since {commit}: railbed reproduce dgtp --quick --write REPRODUCTION.md"
    write_block(md, [], " --quick", papers, ("dgtp",))  # another write marks the kept section
    text = md.read_text()
    assert f"**Stale since {commit}**" in text and "| dgtp | `--quick` | 1 |" in text
    reproduce("dgtp", tmp_path / "out", quick=True, echo=lambda _: None, write=md, claims_dir=papers,
              papers=("dgtp",))  # fmt: skip
    assert "Stale since" not in md.read_text() and block.check(md, papers, said.append) == 0


def test_the_summary_counts_each_claim_once_from_the_largest_size():
    row = "| {} | r | p | 1x | {} | - | - | `c` |"
    head = "| claim | ran | paper | railbed | verdict | room (baseline) | fidelity | command |\n| --- |\n"
    quick = head + "\n".join(row.format(c, "quick: no verdict") for c in "abc") + "\n" + row.format("d", "input check")
    full = head + row.format("a", "holds") + "\n" + row.format("b", "does not hold") + "\n" + row.format("c", "skipped")
    full += "\n" + row.format("a [value before tuning: x = 1]", "does not hold")
    full += "\n" + row.format("e", f"{EXPLAINED} the setup's room, 1.08x, is under the 1.25x that holds)")
    sections = {("p", " --quick"): quick, ("p", ""): full}
    lines = block.summary(sections, ("p",))
    cells = lines[2].split(" | ")
    counts = dict(zip(block.COLUMNS, cells[2:]))
    assert counts["claims"] == "5" and counts["hold"] == "1" and counts["do not hold"] == "1"
    assert counts["explained"] == "1" and counts["quick: no verdict"] == "1" and counts["input check"] == "1"


def test_claims_sharing_a_text_count_once_each():
    """Hermod's Fig. 5.11 rows at 16 and 32 GPUs share their text: the summary counted them once
    (18 of Hermod's 40 claims); the n-th row of a text is the n-th claim of that text."""
    row = "| {} | r | p | 1x | {} | - | - | `c` |"
    head = "| claim | ran | paper | railbed | verdict | room (baseline) | fidelity | command |\n| --- |\n"
    quick_rows = [("a", "skipped"), ("a", "quick: no verdict"), ("b", "skipped")]
    quick = head + "\n".join(row.format(c, v) for c, v in quick_rows)
    full = head + "\n".join(row.format(c, v) for c, v in [("a", "holds"), ("a", "skipped"), ("b", "skipped")])
    lines = block.summary({("p", " --quick"): quick, ("p", ""): full}, ("p",))
    counts = dict(zip(block.COLUMNS, lines[2].split(" | ")[2:]))
    assert counts["claims"] == "3" and counts["hold"] == "1" and counts["quick: no verdict"] == "1"
    assert counts["skipped"] == "1"


NUMBER = r"([-+]?[\d.]+)(x| %)"
INTERVAL = re.compile(r"holds in ([\[(])" + NUMBER + ", " + NUMBER + r"([\])])")


def test_no_committed_row_holds_without_half_the_papers_effect():
    """No quick row judges; every committed row that holds is inside its printed interval (which
    carries the effect rule: tests above)."""
    sections = block.block_sections(COMMITTED.read_text().split(BEGIN, 1)[1].split(END, 1)[0])
    assert set(PAPERS) <= {p for p, _f in sections}
    for (paper, flags), text in sections.items():
        for line in text.splitlines():
            cells = re.split(r"(?<!\\) \| ", line[2:-2]) if line.startswith("| ") else []
            if len(cells) < 5 or not cells[4].startswith(("holds", "does not hold")):
                continue
            assert "--quick" not in flags.split(), (paper, flags, cells[0])
            m, v = INTERVAL.search(cells[2]), re.fullmatch(NUMBER, cells[3])
            if m and v:
                lo, hi, x = float(m.group(2)), float(m.group(4)), float(v.group(1))
                inside = (lo < x if m.group(1) == "(" else lo <= x) and (x < hi if m.group(6) == ")" else x <= hi)
                assert inside == cells[4].startswith("holds"), (paper, flags, cells[0])


def test_the_committed_summary_is_what_its_sections_give():
    text = COMMITTED.read_text()
    assert block.write_summary(text, PAPERS, ROOT / "scenarios") == text


def test_the_check_command_exits_1_on_a_stale_section(tmp_path, capsys):
    """``railbed reproduce --check FILE``: a section without an inputs line (made before sections
    recorded them) is stale; the command names it and exits 1."""
    from cli import main

    md = tmp_path / "R.md"
    md.write_text(f"{BEGIN}\n<!-- reproduce:section dgtp --quick -->\n\n### dgtp: t\n\nold\n{END}\n")
    assert main(["reproduce", "--check", str(md)]) == 1
    assert "stale since unknown: railbed reproduce dgtp --quick --write R.md" in capsys.readouterr().out
