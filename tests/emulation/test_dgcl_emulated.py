"""DGCL (seed 002) on the emulator: the 16-GPU setup's shape, two DGX-1 servers on one IB-class
link (50.96 Gbit/s model, k = 500: about 100 Mbit/s real), a small gnn_fullgraph job planned by
``dgcl``. Cross-server hops of SPST's plan are real TCP flows between the two servers'
namespaces; intra-host hops are waits of the DGX-1 hardware model. Also exercises the interface's
multicast sub-flows (``carries``) on the emulator.

Sizes: 8 GPUs (4 per server), a 5,000-edge Web-Google-shaped graph, hidden 16 (a few MB per
graphAllgather), compute 1 ms per layer: the run takes well under a minute."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from loadcheck import tolerance_or_load

from emulator.fidelity import LAG_SHARE
from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.spec import ClusterSpec
from schedulers import by_name
from schedulers.dgcl_alg import spst_hops
from simulator import simulate
from workloads.gnn_fullgraph import gnn_fullgraph, requirements

K = 500
TWO_DGX1 = ClusterSpec.from_dict(
    {"name": "dgcl-dgx1x2", "servers": [{"count": 2, "gpus": 8, "nics": 1, "nic_rate": "50.96Gbit",
     "intra_host": "dgx1-v100"}], "fabric": {"type": "single_switch"}}
)  # fmt: skip
ARGS = {"dataset": "web-google", "gpus": 8, "gpus_per_server": 4, "hidden": 16, "max_edges": 5_000, "compute": 1e-3}


def _topology():
    from hwmodels.dgcl import comm_topology
    from hwmodels.graph import join, load_preset

    dgx1 = load_preset("dgx1-v100")
    joined = join([dgx1, dgx1], ["nic0", "nic0"], [50.96e9, 50.96e9])
    return comm_topology(joined, [f"s{s}.gpu{g}" for s in (0, 1) for g in range(4)])


def _cross(result) -> dict[str, int]:
    return {r.id: r.size for r in result.items.values() if r.parent is not None and r.server != r.dst_server}


def test_two_server_dgcl_run_completes_with_the_plans_cross_server_bytes():
    job = gnn_fullgraph(**ARGS)
    with Testbed(TWO_DGX1, scale=K) as tb:
        emu = run(job, by_name("dgcl"), tb)
    sim = simulate(job, by_name("dgcl"), TWO_DGX1)
    assert all(r.end is not None for r in emu.items.values())
    assert all(r.received == r.size for r in emu.items.values() if r.kind == "flow")
    cross = _cross(emu)
    assert cross and cross == _cross(sim)  # the same plan's hops, on both backends
    plan = spst_hops(_topology(), requirements(job.flows[0].tags["graph"]))
    plan_cross = sum(h.size for h in plan if (h.src < 4) != (h.dst < 4))
    assert sum(emu.items[i].received for i in cross) == 2 * plan_cross  # forward + backward exchange
    with tolerance_or_load(emu):
        assert emu.fidelity_report.get("ok", True), emu.fidelity_report.get("problems")
        assert emu.makespan == pytest.approx(sim.makespan, rel=0.3), (_late(emu, sim), emu.fidelity_report)


COLD_RUN = """
import json, sys
sys.path.insert(0, {here!r})
from test_dgcl_emulated import ARGS, K, TWO_DGX1, Testbed, by_name, gnn_fullgraph, run
with Testbed(TWO_DGX1, scale=K) as tb:
    emu = run(gnn_fullgraph(**ARGS), by_name("dgcl"), tb)
print(json.dumps({{"makespan": emu.makespan, "fidelity": emu.fidelity_report}}, default=str))
"""


def test_a_fresh_clones_run_compiles_its_kernels_before_the_clock_starts(tmp_path: Path):
    """With an empty numba cache (a fresh clone, as in CI) the kernels that the DGCL planner and
    the DGX-1 model call compiled mid-run, holding the controller 2-4 s real (+31-75 % makespan);
    the run-time now compiles them first, in the fluid model's run (emulator.runtime)."""
    here = str(Path(__file__).parent)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "-c", COLD_RUN.format(here=here)], cwd=root, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert list(tmp_path.rglob("*.nbi")), "the child found its kernels compiled: the cache was not cold"
    got = json.loads(out.stdout.strip().splitlines()[-1])
    fid = got["fidelity"]
    with tolerance_or_load(SimpleNamespace(fidelity_report=fid)):  # timing checks: a loaded machine skips, naming it
        # the fidelity report's own bar (LAG_SHARE, 5 %): a kernel compiled mid-run held the controller
        # 31-75 % of the makespan; OS scheduling on 2 busy cores costs about 1 % (1.1 % in CI, stop 48:
        # 67 ms real at k = 500), which a 1 % bar here failed on
        assert fid["start_lag_max"] < LAG_SHARE * got["makespan"], fid
        assert fid["ok"], fid["problems"]
        assert got["makespan"] == pytest.approx(fid["loss"]["fluid_makespan"], rel=0.1)


def _late(emu, sim, n: int = 3) -> list[tuple[str, float, float]]:
    """The ``n`` items that ended latest against the simulator: (id, emulated end, simulated end)."""
    late = sorted(emu.items, key=lambda i: sim.items[i].end - emu.items[i].end)[:n]
    return [(i, emu.items[i].end, sim.items[i].end) for i in late]
