"""How TCP shares a port against the fluid model's max-min, by congestion control (emulate: root).

    sudo /opt/railbed/venv/bin/python bench/bench_sharing.py [--runs 3] [--backends emulate,packet]

The mechanism test's PP chain (``scenarios/mechanisms/pp-chain.yaml``: 9 tasks of 1 ms, 8 PP flows of
1 MB, 8 Gbit/s, k = 100) in two forms: ``paired``, the test's, where each PP flow from server 0
starts together with a DP bucket of its size, and ``long``, the form it had before, one 40 MB DP
flow ready at 0 beside which each PP flow from server 0 starts fresh. Under fifo the fluid model
shares max-min (each shared PP flow 2p, the chain 21.55 ms); under tag-priority PP is strict (p,
17.36 ms). Each row: the chain's end against the hand time and the mean duration of the 4 shared PP
flows against p, per backend, congestion control and run. Nothing is asserted; docs/fidelity.md,
"Sharing a port", holds a run's table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railbed.backend import RunOptions, backend  # noqa: E402
from railbed.errors import SpecError  # noqa: E402
from railbed.job import Job  # noqa: E402
from railbed.safeload import load_yaml_file  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from scenarios.mechanisms import HERE, chain_numbers  # noqa: E402
from schedulers import by_name  # noqa: E402
from workloads import generate  # noqa: E402

SCENARIO = HERE / "pp-chain.yaml"
LONG_DP = 40_000_000


def job(form: str, args: dict) -> Job:
    """The chain with its DP buckets (``paired``) or with one long DP flow instead (``long``)."""
    j = generate("pp_chain", args)
    if form == "paired":
        return j
    for fid in [i for i in j.items if i.startswith("dp")]:
        del j.items[fid]
    j.flow("dp", "g0", "g1", LONG_DP, (), iteration=0, microbatch=1, layer=0, coflow="dp", coflow_type="DP",
           tags={"dscp": 0})  # fmt: skip
    return j.validate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backends", default="emulate,packet")
    ap.add_argument("--tcp", default="cubic,reno,bbr")
    args = ap.parse_args()
    sc = load_yaml_file(SCENARIO, "scenario")
    cluster, jargs, k = ClusterSpec.from_dict(sc["cluster"]), sc["job"]["args"], sc["scale"]
    hand = chain_numbers(sc)
    expected = {"fifo": hand["fair"], "tag-priority": hand["strict"]}
    print(f"pp-chain, k = {k:g}: fair {hand['fair'] * 1e3:.2f} ms (shared PP 2p = {2 * hand['p'] * 1e3:.3f} ms), "
          f"strict {hand['strict'] * 1e3:.2f} ms (p = {hand['p'] * 1e3:.3f} ms)")  # fmt: skip
    print("| backend | tcp | form | scheduler | chain's end / hand | shared PP flows (mean) / p, per run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.backends.split(","):
        be = backend(name, "--backends")
        for tcp in args.tcp.split(","):
            options = RunOptions(scale=k, tcp=tcp, analysis=False)
            try:  # the backend's own check: the packet backend refuses bbr (simulator/packet/options.py
                be.check(cluster, options)  # NOT_HERE: this bench's measurement), a kernel without it too
            except SpecError as exc:
                if exc.field != "tcp":
                    raise
                print(f"| {name} | {tcp} | refused: {exc.message} | | | |", flush=True)
                continue
            with be.session(cluster, options) as session:
                for form in ("paired", "long"):
                    for sched in ("fifo", "tag-priority"):
                        ends, shared = [], []
                        for _ in range(args.runs if be.capabilities.needs_root else 1):
                            r = session.run(job(form, jargs), by_name(sched), options)
                            ends.append(r.items["t8"].end / expected[sched])
                            fl = [r.items[f"f{i}"] for i in (0, 2, 4, 6)]
                            shared.append(statistics.mean(f.end - f.start for f in fl) / hand["p"])
                        print(f"| {name} | {tcp} | {form} | {sched} | {' '.join(f'{e:.3f}' for e in ends)} | "
                              f"{' '.join(f'{x:.2f}' for x in shared)} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
