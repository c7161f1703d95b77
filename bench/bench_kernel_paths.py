"""Which path should railbed take on a kernel that has both? (needs root; run by the VM lane)

    sudo /opt/railbed/venv/bin/python bench/bench_kernel_paths.py [--reps N] [--json FILE]

1. Strict priority: the ``prio`` qdisc under HTB against HTB prio classes,
   on 3 servers at 5 Mbit/s real (k = 1): class 7 against class 0 into one
   port (high share, low leakage, wire error against the configured rate),
   class 0 alone (utilisation), and the RTT of a class-7 ping and of a
   class-0 ping while class 0 saturates the path (queueing the high class
   still sees).
2. Link latency: netem leaves against agent waits, 2 servers, 5 Gbit/s
   model links at k = 1000 (5 Mbit/s real), 25 us per link (100 us model
   RTT over the 4 links of a round trip): ping RTT; the completion time of
   one flow of 10 KB, 100 KB and 500 KB, as the time the latency added
   (against the same flow on a fabric without latency) in RTTs, and against
   the simulator's (wire time + one-way latency); the wire error of a
   saturating flow through the shaped host port.

Numbers are medians (and the range) over ``--reps`` runs, the two paths
taking turns, printed as a table (and JSON); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator import features  # noqa: E402
from emulator.loadtest import Flow, measure  # noqa: E402
from emulator.runtime import run  # noqa: E402
from emulator.testbed import Testbed  # noqa: E402
from railbed.job import Job, Location  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from schedulers import by_name  # noqa: E402
from simulator import simulate  # noqa: E402
from tc_policies.plan import DscpPriorityPolicy  # noqa: E402

RATE = 5e6
K = 1000
LINK_LATENCY = 25e-6
RTT = 4 * LINK_LATENCY
SIZES = (10_000, 100_000, 500_000)
PORT = ("sw0", "sw0-eth0")


def star(servers: int, rate: float, latency: float = 0.0) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": servers, "nic_rate": rate}], "fabric": {"type": "single_switch", "latency": latency}}
    )


def ping(tb: Testbed, src: str, dst_server: int, tos: int = 0, count: int = 20) -> float:
    """Median RTT (ms) of ``count`` pings with TOS byte ``tos``."""
    out = tb.node(src).cmd(f"ping -n -Q {tos} -c {count} -i 0.1 -W 2 {tb.address(dst_server)}")
    rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)[1:]]
    return statistics.median(rtts) if rtts else float("nan")


def ping_under_load(tb: Testbed, tos: int) -> float:
    """RTT of h2 -> h0 pings while h2 saturates the same path with class 0."""
    load = threading.Thread(target=lambda: measure(tb, [Flow((2, 0), (0, 0), 0)], [PORT], warmup=1.0, window=3.0))
    load.start()
    threading.Event().wait(1.2)
    rtt = ping(tb, "h2", 0, tos, count=25)
    load.join()
    return rtt


def priority_once(use_prio: bool) -> dict[str, float]:
    with Testbed(star(3, RATE), policy=DscpPriorityPolicy(use_prio_qdisc=use_prio), scale=1) as tb:
        both = measure(tb, [Flow((2, 0), (0, 0), 0), Flow((1, 0), (0, 0), 56)], [PORT], base_port=5201)
        p = both.ports[PORT]
        alone = measure(tb, [Flow((2, 0), (0, 0), 0)], [PORT], base_port=5301).ports[PORT]
        return {
            "high share %": 100 * p.share(7),
            "low leak %": 100 * p.share(0),
            "wire error %": 100 * p.error,
            "low alone util %": 100 * alone.wire_bps / alone.configured_bps,
            "class-7 ping under load ms": ping_under_load(tb, 56 << 2),
            "class-0 ping under load ms": ping_under_load(tb, 0),
        }


def one_flow(size: int) -> Job:
    job = Job("latency")
    for s in range(2):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))
    job.flow("f", "w0", "w1", size)
    return job


def flow_times(latency: float, mode: str) -> dict[int, float]:
    """Model completion time of one flow of each size, on one testbed."""
    with Testbed(star(2, RATE * K, latency), policy="fifo", scale=K, latency=mode) as tb:
        return {size: run(one_flow(size), by_name("fifo"), tb).items["f"].duration for size in SIZES}


def latency_once(mode: str) -> dict[str, float]:
    spec = star(2, RATE * K, LINK_LATENCY)
    base = flow_times(0.0, mode)
    out: dict[str, float] = {}
    with Testbed(spec, policy="fifo", scale=K, latency=mode) as tb:
        assert tb.latency_mode == mode
        out["ping RTT ms (real)"] = ping(tb, "h0", 1)
        for size in SIZES:
            emu = run(one_flow(size), by_name("fifo"), tb).items["f"].duration
            sim = simulate(one_flow(size), by_name("fifo"), spec, policy="fifo").items["f"].duration
            out[f"FCT {size // 1000} KB us (model)"] = emu * 1e6
            out[f"FCT {size // 1000} KB latency added / RTT"] = (emu - base[size]) / RTT
            out[f"FCT {size // 1000} KB / simulator"] = emu / sim
        m = measure(tb, [Flow((0, 0), (1, 0))], [("h0", "h0-eth0")])
        out["saturating wire error %"] = 100 * m.ports[("h0", "h0-eth0")].error
    return out


def interleaved(fn, variants: dict[str, object], reps: int) -> dict[str, dict[str, tuple[float, float, float]]]:
    """(median, min, max) over ``reps`` runs of ``fn(arg)`` per variant and number; the
    variants take turns, so a busy spell of the host (which slows an emulated guest) hits both."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, arg in variants.items():
            runs[name].append(fn(arg))
    return {
        name: {
            key: (statistics.median(x[key] for x in r), min(x[key] for x in r), max(x[key] for x in r)) for key in r[0]
        }
        for name, r in runs.items()
    }


def table(title: str, columns: dict[str, dict[str, tuple[float, float, float]]]) -> list[str]:
    names = list(columns)
    lines = [title + " (median [min..max])", f"{'':36}" + "".join(f"{n:>28}" for n in names)]
    for key in columns[names[0]]:
        cells = (f"{m:.2f} [{lo:.2f}..{hi:.2f}]" for m, lo, hi in (columns[n][key] for n in names))
        lines.append(f"{key:36}" + "".join(f"{c:>28}" for c in cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    feats = features.probe()
    results: dict[str, dict[str, dict[str, float]]] = {}
    if feats.has("prio"):
        results["priority"] = interleaved(priority_once, {"prio qdisc": True, "HTB classes": False}, args.reps)
    if feats.has("netem"):
        results["latency"] = interleaved(latency_once, {"netem": "netem", "agents": "agents"}, args.reps)
    lines = [f"{args.reps} runs each; real rate {RATE / 1e6:g} Mbit/s"]
    for title, cols in results.items():
        lines += table(title, cols) + [""]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
