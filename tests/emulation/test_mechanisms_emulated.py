"""Mechanism tests with known answers on the emulator: each scheduler's time within the
emulator's band (10 %, the platform's crosscheck target) of the hand-computed one.

Same jobs and formulas as ``tests/test_mechanisms.py`` (arithmetic there and in
``scenarios/mechanisms/__init__.py``): pp-chain's fair 21.55 ms against strict
17.36 ms differ by 24 %, more than twice the band, so the emulator sees the
mechanism. Two servers (five for oes-incast) at 8 Gbit/s model, k = 100
(80 Mbit/s real), LEO's hosts at k = 20000: each run takes a few seconds of real
time. Where the hand time assumes max-min sharing that TCP does not give
(``Mechanism.tcp_range``: OES's incast under distdgl), the emulated time is held
between the mechanism's stated bound and the hand time instead.
"""

import pytest

from scenarios.mechanisms import by_name, cases, run

CASES = [
    pytest.param(name, s, id=f"{name}-{s}", marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [])
    for name, s, why in cases()
]


@pytest.fixture(scope="module")
def emulated():
    return {}


def _get(emulated, name):
    if name not in emulated:
        emulated[name] = run(by_name(name), "emulate")
    return emulated[name]


@pytest.mark.parametrize("name, scheduler", CASES)
def test_the_emulator_gives_the_hand_computed_time_within_its_band(emulated, name, scheduler):
    mech = by_name(name)
    got = _get(emulated, name)[scheduler]
    expected = mech.expected(mech.source())[scheduler]
    assert mech.holds(scheduler, got, packets=True), (got, expected, mech.numbers(mech.source()))


def test_the_gain_is_seen_beyond_the_band(emulated):
    """The mechanism is visible on the emulator: strict priority's gain over FIFO (19.4 % by hand) is
    larger than the band, so it cannot be the emulator's error alone. (Measured under cubic, the
    default TCP: 16.6-17.0 %; FIFO 2-3 % under the fair time, strict priority 1-2 % over its time.)"""
    got = _get(emulated, "pp-chain")
    assert 1 - got["tag-priority"] / got["fifo"] > by_name("pp-chain").band
