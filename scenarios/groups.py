"""A section's run groups: each run once, at most :data:`KEEP` of them in memory.

A run group is one scenario run for every scheduler it names (:func:`run_group`); the
rows of one experiment share it. Its results (item records, events, traces) can be
gigabytes at the papers' sizes, so :class:`Groups` holds the most recently used
:data:`KEEP` groups and lets the others go. A group let go is read again from its
directory (:func:`finished`) when a later row needs it: it finished there, from the
section's own inputs. Rows keep what they read from their runs (``reproduce._let_go``),
never the runs.

With ``railbed reproduce --jobs N``, :func:`prerun` first runs the section's simulated groups,
N at once in processes forked from this one (as ``railbed sweep`` runs points locally); the
rows then read each from its directory. Emulated and crosscheck groups stay in the rows' turn
(one testbed per machine), as do groups whose size a probe decides. N groups at once need N
times the memory of one.

A group is planned as its scenario's mapping (:class:`Planned`), and its jobs are built only
where it runs (:func:`run_group`): reading it back (:func:`finished`) and labelling its rows
need the mapping and its run labels. A job at the papers' sizes takes about 50 s to build
(DGTP's testbed products), and the parent of ``--jobs N`` built every group's jobs to plan it,
to label its rows and to read it back, which its workers then built again: about 40 of DGTP's
95-minute section.

A group's directory keeps, in ``inputs.txt``, the digest of the code it ran and the commit it was
made at. The digest is that of the group's own mode (``reproduce.group_inputs``): a simulated group counts the
code a simulated run can execute, the section's digest without ``--emulate``; an emulated or
crosscheck group the section's with it. So ``railbed reproduce X --emulate --resume`` reads the
simulated groups ``railbed reproduce X --resume`` made from the same code into the same ``--out``,
and runs only the emulated ones; the section's header says how many groups it read from earlier
runs and at which commits (:attr:`Groups.read`).

Why: ``railbed reproduce hermod --full-size`` held every group it had run until it
wrote the section: 25 groups whose results fill 0.4-2.7 GB each on disk. Table 5.2's
group then took the process to 14.07 GB RSS, and the kernel's OOM killer ended it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from railbed.results import RunResult
from scenarios.block import head_commit
from scenarios.claims import MODES, Claim
from scenarios.crosscheck import compare

INPUTS = "inputs.txt"  # a run group's inputs digest and the commit it was made at (run_group, --resume)
KEEP = 2  # groups held in memory: the one a row reads and the one before it (a sweep's rows alternate)


class Planned:
    """A run group's scenario before it is built: its mapping and the base directory its relative
    paths name (``arrays``: how its job is built, ``Claim.arrays``). Building the scenario
    (:attr:`scenario`, once) builds its jobs, about 50 s each at the papers' sizes, so only the
    process that runs the group does it; planning the group, reading it back (:func:`finished`) and
    labelling its rows need the mapping and its run labels (:attr:`labels`)."""

    def __init__(self, mapping: dict[str, Any], base: Path = Path("."), arrays: bool | str = False):
        self.mapping, self.base, self.arrays = mapping, base, arrays

    @cached_property
    def scenario(self):
        """The :class:`scenarios.runner.Scenario`, its jobs built (the first time only)."""
        from scenarios.runner import Scenario

        return Scenario.from_dict(self.mapping, self.base, arrays=self.arrays)

    @cached_property
    def labels(self) -> list[str]:
        """Its runs' labels (their directories), in the order of its runs, no job built."""
        from scenarios.runner import run_labels

        return run_labels(self.mapping, self.base)

    @property
    def name(self) -> str:
        """The scenario's name (``Scenario.name``) as its mapping gives it."""
        return self.mapping.get("name", "scenario")


def run_group(
    claim: Claim,
    planned: Planned,
    out: Path,
    echo: Callable[[str], None],
    resume: bool = False,
    plots: bool = True,
    inputs: str = "",
) -> dict[str, Any]:
    """Run the scenario ``planned`` of ``claim`` once (its jobs built here); return what its rows read
    (results, crosschecks). With ``resume``, an earlier finished run of the same scenario in ``out`` is
    read instead (no job built), if it was made from ``inputs`` (the digest of the group's mode,
    ``reproduce.group_inputs``, kept in ``out/inputs.txt`` with the commit); such a group's answer says so
    (``made_at``: that commit)."""
    made, commit = made_from(out) if resume else ("unknown", "unknown")
    got = finished(planned, claim.mode, out) if resume and made == inputs else None
    if got is not None:
        echo(f"  {claim.mode} {planned.name}: finished earlier in {out} (--resume)")
        return {**got, "made_at": commit}
    sc = planned.scenario
    if resume and made != inputs and (out / "scenario.yaml").exists():
        echo(f"  {claim.mode} {sc.name}: {out} was made from other inputs ({made}, now {inputs}): run again")
    echo(f"  {claim.mode} {sc.name} -> {out}")
    got = _run(claim, sc, out, plots)
    (out / INPUTS).write_text(f"{inputs} {head_commit()}\n")
    return got


def made_from(out: Path) -> tuple[str, str]:
    """(inputs digest, commit) a group's directory was made from; ``unknown`` for what it does not
    record (a directory from before the commit was kept holds the digest alone)."""
    if not (out / INPUTS).exists():
        return "unknown", "unknown"
    digest, _, commit = (out / INPUTS).read_text().strip().partition(" ")
    return digest or "unknown", commit or "unknown"


def _run(claim: Claim, sc, out: Path, plots: bool) -> dict[str, Any]:
    from scenarios.runner import crosscheck_scenario, run_scenario, simulate_scenario

    quiet = lambda _msg: None  # noqa: E731 - the scenario's own progress is in its directory
    if claim.mode == "simulate":
        # full-size rows are the big jobs (1024+ GPUs): no figures, which would read every item
        plots = plots and not claim.full_size
        return {"runs": simulate_scenario(sc, out, echo=quiet, backend=claim.engine, plots=plots)}
    if claim.mode == "emulate":
        return {"runs": run_scenario(sc, out, echo=quiet, plots=plots)}
    checks = crosscheck_scenario(sc, out, echo=quiet, plots=plots)
    runs = [RunResult.load(out / s.run_label / "result.json") for s in sc.schedulers]
    return {"runs": runs, "checks": checks}


def finished(planned: Planned, mode: str, out: Path) -> dict[str, Any] | None:
    """What :func:`run_group` returns, read from ``out`` if a run of exactly the scenario ``planned``
    finished there: its saved ``scenario.yaml`` is the mapping, its runs read by their labels (no
    job built: the group ran elsewhere, in a worker or an earlier section)."""
    from scenarios.runner import PARTIAL

    saved = out / "scenario.yaml"
    if (out / PARTIAL).exists() or not saved.exists():
        return None
    if yaml.safe_load(saved.read_text()) != yaml.safe_load(yaml.safe_dump(planned.mapping, sort_keys=False)):
        return None
    names = ("result.json", "simulated.json") if mode == "crosscheck" else ("result.json",)
    paths = [[out / label / name for name in names] for label in planned.labels]
    if not all(p.exists() for group in paths for p in group):
        return None
    runs = [RunResult.load(group[0]) for group in paths]
    if mode != "crosscheck":
        return {"runs": runs}
    return {"runs": runs, "checks": [compare(r, RunResult.load(g[1])) for r, g in zip(runs, paths)]}


_PLAN: list[tuple] = []  # prerun's groups, read by the forked workers (_run_planned)


def prerun(plan: list[tuple], jobs: int, groups: Groups) -> None:
    """Run the groups of ``plan`` ((key, claim, :class:`Planned`, directory) each) in ``jobs``
    processes forked from this one, each as :func:`run_group` would in the rows' turn (its jobs built
    in its worker, none here); they are then made in this section (``groups.made``) and the rows read
    them from their directories. A group that fails fails the section, as it would in turn; Ctrl-C
    stops the workers (they clean up)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    global _PLAN
    todo = [p for p in plan if p[0] not in groups.made]
    if not todo:
        return
    workers = min(jobs, len(todo))
    groups.echo(f"  {len(todo)} simulated run groups, {workers} at once (--jobs {jobs})")
    _PLAN = todo
    try:
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            futures = {pool.submit(_run_planned, i, groups.resume, groups.plots, groups.inputs["simulate"]): i
                       for i in range(len(todo))}  # fmt: skip
            try:
                for done, future in enumerate(as_completed(futures), 1):
                    made_at = future.result()
                    groups.made.add(todo[futures[future]][0])
                    if made_at is not None:
                        groups.read.append(made_at)
                    groups.echo(f"  run groups finished: {done} of {len(todo)}")
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                _interrupt_workers()
                raise
    finally:
        _PLAN = []


def _interrupt_workers() -> None:
    """SIGINT to every worker still alive: a Ctrl-C reaches them with the terminal's process group,
    but a SIGINT sent to this process alone (``kill -INT``) or an error here did not, and the pool
    waited for their groups (tens of minutes) and started the one it had queued."""
    import multiprocessing
    import signal

    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signal.SIGINT)
        except ProcessLookupError:
            pass


def _run_planned(i: int, resume: bool, plots: bool, inputs: str) -> str | None:
    """In a worker: run group ``i`` of :data:`_PLAN` (its jobs built here, its results stay in its
    directory); the commit it was made at if it was read from an earlier run instead."""
    _key, claim, planned, out = _PLAN[i]
    try:
        return run_group(claim, planned, out, print, resume, plots, inputs).get("made_at")
    except KeyboardInterrupt:  # its group cleaned up: the worker ends, so the pool starts no other
        os._exit(130)


class Groups:
    """One section's run groups by key: each made once (:func:`run_group`), the :data:`KEEP` most
    recently used held, the others read again from their directories when asked for. ``inputs``:
    the digest a group of each mode is made from (one string: every mode's)."""

    def __init__(self, echo: Callable[[str], None], resume: bool, plots: bool, inputs: str | dict[str, str],
                 keep: int | None = None):  # fmt: skip
        self.echo, self.resume, self.plots = echo, resume, plots
        self.inputs = inputs if isinstance(inputs, dict) else dict.fromkeys(MODES, inputs)
        self.keep = KEEP if keep is None else keep
        self.held: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.made: set[str] = set()  # keys run (or resumed) in this section
        self.reads = 0  # groups read again after being let go
        self.read: list[str] = []  # per group read from an earlier run (--resume): the commit it was made at

    def get(self, key: str, claim: Claim, planned: Planned, out: Path) -> dict[str, Any]:
        """The group ``key`` (scenario ``planned`` of ``claim``, results in ``out``); its jobs are
        built only if it runs here."""
        if key in self.held:
            self.held.move_to_end(key)
            return self.held[key]
        if key in self.made:
            got = finished(planned, claim.mode, out)
            if got is None:
                raise RuntimeError(f"run group {out} finished in this section but cannot be read again")
            self.reads += 1
        else:
            got = run_group(claim, planned, out, self.echo, self.resume, self.plots, self.inputs[claim.mode])
            self.made.add(key)
            if "made_at" in got:
                self.read.append(got["made_at"])
        self.held[key] = got
        while len(self.held) > self.keep:
            self.held.popitem(last=False)
        return got
