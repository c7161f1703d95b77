"""What a run was, in words, from its scenario and job (the reproduction report's "ran" column).

Generated, never typed: a label names the model or dataset, layers (and the
model's own count when fewer ran), GPUs (the ones the job used), iterations,
the backend and whether the run was ``--quick``. Each job generator has a
describer reading the generator's effective arguments (its defaults filled
in); a saved job (``job: {file: ...}``) is described from its items.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from railbed.job import Job
from railbed.results import fmt_time
from scenarios.claims import DEFAULT_ENGINE


def _effective(generator: str, args: dict[str, Any]) -> dict[str, Any]:
    """The generator's arguments with its defaults filled in (sizes and durations parsed)."""
    from workloads import GENERATORS, checked_args

    _, kwargs, _, _ = checked_args(generator, args, "job")
    params = inspect.signature(GENERATORS[generator]).parameters
    return {k: kwargs.get(k, p.default) for k, p in params.items()}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _moe(args: dict[str, Any], generator: str = "moe_training") -> list[str]:
    from workloads import DESCRIPTIONS

    d = DESCRIPTIONS.get(generator)(**args)  # by the generator's name: a section counts it only if it runs it
    layers = f"{d['layers']} of {d['model_layers']} layers" if d["layers"] != d["model_layers"] else (
        f"all {d['layers']} layers")  # fmt: skip
    out = [d["model"], layers, _plural(d["gpus"], "GPU"), _plural(d["microbatches"], "microbatch").replace(
        "microbatchs", "microbatches"), _plural(d["iterations"], "iteration")]  # fmt: skip
    return out + ([f"sizes / {d['shrink']}"] if d["shrink"] > 1 else [])


def _gnn(args: dict[str, Any]) -> list[str]:
    a = _effective("gnn_training", args)
    graph = "full-size graph" if a["scale"] == 1 else f"graph at scale {a['scale']:g}"
    return [f"{a['dataset']} ({graph}, {a['partitioner']})", _plural(a["machines"], "machine"),
            f"{a['workers']} workers x {a['samplers_per_worker']} samplers", f"batch {a['batch']}",
            _plural(a["iterations"], "iteration")]  # fmt: skip


def _fullgraph(args: dict[str, Any]) -> list[str]:
    a = _effective("gnn_fullgraph", args)
    return [f"{a['dataset']} (graph of {a['max_edges']:,} edges)", _plural(a["gpus"], "GPU"),
            _plural(a["layers"], "layer"), _plural(a["epochs"], "epoch")]  # fmt: skip


def _requests(args: dict[str, Any]) -> list[str]:
    a = _effective("requests", args)
    if a.get("duration") is not None:  # a steady state: arrivals for a time, requests = load x duration
        return [a["preset"], f"{fmt_time(float(a['duration']))} of arrivals per load"]
    return [a["preset"], f"{a['requests']:,} requests per load"]


def _hybrid(args: dict[str, Any]) -> list[str]:
    a = _effective("hybrid_parallel", args)
    ranks = a["dp"] * a["pp"] * a["tp"]
    return [f"dp {a['dp']} x pp {a['pp']} x tp {a['tp']} ({_plural(ranks, 'GPU')})",
            _plural(a["microbatches"], "microbatch").replace("microbatchs", "microbatches"),
            _plural(a["iterations"], "iteration")]  # fmt: skip


def _a2a(args: dict[str, Any]) -> list[str]:
    a = _effective("all_to_all", args)
    return [f"all-to-all of {a['n']}", _plural(a["iterations"], "iteration")]


def _graph(dataset: str, scale: float) -> str:
    return f"{dataset} ({'full-size graph' if scale == 1 else f'graph at scale {scale:g}'})"


def _cagnet(args: dict[str, Any]) -> list[str]:
    a = _effective("gnn_cagnet", args)
    servers = -(-a["gpus"] // a["gpus_per_server"])
    return [_graph(a["dataset"], a["scale"]), f"{_plural(a['gpus'], 'GPU')} on {_plural(servers, 'server')}",
            _plural(a["layers"], "layer"), f"hidden {a['hidden']}", _plural(a["epochs"], "epoch")] + (
            ["point-to-point sends"] if a["p2p"] else [])  # fmt: skip


def _g3(args: dict[str, Any]) -> list[str]:
    a = _effective("gnn_hybrid", args)
    return [_graph(a["dataset"], a["scale"]) + f", {a['model']}", _plural(a["workers"], "worker"),
            _plural(a["layers"], "layer"), f"hidden {a['hidden']}", f"bins of {a['bin_size']:,} nodes",
            _plural(a["epochs"], "epoch")]  # fmt: skip


def _epoch(args: dict[str, Any]) -> list[str]:
    from workloads.graphs import dataset

    a = _effective("gnn_epoch", args)
    layers = len(a["fanout"] or dataset(a["dataset"]).fanout)
    batches = f"first {_plural(a['batches'], 'batch')} per server".replace("batchs", "batches") if a["batches"] else (
        "every batch")  # fmt: skip
    return [_graph(a["dataset"], a["scale"]), _plural(a["servers"], "server"), _plural(layers, "layer"),
            f"hidden {a['hidden']}", f"batch {a['batch']}", batches, _plural(a["epochs"], "epoch")]  # fmt: skip


DESCRIBERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "gnn_cagnet": _cagnet,
    "gnn_hybrid": _g3,
    "gnn_epoch": _epoch,
    "moe_training": _moe,
    "gnn_training": _gnn,
    "gnn_fullgraph": _fullgraph,
    "requests": _requests,
    "hybrid_parallel": _hybrid,
    "all_to_all": _a2a,
}


def _saved(job: Job) -> list[str]:
    """A saved job: its name, GPU endpoints and iterations, counted from its items."""
    gpus = {(e.pin.server, e.pin.device) for e in job.endpoints.values() if e.pin and e.pin.device.startswith("gpu")}
    iterations = {item.iteration for item in job.items.values()}
    return [job.name, _plural(len(gpus), "GPU"), _plural(len(iterations), "iteration")]


def _with_iterations(entry: dict[str, Any]) -> dict[str, Any]:
    """A ``jobs:`` entry as a ``job:`` (its ``iterations`` are its generator's argument)."""
    if "iterations" not in entry or not isinstance(entry.get("args", {}), dict):
        return entry
    return {**entry, "args": {**(entry.get("args") or {}), "iterations": entry["iterations"]}}


def needs_job(source: dict[str, Any]) -> bool:
    """Whether :func:`job_label` reads the built job of scenario mapping ``source``: only a job no
    describer reads (a saved job, a trace, a generator without one) is described from its items.
    Every other label comes from the mapping alone, so a row whose run group ran elsewhere (another
    process, an earlier section) builds no job for its label (a minute at the papers' sizes)."""
    if isinstance(source.get("jobs"), list):  # several jobs: each one's from its entry, never built
        return False
    return (source.get("job") or {}).get("generator") not in DESCRIBERS


def job_label(source: dict[str, Any], job: Job | None) -> str:
    """The job part of a label from the scenario mapping (and the built job where :func:`needs_job`)."""
    if isinstance(source.get("jobs"), list):  # several jobs (issue 45): each one's, by name
        return "; ".join(f"job {e.get('name', f'job{i}')}: {job_label({'job': _with_iterations(e)}, None)}"
                         for i, e in enumerate(source["jobs"]) if isinstance(e, dict))  # fmt: skip
    spec = source.get("job") or {}
    generator = spec.get("generator")
    if not needs_job(source):
        parts = DESCRIBERS[generator](dict(spec.get("args") or {}))
    elif job is not None:
        parts = _saved(job)
    else:
        parts = ["?"]
    if source.get("loads"):
        parts.append("loads " + ", ".join(f"{x:g}" for x in source["loads"]))
    return ", ".join(parts)


def mode_label(mode: str, engine: str, scale: float | None) -> str:
    """How a row ran, as its label prints it: a claim's mode (``scenarios.claims.MODES``) and, on a
    simulated row, its backend when not the default one."""
    k = f", k = {scale:g}" if scale else ""
    if mode == "emulate":
        return f"emulated{k}"
    if mode == "crosscheck":
        return f"emulated{k} and simulated"
    return "simulated" + (f" ({engine} backend)" if engine != DEFAULT_ENGINE else "")


def run_label(source: dict[str, Any], job: Job | None, mode: str, engine: str, scale: float | None,
              quick: bool) -> str:  # fmt: skip
    """Everything a row's run was: job, backend, quick or not."""
    return f"{job_label(source, job)}; {mode_label(mode, engine, scale)}{'; quick' if quick else ''}"
