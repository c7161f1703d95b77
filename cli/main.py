"""The ``railbed`` command.

Exit codes: 0 success; 1 the machine cannot do it (not root, a run is
active, tools missing) or a run failed (an agent died, a flow's bytes did
not add up, a scheduler error); 2 bad input (one line naming the field); 130 and
143 interrupted by SIGINT and SIGTERM (after cleaning up).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from pathlib import Path

from railbed import machine
from railbed.backend import BACKENDS, TCP_CONGESTION, backend, parse_tcp
from railbed.dispatch import RunStalled, SchedulerError
from railbed.errors import EnvironmentProblem, Interrupted, RunFailed, SpecError
from railbed.results import RESULT_LEVELS
from railbed.spec import ClusterSpec
from tc_policies.plan import POLICIES

RUN_ERRORS = (RunFailed, RunStalled, SchedulerError)

DEFAULT_DEMO_CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "rail-4x4.yaml"


STRICT_HELP = "a value that is almost surely a mistake (railbed/doubts.py: warned about) is an error (exit 2)"


def _say(msg: str) -> None:
    print(msg, flush=True)


def _scale_arg(value: str) -> float:
    try:
        k = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"scale: expected a number, got {value!r}") from None
    if not 0 < k < math.inf:
        raise argparse.ArgumentTypeError(f"scale: must be a positive finite number, got {value}")
    return k


def _seconds_arg(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds: expected a number, got {value!r}") from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"seconds: must be in (0, 3600], got {value}")
    return seconds


def _count_arg(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return int(value)


def cmd_check(args: argparse.Namespace) -> int:
    from railbed.safeload import load_yaml_file

    doc = load_yaml_file(Path(args.cluster), str(args.cluster))
    if isinstance(doc, dict) and {"job", "schedulers"} & set(doc):
        return check_scenario(args)
    from railbed.doubts import cluster_doubts, report

    spec = ClusterSpec.load(args.cluster)
    code = check_cluster(args, spec)
    report(cluster_doubts(spec), args.strict)
    return code


def check_cluster(args: argparse.Namespace, spec: ClusterSpec) -> int:
    """``railbed check cluster.yaml``: the cluster's summary, its cost and what this machine can emulate."""
    from railbed.topology import Topology, default_scale
    from railbed.units import RateScale

    topo = Topology(spec)
    _say(spec.summary())
    _say(
        f"  {len(topo.hosts)} hosts, {len(topo.switches)} switches, {len(topo.spines)} spines, {len(topo.links)} links"
    )
    k = RateScale(args.scale) if args.scale is not None else default_scale(spec, topo)
    _say(f"  rate scale k = {k.k:g} ({'given' if args.scale is not None else 'default for this machine'})")
    _say(f"  {machine.cost(spec, topo).summary()}")
    for field, reason in machine.problems(spec, topo, k):
        _say(f"  note: railbed run and up would refuse this cluster here: {field}: {reason}")
    return 0


def check_scenario(args: argparse.Namespace) -> int:
    """``railbed check scenario.yaml``: a dry run. The scenario read (cluster, job built, schedulers
    made), every pre-flight check of its backend (pins, each scheduler's check and placement), its
    doubtful values; nothing run, nothing written."""
    from scenarios.runner import Scenario, preflight

    sc = Scenario.load(args.cluster)
    be = backend(sc.backend or "fluid", "backend")
    args.scale = args.scale if args.scale is not None else sc.scale
    check_cluster(args, sc.cluster)
    job = f"{sc.job.name}: {len(sc.job.tasks)} tasks, {len(sc.job.flows)} flows" if sc.job else "built as arrays"
    _say(f"job {job}; schedulers {', '.join(s.run_label for s in sc.schedulers)}; backend {be.name}")
    if be.capabilities.needs_root and os.geteuid() != 0:
        _say("  (not root: the checks of this machine's emulation are left to railbed run)")
        be = None
    preflight(sc, sc.schedulers, None, args.scale or sc.scale, be)
    _warn_doubts(args, sc)
    _say("dry run: every scheduler placed the job; nothing was run or written")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``railbed list [KIND]``: generators, schedulers, backends, host models, with their arguments."""
    from scenarios.catalog import listing

    for line in listing(args.kind):
        _say(line)
    return 0


def version() -> str:
    """``railbed --version``: the package's version and the code's git commit (``dirty``: uncommitted changes)."""
    from railbed.provenance import code_version, shadowed_packages

    code = code_version()
    commit = code.get("commit")
    where = f" (commit {commit[:12]}{', dirty' if code.get('dirty') else ''})" if commit else ""
    lines = [f"railbed {code.get('version') or 'unknown'}{where}"]
    lines += [f"warning: {n} imports from {at}, not railbed's (rename yours)" for n, at in shadowed_packages().items()]
    return "\n".join(lines)


def cmd_doctor(_args: argparse.Namespace) -> int:
    from emulator.features import doctor_report

    lines, ok = doctor_report()
    for line in lines:
        _say(line)
    _say("ready for emulation" if ok else "NOT ready for emulation (see above)")
    return 0 if ok else 1


def cmd_up(args: argparse.Namespace) -> int:
    from emulator.testbed import Testbed

    spec = ClusterSpec.load(args.cluster)
    tb = Testbed(spec, policy=args.policy, scale=args.scale, verbose=args.verbose)
    with tb:
        _say(spec.summary())
        _say(f"built in {tb.build_seconds:.1f} s; scale k = {tb.scale.k:g}; policy {tb.policy.name}")
        if sys.stdin.isatty() and not args.no_cli:
            from mininet.cli import CLI

            CLI(tb.net)
        else:
            _say("no terminal: the cluster stays up until Ctrl-C or SIGTERM")
            while True:
                time.sleep(3600)
    _say(f"torn down in {tb.teardown_seconds:.1f} s")
    return 0


def cmd_clean(_args: argparse.Namespace) -> int:
    from emulator.state import clean

    if os.geteuid() != 0:
        raise EnvironmentProblem("railbed clean needs root (use sudo)")
    counts = clean()
    from emulator.runtime import cleanup_stale_control_files

    cleanup_stale_control_files()
    _say(f"removed {counts['processes']} processes (and their namespaces) and {counts['interfaces']} stray interfaces")
    return 0


def _output_switches(args: argparse.Namespace, sc) -> None:
    """``--analysis on|off`` and ``--results summary|flows|all`` over the scenario's ``analysis`` and ``results``."""
    if getattr(args, "analysis", None) is not None:
        sc.analysis = args.analysis == "on"
    if getattr(args, "results", None) is not None:
        sc.results = args.results
    if getattr(args, "load", None):
        _narrow_loads(args.load, sc)


def _narrow_loads(wanted: list[float], sc) -> None:
    """``--load X`` (repeatable): only these of an offered-load scenario's ``loads``."""
    if not sc.loads:
        raise SpecError("--load", "the scenario has no loads: (an offered-load sweep) to choose from")
    for x in wanted:
        if x not in sc.loads:
            raise SpecError(
                "--load", f"{x:g} is not one of the scenario's loads ({', '.join(f'{v:g}' for v in sc.loads)})"
            )
    kept = [(x, job) for x, job in zip(sc.loads, sc.jobs or []) if x in wanted]
    sc.loads, sc.jobs = [x for x, _ in kept], [job for _, job in kept]
    sc.job = sc.jobs[0]


def _scenario_and_out(args: argparse.Namespace, kind: str = "", arrays: bool = False):
    """The scenario file (validated) and its results directory (default results/<name>[-kind]-<time>).
    ``arrays``: a job too large for a Python Job is left to be built as arrays (backend fluid-rules)."""
    from scenarios.runner import Scenario

    sc = Scenario.load(args.scenario, arrays=arrays)
    if args.tcp is not None:
        sc.tcp = parse_tcp(args.tcp, "--tcp")
    _output_switches(args, sc)
    return sc, Path(args.out or f"results/{sc.name}{kind}-{time.strftime('%Y%m%d-%H%M%S')}")


def _warn_doubts(args: argparse.Namespace, sc) -> None:
    """Values of the scenario that are almost surely mistakes, one warning each on stderr (railbed/doubts.py);
    ``--strict``: the first is an error (exit 2), before anything runs."""
    from railbed.doubts import report
    from scenarios.doubts import scenario_doubts

    report(scenario_doubts(sc), strict=getattr(args, "strict", False))


def _warn_results(args: argparse.Namespace, sc, results) -> None:
    """A makespan far beyond what the job's bytes and tasks imply (railbed/doubts.py), after the run
    (its results are written); ``--strict``: exit 2."""
    from railbed.doubts import report, result_doubts

    report([d for r in results for d in result_doubts(r, sc.cluster, f"{r.scheduler}: makespan")], args.strict)


def cmd_run(args: argparse.Namespace) -> int:
    from scenarios.runner import run_scenario

    sc, out = _scenario_and_out(args)
    _warn_doubts(args, sc)
    results = run_scenario(sc, out, echo=_say, scale=args.scale, schedulers=args.scheduler, plots=not args.no_plots)
    _warn_results(args, sc, results)
    return 0


def _scenario_backend(path: str) -> str | None:
    """The ``backend`` a scenario file names (decoded by the seam), before the scenario is built."""
    from railbed.safeload import load_yaml_file
    from scenarios.runner import scenario_backend

    return scenario_backend(load_yaml_file(Path(path), str(path)))


def _simulator(args: argparse.Namespace):
    """The backend ``--backend`` names (``--engine``: its old spelling), decoded here, once."""
    if args.backend is not None and args.engine is not None:
        raise SpecError("--engine", "give --backend only (--engine is its old name)")
    name, field = (args.engine, "--engine") if args.engine is not None else (args.backend or "fluid", "--backend")
    if args.backend is None and args.engine is None:
        name, field = _scenario_backend(args.scenario) or "fluid", "backend"
    note = BACKENDS.note(name)
    if args.engine is not None:
        note = f"--engine {name} is now --backend {BACKENDS.canonical(name, field)} (the old spelling still works)"
    if note:
        print(f"railbed: note: {note}", file=sys.stderr)
    be = backend(name, field)
    if be.capabilities.needs_root:
        raise SpecError(field, f"{be.name} builds a cluster (root): railbed run or crosscheck run it")
    return be


def cmd_simulate(args: argparse.Namespace) -> int:
    from scenarios.runner import simulate_scenario

    be = _simulator(args)
    sc, out = _scenario_and_out(args, "-sim", arrays=be.capabilities.array_jobs)
    _warn_doubts(args, sc)
    results = simulate_scenario(sc, out, echo=_say, schedulers=args.scheduler, backend=be, plots=not args.no_plots)
    _warn_results(args, sc, results)
    return 0


def _sides(value: str):
    """``--backends A,B``: the two backends a crosscheck compares, decoded here, once."""
    names = value.split(",")
    if len(names) != 2 or names[0] == names[1]:
        raise SpecError("--backends", f"two different backends, as A,B (e.g. emulate,packet), got {value!r}")
    return tuple(backend(n, "--backends") for n in names)


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from scenarios.runner import crosscheck_scenario

    sides = _sides(args.backends)
    sc, out = _scenario_and_out(args, "-crosscheck")
    _warn_doubts(args, sc)
    plots = not args.no_plots
    crosscheck_scenario(sc, out, echo=_say, scale=args.scale, schedulers=args.scheduler, plots=plots, sides=sides)
    return 0


def _results_dir(path: str) -> Path:
    out = Path(path)
    if not out.is_dir() or not any(out.glob("*/result.json")):
        raise SpecError("results_dir", f"{path} is not a results directory (no <run>/result.json)")
    return out


def cmd_plot(args: argparse.Namespace) -> int:
    from railbed.plots import plot_results

    out = _results_dir(args.results_dir)
    for png in plot_results(out, color_by=args.color_by):
        _say(str(png))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from railbed.export import export_results

    for path in export_results(_results_dir(args.results_dir)):
        _say(str(path))
    return 0


def cmd_import_chakra(args: argparse.Namespace) -> int:
    """A Chakra trace (``<prefix>.<rank>.et``) as railbed's job JSON (workloads/chakra.py)."""
    from railbed.safeload import load_yaml_file
    from workloads.chakra import scenario_job

    value = {"chakra": str(Path(args.prefix).resolve()), "algorithm": args.algorithm, "chunks": args.chunks,
             "gpus_per_server": args.gpus_per_server}  # fmt: skip
    for key in ("placement", "groups"):
        if getattr(args, key):
            value[key] = load_yaml_file(Path(getattr(args, key)), f"--{key}")
    try:
        job = scenario_job(value, Path("."), echo=_say)
    except SpecError as exc:  # the scenario's field names as this command's: the prefix, the options
        field = exc.field.replace("job.chakra", "PREFIX", 1).replace("job.", "--", 1).replace("_", "-")
        raise SpecError(field, exc.message) from None
    job.save(args.out)
    _say(f"wrote {args.out} ({len(job.endpoints)} ranks, {len(job.items)} items)")
    return 0


def cmd_export_chakra(args: argparse.Namespace) -> int:
    """A railbed job (job.json, or a results directory's) as a Chakra trace, one file per endpoint."""
    from railbed.job import Job
    from workloads.chakra import export_trace

    path = Path(args.job)
    job = Job.load(path / "job.json" if path.is_dir() else path)
    paths = export_trace(job, args.out)
    _say(f"wrote {len(paths)} rank files {args.out}.0.et .. {args.out}.{len(paths) - 1}.et")
    return 0


def _chakra_commands(sub) -> None:
    from workloads.collectives import ALGORITHMS

    ic = sub.add_parser("import-chakra", help="a Chakra execution trace (<prefix>.<rank>.et) as a railbed job JSON")
    ic.add_argument("prefix", help="the trace's path prefix: <prefix>.0.et, <prefix>.1.et, ...")
    ic.add_argument("-o", "--out", required=True, help="the job JSON to write")
    ic.add_argument("--algorithm", default="ring", choices=list(ALGORITHMS), help="for COMM_COLL nodes")
    ic.add_argument("--chunks", type=_count_arg, default=1, help="pipelined chunks (tree, ring broadcast)")
    ic.add_argument("--gpus-per-server", type=_count_arg, default=1, help="ranks in order: r // G, GPU r %% G")
    ic.add_argument("--placement", default=None, help="YAML/JSON list per rank of [server, gpu, nic]")
    ic.add_argument("--groups", default=None, help="YAML/JSON mapping of process group name -> ranks")
    ic.set_defaults(func=cmd_import_chakra)
    ec = sub.add_parser("export-chakra", help="a railbed job (job.json or a results directory) as a Chakra trace")
    ec.add_argument("job", help="job.json, or a results directory holding one")
    ec.add_argument("-o", "--out", required=True, help="the trace's path prefix: writes <prefix>.<rank>.et")
    ec.set_defaults(func=cmd_export_chakra)


def cmd_import_trace(args: argparse.Namespace) -> int:
    """A flow trace (workloads/traces.py) as job JSON, and with --cluster a cluster YAML that fits it."""
    import yaml

    from railbed.units import parse_rate
    from workloads.traces import import_trace, servers_needed, trace_cluster

    cluster = ClusterSpec.load(args.for_cluster) if args.for_cluster else None
    options = {k: v for k, v in (("layout", args.layout), ("sizes", args.sizes)) if v is not None}
    job = import_trace(args.trace, args.format, options, cluster, where="import-trace")
    out = Path(args.out or Path(args.trace).with_suffix(".json").name)
    if args.cluster:
        doc = trace_cluster(servers_needed(job), parse_rate(args.rate, "--rate"), Path(args.trace).stem)
        ClusterSpec.from_dict(doc)  # checked before anything is written
        Path(args.cluster).write_text(yaml.safe_dump(doc, sort_keys=False))
        _say(f"{args.cluster}: {servers_needed(job)} servers at {args.rate} bit/s on one switch")
    job.save(out)
    _say(f"{out}: {len(job.flows)} flows, {len({f.coflow for f in job.flows})} coflows")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from scenarios.sweep import MAX_POINTS, Sweep, run_sweep

    sweep = Sweep.load(args.sweep)
    out = Path(args.out or f"results/sweep-{sweep.name}")
    limit = args.max_points or MAX_POINTS
    rows = run_sweep(
        sweep, out, echo=_say, address=args.address, cpus=args.cpus, max_points=limit, use_ray=args.ray, only=args.only
    )
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def cmd_reproduce(args: argparse.Namespace) -> int:
    write = args.write or args.readme
    if args.check:  # the sections whose inputs changed since they were made (scenarios/block.py)
        from scenarios.block import check
        from scenarios.reproduce import HERE

        return check(Path(args.check), HERE, echo=_say)
    if args.refresh_inputs:  # old-style inputs lines rewritten where git proves them (scenarios/block.py)
        from scenarios.block import refresh_inputs
        from scenarios.reproduce import HERE

        return refresh_inputs(Path(args.refresh_inputs), HERE, echo=_say)
    if args.sensitivity:
        from scenarios.sensitivity import sensitivity

        sensitivity(args.paper, Path(args.out), quick=args.quick, echo=_say, address=args.address, cpus=args.cpus)
        return 0
    from scenarios.reproduce import reproduce

    reproduce(
        args.paper,
        Path(args.out),
        quick=args.quick,
        emulate=args.emulate,
        echo=_say,
        write=Path(write) if write else None,
        resume=args.resume,
        full_size=args.full_size,
        plots=not args.no_plots,
        jobs=args.jobs,
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from scenarios import priority_demo

    spec = ClusterSpec.load(args.cluster)
    out = Path(args.out or f"results/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    priority_demo.run(
        spec,
        out,
        scale=args.scale,
        window=args.seconds,
        policy=args.policy,
        high_dscp=args.high_dscp,
        low_dscp=args.low_dscp,
        echo=_say,
    )
    return 0


class _Version(argparse.Action):
    """``--version``, its text made only when asked (it runs git)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        _say(version())
        parser.exit()


def _sweep_command(sub) -> None:
    sw = sub.add_parser(
        "sweep", help="a scenario over a grid of settings, here or on Ray (resumes; see scenarios/sweep.py)"
    )
    sw.add_argument("sweep", help="sweep YAML")
    sw.add_argument("--out", default=None, help="results directory (default results/sweep-<name>); re-run resumes")
    sw.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else local)")
    sw.add_argument("--cpus", type=int, default=None, help="points at once on this machine (default: all CPUs)")
    sw.add_argument("--max-points", type=_count_arg, default=None, help="allow grids of up to N points (default 1000)")
    sw.add_argument("--ray", action="store_true", help="run the points on a local Ray instance (default: processes)")
    sw.add_argument(
        "--only", action="append", default=None, metavar="TEXT", help="only the points whose id has TEXT (repeatable)"
    )
    sw.set_defaults(func=cmd_sweep)


def _reproduce_command(sub) -> None:
    from scenarios.reproduce import PAPERS

    rp = sub.add_parser("reproduce", help="run the papers' claims and write REPRODUCTION.md (scenarios/reproduce.py)")
    rp.add_argument("paper", nargs="?", default="all", choices=[*PAPERS, "all"])
    rp.add_argument("--quick", action="store_true", help="small versions of the scenarios (minutes)")
    rp.add_argument("--emulate", action="store_true", help="also the emulated and crosscheck rows (root)")
    rp.add_argument(
        "--full-size", action="store_true", help="also the claims marked full_size (1000s of GPUs: minutes, GBs each)"
    )
    rp.add_argument("--out", default="reproduction", help="where the runs and REPRODUCTION.md go")
    rp.add_argument(
        "--write",
        default=None,
        metavar="FILE",
        help="also rewrite this file's reproduce:begin/end block (REPRODUCTION.md)",
    )
    rp.add_argument("--readme", default=None, help=argparse.SUPPRESS)  # the old name of --write
    rp.add_argument("--check", default=None, metavar="FILE", help="list FILE's stale sections (exit 1 if any)")
    rp.add_argument(
        "--refresh-inputs",
        default=None,
        metavar="FILE",
        help="rewrite FILE's old-style inputs lines to today's rule where git proves what each was made from",
    )
    rp.add_argument(
        "--resume", action="store_true", help="reuse runs in --out that finished with the same scenario.yaml"
    )
    rp.add_argument(
        "--sensitivity",
        action="store_true",
        help="sweep the claims files' unstated parameters on Ray, one figure per claim",
    )
    rp.add_argument("--no-plots", action="store_true", help="no figures (REPRODUCTION.md's block has none)")
    rp.add_argument(
        "--jobs", type=_count_arg, default=1, help="simulated run groups at once (forked processes; N x the memory)"
    )
    rp.add_argument("--address", default=None, help="--sensitivity: a Ray cluster (default: local)")
    rp.add_argument("--cpus", type=int, default=None, help="--sensitivity: CPUs of the local Ray instance")
    rp.set_defaults(func=cmd_reproduce)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="railbed", description="packet-level testbed for ML cluster networks")
    p.add_argument("--version", action=_Version, help="the version and git commit of this code")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "check", help="validate a cluster or a scenario YAML (a dry run: job, schedulers, placement) (no root)"
    )
    c.add_argument("cluster", metavar="FILE", help="a cluster file, or a scenario file (it has job: and schedulers:)")
    c.add_argument("--scale", type=_scale_arg, default=None)
    c.add_argument("--strict", action="store_true", help=STRICT_HELP)
    c.set_defaults(func=cmd_check)

    ls = sub.add_parser("list", help="generators, schedulers, backends, host models: each with its arguments")
    ls.add_argument("kind", nargs="?", default=None, choices=["generators", "schedulers", "backends", "hosts"])
    ls.set_defaults(func=cmd_list)

    d = sub.add_parser("doctor", help="what this machine's kernel and tools can do")
    d.set_defaults(func=cmd_doctor)

    u = sub.add_parser("up", help="build a cluster and open Mininet's CLI (root)")
    u.add_argument("cluster")
    u.add_argument("--policy", default="dscp-priority", choices=list(POLICIES))
    u.add_argument("--scale", type=_scale_arg, default=None, help="k: real rate = model rate / k")
    u.add_argument("--no-cli", action="store_true", help="wait for Ctrl-C instead of opening the CLI")
    u.add_argument("-v", "--verbose", action="store_true")
    u.set_defaults(func=cmd_up)

    def scenario_command(name: str, help_: str, func, kind: str = "", scale: bool = True):
        c = sub.add_parser(name, help=help_)
        c.add_argument(
            "scenario",
            help="scenario YAML: cluster, job {generator, args}, schedulers (README 'Scenario files'; "
            "railbed list: the generators and schedulers with their arguments; railbed check: a dry run)",
        )
        c.add_argument("--out", default=None, help=f"results directory (default results/<name>{kind}-<time>)")
        if scale:
            c.add_argument("--scale", type=_scale_arg, default=None, help="override the scenario's k")
        c.add_argument("--scheduler", action="append", default=None, help="run only these schedulers (repeatable)")
        tcps = ", ".join(TCP_CONGESTION)
        c.add_argument("--tcp", default=None, help=f"override the scenario's TCP congestion control ({tcps})")
        c.add_argument("--no-plots", action="store_true", help="do not write figures/, trace.json and the CSVs")
        c.add_argument("--strict", action="store_true", help=STRICT_HELP)
        c.add_argument("--load", type=float, action="append", default=None, help="only this of the scenario's loads")
        c.add_argument("--analysis", choices=["on", "off"], default=None, help="each run's analysis (default on)")
        c.add_argument(
            "--results",
            choices=list(RESULT_LEVELS),
            default=None,
            help="summary: result.json without per-item records; flows: with them and the CSVs; all: also trace.json "
            "and figures (default, or the scenario's); the size is said before large results are written",
        )
        c.set_defaults(func=func)
        return c

    scenario_command("run", "run a scenario (cluster + job + schedulers) and compare (root)", cmd_run)
    s = scenario_command(
        "simulate", "run a scenario on the flow-level simulator (no root)", cmd_simulate, "-sim", False
    )
    s.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help="fluid (default, or the scenario's backend): every scheduler hook; fluid-reference: the same, the "
        "slow oracle; fluid-rules: one numba kernel over the schedulers' rules, jobs as arrays; packet: ns-3, "
        "TCP and queues (railbed[packet]) (railbed/backend.py)",
    )
    s.add_argument("--engine", default=None, help=argparse.SUPPRESS)  # the old name: numba | reference | compact
    cc = scenario_command(
        "crosscheck",
        "run a scenario on two backends and compare (the emulator and fluid by default: root)",
        cmd_crosscheck,
        "-crosscheck",
    )
    cc.add_argument(
        "--backends",
        default="emulate,fluid",
        metavar="A,B",
        help="the two backends to compare, any of emulate, fluid, packet (railbed/backend.py); default emulate,fluid",
    )

    pl = sub.add_parser("plot", help="write the standard figures of a results directory (PNG + CSV)")
    pl.add_argument("results_dir")
    pl.add_argument("--color-by", default="coflow_type", choices=["coflow_type", "dscp"], help="flow colours")
    pl.set_defaults(func=cmd_plot)

    ex = sub.add_parser("export", help="each run as a Perfetto trace (trace.json) and flows/tasks/links CSVs")
    ex.add_argument("results_dir")
    ex.set_defaults(func=cmd_export)

    it = sub.add_parser("import-trace", help="a flow trace (coflow-benchmark or CSV) as job JSON (workloads/traces.py)")
    it.add_argument("trace", help="the trace file")
    it.add_argument(
        "--format", default=None, help="coflow-benchmark or csv (default: csv for .csv, else coflow-benchmark)"
    )
    it.add_argument("--layout", default=None, help="coflow-benchmark: split (default) or rack")
    it.add_argument("--sizes", default=None, help="coflow-benchmark: exact (default) or coflowsim")
    it.add_argument("--for-cluster", default=None, metavar="YAML", help="check the trace against this cluster")
    it.add_argument("--cluster", default=None, metavar="YAML", help="also write a one-switch cluster that fits it")
    it.add_argument("--rate", default=str(2**30), help="its NIC rate (default 2^30 bit/s, CoflowSim's rack port)")
    it.add_argument("-o", "--out", default=None, help="job JSON (default: the trace's name with .json, here)")
    it.set_defaults(func=cmd_import_trace)

    _sweep_command(sub)
    _reproduce_command(sub)
    _chakra_commands(sub)

    k = sub.add_parser("clean", help="remove what a killed run left behind (root)")
    k.set_defaults(func=cmd_clean)

    m = sub.add_parser("demo", help="two DSCP classes through one rail switch port (root)")
    m.add_argument("--cluster", default=str(DEFAULT_DEMO_CLUSTER))
    m.add_argument("--scale", type=_scale_arg, default=None)
    m.add_argument("--seconds", type=_seconds_arg, default=3.0, help="measurement window per case")
    m.add_argument("--out", default=None, help="results directory")
    m.add_argument("--policy", default="dscp-priority", choices=list(POLICIES))
    m.add_argument("--high-dscp", type=int, default=46, help="DSCP of the high class (0..63)")
    m.add_argument("--low-dscp", type=int, default=0, help="DSCP of the low class (0..63)")
    m.set_defaults(func=cmd_demo)
    return p


# what a failed or interrupted command leaves: no testbed; finished results (a sweep's points, a
# report's runs) and a PARTIAL-marked results directory stay
CLEANED = "every namespace, link and process it created was removed (results already saved stay)"


def _from_interrupt(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among ``exc``'s causes (``__cause__`` / ``__context__``)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # A shell may start background jobs with SIGINT ignored; a run must stop on Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args)
    except SpecError as exc:
        print(f"railbed: {exc}", file=sys.stderr)
        return 2
    except EnvironmentProblem as exc:
        print(f"railbed: {exc}", file=sys.stderr)
        return 1
    except RUN_ERRORS as exc:
        print(f"railbed: run failed: {exc}; {CLEANED}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemError) as exc:  # Ctrl-C in a numba kernel: SystemError from one
        if not _from_interrupt(exc):
            raise
        print(f"railbed: interrupted (SIGINT); {CLEANED}", file=sys.stderr)
        return 130
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"railbed: interrupted ({name}); {CLEANED}", file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
