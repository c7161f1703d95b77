"""Sweeps: one scenario over a grid of settings, run on Ray (``railbed sweep sweep.yaml``).

A sweep file::

    name: llm-rates
    scenario: ../examples/scenarios/llm-small.yaml   # a path (relative to this file) or an inline mapping
    backend: simulate                 # simulate (default) | emulate
    axes:                             # every combination of the values is one point
      rate: [50Gbit, 100Gbit]         # every NIC and uplink rate of the cluster
      job.args.gradient: [8MB, 32MB]  # any dotted key of the scenario: model sizes, offered load, ...
      scale: [500, 1000]              # the scenario's k (emulate)
      schedulers: [[fifo], [fifo, small-first]]   # scheduler lists (and their arguments)
      seed: [1, 2]                    # seeds the point's Python and numpy RNGs; recorded
    metrics: [makespan, fct_p99]      # table columns (railbed/metrics.py), default DEFAULT_METRICS
    plots: false                      # figures in every point's directory (default false: railbed plot later)

Output (``--out``, default ``results/sweep-<name>``): ``points/<point>/``
per point, the results directory of ``railbed simulate`` (or ``run``) plus
``log.txt`` and ``point.json`` (axis values, status, error, metric rows,
wall time, start time, host and worker pid), written last;
``sweep.csv`` and ``sweep.json``: one row per point and run (status, axis
values, metrics; a failed point has one row with its error), rewritten as
points finish; ``provenance.json`` and the sweep file.

Before anything runs or is written, every point is checked as a single run
is (``Scenario.from_dict`` and ``scenarios.runner.preflight``: pins, each
scheduler's check and placement, ``--out``, and for emulated points run here
this machine's limits), with progress and an estimate of how long it takes;
the first bad point ends the sweep with exit 2 naming it. A grid of more
than ``--max-points`` points (default :data:`MAX_POINTS`) is refused at once
(exit 2, its size named): at the example's 2 s per point on 2 cores, 1000
points are 17 minutes, and a grid larger than that is more often a typo (an
axis of a thousand values) than a plan. The cluster is reached before
anything is written (``scenarios.ray_cluster``: exit 1 with one line when it
cannot be reached or refuses the token).

Re-running the same command resumes: points whose ``point.json`` says ``ok``
are skipped, failed and missing ones run. Ctrl-C stops the sweep; what has
finished stays.

Where points run: on this machine by default, without Ray (:func:`run_local`:
one point in this process, several in a pool of forked processes, ``--cpus``
of them, default all; Ray's start took 16 of the 20.5 s of a two-point sweep
and warned about tokens on a purely local run); on Ray, the optional extra
``railbed[sweep]``, when ``--address`` or ``RAY_ADDRESS`` names a cluster,
or locally with ``--ray``. Simulated points take one CPU
each and run in parallel. An emulated point needs the machine to itself
(one testbed per machine), so it takes the custom resource
``railbed_testbed``, of which the local instance has 1: emulated points run
one at a time locally and one per node on a cluster whose nodes were
started with ``ray start ... --resources '{"railbed_testbed": 1}'`` (as
root, with railbed provisioned). A point's files travel back to the driver
as the task's return value, so nodes need no shared file system. Setting up
a cluster, its token included: ``docs/sweeps.md``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import random
import re
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from railbed import provenance
from railbed.backend import backend as get_backend
from railbed.errors import EnvironmentProblem, SpecError
from railbed.metrics import DEFAULT_METRICS, METRICS
from railbed.safeload import load_yaml_file

KEYS = {"name", "scenario", "backend", "axes", "metrics", "plots"}
MAX_POINTS = 1000  # default --max-points (module docstring)
PROGRESS_SECONDS = 2.0  # between progress lines while points are validated
MODES = {"simulate": "fluid", "emulate": "emulate"}  # a sweep's ``backend`` key -> the backend its points run on
TESTBED = "railbed_testbed"
SHORTCUTS = {"rate", "seed"}


def needs_testbed(mode: str) -> bool:
    """Whether the points of a sweep in ``mode`` (:data:`MODES`) build a cluster: root, one testbed
    per machine (their backend's capabilities)."""
    return get_backend(MODES[mode]).capabilities.needs_root


# ------------------------------------------------------------------ points
def set_dotted(data: dict, key: str, value: Any, where: str) -> None:
    """``data["a"]["b"] = value`` for ``key = "a.b"``, creating missing mappings; a whole-number
    part indexes a list (``cluster.servers.0.nics``)."""
    node: Any = data
    parts = key.split(".")
    for part in parts[:-1]:
        if isinstance(node, list):
            node = _item(node, part, key, where)
        else:
            node = node.setdefault(part, {})
        if not isinstance(node, (dict, list)):
            raise SpecError(where, f"{part!r} in {key!r} is not a mapping in the scenario")
    if isinstance(node, list):
        _item(node, parts[-1], key, where)
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value


def get_dotted(data: Any, key: str) -> Any:
    """The value at ``key`` (as :func:`set_dotted` reads it), or None where the path ends."""
    node = data
    for part in key.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _item(node: list, part: str, key: str, where: str) -> Any:
    if not part.isdigit() or int(part) >= len(node):
        raise SpecError(where, f"{part!r} in {key!r} is not an index of a list of {len(node)}")
    return node[int(part)]


def set_rate(scenario: dict, rate: Any) -> None:
    """Every NIC rate and the fabric's uplink rate (if it has one) of the inline cluster."""
    cluster = scenario.get("cluster")
    groups = cluster.get("servers") if isinstance(cluster, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise SpecError("axes.rate", "the scenario's cluster has no list of server groups to set the rate of")
    for group in groups:
        group["nic_rate"] = rate
    fabric = cluster.get("fabric")
    if isinstance(fabric, dict) and "uplink_rate" in fabric:
        fabric["uplink_rate"] = rate


def selected(points: list[Point], only: list[str] | None) -> list[Point]:
    """The points whose id contains every text of ``only`` (all without it); SpecError naming ``--only``
    when none does."""
    if not only:
        return points
    kept = [p for p in points if all(text in p.id for text in only)]
    if not kept:
        some = ", ".join(p.id for p in points[:3])
        raise SpecError("--only", f"no point's id contains {' and '.join(map(repr, only))} (ids: {some}, ...)")
    return kept


def point_id(values: dict[str, Any]) -> str:
    """A directory name for a point: readable axis values plus a hash of all of them (stable across runs)."""
    digest = hashlib.sha1(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:8]
    slug = "_".join(f"{k.split('.')[-1]}={v}" for k, v in values.items())
    slug = re.sub(r"[^A-Za-z0-9=._-]+", "-", slug)[:80]
    return f"{slug}-{digest}" if slug else digest


@dataclass
class Point:
    id: str
    values: dict[str, Any]
    scenario: dict[str, Any]  # the scenario mapping of this point, cluster inline, paths absolute
    seed: int | None = None


@dataclass
class Sweep:
    name: str
    scenario: dict[str, Any]
    base: Path
    mode: str = "simulate"  # MODES (the sweep file's ``backend`` key)
    axes: dict[str, list] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    plots: bool = False
    source: dict[str, Any] | None = None

    @classmethod
    def load(cls, path: str | Path) -> Sweep:
        path = Path(path)
        return cls.from_dict(load_yaml_file(path, "sweep"), path.parent)

    @classmethod
    def from_dict(cls, data: Any, base: Path = Path(".")) -> Sweep:
        if not isinstance(data, dict):
            raise SpecError("sweep", "expected a mapping at the top level")
        unknown = set(data) - KEYS
        if unknown:
            raise SpecError(sorted(unknown)[0], f"unknown key (known: {', '.join(sorted(KEYS))})")
        if "scenario" not in data:
            raise SpecError("scenario", "missing")
        scenario, sbase = scenario_mapping(data["scenario"], base)
        mode = str(data.get("backend", "simulate"))
        if mode not in MODES:
            raise SpecError("backend", f"must be simulate or emulate, got {mode!r}")
        axes = data.get("axes") or {}
        if not isinstance(axes, dict):
            raise SpecError("axes", "expected a mapping of axis -> list of values")
        for axis, values in axes.items():
            if not isinstance(values, list) or not values:
                raise SpecError(f"axes.{axis}", "expected a non-empty list of values")
        metrics = data.get("metrics", list(DEFAULT_METRICS))
        if not isinstance(metrics, list) or not metrics:
            raise SpecError("metrics", "expected a non-empty list")
        for i, m in enumerate(metrics):
            if m not in METRICS:
                raise SpecError(f"metrics[{i}]", f"unknown metric {m!r} (known: {', '.join(METRICS)})")
        plots = data.get("plots", False)
        if not isinstance(plots, bool):
            raise SpecError("plots", f"expected true or false, got {plots!r}")
        name = str(data.get("name", scenario.get("name", "sweep")))
        return cls(name, scenario, sbase, mode, {str(k): v for k, v in axes.items()}, metrics, plots, data)

    def size(self) -> int:
        """How many points the grid has (the product of the axes' lengths), without making them."""
        return math.prod(len(v) for v in self.axes.values())

    def shape(self) -> str:
        return " x ".join(f"{len(v)} {a}" for a, v in self.axes.items()) or "no axes"

    def grid(self) -> list[Point]:
        """Every combination of the axes' values applied to a copy of the scenario (not yet checked)."""
        out = []
        for combo in itertools.product(*self.axes.values()):
            values = dict(zip(self.axes, combo))
            data = copy.deepcopy(self.scenario)
            seed = None
            for axis, value in values.items():
                if axis == "rate":
                    set_rate(data, value)
                elif axis == "seed":
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise SpecError("axes.seed", f"expected integers, got {value!r}")
                    seed = value
                else:
                    set_dotted(data, axis, value, f"axes.{axis}")
            out.append(Point(point_id(values), values, data, seed))
        return out

    def points(
        self,
        echo: Callable[[str], None] | None = None,
        out: Path = Path("."),
        emulate_here: bool = False,
        only: list[str] | None = None,
    ) -> list[Point]:
        """The grid, every point checked as its own run would check it before starting
        (``Scenario.from_dict``, then ``scenarios.runner.preflight`` into ``out``, with this
        machine's emulation limits if ``emulate_here``); the first bad point is a SpecError naming
        it. Points whose scenarios are equal (they differ only in seed) are checked once. ``echo``
        gets an estimate after the second check (the first pays for imports), then progress
        every PROGRESS_SECONDS. ``only``: the points whose id contains every one of these texts
        (``--only rate=50Gbit``)."""
        points = selected(self.grid(), only)
        keys = [json.dumps(p.scenario, sort_keys=True, default=str) for p in points]
        distinct = len(set(keys))
        checked: set[str] = set()
        t0 = last = time.perf_counter()
        for point, key in zip(points, keys):
            if key in checked:
                continue
            t = time.perf_counter()
            try:
                _check_point(point.scenario, self.base, out, self.mode, emulate_here)
            except SpecError as exc:
                raise SpecError(f"point {point.id}: {exc.field}", exc.message) from None
            checked.add(key)
            now = time.perf_counter()
            if echo and len(checked) == 2 and distinct > 2:
                echo(f"  checking {distinct} scenarios first: about {(now - t) * (distinct - 2):.0f} s more "
                     f"({now - t:.3f} s for one)")  # fmt: skip
            elif echo and now - last >= PROGRESS_SECONDS and len(checked) > 2:
                left = (now - t0) / len(checked) * (distinct - len(checked))
                echo(f"  checked {len(checked)}/{distinct} ({now - t0:.0f} s, about {left:.0f} s left)")
                last = now
        return points


def _check_point(scenario: dict, base: Path, out: Path, mode: str, emulate_here: bool) -> None:
    """What ``railbed simulate`` / ``run`` check before they start (SpecError if anything fails);
    the check of this machine by a backend that builds a cluster only if the points run here."""
    from scenarios.runner import Scenario, preflight

    sc = Scenario.from_dict(scenario, base)
    checked = get_backend(MODES[mode])
    if needs_testbed(mode) and not emulate_here:
        checked = None
    preflight(sc, sc.schedulers, out, sc.scale, backend=checked)


# keys a sweep file has and a scenario never does: a sweep named as a sweep's scenario
SWEEP_ONLY = KEYS - {"name"}


def scenario_mapping(raw: Any, base: Path) -> tuple[dict, Path]:
    """The scenario as a mapping with its cluster inline and job file absolute, and its base directory."""
    where = "the inline scenario"
    if isinstance(raw, str):
        path = (base / raw).resolve()
        raw, base, where = load_yaml_file(path, "scenario"), path.parent, str(path)
    if not isinstance(raw, dict):
        raise SpecError("scenario", "expected a path or a mapping")
    nested = sorted(SWEEP_ONLY & set(raw))
    if nested:
        raise SpecError("scenario", f"{where} is a sweep file (it has {', '.join(nested)}), not a scenario: "
                        "a sweep's scenario is the scenario file it varies")  # fmt: skip
    for key in ("cluster", "job" if "jobs" not in raw else "jobs", "schedulers"):
        if key not in raw:
            raise SpecError(f"scenario.{key}", f"missing in {where}")
    data = copy.deepcopy(raw)
    if isinstance(data.get("cluster"), str):
        data["cluster"] = load_yaml_file(base / data["cluster"], "scenario.cluster")
    jobs = data.get("jobs") if isinstance(data.get("jobs"), list) else [data.get("job")]
    for job in jobs:  # a scenario of several jobs (issue 45): each one's file, as job's
        if isinstance(job, dict) and "file" in job:
            job["file"] = str((base / str(job["file"])).resolve())
    return data, base


# -------------------------------------------------------------- one point
def run_point(scenario: dict, base: str, mode: str, seed: int | None, plots: bool, metrics: list[str]) -> dict:
    """Run one point in a temporary directory; return its files (relative path -> bytes),
    its metric rows per run, its status and error, and its log. Never raises for a failed run."""
    from railbed.metrics import metric
    from railbed.results import RunResult
    from scenarios.runner import Scenario, run_scenario, simulate_scenario

    if seed is not None:
        random.seed(seed)
        import numpy

        numpy.random.seed(seed % 2**32)
    log: list[str] = []
    status, error, rows = "ok", None, []
    started, wall0 = time.time(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="railbed-point-") as tmp:
        out = Path(tmp)
        try:
            sc = Scenario.from_dict(scenario, Path(base))
            run = run_scenario if needs_testbed(mode) else simulate_scenario
            results: list[RunResult] = run(sc, out, echo=log.append, plots=plots)
            for r in results:
                rows.append({"run": r.scheduler, **{m: metric(r, m) for m in metrics}})
            scale = json.loads((out / "provenance.json").read_text())["scale"]
            seeds = {"sweep.seed": seed} if seed is not None else None
            provenance.write(out, scale=scale, scenario=scenario, extra_seeds=seeds)
        except Exception as exc:  # noqa: BLE001 - a failed point is recorded and the sweep goes on
            status, error = "error", f"{type(exc).__name__}: {exc}"
        files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    wall = time.perf_counter() - wall0
    return {"status": status, "error": error, "rows": rows, "log": log, "files": files, "wall_seconds": wall,
            "started": started, "host": os.uname().nodename, "pid": os.getpid()}  # fmt: skip


# ------------------------------------------------------------------- table
def point_done(out: Path, point: Point) -> dict | None:
    path = out / "points" / point.id / "point.json"
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    return rec if rec.get("status") == "ok" else None


def save_point(out: Path, point: Point, answer: dict) -> dict:
    """Write a finished point's files, then its ``point.json`` (the resume marker) last."""
    pdir = out / "points" / point.id
    pdir.mkdir(parents=True, exist_ok=True)
    for rel, data in answer.get("files", {}).items():
        (pdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (pdir / rel).write_bytes(data)
    prov = pdir / "provenance.json"
    if prov.exists():  # the worker's argv is Ray's; record the sweep's command
        data = json.loads(prov.read_text())
        data["command"] = {"argv": list(sys.argv), "cwd": os.getcwd(), "sweep_point": point.id}
        prov.write_text(json.dumps(data, indent=1) + "\n")
    rec = {k: answer.get(k) for k in ("status", "error", "rows", "wall_seconds", "started", "host", "pid")}
    rec.update(id=point.id, values=point.values, seed=point.seed)
    (pdir / "log.txt").write_text("\n".join(answer.get("log", [])) + "\n")
    (pdir / "point.json").write_text(json.dumps(rec, indent=1, default=str) + "\n")
    return rec


def table_rows(sweep: Sweep, records: list[dict]) -> list[dict]:
    out = []
    for rec in records:
        head = {"point": rec["id"], "status": rec["status"], **{a: rec["values"].get(a) for a in sweep.axes}}
        if rec["status"] != "ok" or not rec.get("rows"):
            out.append({**head, "run": None, **{m: None for m in sweep.metrics}, "error": rec.get("error")})
        for row in rec.get("rows") or []:
            out.append({**head, "run": row["run"], **{m: row.get(m) for m in sweep.metrics}, "error": None})
    return out


def write_table(sweep: Sweep, out: Path, records: list[dict]) -> list[dict]:
    import csv

    rows = table_rows(sweep, records)
    (out / "sweep.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    columns = ["point", "status", *sweep.axes, "run", *sweep.metrics, "error"]
    with open(out / "sweep.csv", "w", newline="") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    return rows


# --------------------------------------------------------------------- Ray
def object_store_bytes() -> int | None:
    """An object store for a local Ray that fits this process's address-space limit (``ulimit
    -v``, ``prlimit --as``): an eighth of it; None (Ray's default) without a limit. Ray maps its
    default store, 30 % of the machine's memory, into every worker: on this 23 GB machine under
    an 8 GB limit a one-task ``ray.init`` hung until killed and sweeps failed with "Connection
    reset by peer", with a 1 GB store it ran (2026-11-28). 75 MiB is Ray's least."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else max(75 * 2**20, soft // 8)


def start_ray(address: str | None, cpus: int | None, where: str = "--address", echo: Callable[[str], None] = print):
    """Ray on the cluster at ``address`` (``scenarios.ray_cluster.connect``: probed first, one line
    and exit 1 if it cannot be reached or refuses the token), else a local instance (its object
    store fitted to an address-space limit, :func:`object_store_bytes`, said with ``echo``)."""
    try:
        import ray  # noqa: F401 - is it installed at all
    except ImportError:
        raise EnvironmentProblem("railbed sweep needs Ray: pip install 'railbed[sweep]'") from None
    import logging

    path = os.pathsep.join(x for x in (str(provenance.REPO), os.environ.get("PYTHONPATH", "")) if x)
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "runtime_env": {"env_vars": {"PYTHONPATH": path}},
    }
    if address:
        from scenarios.ray_cluster import connect

        return connect(address, where, **kwargs)
    store = object_store_bytes()
    if store is not None:
        kwargs["object_store_memory"] = store
        echo(f"  address space limited (ulimit -v): Ray's object store {store / 2**30:.2g} GiB")
    ray.init(num_cpus=cpus or os.cpu_count(), resources={TESTBED: 1}, **kwargs)
    return ray


def _submit(ray, sweep: Sweep, point: Point):
    opts: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
    if needs_testbed(sweep.mode):
        opts["resources"] = {TESTBED: 1}
    task = ray.remote(run_point).options(**opts)
    return task.remote(point.scenario, str(sweep.base), sweep.mode, point.seed, sweep.plots, sweep.metrics)


def run_sweep(
    sweep: Sweep,
    out: Path,
    echo: Callable[[str], None] = print,
    address: str | None = None,
    cpus: int | None = None,
    max_points: int = MAX_POINTS,
    use_ray: bool = False,
    only: list[str] | None = None,
) -> list[dict]:
    """Run every point not done yet (module docstring); return the table's rows. Nothing is
    written before every point is checked and Ray (given an address, or ``use_ray``) is up."""
    n = sweep.size() if not only else len(selected(sweep.grid(), only))
    if n > max_points:
        raise SpecError("axes", f"{n} points ({sweep.shape()}) is more than --max-points {max_points}; "
                        f"pass --max-points {n} to run them all")  # fmt: skip
    where = "--address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS")
    where_run = address or ("a local Ray instance" if use_ray else "this machine")
    echo(f"sweep {sweep.name}: {n} points ({sweep.shape()}), {sweep.mode}, on {where_run}")
    t0 = time.perf_counter()
    points = sweep.points(echo, out, emulate_here=needs_testbed(sweep.mode) and not address, only=only)
    records = {p.id: point_done(out, p) for p in points}
    todo = [p for p in points if records[p.id] is None]
    echo(f"  {n} points checked in {time.perf_counter() - t0:.1f} s; {n - len(todo)} done already, {len(todo)} to run")
    ray = start_ray(address, cpus, where, echo) if todo and (address or use_ray) else None
    try:
        if ray is not None and needs_testbed(sweep.mode) and not ray.cluster_resources().get(TESTBED):
            raise EnvironmentProblem(
                f"no Ray node offers the resource {TESTBED!r}: start nodes with "
                f"ray start ... --resources '{{\"{TESTBED}\": 1}}'"
            )
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.yaml").write_text(yaml.safe_dump(sweep.source or {}, sort_keys=False))
        provenance.write(out, scenario=sweep.scenario, extra_seeds={"axes.seed": sweep.axes.get("seed")})
        if todo and ray is not None:
            run_points(ray, sweep, out, todo, records, echo)
        elif todo:
            run_local(sweep, out, todo, records, echo, cpus)
    finally:
        if ray is not None:
            ray.shutdown()
    rows = write_table(sweep, out, [r for r in records.values() if r is not None])
    _sweep_figure(sweep, out, rows, echo)
    failed = [pid for pid, r in records.items() if r is not None and r["status"] != "ok"]
    echo(f"{n - len(failed)} of {n} points ok; table in {out / 'sweep.csv'}")
    for pid in failed:
        echo(f"  failed: {pid}: {records[pid]['error']}")
    return rows


def _finished(sweep, out, records, point, answer, t0: float, left_points: int, todo: int, echo) -> None:
    """Save a finished point, rewrite the table, say how far the sweep is."""
    records[point.id] = save_point(out, point, answer)
    write_table(sweep, out, [r for r in records.values() if r is not None])
    done = sum(1 for r in records.values() if r is not None)
    spent = time.perf_counter() - t0
    left = spent / (todo - left_points) * left_points
    echo(f"  [{done}/{len(records)}] {point.id}: {answer['status']} ({spent:.1f} s, about {left:.0f} s left)")


def _failed(exc: BaseException) -> dict:
    return {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}


def run_local(sweep, out, todo, records, echo, cpus: int | None) -> None:
    """The points on this machine without Ray: in this process one after the other (one CPU, one
    point, or emulated points: one testbed at a time, and the emulator's signal handlers want the
    main thread), else in a pool of ``cpus`` (default all) processes forked from this one, which
    has railbed imported already: a point starts in milliseconds, not after Ray's start."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    args = lambda p: (p.scenario, str(sweep.base), sweep.mode, p.seed, sweep.plots, sweep.metrics)  # noqa: E731
    workers = 1 if needs_testbed(sweep.mode) else min(len(todo), cpus or os.cpu_count() or 1)
    t0 = time.perf_counter()
    if workers == 1:
        try:
            for i, point in enumerate(todo):
                _finished(sweep, out, records, point, run_point(*args(point)), t0, len(todo) - i - 1, len(todo), echo)
        except KeyboardInterrupt:
            _interrupted(records, echo)
            raise
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        pending = {pool.submit(run_point, *args(p)): p for p in todo}
        try:
            for future in as_completed(list(pending)):
                point = pending.pop(future)
                try:
                    answer = future.result()
                except Exception as exc:  # noqa: BLE001 - the worker died: record the point as failed
                    answer = _failed(exc)
                _finished(sweep, out, records, point, answer, t0, len(pending), len(todo), echo)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            _interrupted(records, echo)
            raise


def _interrupted(records: dict, echo) -> None:
    echo(f"sweep interrupted: {sum(1 for r in records.values() if r)} of {len(records)} points saved; "
         "run the same command again to resume")  # fmt: skip


def _sweep_figure(sweep: Sweep, out: Path, rows: list[dict], echo) -> None:
    """``sweep-<metric>.png`` of the first metric (``railbed.compare_plots.sweep_figure``); a failure
    is said, not raised: the table is written."""
    from railbed.compare_plots import sweep_figure

    metric = sweep.metrics[0] if sweep.metrics else "makespan"
    try:
        png = sweep_figure(rows, list(sweep.axes), metric, out / f"sweep-{metric}")
    except Exception as exc:  # noqa: BLE001 - the sweep's results are saved
        echo(f"the sweep's figure failed ({type(exc).__name__}: {exc})")
        return
    if png is not None:
        echo(f"figure: {png}")


def run_points(ray, sweep, out, todo, records, echo) -> None:
    pending = {_submit(ray, sweep, p): p for p in todo}
    t0 = time.perf_counter()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            point = pending.pop(ready[0])
            try:
                answer = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - the worker died: record the point as failed
                answer = _failed(exc)
            _finished(sweep, out, records, point, answer, t0, len(pending), len(todo), echo)
    except KeyboardInterrupt:
        _stop(ray, pending, sweep.mode)
        _interrupted(records, echo)
        raise


def _stop(ray, pending: dict, mode: str) -> None:
    """Cancel unfinished points. Emulated ones get KeyboardInterrupt (not a kill), so their
    testbed is torn down; wait for them briefly before Ray's shutdown ends the workers."""
    for ref in pending:
        ray.cancel(ref, force=not needs_testbed(mode))
    if needs_testbed(mode) and pending:
        ray.wait(list(pending), num_returns=len(pending), timeout=60)
