"""A section's run groups (scenarios.groups): each made once, few held, the rest read again.

The rows of a section read the same numbers whether it holds every group or none."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

import scenarios.groups as groups_mod
from scenarios.groups import Groups
from scenarios.reproduce import notes, reproduce_paper
from tests.test_reproduce import CLAIMS, SCENARIO


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


TWO_GROUPS = CLAIMS.replace(
    "  - id: agree\n",
    "  - id: fifo-big\n    claim: FIFO at twice the gradient\n    paper: {value: 1, unit: us, source: Table 2}\n"
    f"    scenario: {CLAIMS.split('scenario: ')[1].splitlines()[0]}\n    scheduler: fifo\n    metric: makespan\n"
    "    set: {job.args.gradient: 2MB}\n  - id: agree\n",
)


def jobs_section(tmp_path, jobs: int, monkeypatch, fail: str | None = None):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True, exist_ok=True)
    (papers / "dgtp" / "claims.yaml").write_text(TWO_GROUPS)
    real, runs = groups_mod.run_group, tmp_path / f"runs{jobs}"
    runs.mkdir(exist_ok=True)

    def run_group(claim, planned, out, *rest):  # forked workers inherit it: a file per run
        (runs / f"{out.name}.{__import__('os').getpid()}").touch()
        if fail and claim.id == fail:
            raise RuntimeError(f"group of {fail} failed")
        return real(claim, planned, out, *rest)

    monkeypatch.setattr(groups_mod, "run_group", run_group)
    said = []
    _, rows = reproduce_paper("dgtp", tmp_path / f"out{jobs}", True, False, said.append, papers, plots=False, jobs=jobs)
    cells = [(r.value, r.verdict, r.ran, r.room, r.fidelity) for r in rows]
    return cells, notes(rows), sorted(runs.iterdir()), said


def test_groups_run_at_once_give_the_rows_of_groups_run_in_turn(tmp_path, monkeypatch):
    """``--jobs 2``: the two simulated groups run in two forked processes, once each, and the
    rows and notes are those of the section run in turn; the crosscheck row is not run early."""
    import os

    one, one_notes, one_runs, _ = jobs_section(tmp_path, 1, monkeypatch)
    two, two_notes, two_runs, said = jobs_section(tmp_path, 2, monkeypatch)
    assert two == one and two_notes == one_notes
    assert len(one_runs) == len(two_runs) == 2  # each group once
    assert all(p.suffix != f".{os.getpid()}" for p in two_runs)  # in workers, not in this process
    assert "  2 simulated run groups, 2 at once (--jobs 2)" in said


def counting_builds(monkeypatch, where: Path) -> Callable[[], tuple[int, int]]:
    """Count every job built (``scenarios.runner._job``), in this process and in the workers it
    forks (a file each in ``where``): returns () -> (builds here, builds elsewhere)."""
    import itertools
    import os

    import scenarios.runner as runner

    real, where, here, n = runner._job, where / "builds", os.getpid(), itertools.count()
    where.mkdir()

    def job(*args):
        (where / f"{os.getpid()}.{next(n)}").touch()  # a name of its own in each process
        return real(*args)

    monkeypatch.setattr(runner, "_job", job)
    pids = lambda: [int(p.name.split(".")[0]) for p in where.iterdir()]  # noqa: E731
    return lambda: (pids().count(here), len(pids()) - pids().count(here))


@pytest.mark.parametrize("jobs, here, workers", [(1, 2, 0), (2, 0, 2)])
def test_a_groups_job_is_built_once_and_only_where_the_group_runs(tmp_path, monkeypatch, jobs, here, workers):
    """Two run groups (three rows read them): each one's job is built once, by the process that runs
    it, and neither planning the groups (``--jobs 2``) nor labelling a row builds one. A job at the
    papers' sizes takes a minute to build; this process built every group's job to plan it and each
    row's again, and its workers built them once more (about 40 of DGTP's 95-minute section)."""
    builds = counting_builds(monkeypatch, tmp_path)
    jobs_section(tmp_path, jobs, monkeypatch)
    assert builds() == (here, workers)


def test_a_section_resumed_reads_its_groups_without_building_a_job(tmp_path, monkeypatch):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(TWO_GROUPS)
    made = [reproduce_paper("dgtp", tmp_path / "out", True, False, lambda _: None, papers, plots=False)]
    builds = counting_builds(monkeypatch, tmp_path)
    made.append(reproduce_paper("dgtp", tmp_path / "out", True, False, lambda _: None, papers, True, plots=False))
    assert builds() == (0, 0)
    cells = [[(r.value, r.verdict, r.ran, r.room, r.fidelity) for r in rows] for _, rows in made]
    assert cells[0] == cells[1]


def test_a_planned_groups_labels_are_its_runs_without_a_job_built():
    """A load sweep's runs are ``<label>@<load>``: :func:`scenarios.runner.run_labels` reads them from
    the mapping, in the order the built scenario runs them."""
    from scenarios.sweep import scenario_mapping

    data, base = scenario_mapping(str(Path(groups_mod.__file__).parent / "leo" / "kvs-b.yaml"), Path("."))
    data["job"]["args"]["duration"], data["loads"] = "20us", [5e5, 3e6]  # two small loads
    planned = groups_mod.Planned(data, base)
    labels = planned.labels
    assert "scenario" not in planned.__dict__ and any("@" in label for label in labels)
    sc = planned.scenario
    assert labels == [spec.run_label for spec, _job in sc.points(sc.schedulers)]


def test_a_group_failing_in_a_worker_fails_the_section(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="group of fifo-big failed"):
        jobs_section(tmp_path, 2, monkeypatch, fail="fifo-big")


def test_an_interrupt_of_this_process_alone_stops_the_workers_and_starts_no_other_group(tmp_path, monkeypatch):
    """``kill -INT`` of the section's process (not of its process group): its workers are
    interrupted too, and the group the pool had queued never starts (it waited for two groups of
    tens of minutes and started a third, 2026-11-30)."""
    import multiprocessing
    import os
    import signal
    import threading
    import time

    def run_group(claim, sc, out, echo, resume, plots, inputs):
        (tmp_path / f"started-{out.name}").touch()
        time.sleep(60)

    monkeypatch.setattr(groups_mod, "run_group", run_group)
    plan = [(f"g{i}", _Claim(), None, tmp_path / f"g{i}") for i in range(4)]
    said = []
    threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        groups_mod.prerun(plan, 2, Groups(said.append, False, False, "v2_x"))
    assert time.monotonic() - t < 20
    assert sorted(p.name for p in tmp_path.glob("started-*")) == ["started-g0", "started-g1"]
    time.sleep(1.0)
    assert sorted(p.name for p in tmp_path.glob("started-*")) == ["started-g0", "started-g1"]
    assert multiprocessing.active_children() == []


def test_a_section_with_emulate_reads_the_simulated_groups_of_the_one_without(tmp_path):
    """A simulated group's digest is its section's without ``--emulate`` (the code a simulated run can
    execute): ``X --emulate --resume`` reads the simulated groups ``X`` made into the same ``--out``.
    Before, the emulator's files in the section's digest made it run them all again (DGTP's 34
    simulated minutes before its emulated ones), and its header now counts the groups it read."""
    from scenarios.block import head_commit

    papers, out = tmp_path / "papers", tmp_path / "out"
    (papers / "dgtp").mkdir(parents=True)
    simulated = re.sub(r"  - id: agree\n(    .*\n)+", "", TWO_GROUPS)  # no emulated row: no testbed here
    assert "backend: crosscheck" not in simulated
    (papers / "dgtp" / "claims.yaml").write_text(simulated)
    made, said, tally = {}, [], {}
    reproduce_paper("dgtp", out, True, False, lambda _: None, papers, plots=False, tally=made)
    assert made == {"groups": 2, "read": []}
    _, rows = reproduce_paper("dgtp", out, True, True, said.append, papers, True, plots=False, tally=tally)
    assert tally == {"groups": 2, "read": [head_commit()] * 2}, said
    assert not any(" -> " in line for line in said), said  # nothing ran again
    assert len([line for line in said if "finished earlier" in line]) == 2


def test_a_groups_inputs_file_keeps_its_commit_and_an_older_one_still_reads(tmp_path):
    from scenarios.block import head_commit

    papers, out = tmp_path / "papers", tmp_path / "out"
    (papers / "dgtp").mkdir(parents=True)
    (papers / "dgtp" / "claims.yaml").write_text(CLAIMS)
    reproduce_paper("dgtp", out, True, False, lambda _: None, papers, plots=False)
    [run_dir] = [p for p in (out / "dgtp").iterdir() if p.is_dir()]
    digest, commit = groups_mod.made_from(run_dir)
    assert digest.startswith("v2_") and commit == head_commit()
    (run_dir / "inputs.txt").write_text(digest + "\n")  # a group made before the commit was kept
    assert groups_mod.made_from(run_dir) == (digest, "unknown")
    tally = {}
    reproduce_paper("dgtp", out, True, False, lambda _: None, papers, True, plots=False, tally=tally)
    assert tally["read"] == ["unknown"]
    assert groups_mod.made_from(tmp_path) == ("unknown", "unknown")


def test_a_copy_of_the_tree_gives_the_same_run_keys(tmp_path):
    """A run key names its scenario from the claims file's folder, so a frozen copy of the tree
    (a worktree made to regenerate a section) finds the groups another copy made (``--resume``);
    different scenarios keep different keys."""
    from scenarios.claims import load_claims

    keys = []
    for copy in ("a", "deeper/b"):
        here = tmp_path / copy / "papers" / "dgtp"
        here.mkdir(parents=True)
        for name in ("one.yaml", "two.yaml"):
            cluster = str(SCENARIO.parent.parent / "rail-4x4.yaml")
            (here / name).write_text(SCENARIO.read_text().replace("../rail-4x4.yaml", cluster))
        (here / "claims.yaml").write_text(CLAIMS.replace(str(SCENARIO), "one.yaml"))
        _, claims, _ = load_claims(here / "claims.yaml")
        keys.append([c.run_key({}, q) for c in claims if c.scenario for q in (False, True)])
        claims[0].scenario = here / "two.yaml"
        keys[-1].append(claims[0].run_key({}, False))
    assert keys[0] == keys[1]
    assert keys[0][-1] != keys[0][0]  # another scenario file: another group


def test_the_wall_line_says_how_many_groups_were_read_from_earlier_runs():
    from scenarios.block import WALL, head_commit, wall_line

    assert wall_line(60.0) == f"Wall time of the command: 60 s (1.0 min), at commit {head_commit()}."
    line = wall_line(6.0, {"groups": 3, "read": ["abc1234", "def5678", "abc1234"]})
    assert line.endswith("; 3 of its 3 run groups read from earlier runs of the same inputs (`--resume`; "
                         "made 2 at abc1234, 1 at def5678).")  # fmt: skip
    assert WALL.sub("", line + "\n\n") == ""  # left out of the comparison of two sections, as the time
    assert wall_line(6.0, {"groups": 3, "read": []}) == wall_line(6.0)


def test_a_row_without_quick_overrides_reads_one_group_at_both_sizes(tmp_path):
    """A row whose claim has no ``quick`` overrides runs the same job at both sizes, so ``--quick``
    and the claims' size name one run group, and the second section made into the same ``--out``
    reads it (``--resume``) instead of running it again (Hermod's and AdaGL's emulated rows: one
    testbed run for the two sections). A row with ``quick`` overrides keeps two groups."""
    from scenarios.claims import load_claims

    papers, out = tmp_path / "papers", tmp_path / "out"
    (papers / "dgtp").mkdir(parents=True)
    same = CLAIMS.replace("    quick: {job.args.gradient: 1MB}\n", "", 1)  # prio: no quick overrides
    same = re.sub(r"  - id: agree\n(    .*\n)+", "", same)  # no emulated row: no testbed here
    (papers / "dgtp" / "claims.yaml").write_text(same)
    _, claims, _ = load_claims(papers / "dgtp" / "claims.yaml")
    prio, fifo_time = claims[0], claims[1]
    assert prio.run_key({}, True) == prio.run_key({}, False)
    assert fifo_time.run_key({}, True) != fifo_time.run_key({}, False) and fifo_time.run_key({}, True).count("-quick")
    reproduce_paper("dgtp", out, False, False, lambda _: None, papers, plots=False)
    said, tally = [], {}
    reproduce_paper("dgtp", out, True, False, said.append, papers, True, plots=False, tally=tally)
    assert tally["groups"] == 2 and len(tally["read"]) == 1, said  # prio's group read, fifo-time's made
