"""Scenario files: one cluster, one job, several schedulers, one comparison.

A scenario is YAML (``railbed run scenario.yaml``)::

    name: dp-ring
    cluster: ../rail-4x4.yaml          # a path (relative to this file) or an inline mapping
    job:                               # a generator with arguments ...
      generator: hybrid_parallel
      args: {dp: 4, pp: 2, microbatches: 2, gradient: 16MB, activation: 4MB, fwd: 1ms, bwd: 2ms}
    # job: {file: saved-job.json}      # ... or a saved job (replay)
    # job: {trace: fb.txt, format: coflow-benchmark, args: {layout: split}}  # ... or a flow trace
    #                                  # (workloads/traces.py: coflow-benchmark or csv)
    schedulers:                        # names, or {name, args, label, job}: one scheduler, several settings
      - fifo
      - {name: small-first, args: {limit: 2}, label: small-first-2}
      # - {name: fifo, label: metis, job: {partitioner: metis}}   # a variant: this run's job takes these
      #                                  # generator arguments over job.args (a system whose data differs),
      #                                  # or {generator: NAME, args: {...}}: a job of its own
    policy: dscp-priority              # tc policy (tc_policies.plan.POLICIES): dscp-priority | fifo
    scale: 400                         # k; default: chosen for this machine
    latency: auto                      # auto | netem | agents   (latency .. capture: the emulator's own keys,
                                       #  parsed by emulator/settings.py; packet: the packet backend's)
    trace: 0                           # s between received-bytes samples per flow (0: off)
    strict: false                      # a broken fidelity report fails the run
    timeout: 600                       # real seconds per scheduler run
    flow_progress: 0.01                # model s between the emulator's reports of flow bytes (0: off)
    capture: [rail0:rail0-eth2]        # tcpdump on these ports during each run (emulator/capture.py)
    backend: packet                    # the backend ``railbed simulate`` uses without --backend (default fluid)
    tcp: cubic                         # TCP congestion control of emulate and packet: cubic | reno | bbr | dctcp
    packet: {buffer: 100, ecn: 20}     # the packet backend's settings (simulator/packet/options.py)
    loads: [1e6, 2e6, 4e6]             # an offered-load sweep: the generator's ``load`` argument takes each
                                       # value; every scheduler runs at every load, as ``<label>@<load>``
    analysis: true                     # each run's analysis (railbed/analysis.py); false: faster (--analysis)
    results: all                       # summary | flows | all: how much is written (--results; RESULT_LEVELS)

The keys every backend reads are :data:`KEYS`; the others belong to one backend each (its
``Capabilities.settings``, :mod:`railbed.backend`), which parses them (``parse_settings``, called by
:func:`backend_settings`) and reads them back as ``RunOptions.settings[its name]``: this module
imports no backend.

``railbed run`` runs each scheduler on the same emulated cluster (built
once), one after the other; ``railbed simulate`` runs them on a simulator
(:func:`simulate_scenario`, no root; ``--backend``, default ``fluid``) and
``railbed crosscheck`` on both (:func:`crosscheck_scenario`). Each is
:func:`run_on` a backend of :data:`railbed.backend.BACKENDS`. The
results directory gets ``scenario.yaml``, ``cluster.yaml``, ``job.json`` (replayable), ``<label>/result.json`` and
``<label>/summary.txt`` per run (a scheduler's label is its name unless the
scenario gives one; ``<label>/job.json`` for a run with its own job),
``comparison.txt`` and ``index.json`` (makespan per run), ``provenance.json``
(code, command, machine, k, package versions, seeds: ``railbed/provenance.py``) and, unless ``--no-plots``, the standard
figures in ``figures/`` (``railbed/plots.py``) and each run's
``trace.json``, ``flows.csv``, ``tasks.csv`` and ``links.csv``
(``railbed/export.py``). A scenario with ``loads`` (LEO's request streams)
also gets ``curve.json``: per scheduler and offered load the request
latency's median and p99 and the throughput, drawn as
``figures/latency-load.png`` and ``figures/throughput-load.png``.

Nothing is built or written before :func:`preflight` has checked all a run
can know in advance; the results directory is created only once the run
has started (for the emulator: the testbed is up), and carries a
``PARTIAL`` marker until the run ends (:func:`results_dir`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from railbed import provenance
from railbed.backend import BACKENDS, Backend, RunOptions, Session, owners, parse_tcp
from railbed.backend import backend as get_backend
from railbed.dispatch import SchedulerError, check_placement
from railbed.errors import SpecError
from railbed.job import Job
from railbed.results import RESULT_LEVELS, RunResult, comparison_table, estimated_bytes
from railbed.safeload import boolean, choice, describe, key_name, load_yaml_file, positive
from railbed.spec import ClusterSpec
from scenarios.crosscheck import compare
from schedulers import SchedulerSpec, by_name, default_label, make, scheduler_spec
from tc_policies.plan import POLICIES
from workloads import check_fits, generate
from workloads.traces import import_trace

KEYS = {
    "name", "cluster", "job", "schedulers", "policy", "scale", "loads", "backend", "tcp", "jobs", "analysis",
    "results",
}  # fmt: skip
"""The keys every backend reads; a backend's own keys are its ``Capabilities.settings``."""


def known_keys(data: dict) -> set[str]:
    """The top-level keys ``data`` may give: :data:`KEYS` and, when it gives any other, the keys each
    registered backend owns (reading the backends only then)."""
    return KEYS if set(data) <= KEYS else KEYS | set(owners())


@dataclass
class Scenario:
    name: str
    cluster: ClusterSpec
    job: Job
    schedulers: list[SchedulerSpec]
    policy: str = "dscp-priority"
    scale: float | None = None
    source: dict[str, Any] | None = None
    loads: list[float] | None = None  # offered loads (the generator's ``load``), one run per scheduler each
    jobs: list[Job] | None = None  # the job at each load
    variants: dict[str, Job] | None = None  # run label -> its own job (a scheduler entry's ``job`` overrides)
    arrays: tuple[str, dict] | None = None  # (generator, args) of a job too large for a Job: built as arrays
    backend: str | None = None  # the backend's canonical name (decoded by railbed.backend), None: not given
    settings: dict[str, Any] = field(default_factory=dict)  # backend name -> its own settings (its keys given)
    tcp: str = "cubic"  # railbed.backend.TCP_CONGESTION
    multi: Any = None  # scenarios.multijob.MultiJob: the scenario's ``jobs:`` (job is then their merge)
    analysis: bool = True  # each run's analysis (railbed.analysis)
    results: str = "all"  # how much of each run is written: railbed.results.RESULT_LEVELS

    def options(
        self, scale: float | None = None, progress: Callable[[str], None] | None = None, tcp: str | None = None
    ) -> RunOptions:
        """The scenario's settings as a backend reads them (``scale``, ``tcp``: the command line's, else
        the scenario's)."""
        return RunOptions(
            policy=self.policy,
            progress=progress,
            scale=scale if scale is not None else self.scale,
            tcp=tcp or self.tcp,
            analysis=self.analysis,
            settings=dict(self.settings),
        )

    def points(self, specs: list[SchedulerSpec]) -> list[tuple[SchedulerSpec, Job]]:
        """(scheduler, job) of every run: each scheduler on the job, or at each load (``label@load``,
        :func:`at_loads`)."""
        if not self.loads:
            return [(spec, self.job_of(spec)) for spec in specs]
        return list(zip(at_loads(specs, self.loads), [job for job in self.jobs or [] for _ in specs]))

    def job_of(self, spec: SchedulerSpec) -> Job:
        """The job ``spec``'s run takes: its variant's when its entry overrides job arguments."""
        return (self.variants or {}).get(spec.run_label, self.job)

    @classmethod
    def load(cls, path: str | Path, arrays: bool = False) -> Scenario:
        path = Path(path)
        return cls.from_dict(load_yaml_file(path, str(path)), base=path.parent, arrays=arrays)

    @classmethod
    def from_dict(cls, data: Any, base: Path = Path("."), arrays: bool | str = False) -> Scenario:
        """``arrays``: a generated job over ``workloads.MAX_ITEMS`` whose generator has an array
        form is not built here (``job`` is None) but per run, as arrays, by the compact engine
        (``railbed simulate --backend fluid-rules``); ``arrays="always"``: any job with an array form
        (a summary result per run, items in ``items.npz``: no per-item JSON of a 1024-GPU job)."""
        if not isinstance(data, dict):
            raise SpecError("scenario", f"expected a mapping at the top level, got {describe(data)}")
        known = known_keys(data)
        for key in data:
            if key not in known:
                raise SpecError(key_name(key), f"unknown key (known: {', '.join(sorted(known))})")
        for key in ("cluster", "jobs" if "jobs" in data else "job", "schedulers"):
            if key not in data:
                raise SpecError(key, "missing")
        cluster = _cluster(data["cluster"], base)
        if "jobs" in data:
            return _with_jobs(cls, data, base, cluster)
        loads = _loads(data.get("loads"), data["job"])
        jobs = [_job(_with_load(data["job"], x), base) for x in loads] if loads else None
        big = bool(arrays) and not loads and _array_job(data["job"], always=arrays == "always")
        job = jobs[0] if jobs else None if big else _job(data["job"], base, cluster)
        specs = _scheduler_specs(data["schedulers"], base)
        variants = _variants(specs, data["job"], base, bool(loads) or big)
        policy = choice(data.get("policy", "dscp-priority"), "policy", tuple(POLICIES))
        tcp = parse_tcp(data.get("tcp", "cubic"))
        return cls(
            name=_name(data.get("name", "scenario")),
            cluster=cluster,
            job=job,
            schedulers=specs,
            policy=policy,
            scale=positive(data.get("scale"), "scale"),
            source=data,
            loads=loads,
            jobs=jobs,
            variants=variants,
            arrays=(data["job"]["generator"], data["job"].get("args") or {}) if big else None,
            backend=scenario_backend(data),
            settings=backend_settings(data, cluster),
            tcp=tcp,
            analysis=boolean(data.get("analysis", True), "analysis"),
            results=choice(data.get("results", "all"), "results", RESULT_LEVELS),
        )


def _with_jobs(cls, data: dict, base: Path, cluster: ClusterSpec) -> Scenario:
    """A scenario of several jobs (``jobs:``, scenarios/multijob.py): their merge is its job."""
    from scenarios.multijob import parse_jobs
    from workloads.synthetic import all_to_all  # the placeholder job (imported here: a section counts it)

    for key in ("job", "loads"):
        if key in data:
            raise SpecError(key, "give either job or jobs; loads do not combine with jobs")
    one = {**data, "job": {"generator": all_to_all.__name__, "args": {"n": 2}}}
    one.pop("jobs")
    sc = cls.from_dict(one, base)  # every other key read as for one job
    if sc.variants:
        raise SpecError("schedulers", "job overrides (schedulers[i].job) do not combine with jobs")
    multi = parse_jobs(data["jobs"], base, cluster)
    return replace(sc, job=multi.job, multi=multi, source=data)


def _cluster(value: Any, base: Path) -> ClusterSpec:
    """``cluster:``: a path relative to the scenario file, or an inline mapping (errors
    then name ``cluster.<field>``)."""
    if isinstance(value, str):
        if not value or len(value) > 4096 or not value.isprintable():
            raise SpecError("cluster", f"expected a file path, got {describe(value)}")
        return ClusterSpec.load(base / value)
    if not isinstance(value, dict):
        raise SpecError("cluster", f"expected a file path or a mapping, got {describe(value)}")
    try:
        return ClusterSpec.from_dict(value)
    except SpecError as exc:
        raise SpecError(f"cluster.{exc.field}", exc.message) from None


def _job(value: Any, base: Path, cluster: ClusterSpec | None = None) -> Job:
    """``job:``: ``{generator: NAME, args: {...}}``, ``{file: PATH}`` (a saved job),
    ``{trace: PATH, format: NAME, args: {...}}`` (a flow trace, :mod:`workloads.traces`, read
    for ``cluster``) or ``{chakra: PREFIX, ...}`` (a Chakra execution trace,
    :func:`workloads.chakra.scenario_job`)."""
    if isinstance(value, dict) and "chakra" in value:
        from workloads.chakra import scenario_job

        return scenario_job(value, base)
    kinds = {"file": {"file"}, "trace": {"trace", "format", "args"}, "generator": {"generator", "args"}}
    kind = next((k for k in kinds if isinstance(value, dict) and k in value), None)
    if kind is None:
        raise SpecError(
            "job",
            f"expected {{generator: NAME, args: {{...}}}}, {{file: PATH}}, {{trace: PATH}} or {{chakra: PREFIX}}, "
            f"got {describe(value)}",
        )
    for key in value:
        if key not in kinds[kind]:
            raise SpecError(f"job.{key_name(key)}", f"unknown key (known: {', '.join(sorted(kinds[kind]))})")
    if kind == "generator":
        return generate(value["generator"], value.get("args"), "job")
    path = value[kind]
    if not isinstance(path, str) or not path or not path.isprintable():
        raise SpecError(f"job.{kind}", f"expected a file path, got {describe(path)}")
    if kind == "trace":
        args = value.get("args") or {}
        if not isinstance(args, dict):
            raise SpecError("job.args", f"expected a mapping of option to value, got {describe(args)}")
        return import_trace(base / path, value.get("format"), args, cluster)
    try:
        return Job.load(base / path)
    except SpecError as exc:
        raise SpecError(f"job.{exc.field}" if exc.field != "job" else "job.file", exc.message) from None


def _variants(specs: list[SchedulerSpec], job: Any, base: Path, refused: bool) -> dict[str, Job] | None:
    """Run label -> its job, for the scheduler entries with a ``job:``: arguments over the
    scenario's ``job.args`` (``{partitioner: metis}``), or a whole generated job of its own
    (``{generator: NAME, args: {...}}``: another system's job on the same cluster). Not with
    ``loads`` or a job built as arrays (``refused``); overrides need the scenario's job generated."""
    out = {}
    for i, spec in enumerate(specs):
        if not spec.job:
            continue
        where = f"schedulers[{i}].job"
        if refused:
            raise SpecError(where, "job overrides cannot be combined with loads or a job built as arrays")
        if "generator" in spec.job:
            unknown = set(spec.job) - {"generator", "args"}
            if unknown:
                raise SpecError(f"{where}.{sorted(unknown)[0]}", "unknown key (known: generator, args)")
            name, args, prefix = spec.job["generator"], spec.job.get("args") or {}, f"{where}.args."
        else:
            if not isinstance(job, dict) or "generator" not in job:
                raise SpecError(where, "job overrides need a generated job (job: {generator, args}), not a file")
            base_args = job.get("args") or {}
            if not isinstance(base_args, dict):
                raise SpecError("job.args", f"expected a mapping of argument to value, got {describe(base_args)}")
            name, args, prefix = job["generator"], {**base_args, **spec.job}, f"{where}."
        try:
            out[spec.run_label] = generate(name, args, "job")
        except SpecError as exc:
            field = exc.field.replace("job.args.", prefix, 1) if exc.field.startswith("job.args.") else exc.field
            field = field.replace("job.generator", f"{where}.generator", 1)
            raise SpecError(field, exc.message) from None
    return out or None


def _array_job(value: Any, always: bool = False) -> bool:
    """A generated job with an array form that ``generate`` would refuse only for its size (or,
    ``always``, any generated job with an array form)."""
    from workloads import ARRAY_FORMS, too_many_items

    if not isinstance(value, dict) or set(value) - {"generator", "args"} or value.get("generator") not in ARRAY_FORMS:
        return False
    return always or too_many_items(value["generator"], value.get("args"), "job")


def _loads(value: Any, job: Any) -> list[float] | None:
    """``loads:``: a non-empty list of positive offered loads, for a generator that takes ``load``."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > 100:
        raise SpecError("loads", f"expected a list of 1..100 offered loads, got {describe(value)}")
    loads = [positive(x, f"loads[{i}]") for i, x in enumerate(value)]
    if not isinstance(job, dict) or "generator" not in job:
        raise SpecError("loads", "an offered-load sweep needs a job generator with a load argument")
    if len(set(loads)) != len(loads):
        raise SpecError("loads", "lists a load twice")
    return loads


def at_loads(specs: list[SchedulerSpec], loads: list[float] | None) -> list[SchedulerSpec]:
    """The scheduler of every run, in :meth:`Scenario.points`' order: each of ``specs``, or each at
    each load as ``<label>@<load>``. Apart from the jobs, so that :func:`run_labels` needs none."""
    if not loads:
        return list(specs)
    return [SchedulerSpec(spec.name, spec.args, f"{spec.run_label}@{load:g}") for load in loads for spec in specs]


def run_labels(data: dict, base: Path = Path(".")) -> list[str]:
    """The run labels (``<label>/`` results directories) of scenario mapping ``data``'s runs, in
    :meth:`Scenario.points`' order, without building its job: a run group read back from its
    directory (``scenarios.groups.finished``) needs its labels only, and a job at the papers'
    sizes takes a minute to build."""
    specs = _scheduler_specs(data["schedulers"], base)
    return [spec.run_label for spec in at_loads(specs, _loads(data.get("loads"), data.get("job")))]


def _with_load(job: dict, load: float) -> dict:
    args = dict(job.get("args") or {}) if isinstance(job.get("args") or {}, dict) else job.get("args")
    if isinstance(args, dict):
        args["load"] = load
    return {**job, "args": args}


def _name(value: Any) -> str:
    """The scenario's name: it names the results directory, so one plain path component."""
    ok = isinstance(value, str) and 0 < len(value) <= 100 and value.isprintable()
    if not ok or "/" in value or value.startswith("."):
        raise SpecError("name", f"expected a file-name-safe string of 1..100 characters, got {describe(value)}")
    return value


def scenario_backend(data: Any) -> str | None:
    """The scenario's ``backend`` as its canonical name (``railbed.backend`` decodes it), or None."""
    if not isinstance(data, dict) or data.get("backend") is None:
        return None
    return get_backend(data["backend"], "backend").name


def backend_settings(data: dict, cluster: ClusterSpec) -> dict[str, Any]:
    """Backend name -> its settings, parsed by the backend (``parse_settings``) from its own keys of the
    scenario (``Capabilities.settings``). A backend whose keys are absent takes its defaults; a
    scenario with none of them reads no backend."""
    given = [key for key in data if key not in KEYS]
    if not given:
        return {}
    owner = owners()
    out = {}
    for name in dict.fromkeys(owner[key] for key in given):
        be = get_backend(name)
        out[name] = be.parse_settings({key: data[key] for key in be.capabilities.settings if key in data}, cluster)
    return out


def _scheduler_specs(raw: Any, base: Path | None = None) -> list[SchedulerSpec]:
    """The ``schedulers`` list: each entry read and instantiated once (arguments checked), labels unique;
    a scheduler file (``mine.py:Mine``) is relative to ``base``, the scenario's folder."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise SpecError("schedulers", "expected a non-empty list of scheduler names or {name, args, label}")
    specs, seen = [], set()
    for i, entry in enumerate(raw):
        spec = scheduler_spec(entry, f"schedulers[{i}]", base)
        make(spec, f"schedulers[{i}]")
        if spec.run_label in seen:
            raise SpecError(f"schedulers[{i}]", f"{spec.run_label!r} is listed twice (give one a label)")
        seen.add(spec.run_label)
        specs.append(spec)
    return specs


def _selected(sc: Scenario, labels: list[str] | None) -> list[SchedulerSpec]:
    """The scenario's schedulers, or those of them named by ``--scheduler`` (label or registered name)."""
    if not labels:
        return sc.schedulers
    known = {s.run_label: s for s in sc.schedulers}
    out = []
    for i, label in enumerate(labels):
        if label in known or default_label(label) in known:  # a label, or the file the scenario names
            out.append(known.get(label) or known[default_label(label)])
        else:
            by_name(label, f"--scheduler[{i}]")  # a registered name the scenario does not list: default args
            out.append(SchedulerSpec(label))
    return out


# ---------------------------------------------------------------- pre-flight
def check_pins(job: Job, cluster: ClusterSpec) -> None:
    """Every pinned endpoint on a server and NIC the cluster has."""
    servers = cluster.servers
    for name, ep in job.endpoints.items():
        if ep.pin is None:
            continue
        where = f"job.endpoints.{name}.pin"
        if not 0 <= ep.pin.server < len(servers):
            raise SpecError(
                f"{where}.server", f"server {ep.pin.server}, but the cluster has {len(servers)} (0..{len(servers) - 1})"
            )
        nics = servers[ep.pin.server].nics
        if not 0 <= ep.pin.nic < nics:
            raise SpecError(f"{where}.nic", f"NIC {ep.pin.nic}, but server {ep.pin.server} has {nics} (0..{nics - 1})")


def _check_out(out_dir: Path) -> None:
    """The results directory can be made: it, or its nearest existing parent, is a writable directory."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError("--out", f"{describe(str(out_dir))} exists and is not a directory")
    parent = out_dir
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise SpecError("--out", f"{describe(str(parent))} is a file, so {describe(str(out_dir))} cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecError("--out", f"{describe(str(parent))} is not writable")


def preflight(
    sc: Scenario,
    specs: list[SchedulerSpec],
    out_dir: Path | None,
    scale: float | None = None,
    backend: Backend | None = None,
) -> float | None:
    """Everything a run can know before it starts, checked before anything is built or
    written; each problem is a :class:`SpecError` naming the field (exit 2).

    Pins against the cluster; per scheduler: its own ``check`` of the job (tags
    it reads), its placement (``place`` on the public job, then
    ``check_placement``); the results directory; and, given the ``backend``,
    what it models (servers' hardware models) and its own ``check`` of this
    machine at the scale the run will use (the emulator: :mod:`railbed.machine`).
    ``out_dir`` None: no results directory (``railbed check``'s dry run).
    Returns that scale (None when the backend has none).
    A job built as arrays (``sc.arrays``) is checked when it is built (``compact_arrays``)."""
    if sc.job is not None:
        raw = (sc.source or {}).get("job")
        if isinstance(raw, dict) and "generator" in raw:  # in the terms the user wrote: job.args
            check_fits(raw["generator"], raw.get("args"), sc.job, sc.cluster)
        check_pins(sc.job, sc.cluster)
    for i, spec in enumerate(specs if sc.job is not None else ()):
        sched, name, job = make(spec, f"schedulers[{i}]"), spec.run_label, sc.job_of(spec)
        if job is not sc.job:
            check_pins(job, sc.cluster)
        try:
            sched.check(job, sc.cluster)
        except SpecError as exc:
            raise SpecError(f"job.{exc.field}", f"{exc.message} (read by {name})") from None
        try:
            check_placement(job, sc.cluster, sched.place(job.public(), sc.cluster))
        except SchedulerError as exc:
            raise SpecError(f"schedulers[{i}]", f"{name} cannot place this job: {exc}") from None
    if out_dir is not None:
        _check_out(out_dir)
    if backend is None:
        return None
    if not backend.capabilities.hooks:
        _check_rules(sc, specs, backend)
    if not backend.capabilities.host_models:
        for g, server in enumerate(sc.cluster.servers):
            if server.host is not None:
                why = f"server {server.name} has a hardware model ({server.host.kind}); {backend.name} models none"
                raise SpecError(f"cluster.servers[{g}].{server.host.kind}", why)
    return backend.check(sc.cluster, sc.options(scale=scale))


def _check_rules(sc: Scenario, specs: list[SchedulerSpec], backend: Backend) -> None:
    """A backend that calls no hooks during the run needs each scheduler's ``rule`` for every flow."""
    for i, spec in enumerate(specs if sc.job is not None else ()):
        sched, job = make(spec), sc.job_of(spec)
        placement = sched.place(job.public(), sc.cluster)
        for flow in job.flows:
            if sched.rule(flow, placement, sc.cluster) is None:
                why = f"{spec.run_label} has no rule for flow {flow.id} (Scheduler.rule): {backend.name} calls no hooks"
                raise SpecError(f"schedulers[{i}]", why)


# ------------------------------------------------------------- results files
PARTIAL = "PARTIAL"


@contextlib.contextmanager
def results_dir(sc: Scenario, out_dir: Path, write_inputs: bool = True):
    """The results directory of a run that has started: the inputs are written on
    entry with a ``PARTIAL`` marker, removed when the block ends normally; if it
    raises, the marker says why the directory is incomplete."""
    out_dir.mkdir(parents=True, exist_ok=True)
    marker = out_dir / PARTIAL
    marker.write_text(f"run started {time.strftime('%Y-%m-%d %H:%M:%S')}; not finished\n")
    if write_inputs:
        (out_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.source or {}, sort_keys=False))
        (out_dir / "cluster.yaml").write_text(yaml.safe_dump(sc.cluster.to_dict(), sort_keys=False))
        if sc.job is not None:  # a job built as arrays is its scenario's generator and args (scenario.yaml)
            sc.job.save(out_dir / "job.json")
        for label, job in (sc.variants or {}).items():  # a run's own job: <label>/job.json
            (out_dir / label).mkdir(exist_ok=True)
            job.save(out_dir / label / "job.json")
    try:
        yield out_dir
    except BaseException as exc:
        why = str(exc) or type(exc).__name__
        marker.write_text(f"this run did not finish: {type(exc).__name__}: {why[:2000]}\n")
        raise
    marker.unlink(missing_ok=True)


LARGE_RESULTS = 50e6  # bytes of a run's files from which their size is said before they are written


def _save_run(result: RunResult, out_dir: Path, name: str, echo: Callable[[str], None], level: str = "all") -> None:
    run_dir = out_dir / name
    run_dir.mkdir(exist_ok=True)
    size = estimated_bytes(result, level)
    if sum(size.values()) > LARGE_RESULTS:
        files = ", ".join(f"{f} {b / 1e6:.0f} MB" for f, b in size.items())
        echo(f"writing {name}'s results: about {sum(size.values()) / 1e6:.0f} MB ({files}; --results summary: 0.02 MB)")
    result.save(run_dir / "result.json", records=level != "summary")
    (run_dir / "summary.txt").write_text(result.summary() + "\n")
    echo(result.summary())


def _write_comparison(sc: Scenario, results: list[RunResult], out_dir: Path, echo: Callable[[str], None]) -> None:
    if sc.loads:
        from railbed.metrics import load_curve

        (out_dir / "curve.json").write_text(json.dumps(load_curve(results), indent=1) + "\n")
    table = comparison_table(results, lambda r: get_backend(r.backend, "backend").capabilities.exact)
    (out_dir / "comparison.txt").write_text(table + "\n")
    (out_dir / "index.json").write_text(
        json.dumps({"scenario": sc.name, "runs": [{"scheduler": r.scheduler, "makespan": r.makespan} for r in results]})
        + "\n"
    )
    echo("")
    echo(table)
    echo(f"results in {out_dir}")


def write_figures(out_dir: Path, echo: Callable[[str], None] = print, have: dict[str, RunResult] | None = None) -> None:
    """The standard figures and the exports of a results directory (``railbed plot`` and ``export``).
    The results are on disk already, so a failure here is reported, not raised. ``have``: the
    runs' results still in memory (run directory -> result), used instead of reading them again."""
    from railbed.export import export_results
    from railbed.plots import plot_results

    try:  # the exports (trace, CSVs: the results) first, then the figures (slower, and only views)
        export_results(out_dir, have, progress=echo)
        pngs = plot_results(out_dir, have=have, progress=echo)
    except Exception as exc:  # noqa: BLE001 - the run's results are saved; say what failed
        echo(f"figures failed ({type(exc).__name__}: {exc}); retry with: railbed plot {out_dir}")
        return
    echo(f"{len(pngs)} figures in {out_dir / 'figures'}")


def _finish(
    sc: Scenario, out_dir: Path, scale: dict, plots: bool, echo: Callable[[str], None], have: dict | None = None
) -> None:
    from scenarios.catalog import default_seeds

    provenance.write(out_dir, scale=scale, scenario=sc.source, extra_seeds=default_seeds(sc.source))
    if plots and sc.results == "all":
        write_figures(out_dir, echo, have)
    elif plots and sc.results == "flows":
        from railbed.export import export_results

        export_results(out_dir, have, trace=False)


def run_on(
    backend: str | Backend,
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    scale: float | None = None,
    schedulers: list[str] | None = None,
    plots: bool = True,
) -> list[RunResult]:
    """Run the job under each scheduler on ``backend`` (one session: the emulator builds the
    cluster once), write the results directory."""
    be = get_backend(backend) if isinstance(backend, str) else backend
    specs = _selected(sc, schedulers)
    if sc.job is None and not be.capabilities.array_jobs:
        takers = ", ".join(n for n in BACKENDS.names() if get_backend(n).capabilities.array_jobs)
        raise SpecError("job.args", f"this job is too large for a Python Job: simulate it with --backend {takers}")
    options = sc.options(progress=echo)
    options = replace(options, scale=preflight(sc, specs, out_dir, scale or sc.scale, be))
    results = []
    saved: dict[str, RunResult] = {}  # run directory -> its result, for the figures
    # the session first (the emulator's lock and cluster): a refused run writes nothing
    with be.session(sc.cluster, options) as session, results_dir(sc, out_dir):
        if session.describe():
            echo(f"{sc.name}: {sc.cluster.summary()}")
            echo(f"  {sc.job!r}; {session.describe()}")
        for spec, job in sc.points(specs):  # job None: built as arrays per run (sc.arrays)
            echo(f"running {spec.run_label} on {be.name}{' (job built as arrays)' if job is None else ''} ...")
            result = _run_one(sc, session, spec, job, replace(options, run_dir=out_dir / spec.run_label))
            results.append(result)
            _save_run(result, out_dir, spec.run_label, echo, sc.results)
            saved[spec.run_label] = result
        _write_comparison(sc, results, out_dir, echo)
        k = session.scale
        _finish(sc, out_dir, provenance.scale_record(k, scale, sc.scale), plots and sc.job is not None, echo, saved)
    if sc.job is None:
        echo("no figures: they need per-item records (the items are in <scheduler>/items.npz)")
    return results


def _run_one(sc: Scenario, session: Session, spec: SchedulerSpec, job: Job | None, options: RunOptions) -> RunResult:
    """One scheduler's run. A job too large for a ``Job`` (``sc.arrays``) is built as arrays here,
    once per scheduler (``workloads.generate_arrays``: the arrays and a run do not both fit in
    8 GB at 8192 GPUs), and handed over without a reference kept; its ``result.json`` is a
    RunResult without per-item records, the items in ``<label>/items.npz``
    (``simulator.rules.load_items``). No figures then: they read per-item records."""
    if job is not None and sc.multi is not None:
        result = session.run(job, sc.multi.scheduler(spec), options)
        sc.multi.add_results(result, session, spec, options)
        return result
    if job is not None:
        return session.run(job, make(spec), options)
    from workloads import generate_arrays

    assert sc.arrays is not None
    name, args = sc.arrays
    t0 = time.perf_counter()
    result = session.run(generate_arrays(name, args, "job"), make(spec), options)
    result.notes.append(f"built as arrays, compacted and run in {time.perf_counter() - t0:.1f} s")
    return result


def run_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    scale: float | None = None,
    schedulers: list[str] | None = None,
    plots: bool = True,
) -> list[RunResult]:
    """The scenario on the emulator (root): build the cluster once, run each scheduler."""
    return run_on("emulate", sc, out_dir, echo, scale, schedulers, plots)


def simulate_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    schedulers: list[str] | None = None,
    backend: str | Backend = "fluid",
    plots: bool = True,
) -> list[RunResult]:
    """The scenario on a simulator (no root): the same results directory as :func:`run_scenario`."""
    return run_on(backend, sc, out_dir, echo, None, schedulers, plots)


def crosscheck_scenario(
    sc: Scenario,
    out_dir: Path,
    echo: Callable[[str], None] = print,
    scale: float | None = None,
    schedulers: list[str] | None = None,
    plots: bool = True,
    sides: tuple[Backend, Backend] | None = None,
) -> list:
    """Run the scenario on two backends (``sides``; default the emulator, then ``fluid``) and
    compare each scheduler's two results.

    Writes everything :func:`run_on` writes for the first side, the second side's result as
    ``<label>/simulated.json``, ``crosscheck.txt`` and ``crosscheck.json``; returns the
    :class:`scenarios.crosscheck.Crosscheck` per scheduler."""
    first, second = sides or (get_backend("emulate"), get_backend("fluid"))
    results = run_on(first, sc, out_dir, echo, scale, schedulers, plots=False)
    checks = []
    with results_dir(sc, out_dir, write_inputs=False):
        for spec, result in zip(_selected(sc, schedulers), results):
            echo(f"running {spec.run_label} on {second.name} ...")
            other = second.run(sc.job_of(spec), make(spec), sc.cluster, sc.options(progress=echo))
            other.save(out_dir / spec.run_label / "simulated.json")
            checks.append(compare(result, other))
        text = "\n\n".join(c.report() for c in checks)
        (out_dir / "crosscheck.txt").write_text(f"{first.name} vs {second.name}\n\n{text}\n")
        (out_dir / "crosscheck.json").write_text(json.dumps([c.to_dict() for c in checks], indent=1) + "\n")
    echo("")
    echo(f"{first.name} vs {second.name}")
    echo(text)
    if plots:
        write_figures(out_dir, echo)
    echo(f"results in {out_dir}")
    return checks
