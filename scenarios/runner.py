"""Scenario files: one cluster, one job, several schedulers, one comparison.

A scenario is YAML (``railbed run scenario.yaml``)::

    name: dp-ring
    cluster: ../rail-4x4.yaml          # a path (relative to this file) or an inline mapping
    job:                               # a generator with arguments ...
      generator: hybrid_parallel
      args: {dp: 4, pp: 2, microbatches: 2, gradient: 16MB, activation: 4MB, fwd: 1ms, bwd: 2ms}
    # job: {file: saved-job.json}      # ... or a saved job (replay)
    schedulers: [fifo, tag-priority]
    policy: dscp-priority              # tc policy: dscp-priority | fifo
    scale: 400                         # k; default: chosen for this machine
    latency: auto                      # auto | netem | agents
    trace: 0                           # s between received-bytes samples per flow (0: off)
    strict: false                      # a broken fidelity report fails the run
    timeout: 600                       # real seconds per scheduler run
    capture: [rail0:rail0-eth2]        # tcpdump on these ports during each run (emulator/capture.py)

``railbed run`` runs each scheduler on the same emulated cluster (built
once), one after the other; ``railbed simulate`` runs them on the
flow-level simulator (:func:`simulate_scenario`, no root) and ``railbed
crosscheck`` on both (:func:`crosscheck_scenario`). The results directory gets ``scenario.yaml``, ``cluster.yaml``,
``job.json`` (replayable), ``<scheduler>/result.json`` and
``<scheduler>/summary.txt`` per run, ``comparison.txt`` and ``index.json``
(makespan per scheduler), ``provenance.json`` (code, command, machine, k,
package versions, seeds: ``railbed/provenance.py``) and, unless ``plots``
is off (``--no-plots``), the standard figures in ``figures/``
(``railbed/plots.py``) and each run's ``trace.json``, ``flows.csv``,
``tasks.csv`` and ``links.csv`` (``railbed/export.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from railbed import provenance
from railbed.errors import SpecError
from railbed.job import Job
from railbed.results import RunResult, comparison_table
from railbed.spec import ClusterSpec
from schedulers import by_name
from tc_policies.plan import policy_by_name
from workloads import generate

KEYS = {"name", "cluster", "job", "schedulers", "policy", "scale", "latency", "trace", "strict", "timeout", "capture"}


@dataclass
class Scenario:
    name: str
    cluster: ClusterSpec
    job: Job
    schedulers: list[str]
    policy: str = "dscp-priority"
    scale: float | None = None
    latency: str = "auto"
    trace: float = 0.0
    strict: bool = False
    timeout: float | None = None
    source: dict[str, Any] | None = None
    capture: Any = None  # emulator.capture.CaptureSpec

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise SpecError("scenario", f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark else ""
            raise SpecError("scenario", f"{path} is not valid YAML{where}") from None
        return cls.from_dict(data, base=path.parent)

    @classmethod
    def from_dict(cls, data: Any, base: Path = Path(".")) -> Scenario:
        if not isinstance(data, dict):
            raise SpecError("scenario", "expected a mapping at the top level")
        unknown = set(data) - KEYS
        if unknown:
            raise SpecError(sorted(unknown)[0], f"unknown key (known: {', '.join(sorted(KEYS))})")
        for key in ("cluster", "job", "schedulers"):
            if key not in data:
                raise SpecError(key, "missing")
        cluster_raw = data["cluster"]
        if isinstance(cluster_raw, str):
            cluster = ClusterSpec.load(base / cluster_raw)
        else:
            cluster = ClusterSpec.from_dict(cluster_raw)
        job_raw = data["job"]
        if not isinstance(job_raw, dict):
            raise SpecError("job", "expected {generator: NAME, args: {...}} or {file: PATH}")
        if "file" in job_raw:
            job = Job.load(base / str(job_raw["file"]))
        elif "generator" in job_raw:
            extra = set(job_raw) - {"generator", "args"}
            if extra:
                raise SpecError(f"job.{sorted(extra)[0]}", "unknown key (known: generator, args)")
            job = generate(str(job_raw["generator"]), job_raw.get("args") or {}, "job")
        else:
            raise SpecError("job", "needs 'generator' or 'file'")
        scheds = data["schedulers"]
        if isinstance(scheds, str):
            scheds = [scheds]
        if not isinstance(scheds, list) or not scheds:
            raise SpecError("schedulers", "expected a non-empty list of scheduler names")
        for i, name in enumerate(scheds):
            by_name(str(name), f"schedulers[{i}]")
        if len(set(scheds)) != len(scheds):
            raise SpecError("schedulers", "a scheduler is listed twice")
        policy = str(data.get("policy", "dscp-priority"))
        policy_by_name(policy)
        latency = str(data.get("latency", "auto"))
        if latency not in ("auto", "netem", "agents"):
            raise SpecError("latency", f"must be auto, netem or agents, got {latency!r}")
        return cls(
            name=str(data.get("name", "scenario")),
            cluster=cluster,
            job=job,
            schedulers=[str(s) for s in scheds],
            policy=policy,
            scale=_positive(data.get("scale"), "scale"),
            latency=latency,
            trace=_positive(data.get("trace"), "trace", allow_zero=True) or 0.0,
            strict=_bool(data.get("strict", False), "strict"),
            timeout=_positive(data.get("timeout"), "timeout"),
            source=data,
            capture=_capture(data.get("capture"), cluster),
        )


def _capture(raw: Any, cluster: ClusterSpec):
    if raw is None:
        return None
    from emulator.capture import parse_capture  # pure: no Mininet, no pyroute2
    from railbed.topology import Topology

    return parse_capture(raw, Topology(cluster))


def _positive(value: Any, field: str, allow_zero: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(field, f"expected a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise SpecError(field, f"must be {'>= 0' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(field, f"expected true or false, got {value!r}")
    return value


def _scheduler_names(sc: Scenario, schedulers: list[str] | None) -> list[str]:
    names = schedulers or sc.schedulers
    for i, name in enumerate(names):
        by_name(name, f"schedulers[{i}]")
    return names


def _write_inputs(sc: Scenario, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.source or {}, sort_keys=False))
    (out_dir / "cluster.yaml").write_text(yaml.safe_dump(sc.cluster.to_dict(), sort_keys=False))
    sc.job.save(out_dir / "job.json")


def _save_run(result: RunResult, out_dir: Path, name: str, echo: Callable[[str], None]) -> None:
    run_dir = out_dir / name
    run_dir.mkdir(exist_ok=True)
    result.save(run_dir / "result.json")
    (run_dir / "summary.txt").write_text(result.summary() + "\n")
    echo(result.summary())


def _write_comparison(sc: Scenario, results: list[RunResult], out_dir: Path, echo: Callable[[str], None]) -> None:
    table = comparison_table(results)
    (out_dir / "comparison.txt").write_text(table + "\n")
    (out_dir / "index.json").write_text(
        json.dumps({"scenario": sc.name, "runs": [{"scheduler": r.scheduler, "makespan": r.makespan} for r in results]})
        + "\n"
    )
    echo("")
    echo(table)
    echo(f"results in {out_dir}")


def write_figures(out_dir: Path, echo: Callable[[str], None] = print) -> None:
    """The standard figures and the exports of a results directory (``railbed plot`` and ``export``).
    The results are on disk already, so a failure here is reported, not raised."""
    from railbed.export import export_results
    from railbed.plots import plot_results

    try:
        pngs = plot_results(out_dir)
        export_results(out_dir)
    except Exception as exc:  # noqa: BLE001 - the run's results are saved; say what failed
        echo(f"figures failed ({type(exc).__name__}: {exc}); retry with: railbed plot {out_dir}")
        return
    echo(f"{len(pngs)} figures in {out_dir / 'figures'}")


def _finish(sc: Scenario, out_dir: Path, scale: dict, plots: bool, echo: Callable[[str], None]) -> None:
    provenance.write(out_dir, scale=scale, scenario=sc.source)
    if plots:
        write_figures(out_dir, echo)


def _simulate(sc: Scenario, name: str, engine: str, echo: Callable[[str], None]) -> RunResult:
    from simulator import simulate

    echo(f"simulating {name} ...")
    return simulate(sc.job, by_name(name), sc.cluster, policy=sc.policy, engine=engine, progress=echo)


def run_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    scale: float | None = None,
    schedulers: list[str] | None = None,
    plots: bool = True,
) -> list[RunResult]:
    """Build the cluster once, run the job under each scheduler, write the results directory."""
    from emulator.testbed import Testbed

    names = _scheduler_names(sc, schedulers)
    _write_inputs(sc, out_dir)
    results = []
    tb = Testbed(sc.cluster, policy=sc.policy, scale=scale or sc.scale, latency=sc.latency)
    with tb:
        echo(f"{sc.name}: {sc.cluster.summary()}")
        echo(
            f"  {sc.job!r}; built in {tb.build_seconds:.1f} s; k = {tb.scale.k:g}; "
            f"policy {tb.policy.name}; latency {tb.latency_mode}"
        )
        for name in names:
            echo(f"running {name} ...")
            result = _run_captured(sc, tb, name, out_dir, echo)
            results.append(result)
            _save_run(result, out_dir, name, echo)
    _write_comparison(sc, results, out_dir, echo)
    _finish(sc, out_dir, provenance.scale_record(tb.scale.k, scale, sc.scale), plots, echo)
    return results


def _run_captured(sc: Scenario, tb, name: str, out_dir: Path, echo: Callable[[str], None]) -> RunResult:
    """One scheduler's emulated run, with the scenario's packet captures (if any) around it."""
    from emulator.capture import Capture
    from emulator.runtime import run

    capture = Capture(tb, sc.capture, out_dir / name) if sc.capture else None
    if capture:
        capture.start()
    notes = []
    try:
        result = run(sc.job, by_name(name), tb, trace=sc.trace, progress=echo, timeout=sc.timeout, strict=sc.strict)
    finally:
        if capture:
            notes = capture.stop()
    result.notes += notes
    return result


def simulate_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    schedulers: list[str] | None = None,
    engine: str = "numba",
    plots: bool = True,
) -> list[RunResult]:
    """The scenario on the flow-level simulator (no root): the same results directory as :func:`run_scenario`."""
    names = _scheduler_names(sc, schedulers)
    _write_inputs(sc, out_dir)
    results = []
    for name in names:
        results.append(_simulate(sc, name, engine, echo))
        _save_run(results[-1], out_dir, name, echo)
    _write_comparison(sc, results, out_dir, echo)
    _finish(sc, out_dir, provenance.scale_record(None, None, None), plots, echo)
    return results


def crosscheck_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    scale: float | None = None,
    schedulers: list[str] | None = None,
    plots: bool = True,
) -> list:
    """Run the scenario on the emulator and on the simulator; compare each scheduler's two results.

    Writes everything :func:`run_scenario` writes, ``<scheduler>/simulated.json``,
    ``crosscheck.txt`` and ``crosscheck.json``; returns the
    :class:`simulator.crosscheck.Crosscheck` per scheduler."""
    from simulator.crosscheck import compare

    emulated = run_scenario(sc, out_dir, echo=echo, scale=scale, schedulers=schedulers, plots=False)
    checks = []
    for name, result in zip(_scheduler_names(sc, schedulers), emulated):
        simulated = _simulate(sc, name, "numba", echo)
        simulated.save(out_dir / name / "simulated.json")
        checks.append(compare(result, simulated))
    text = "\n\n".join(c.report() for c in checks)
    (out_dir / "crosscheck.txt").write_text(text + "\n")
    (out_dir / "crosscheck.json").write_text(json.dumps([c.to_dict() for c in checks], indent=1) + "\n")
    echo("")
    echo("emulator vs simulator")
    echo(text)
    if plots:
        write_figures(out_dir, echo)
    echo(f"results in {out_dir}")
    return checks
