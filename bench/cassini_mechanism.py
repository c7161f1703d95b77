"""The two-job mechanism of issue 45 on today's fluid simulator, before the multi-job core exists:
two periodic "jobs" written into one railbed Job by hand (ids prefixed ``a.``/``b.``), each on
its own GPU of the same two servers, so both send through server 0's one NIC.

Each iteration of a job computes ``c`` seconds on its GPU of server 0, then sends ``S`` bytes to
server 1 (``m`` seconds alone at the NIC rate); the next iteration waits for the transfer. Job b
may start after a leading wait of ``shift`` seconds (what CASSINI's time shift does), and the
shift is computed by :func:`schedulers.cassini_alg.plan` from the two jobs' demand curves.

By hand (docs/multi-job-schedulers.md, "The mechanism test, by hand"): alone an iteration takes
``c + m``; two aligned jobs sharing the NIC fairly take ``c + 2m`` each (1.5x when m = c);
shifted by half a period each runs as if alone (b finishes ``shift`` later).

    python bench/cassini_mechanism.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from railbed.job import Job, Location  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from schedulers.cassini_alg import JobTraffic, plan  # noqa: E402
from schedulers.fifo import Fifo  # noqa: E402
from simulator.fluid.run import simulate  # noqa: E402

RATE = 8e9  # bit/s
CLUSTER = {
    "name": "two-servers-2g",
    "servers": [{"count": 2, "gpus": 2, "nics": 1, "nic_rate": "8Gbit"}],
    "fabric": {"type": "single_switch"},
}


def two_jobs(c: float, size: int, iterations: int, shift: float) -> Job:
    job = Job("two-periodic-jobs")
    for x, gpu in (("a", "gpu0"), ("b", "gpu1")):
        job.endpoint(f"{x}0", Location(0, gpu, 0), role="gpu")
        job.endpoint(f"{x}1", Location(1, gpu, 0), role="gpu")
        prev: tuple[str, ...] = ()
        if x == "b" and shift > 0:
            job.task(f"{x}.wait", f"{x}0", shift, iteration=0)
            prev = (f"{x}.wait",)
        for i in range(iterations):
            job.task(f"{x}.c{i}", f"{x}0", c, deps=prev, iteration=i)
            job.flow(f"{x}.f{i}", f"{x}0", f"{x}1", size, deps=(f"{x}.c{i}",), iteration=i)
            prev = (f"{x}.f{i}",)
    return job.validate()


def ends(result, iterations: int) -> tuple[float, float]:
    return tuple(result.items[f"{x}.f{iterations - 1}"].end for x in ("a", "b"))


def main() -> None:
    cluster = ClusterSpec.from_dict(CLUSTER)
    c, size, n = 0.010, 10_000_000, 20  # m = 8e7 / 8e9 = 10 ms = c
    m = size * 8 / RATE
    period = c + m
    traffic = [JobTraffic(x, period, {"nic0": [(c, period, RATE)]}) for x in ("a", "b")]
    shift = plan(traffic, {"nic0": RATE}, 1e-3).shifts["b"]
    print(f"c = {c * 1e3:g} ms, m = {m * 1e3:g} ms, {n} iterations; CASSINI's shift for b: {shift * 1e3:g} ms")
    print("| run | a ends | b ends | a per iteration | b per iteration (after its shift) | by hand |")
    print("|---|---|---|---|---|---|")
    for label, s, hand in (("aligned", 0.0, c + 2 * m), ("CASSINI shift", shift, c + m)):
        result = simulate(two_jobs(c, size, n, s), Fifo(), cluster)
        a, b = ends(result, n)
        print(
            f"| {label} | {a * 1e3:.3f} ms | {b * 1e3:.3f} ms | {a / n * 1e3:.3f} ms | "
            f"{(b - s) / n * 1e3:.3f} ms | {hand * 1e3:g} ms |"
        )


if __name__ == "__main__":
    main()
