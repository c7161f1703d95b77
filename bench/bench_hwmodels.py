"""Hardware-model benchmark: numba kernels vs their pure-Python references, and throughput.

    /opt/railbed/venv/bin/python bench/bench_hwmodels.py [--out bench-hwmodels.json]

Every ratio is measured in this one run on the same inputs (kernels are
compiled and warmed up first). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hwmodels.dgcl import Requirements, comm_topology, peer_to_peer, plan_cost, spst, spst_reference  # noqa: E402
from hwmodels.graph import load_preset  # noqa: E402
from hwmodels.leo import RequestStream, datapath_model, queue_jct, queue_jct_reference  # noqa: E402
from hwmodels.transfer import fluid_finish_times, fluid_finish_times_reference  # noqa: E402


def timed(fn, *args, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_transfer(rng):
    g = load_preset("dgx1-v100")
    gpus = g.gpus
    paths, bits = [], []
    for _ in range(64):  # 64 concurrent GPU-to-GPU transfers
        a, b = rng.choice(8, 2, replace=False)
        path, _ = g.routes(gpus[a], gpus[b])[0]
        paths.append(path)
        bits.append(float(rng.uniform(1e6, 1e8)))
    bits = np.array(bits)
    fluid_finish_times(g.capacity, paths, bits)  # compile
    fast, _ = timed(fluid_finish_times, g.capacity, paths, bits, repeat=20)
    slow, _ = timed(fluid_finish_times_reference, g.capacity, paths, bits, repeat=1)
    return {
        "transfers": len(paths),
        "kernel_s": fast,
        "reference_s": slow,
        "speedup": slow / fast,
        "transfers_per_s": len(paths) / fast,
    }


def bench_spst():
    topo = comm_topology(load_preset("dgx1-v100"))
    small = Requirements.random(8, 300, 1024, density=0.5, seed=1)
    spst(topo, small)  # compile
    fast_small, _ = timed(spst, topo, small)
    slow_small, _ = timed(spst_reference, topo, small, repeat=1)
    big = Requirements.random(8, 200_000, 1024, density=0.5, seed=2)
    fast_big, (plan, cost) = timed(spst, topo, big, repeat=1)
    p2p = plan_cost(topo, peer_to_peer(big), big)
    return {
        "reference_vertices": len(small),
        "kernel_s": fast_small,
        "reference_s": slow_small,
        "speedup": slow_small / fast_small,
        "vertices": len(big),
        "vertices_per_s": len(big) / fast_big,
        "spst_cost_s": cost,
        "p2p_cost_s": p2p,
        "p2p_over_spst": p2p / cost,
    }


def bench_leo(rng):
    m = datapath_model("off-path", acc_capacity=4)
    e = len(m.elements)
    compute = np.zeros((2, e))
    compute[0, m.index("resp.acc")] = 3e-6
    compute[1, m.index("resp.cpu")] = 2e-6

    def stream(n):
        return RequestStream(
            np.cumsum(rng.exponential(1e-6, n)),
            rng.integers(0, 2, n),
            rng.integers(0, 4, n),
            np.array([64.0, 4096.0]),
            compute,
        )

    small = stream(20_000)
    queue_jct(m, small)  # compile
    fast_small, _ = timed(queue_jct, m, small)
    slow_small, _ = timed(queue_jct_reference, m, small, repeat=1)
    big = stream(10_000_000)
    fast_big, _ = timed(queue_jct, m, big, repeat=2)
    return {
        "reference_requests": 20_000,
        "kernel_s": fast_small,
        "reference_s": slow_small,
        "speedup": slow_small / fast_small,
        "requests": 10_000_000,
        "requests_per_s": 1e7 / fast_big,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench-hwmodels.json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    results = {"transfer": bench_transfer(rng), "spst": bench_spst(), "leo": bench_leo(rng)}
    t, s, q = results["transfer"], results["spst"], results["leo"]
    print(
        f"transfer model: {t['transfers']} concurrent transfers on DGX-1: kernel {t['kernel_s'] * 1e3:.2f} ms, "
        f"reference {t['reference_s'] * 1e3:.1f} ms, {t['speedup']:.0f}x; {t['transfers_per_s']:.3g} transfers/s"
    )
    print(
        f"SPST on DGX-1: {s['speedup']:.0f}x faster than the reference ({s['reference_vertices']} vertices); "
        f"{s['vertices_per_s']:.3g} vertices/s on {s['vertices']} vertices; "
        f"peer-to-peer / SPST cost = {s['p2p_over_spst']:.1f}x"
    )
    print(
        f"LEO recurrences: {q['speedup']:.0f}x faster than the reference ({q['reference_requests']} requests); "
        f"{q['requests_per_s']:.3g} requests/s on {q['requests']} requests"
    )
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
