"""LEO's unstated parameters, swept (``python -m scenarios.leo.sensitivity``).

Each :class:`Unstated` is a number the thesis does not give, with the value the scenarios use,
why, and the range swept. For every value the scenario is rebuilt with it, its capacity check
(:func:`schedulers.leo.capacity_check`) gives the most the stream can carry (the datapath's best
split or the network, whichever is lower: the *bound*), and a load sweep at fixed fractions
:data:`FRACTIONS` of the bound runs on the simulator with :data:`SCHEDULERS`, each load for as
long as :data:`REQUESTS` requests take at the bound (the first 20 % warm-up). The table gives,
per value: what binds, the room a split has, and each scheduler's knee as a fraction of the
bound (so rows with different capacities compare). Results in ``--out`` (``sensitivity.md``,
one results directory per point); ``--docs`` writes the tables into docs/leo.md's markers.
Points run one after another: on a 2-core machine shared with others, Ray adds nothing.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scenarios.leo.report import HERE, head_commit, rate_text, sweep_curves, write_between

FRACTIONS = (0.1, 0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1)
REQUESTS = 5000
SCHEDULERS = ["leo", "leo-literal", "greedy-intra", "greedy-e2e", "cpu-only", "acc-only"]
BEGIN, END = "<!-- leo-sensitivity:begin -->", "<!-- leo-sensitivity:end -->"


def _datapaths(data: dict, **fields) -> None:
    """Set ``fields`` in every server group's ``datapath`` of the scenario's inline cluster."""
    for group in data["cluster"]["servers"]:
        group["datapath"].update(copy.deepcopy(fields))


def _functions(data: dict, table: dict) -> None:
    for group in data["cluster"]["servers"]:
        compute = group["datapath"].setdefault("compute", {})
        for name, per_dev in table.items():
            compute.setdefault(name, {}).update(per_dev)


@dataclass(frozen=True)
class Unstated:
    """A parameter the thesis does not state: the value used, why, and the values swept."""

    name: str
    scenario: str
    value: float
    values: tuple[float, ...]
    reason: str
    apply: Callable[[dict, float], None]


def _ebs(data: dict, acc_us: float) -> None:
    _functions(data, {"ebs": {"acc": f"{acc_us!r}us", "cpu": f"{2 * acc_us!r}us"}})


DFS_CHUNK = {"cpu": 0.89e-3 / 4, "acc": 2.18e-3 / 4}  # §6.4.2's compression times, per 256 KB chunk
UNSTATED = (
    Unstated(
        "FPGA lanes serving KVS lookups (the FPGA's parallelism; its capacity stays 5 Mops)",
        "kvs",
        24,
        (1, 4, 24),
        "the 24 cores of §6.1.2's SmartNIC; §6.3 says only that the KV table sits in the FPGA's HBM",
        lambda d, v: _datapaths(d, acc_cores=int(v)),
    ),
    Unstated(
        "DFS decompression time as a fraction of compression time",
        "dfs",
        1.0,
        (0.25, 0.5, 1.0),
        "§6.4.2 times only compression (0.89 ms on a core, 2.18 ms on BF-3)",
        lambda d, v: _functions(d, {"decompress": {dev: f"{v * t!r}s" for dev, t in DFS_CHUNK.items()}}),
    ),
    Unstated(
        "EBS lookup time on the FPGA, us (a CPU core: twice), 4 KB reads",
        "ebs-4k",
        1.0,
        (1.0, 4.0, 16.0, 64.0),
        "Solar's QoS, block and address lookups are not timed in the thesis; 1 us is a few memory accesses",
        _ebs,
    ),
    Unstated(
        "EBS lookup time on the FPGA, us (a CPU core: twice), 64 KB reads",
        "ebs",
        1.0,
        (1.0, 64.0, 256.0),
        "as above",
        _ebs,
    ),
)


def point(param: Unstated, value: float):
    """The scenario of ``param`` at ``value``, its loads set from its capacity check: (scenario, check)."""
    from scenarios.runner import Scenario
    from scenarios.sweep import scenario_mapping
    from schedulers.leo import capacity_check

    data, base = scenario_mapping(str(HERE / f"{param.scenario}.yaml"), HERE)
    param.apply(data, value)
    args = data["job"]["args"]
    probe = Scenario.from_dict({**data, "loads": [1.0], "schedulers": ["leo"]}, base)
    check = capacity_check(probe.jobs[0], probe.cluster)
    bound = min(check.datapath, check.network["tcp"])
    data["loads"] = [float(f"{f * bound:.4g}") for f in FRACTIONS]
    data["schedulers"] = list(SCHEDULERS)
    args["duration"] = f"{REQUESTS / bound!r}s"
    data["name"] = f"{data['name']}-{value:g}"
    return Scenario.from_dict(data, base), check, bound


def sweep(param: Unstated, out: Path, resume: bool, echo=print) -> list[str]:
    """Table rows of one parameter: value, what binds, the split's room, knees over the bound."""
    rows = []
    for value in param.values:
        sc, check, bound = point(param, value)
        cs = sweep_curves(sc, out / f"{param.scenario}-{value:g}", resume, echo)
        knees = " | ".join(f"{cs[s].knee() / bound:.2f}" for s in SCHEDULERS)
        best_single = max(cs["cpu-only"].knee(), cs["acc-only"].knee())
        best_greedy = max(cs["greedy-intra"].knee(), cs["greedy-e2e"].knee())
        binds = "network" if check.network_bound else ", ".join(check.binds)
        rows.append(
            f"| {value:g}{' (used)' if value == param.value else ''} | {binds} | {100 * check.split_room:+.0f} % | "
            f"{rate_text(bound)}/s | {knees} | {cs['leo'].knee() / best_single:.2f}x | "
            f"{cs['leo'].knee() / best_greedy:.2f}x |"
        )
    return rows


def report(out: Path, resume: bool, names=None, echo=print) -> str:
    head = " | ".join(SCHEDULERS)
    lines = [
        f"Generated by `python -m scenarios.leo.sensitivity` at {head_commit()}: simulated, loads at "
        f"{', '.join(f'{f:g}' for f in FRACTIONS)} of the bound, {REQUESTS} requests' time per load at the bound.",
        "",
    ]
    for param in UNSTATED:
        if names and param.scenario not in names:
            continue
        lines += [
            f"**{param.name}** ({param.scenario}.yaml; used: {param.value:g}; why: {param.reason})",
            "",
            f"| value | binds | split's room | bound | knee / bound: {head} | leo over best single | "
            "leo over best greedy |",
            "|---|---|---|---|" + "---|" * len(SCHEDULERS) + "---|---|",
            *sweep(param, out, resume, echo),
            "",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/leo-sensitivity"))
    ap.add_argument("--resume", action="store_true", help="read points that finished in --out")
    ap.add_argument("--only", action="append", help="parameters of these scenarios (kvs, dfs, ebs-4k, ebs)")
    ap.add_argument("--docs", type=Path, help="also write the tables between the markers of this file")
    args = ap.parse_args(argv)
    text = report(args.out, args.resume, args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sensitivity.md").write_text(text)
    if args.docs:
        write_between(args.docs, text, BEGIN, END)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
