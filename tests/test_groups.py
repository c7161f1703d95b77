"""A section's run groups (scenarios.groups): each made once, few held, the rest read again.

The rows of a section read the same numbers whether it holds every group or none."""

from __future__ import annotations

from pathlib import Path

import pytest

import scenarios.groups as groups_mod
from scenarios.groups import Groups
from scenarios.reproduce import notes, reproduce_paper
from tests.test_reproduce import CLAIMS


def counting(monkeypatch, readable: bool = True):
    made, read = [], []

    def run_group(claim, sc, out, echo, resume, plots, inputs):
        made.append(out.name)
        return {"runs": [out.name]}

    def finished(sc, mode, out):
        read.append(out.name)
        return {"runs": [out.name]} if readable else None

    monkeypatch.setattr(groups_mod, "run_group", run_group)
    monkeypatch.setattr(groups_mod, "finished", finished)
    return made, read


class _Claim:
    mode = "simulate"


def test_each_group_is_made_once_and_one_let_go_is_read_again(monkeypatch):
    made, read = counting(monkeypatch)
    groups = Groups(lambda _: None, resume=False, plots=False, inputs="v2_x", keep=2)
    for key in "abcab":
        assert groups.get(key, _Claim(), None, Path(key)) == {"runs": [key]}
    assert made == ["a", "b", "c"]  # never run twice
    assert read == ["a", "b"]  # a went when c came; then b went when a came back
    assert list(groups.held) == ["a", "b"] and groups.reads == 2
    assert groups.get("b", _Claim(), None, Path("b")) and read == ["a", "b"]  # held: no read


def test_a_group_that_cannot_be_read_again_is_an_error_not_a_second_run(monkeypatch):
    made, _ = counting(monkeypatch, readable=False)
    groups = Groups(lambda _: None, resume=False, plots=False, inputs="v2_x", keep=0)
    groups.get("a", _Claim(), None, Path("a"))
    with pytest.raises(RuntimeError, match="cannot be read again"):
        groups.get("a", _Claim(), None, Path("a"))
    assert made == ["a"]


def section(tmp_path, keep: int, monkeypatch):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True, exist_ok=True)
    (papers / "dgtp" / "claims.yaml").write_text(CLAIMS)
    monkeypatch.setattr(groups_mod, "KEEP", keep)
    read = []
    real = groups_mod.finished
    monkeypatch.setattr(groups_mod, "finished", lambda *a: read.append(1) or real(*a))
    _, rows = reproduce_paper("dgtp", tmp_path / f"out{keep}", True, False, lambda _: None, papers, plots=False)
    cells = [(r.value, r.verdict, r.ran, r.room, r.fidelity) for r in rows]
    assert all(p.runs == {} for r in rows for p in r.points)  # a judged row keeps no runs
    return cells, notes(rows), len(read)


def test_a_section_that_holds_no_group_gives_the_same_rows_and_notes(tmp_path, monkeypatch):
    held, held_notes, held_reads = section(tmp_path, 2, monkeypatch)
    none, none_notes, none_reads = section(tmp_path, 0, monkeypatch)
    assert (held_reads, none_reads) == (0, 1)  # the second row's group was let go and read again
    assert held == none and held_notes == none_notes
    note = next(n for n in held_notes if "FIFO took" in n)
    assert "FIFO took n/a" not in note  # the run's field, kept by the row before its runs went
