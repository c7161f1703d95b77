"""Transfer model: max-min sharing, slowest hop, QPI contention; numba kernel == reference."""

import numpy as np
import pytest

from hwmodels.graph import GB, load_preset
from hwmodels.transfer import fluid_finish_times, fluid_finish_times_reference, transfer_times


def random_instance(rng, nlinks, nflows):
    cap = rng.uniform(1.0, 10.0, nlinks)
    paths = [
        sorted(rng.choice(nlinks, rng.integers(0, min(4, nlinks) + 1), replace=False).tolist()) for _ in range(nflows)
    ]
    bits = rng.uniform(0.0, 100.0, nflows)
    bits[rng.random(nflows) < 0.1] = 0.0
    return cap, paths, bits


@pytest.mark.parametrize("seed", range(40))
def test_kernel_matches_reference(seed):
    rng = np.random.default_rng(seed)
    cap, paths, bits = random_instance(rng, int(rng.integers(1, 8)), int(rng.integers(1, 12)))
    fast = fluid_finish_times(cap, paths, bits)
    slow = fluid_finish_times_reference(cap, paths, bits)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)


def test_edge_cases():
    assert fluid_finish_times(np.ones(2), [], np.zeros(0)).shape == (0,)
    # zero bytes and an empty path finish at 0; a saturated link is shared
    out = fluid_finish_times(np.array([2.0]), [[0], [], [0], [0]], np.array([0.0, 5.0, 4.0, 4.0]))
    np.testing.assert_allclose(out, [0.0, 0.0, 4.0, 4.0])


def test_two_transfers_share_a_link_and_slowest_hop_bounds():
    g = load_preset("pcie8")
    one = transfer_times(g, [("gpu0", "gpu1", 1e8)])[0]
    two = transfer_times(g, [("gpu0", "gpu1", 1e8), ("gpu0", "gpu1", 1e8)])
    assert two == pytest.approx([2 * one, 2 * one], rel=1e-3)
    across = transfer_times(g, [("gpu0", "gpu4", 1e8)])[0]
    assert across == pytest.approx(1e8 * 8 / (9.56 * GB), rel=1e-3)  # QPI is the slowest hop


def test_qpi_contention_falls_as_dgcl_table3():
    g = load_preset("pcie8")
    per_gpu = []
    for n in range(1, 5):
        times = transfer_times(g, [(f"gpu{i}", f"gpu{4 + i}", 1e9) for i in range(n)])
        per_gpu.append(1e9 * 8 / times.max())
    assert per_gpu[0] == pytest.approx(9.56 * GB, rel=1e-3)  # one GPU gets the whole QPI
    assert all(a > b for a, b in zip(per_gpu, per_gpu[1:]))
    assert per_gpu[3] == pytest.approx(9.56 * GB / 4, rel=1e-3)


@pytest.mark.parametrize("seed", range(20))
def test_the_transfer_model_is_the_simulators_fluid_network(seed):
    """One max-min solver (railbed.maxmin): the transfer model's finish times are those of the
    simulator's network (ReferenceNetwork: one class, no caps) advanced flow end by flow end."""
    from simulator.fluid.network import ReferenceNetwork

    rng = np.random.default_rng(100 + seed)
    cap, paths, bits = random_instance(rng, int(rng.integers(1, 8)), int(rng.integers(1, 12)))
    net = ReferenceNetwork(cap, max_hops=8)
    slot = {net.add(tuple(p), 0, None, b): f for f, (p, b) in enumerate(zip(paths, bits)) if p and b > 0}
    want, now = np.zeros(len(paths)), 0.0
    while net.active:
        now, done = net.advance(now, float("inf"))
        for s in done:
            want[slot[s]] = now
    np.testing.assert_allclose(fluid_finish_times(cap, paths, bits), want, rtol=1e-12, atol=0)
