"""Hermod's measured rows, generated from results directories (never typed).

``python -m scenarios.hermod.rows DIR [DIR ...] [--baseline megatron]``
prints one markdown row per results directory (``railbed simulate`` or
``railbed run`` output): what ran (model, layers, GPUs, iterations,
microbatches, layout, NICs per server, backend, engine), every scheduler's
mean iteration time as a change against the baseline's, and the baseline
run's ``analysis`` (``result.json``, issue 22): ``max_speedup`` (the most any
network scheduler could gain), the exposed communication on its critical
path and the coflow overlap of the pairs Fig. 5.2 measures (EP/DP, DP/DP,
PP/PP) and PP/DP. A directory whose runs lack ``analysis`` prints ``n/a``.

``--write PAGE --block NAME`` puts the table between ``<!-- rows:NAME:begin -->``
and ``<!-- rows:NAME:end -->`` of PAGE (``docs/hermod.md``) instead of printing
it, with the command that made it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from railbed.backend import BACKENDS, backend
from railbed.jsonout import read_keys
from railbed.results import CONGESTION
from workloads.moe import PRESETS

KEPT = ("iterations", "makespan", "analysis", "backend", "counters", "scale", "tcp", "packet")  # what a row reads
# (tcp, packet: a result.json written before the backends' counters held them)
PAIRS = (("EP", "DP"), ("DP", "DP"), ("PP", "PP"), ("PP", "DP"), ("EP", "PP"))


def _mean_iteration(result: dict, only: int | None = None) -> float:
    """The mean iteration time, or iteration ``only``'s (from the previous one's end to its own)."""
    its = result.get("iterations") or {}
    vals = list(its.values()) if isinstance(its, dict) else list(its)
    if only is not None:
        return vals[only] if vals else result["makespan"]
    return sum(vals) / len(vals) if vals else result["makespan"]


def _what(directory: Path, result: dict) -> dict:
    sc = yaml.safe_load((directory / "scenario.yaml").read_text())
    args = sc["job"]["args"]
    model = args.get("model")
    base = PRESETS.get(model, {})
    layers = args.get("layers") or base.get("layers")
    tp, pp = args.get("tp") or base.get("tp", 1), args.get("pp") or base.get("pp", 1)
    return {
        "scenario": sc["name"], "model": model, "layers": layers,
        "gpus": tp * pp * args.get("dp", 1), "iterations": args.get("iterations", 1),
        "microbatches": args.get("microbatches") or 2 * pp, "layout": args.get("layout", "megatron"),
        "nics": args.get("nics_per_server"), "shrink": args.get("shrink", 1), "backend": _backend(result),
        "full": layers == base.get("layers"), "grid": args.get("expert_grid", "megatron"),
        "seed": args.get("seed", 0), "etp": args.get("etp"),
    }  # fmt: skip


def _backend(result: dict) -> str:
    """The backend and what sets the cost of a lost packet there: TCP, and the minimum RTO (the
    packet backend's own settings, in its counters; the emulator's is 5 ms of real time,
    ``emulator.nodes.RTO_MIN``: 5 ms / k of model time)."""
    name = result.get("backend") or "?"
    own = (result.get("counters") or {}).get(name) or result.get("packet") or {}  # or as written before counters
    tcp = own.get(CONGESTION) or result.get("tcp")
    if "settings" in own:
        rto = own["settings"].get("rto_min")
        return f"{name} ({tcp}, min RTO {rto * 1e6:g} us)" if rto is not None else f"{name} ({tcp})"
    if name in BACKENDS.spellings() and backend(name).capabilities.needs_root and result.get("scale"):
        from emulator.nodes import RTO_MIN

        k = result["scale"]
        return f"{name} (k = {k:g}, {tcp}, min RTO {RTO_MIN * 1e3:g} ms real = {RTO_MIN * 1e6 / k:g} us model)"
    return name


def row(directory: Path, baseline: str = "megatron", only: int | None = None) -> dict:
    """The numbers of one results directory (module docstring); ``only``: of that iteration alone."""
    runs = {}
    for sub in sorted(p for p in directory.iterdir() if (p / "result.json").exists()):
        runs[sub.name] = read_keys(sub / "result.json", KEPT)  # not the records: 600 k of them take GBs
    if baseline not in runs:
        raise SystemExit(f"{directory}: no {baseline} run")
    base = _mean_iteration(runs[baseline], only)
    out = _what(directory, runs[baseline])
    out["baseline"], out["only"] = baseline, only
    out["iteration_s"] = {k: _mean_iteration(r, only) for k, r in runs.items()}
    out["change"] = {k: v / base - 1 for k, v in out["iteration_s"].items()}
    out["analysis"] = {k: r.get("analysis") for k, r in runs.items()}
    out["drops"] = {k: (r.get("packet") or {}).get("drops") for k, r in runs.items()}  # packet backend only
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} %"


def _share(a: dict | None, x: str, y: str) -> str:
    ov = (a or {}).get("overlap") or {}
    try:
        return f"{100 * ov['share'][x][y]:.1f} %"
    except (KeyError, TypeError):
        return "0.0 %" if ov else "n/a"


def markdown(rows: list[dict], schedulers: list[str]) -> str:
    head = ["what ran"] + [f"{s}" for s in schedulers] + ["baseline max_speedup", "exposed comm"]
    head += [f"{a}/{b} overlap" for a, b in PAIRS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        shrink = "" if r["shrink"] == 1 else f", shrink {r['shrink']}"
        reduced = "" if r["full"] else " (REDUCED)"
        grid = "" if r.get("grid", "megatron") == "megatron" else f", {r['grid']} expert grid"
        grid += "" if r.get("etp") is None else f", ETP {r['etp']}"
        seed = f", routing seed {r['seed']}" if r.get("seed") else ""
        only = "" if r.get("only") is None else f" (iteration {r['only']} alone)"
        what = (f"{r['scenario']}: {r['model']}, {r['layers']} layers{reduced}{shrink}, {r['gpus']} GPUs, "
                f"{r['nics']} NICs/server, {r['layout']} order{grid}, {r['microbatches']} microbatches, "
                f"{r['iterations']} iterations{only}{seed}, {r['backend']}")  # fmt: skip
        cells = [what]
        for s in schedulers:
            if s not in r["iteration_s"]:
                cells.append("-")
            elif s == r["baseline"]:
                cells.append(f"{r['iteration_s'][s]:.4g} s")
            else:
                cells.append(_pct(r["change"][s]))
            if r["drops"].get(s) is not None:
                cells[-1] += f" ({r['drops'][s]:,} drops)"
        a = r["analysis"].get(r["baseline"]) or {}
        ms = a.get("max_speedup")
        cells.append("n/a" if ms is None else f"{ms:.3f}x")
        cells.append(_pct(a.get("exposed_comm_fraction")).lstrip("+"))
        cells += [_share(a, x, y) for x, y in PAIRS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--baseline", default="megatron")
    ap.add_argument("--iteration", type=int, help="one iteration's time (0: the first) instead of the mean")
    ap.add_argument("--schedulers", help="comma-separated columns (default: every scheduler that ran)")
    ap.add_argument("--write", type=Path, help="page to write the table into (with --block)")
    ap.add_argument("--block", help="the block's name in that page")
    a = ap.parse_args(argv)
    rows = [row(d, a.baseline, a.iteration) for d in a.dirs]
    if a.schedulers:
        order = a.schedulers.split(",")
    else:
        order = [a.baseline] + sorted({s for r in rows for s in r["iteration_s"]} - {a.baseline})
    table = markdown(rows, order)
    if not a.write:
        print(table)
        return
    if not a.block:
        raise SystemExit("--write needs --block")
    begin, end = f"<!-- rows:{a.block}:begin -->", f"<!-- rows:{a.block}:end -->"
    page = a.write.read_text()
    if begin not in page or end not in page:
        raise SystemExit(f"{a.write}: no {begin} ... {end} block")
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    dirs = " ".join(str(d) for d in a.dirs)
    flags = "" if a.iteration is None else f" --iteration {a.iteration}"
    flags += f" --schedulers {a.schedulers}" if a.schedulers else ""
    flags += f" --baseline {a.baseline}" if a.baseline != "megatron" else ""
    made = f"Generated by `python -m scenarios.hermod.rows {dirs}{flags} --write {a.write} --block {a.block}`"
    what = "mean iteration time" if a.iteration is None else f"iteration {a.iteration}'s time"
    made += f" (columns {','.join(order)}; baseline {a.baseline}); changes are of {what}.\n\n"
    a.write.write_text(head + begin + "\n" + made + table + "\n" + end + tail)


if __name__ == "__main__":
    main()
