"""Profiles for CASSINI and Crux from a job's simulated run alone (schedulers/multijob_profile.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from railbed.spec import ClusterSpec
from railbed.topology import Topology
from schedulers.cassini_alg import link_score, plan
from schedulers.crux_alg import correction_factor
from schedulers.fifo import Fifo
from schedulers.multijob_profile import (
    byte_rates,
    capacities,
    cassini_traffic,
    crux_profile,
    intensity_of,
    iteration_window,
)
from simulator.fluid.run import simulate
from workloads import generate

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def alone():
    """A 4-rank data-parallel job (20 + 40 ms compute, 64 MB ring all-reduce) on 4 servers of
    the 200 Gbit/s leaf-spine example, run alone, 2 iterations."""
    cluster = ClusterSpec.load(ROOT / "examples" / "leaf-spine.yaml")
    args = dict(dp=4, iterations=2, fwd="20ms", bwd="40ms", gradient="64MB", gpus_per_server=1)
    job = generate("hybrid_parallel", args)
    return job, simulate(job, Fifo(), cluster), Topology(cluster)


def test_cassini_profile_of_a_run_interleaves_two_copies(alone):
    """The ring's 6 steps of 16 MB at 200 Gbit/s take 6 x 0.64 ms = 3.84 ms (16 MB = 16e6 bytes) after 60 ms of
    compute: two copies of the job on the same placement fit side by side once one is shifted."""
    job, result, topo = alone
    t0, t1 = iteration_window(job, result, 1)
    assert t0 == pytest.approx(result.iterations[0], rel=1e-3)
    traffic = cassini_traffic("a", job, result, topo, tick=1e-4)
    src = "h0:h0-eth0"  # rank 0's NIC sends 6 ring steps of 16 MB
    sent = sum((hi - lo) * rate for lo, hi, rate in traffic.links[src]) / 8
    assert sent == pytest.approx(6 * 16e6, rel=1e-6)
    twin = dataclasses.replace(traffic, name="b")
    p = plan([traffic, twin], capacities(topo), 1e-4)
    assert p.consistent and p.score == pytest.approx(1.0)
    assert p.shifts["b"] > 0
    from schedulers.cassini_alg import demand_curve

    curve = demand_curve(traffic.period, traffic.links[src], 1e-4)
    assert link_score([curve, curve], [0, 0], 200e9) < 1.0  # unshifted they collide


def test_crux_profile_of_a_run(alone):
    job, result, topo = alone
    prof = crux_profile("a", job, result, topo)
    assert prof.work == pytest.approx(4 * 0.060)  # GPU-seconds of iteration 1's tasks
    assert prof.link.comm == pytest.approx(6 * 16e6 / 25e9)  # busiest queue: 96 MB at 25 GB/s
    assert intensity_of(prof, byte_rates(topo)) == pytest.approx(prof.work / prof.link.comm)
    assert correction_factor(prof.link, prof.link, 1.0) == pytest.approx(1.0)
