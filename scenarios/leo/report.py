"""LEO's numbers from runs, as the thesis reads them (``python -m scenarios.leo.report``).

Each scenario of :data:`SCENARIOS` is an offered-load sweep (``loads``) on the simulator; this
module runs them (or reads finished ones with ``--resume``), reads every scheduler's curve
(steady-state median latency per load, :func:`railbed.metrics.load_curve`), its knee
(:func:`railbed.metrics.knee`: the sustainable throughput) and the capacity check of the
stream (:func:`schedulers.leo.capacity_check`), and writes ``report.md`` in ``--out`` (and,
with ``--docs``, between the markers ``--block`` names in ``docs/leo.md``): per scenario the check and each
scheduler's knee; KVS against the thesis's 1.2-2x and 1.3x; the deep dive's distance to the
MILP; the heuristic's variants. Nothing here is typed: every number comes from the runs.

Figures: ``<out>/<scenario>/figures/latency-load.png`` (knees starred) and
``throughput-load.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from railbed.metrics import KNEE_MULTIPLE, WARMUP, knee, load_curve
from railbed.plots import load_figures

HERE = Path(__file__).resolve().parent
SCENARIOS = ("kvs", "kvs-variants", "kvs-lp", "kvs-b", "dfs", "dfs-4cores", "ebs", "ebs-4k", "dml")
MULTIPLES = (1.2, KNEE_MULTIPLE, 2.0)
SINGLE = ("acc-only", "cpu-only", "drtm-kv-model", "doca-model", "solar-model")  # single-path labels
GREEDY = ("greedy-intra", "greedy-e2e")
BEGIN, END = "<!-- leo-report:begin -->", "<!-- leo-report:end -->"


@dataclass
class Curve:
    """One scheduler's sweep: offered loads, steady-state medians, completion rates."""

    label: str
    loads: list[float]
    p50: list[float]
    throughput: list[float]

    def knee(self, multiple: float = KNEE_MULTIPLE) -> float:
        return knee(zip(self.loads, self.p50), multiple)

    def over(self, multiple: float = KNEE_MULTIPLE) -> float:
        """The first load of the sweep above the knee (the knee's resolution); nan if none."""
        return min((x for x in self.loads if x > self.knee(multiple)), default=math.nan)

    def at(self, load: float, what: str = "p50") -> float:
        values = getattr(self, what)
        return values[self.loads.index(load)] if load in self.loads else math.nan


def curves(results) -> dict[str, Curve]:
    """Per scheduler label, its :class:`Curve` (runs labelled ``<label>@<load>``)."""
    return from_curve(load_curve(results))


def from_curve(curve: dict) -> dict[str, Curve]:
    """:class:`Curve` s from :func:`railbed.metrics.load_curve`'s answer (a sweep's ``curve.json``)."""
    return {
        name: Curve(name, [p["load"] for p in pts], [p["p50"] for p in pts], [p["throughput"] for p in pts])
        for name, pts in curve.items()
    }


# ------------------------------------------------------------------ runs
def scenario(name: str, quick: bool = False):
    """The scenario ``name`` of this folder; ``quick``: a quarter of each load's arrivals."""
    from scenarios.runner import Scenario
    from scenarios.sweep import scenario_mapping

    data, base = scenario_mapping(str(HERE / f"{name}.yaml"), HERE)
    if quick:
        args = data["job"]["args"]
        args["duration"] = f"{_seconds(args['duration']) / 4!r}s"
    return Scenario.from_dict(data, base)


def _seconds(value) -> float:
    from railbed.units import parse_duration

    return parse_duration(value, "duration")


def sweep_curves(sc, where: Path, resume: bool, echo=print) -> dict[str, Curve]:
    """The load sweep ``sc`` simulated into ``where`` (figures: the load curves only), or, with
    ``resume``, read from the ``curve.json`` of a run of it that finished there."""
    from scenarios.runner import PARTIAL, simulate_scenario

    done = where / "curve.json"
    if resume and done.exists() and not (where / PARTIAL).exists():
        echo(f"{sc.name}: finished earlier in {where}")
        return from_curve(json.loads(done.read_text()))
    echo(f"{sc.name}: simulating {len(sc.schedulers)} schedulers x {len(sc.loads)} loads -> {where}")
    runs = simulate_scenario(sc, where, echo=lambda _m: None, plots=False)
    (where / "figures").mkdir(exist_ok=True)
    load_figures({r.scheduler: r for r in runs}, where / "figures")
    return curves(runs)


# ---------------------------------------------------------------- tables
def rate_text(x: float) -> str:
    """A rate in engineering form (5.5 M, 6,329, 182 k)."""
    if math.isnan(x):
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e4:
        return f"{x / 1e3:.3g} k"
    return f"{x:,.0f}"


def _us(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 1e6:.4g} us" if x < 1e-3 else f"{x * 1e3:.4g} ms"


def best_other(cs: dict[str, Curve], mine: str = "leo") -> tuple[str, float]:
    """The best knee among the single paths and the greedy baselines of a scenario."""
    others = [(c.knee(), n) for n, c in cs.items() if n in SINGLE + GREEDY and n != mine]
    k, n = max(others) if others else (math.nan, "-")
    return n, k


def scenario_section(name: str, sc, cs: dict[str, Curve], check) -> list[str]:
    """Per scheduler: knees at each multiple, completion rate at the knee, unloaded median."""
    args = sc.source["job"]["args"]
    lines = [
        f"### {name} ({sc.source['job']['args']['preset']})",
        "",
        f"Simulated; {args['duration']} of Poisson arrivals per load (seed {args.get('seed', 0)}), the first "
        f"{WARMUP:.0%} warm-up; loads {', '.join(rate_text(x) for x in sc.loads)}/s.",
        "",
        f"Check: {check.note()}.",
        "",
        "| scheduler | knee (x1.2) | **knee (x1.5)** | first load over (x1.5) | knee (x2) | "
        "completed/s at the knee | median, lowest load |",
        "|---|---|---|---|---|---|---|",
    ]
    hidden = []
    for n, c in cs.items():
        k = c.knee()
        done = c.at(k, "throughput")
        if done < 0.95 * k:  # the median stays low while a minority's queue grows all run
            hidden.append(n)
        lines.append(
            f"| {n} | {rate_text(c.knee(MULTIPLES[0]))} | **{rate_text(k)}** | {rate_text(c.over())} | "
            f"{rate_text(c.knee(MULTIPLES[2]))} | "
            f"{rate_text(done)}{' (!)' if n in hidden else ''} | {_us(c.p50[0])} |"
        )
    if hidden:
        lines += ["", f"(!) {', '.join(hidden)}: fewer than 95 % of the offered requests per second complete at the "
                  "knee: the median hides a queue that grows all run for a minority of the requests."]  # fmt: skip
    if "leo" in cs and any(n in SINGLE + GREEDY for n in cs):
        lines += ["", verdict_line(cs, check)]
    return lines + [""]


def verdict_line(cs: dict[str, Curve], check) -> str:
    """leo's knee against the best single path or greedy baseline, what binds, and, when leo's is
    lower, both medians at the other's knee (each knee is read against the scheduler's own
    lowest-load median, so a scheduler slower when idle gets a looser threshold)."""
    other, k = best_other(cs)
    mine = cs["leo"].knee()
    why = "network-bound: no split can help" if check.network_bound else f"binds: {', '.join(check.binds)}"
    text = (f"leo's knee {rate_text(mine)}/s against the best single path or greedy baseline "
            f"({other}, {rate_text(k)}/s): "
            f"{'at least as good' if mine >= k else 'lower'} ({why}).")  # fmt: skip
    if mine < k:
        text += (f" At {other}'s knee leo's median is {_us(cs['leo'].at(k))} against {_us(cs[other].at(k))}; "
                 f"their lowest-load medians are {_us(cs['leo'].p50[0])} and {_us(cs[other].p50[0])}.")  # fmt: skip
    return text


def ratio(a: float, b: float) -> str:
    return "-" if not (a > 0 and b > 0) else f"{a / b:.2f}x"


def kvs_section(cs: dict[str, Curve]) -> list[str]:
    """§6.4.2's KVS claims: throughput at the knee (1.2-2x) and median near acc-only's knee (1.3x)."""
    acc, cpu = cs["acc-only"], cs["drtm-kv-model"]
    ka, above = acc.knee(), acc.over()
    lines = [
        "| | thesis | leo | leo-literal |",
        "|---|---|---|---|",
        f"| sustainable throughput over acc-only (LEO's single-path variant) | 1.2-2x | "
        f"{ratio(cs['leo'].knee(), ka)} | {ratio(cs['leo-literal'].knee(), ka)} |",
        f"| sustainable throughput over drtm-kv-model (CPU path at DrTM-KV's rate) | 1.2-2x (as much as 3x, "
        f"Fig. 6.10 caption) | {ratio(cs['leo'].knee(), cpu.knee())} | {ratio(cs['leo-literal'].knee(), cpu.knee())} |",
    ]
    for load, where in ((ka, "at acc-only's knee"), (above, "one load above it")):
        lines.append(
            f"| acc-only's median over the scheduler's, {where} ({rate_text(load)}/s) | 1.3x | "
            f"{ratio(acc.at(load), cs['leo'].at(load))} | {ratio(acc.at(load), cs['leo-literal'].at(load))} |"
        )
    return lines + [""]


def deep_dive_section(cs: dict[str, Curve]) -> list[str]:
    """§6.4.3: the heuristic over the greedy algorithms (1.18-2.17x) and its distance to the MILP."""
    lp = cs["leo-lp"]
    lines = ["| scheduler | knee over greedy-intra | over greedy-e2e | knee over leo-lp's | "
             "median over leo-lp's at leo-lp's knee |", "|---|---|---|---|---|"]  # fmt: skip
    for n in ("leo", "leo-literal"):
        c = cs[n]
        lines.append(
            f"| {n} | {ratio(c.knee(), cs['greedy-intra'].knee())} | {ratio(c.knee(), cs['greedy-e2e'].knee())} | "
            f"{ratio(c.knee(), lp.knee())} | {ratio(c.at(lp.knee()), lp.at(lp.knee()))} |"
        )
    return lines + ["", 'The thesis: 1.18-2.17x over the greedy algorithms, "close to the optimal solution".', ""]


def report(out: Path, resume: bool, quick: bool, names=SCENARIOS, echo=print) -> str:
    """Run (or read) the scenarios; the markdown report."""
    from schedulers.leo import capacity_check

    parts = [f"Generated by `{command(quick, names)}` at {head_commit()}.", ""]
    extra = []
    for name in names:
        sc = scenario(name, quick)
        cs = sweep_curves(sc, out / name, resume, echo)
        parts += scenario_section(name, sc, cs, capacity_check(sc.jobs[0], sc.cluster))
        if name == "kvs":
            extra += ["### KVS against the thesis (§6.4.2, Fig. 6.10a)", "", *kvs_section(cs)]
        if name == "kvs-lp":
            extra += ["### Deep dive (§6.4.3, Fig. 6.14)", "", *deep_dive_section(cs)]
    return "\n".join(extra + parts) + "\n"


def command(quick: bool, names=SCENARIOS) -> str:
    """The command line that makes a report of ``names`` (``--only`` each when not every scenario)."""
    only = "" if tuple(names) == SCENARIOS else "".join(f" --only {n}" for n in names)
    return f"python -m scenarios.leo.report{' --quick' if quick else ''}{only}"


def head_commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
        return rev.stdout.strip() or "an unknown commit"
    except OSError:
        return "an unknown commit"


def write_between(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what lies between the markers ``begin`` and ``end`` in ``path`` by ``text``."""
    doc = path.read_text()
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"{path} has no {begin} ... {end} markers")
    path.write_text(pattern.sub(lambda _m: f"{begin}\n{text}{end}", doc))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/leo"))
    ap.add_argument("--resume", action="store_true", help="read scenarios that finished in --out")
    ap.add_argument("--quick", action="store_true", help="a quarter of each load's arrivals (shapes only)")
    ap.add_argument("--only", action="append", choices=SCENARIOS, help="these scenarios (repeatable)")
    ap.add_argument("--docs", type=Path, help="also write the report between the markers of this file")
    ap.add_argument("--block", default="leo-report", help="the markers' name: <!-- BLOCK:begin --> ... end")
    args = ap.parse_args(argv)
    text = report(args.out, args.resume, args.quick, tuple(args.only or SCENARIOS))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(text)
    if args.docs:
        write_between(args.docs, text, f"<!-- {args.block}:begin -->", f"<!-- {args.block}:end -->")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
