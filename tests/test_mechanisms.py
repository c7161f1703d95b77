"""Mechanism tests with known answers (issue 22), on the simulator: exact to 1e-9 relative.

The jobs are ``scenarios/mechanisms/*.yaml`` (``workloads/mechanisms.py``);
the expected times come from the hand formulas in
``scenarios/mechanisms/__init__.py``, restated here. The emulated side is
``tests/emulation/test_mechanisms_emulated.py``.
"""

import pytest

from scenarios.mechanisms import MECHANISMS, by_name, cases, chain_numbers, leo_numbers, oes_numbers, relay_numbers, run

CASES = [
    pytest.param(name, s, id=f"{name}-{s}", marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [])
    for name, s, why in cases()
]


@pytest.fixture(scope="module")
def simulated():
    return {m.name: run(m, "simulate") for m in MECHANISMS}


def test_the_hand_arithmetic():
    """pp-chain (9 tasks of c = 1 ms, 8 PP flows of 1 MB, a 1 MB DP bucket 0 -> 1 released with each
    PP flow 0 -> 1, 8 Gbit/s NICs): p = g = 8 * wire_bytes(1e6) / 8e9 = 8 * (1e6 + 691 * 66) / 8e9 =
    1.045606 ms (691 segments of 1448 B, 66 B of headers each). The 4 flows 0 -> 1 share server 0's
    NIC with their bucket, the 4 flows 1 -> 0 do not. Fair sharing: 9c + 4p + 4 * (p + g) = 9 + 12 *
    1.045606 = 21.547272 ms; strict priority for PP: 9c + 8p = 9 + 8 * 1.045606 = 17.364848 ms, 19.41 %
    less.

    oes-incast (four 10 MB flows A->C, B->C, B->D, B->E, 20 ms of compute after A->C): s = 8 *
    wire_bytes(1e7) / 8e9 = 8 * (1e7 + 6907 * 66) / 8e9 = 10.455862 ms. Max-min: B's NIC gives its three
    flows B/3, A->C takes the rest of C's NIC, 2B/3: done at 1.5 s, compute at 1.5 s + 20 ms = 35.683793
    ms (B's flows at 3 s = 31.367586 ms). OES: A->C = min(B/2, B/1) = B/2, done at 2 s, compute at
    40.911724 ms, 14.65 % more.

    relay-allgather (DGX-1, Table 1 speeds, 1 us per hop; 100 MB from GPU 0 to GPU 5, no NVLink
    between them; then 1 ms of compute): peer-to-peer over PCIe-QPI-PCIe, 1e8 B / 9.56 GB/s + 5 us =
    10.465251 ms, +1 ms = 11.465251 ms; SPST 0 -> 4 on NV2 (1e8 / 48.35e9 + 1 us = 2.069252 ms) then
    4 -> 5 on NV1 (1e8 / 24.22e9 + 1 us = 4.129819 ms), +1 ms = 7.199071 ms.

    leo-toll (requests at 0, 10, 20, 1000 us; 100 us on a CPU core, 50 us on the accelerator; off-path:
    PCIe hops 1 us, AXI hops 0.5 us): T(acc-acc) = 4 x 0.5 + 50 = 52 us, T(cpu-cpu) = 4 x 1 + 100 = 104
    us; requests 1 and 2 wait 40 and 80 us at the accelerator, so k_hat(acc-acc) = 2; request 3's eq.
    6.5 cost on acc-acc is 2 x (50 us + 2 x 8 x 72 B / 128 Gbit/s) + 52 us = 152.018 us > 104 us: LEO
    takes cpu-cpu, latency 104 us + 8 x (130 + 74) B / 100 Gbit/s = 104.01632 us; acc-only 52.01632 us."""
    chain = chain_numbers(by_name("pp-chain").source())
    assert chain["p"] == pytest.approx(1.045606e-3, rel=1e-12)
    assert chain["fair"] == pytest.approx(21.547272e-3, rel=1e-12)
    assert chain["strict"] == pytest.approx(17.364848e-3, rel=1e-12)
    assert chain["strict"] / chain["fair"] - 1 == pytest.approx(-0.1941, abs=5e-5)
    oes = oes_numbers(by_name("oes-incast").source())
    assert oes["fair"] == pytest.approx(35.683793e-3, rel=1e-9) and oes["oes"] == pytest.approx(40.911724e-3, rel=1e-9)
    relay = relay_numbers(by_name("relay-allgather").source())
    assert relay["p2p_end"] == pytest.approx(11.465251e-3, rel=1e-6)
    assert relay["dgcl_end"] == pytest.approx(7.199071e-3, rel=1e-6)
    leo = leo_numbers(by_name("leo-toll").source())
    assert leo["cost_acc"] == pytest.approx(152.018e-6, rel=1e-12) and leo["t_cpu"] == pytest.approx(104e-6)
    assert leo["leo"] == pytest.approx(104.01632e-6, rel=1e-12) and leo["acc_only"] == pytest.approx(52.01632e-6)


@pytest.mark.parametrize("name, scheduler", CASES)
def test_the_simulator_gives_the_hand_computed_time(simulated, name, scheduler):
    mech = by_name(name)
    expected = mech.expected(mech.source())[scheduler]
    assert simulated[name][scheduler] == pytest.approx(expected, rel=1e-9)
