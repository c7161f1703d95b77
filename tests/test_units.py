"""Rates, durations, wire overhead and the rate scale."""

import pytest

from railbed.errors import SpecError
from railbed.units import (
    FRAME,
    GOODPUT_FRACTION,
    MSS,
    RateScale,
    goodput,
    parse_duration,
    parse_rate,
    parse_size,
    wire_bytes,
)


@pytest.mark.parametrize(
    "text, value", [("100Gbit", 100e9), ("2.5 gbps", 2.5e9), ("400e9", 400e9), (10_000, 1e4), ("1.5M", 1.5e6)]
)
def test_parse_rate(text, value):
    assert parse_rate(text, "x") == pytest.approx(value)


@pytest.mark.parametrize("bad", ["-1Gbit", 0, "ten", "1 furlong", None, True, float("inf")])
def test_parse_rate_rejects(bad):
    with pytest.raises(SpecError) as err:
        parse_rate(bad, "servers[0].nic_rate")
    assert err.value.field == "servers[0].nic_rate"


def test_parse_duration():
    assert parse_duration("2us", "f") == pytest.approx(2e-6)
    with pytest.raises(SpecError):
        parse_duration("-3ms", "f")


def test_wire_overhead_at_mtu_1500():
    assert (FRAME, MSS) == (1514, 1448)
    assert 1 - GOODPUT_FRACTION == pytest.approx(0.0436, abs=1e-4)
    assert wire_bytes(MSS) == FRAME and wire_bytes(MSS + 1) == MSS + 1 + 2 * (FRAME - MSS)
    assert wire_bytes(0) == 0
    assert goodput(100e6) == pytest.approx(100e6 * 1448 / 1514)


def test_rate_scale_roundtrip_and_defaults():
    k = RateScale(250)
    assert k.real_rate(100e9) == 400e6 and k.model_rate(k.real_rate(7e9)) == pytest.approx(7e9)
    assert k.real_time(1e-3) == 0.25 and k.model_time(0.25) == pytest.approx(1e-3)
    small = RateScale.default_for([100e6], [100e6], cores=2)
    assert small.k == 1
    big = RateScale.default_for([400e9] * 64, [400e9] * 64, cores=2)
    assert big.k >= 400e9 / 500e6 and str(big.k)[0] in "125"
    with pytest.raises(SpecError):
        RateScale(0)


# Every suffix parse_rate accepts, with the value it must mean (written out here,
# not read from railbed.units, so a wrong factor in the table is caught).
RATE_SUFFIXES = {
    "": 1.0,
    "bit": 1.0,
    "bps": 1.0,
    "k": 1e3,
    "kbit": 1e3,
    "kbps": 1e3,
    "m": 1e6,
    "mbit": 1e6,
    "mbps": 1e6,
    "g": 1e9,
    "gbit": 1e9,
    "gbps": 1e9,
    "t": 1e12,
    "tbit": 1e12,
    "tbps": 1e12,
}
SIZE_SUFFIXES = {"": 1, "b": 1, "kb": 1000, "mb": 10**6, "gb": 10**9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
TIME_SUFFIXES = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@pytest.mark.parametrize("suffix, factor", sorted(RATE_SUFFIXES.items()))
def test_every_rate_suffix_means_its_power_of_ten(suffix, factor):
    for spelling in {suffix, suffix.upper(), suffix.capitalize()}:
        assert parse_rate(f"2.5{spelling}", "x") == pytest.approx(2.5 * factor, rel=1e-12)
        assert parse_rate(f"3 {spelling}", "x") == pytest.approx(3 * factor, rel=1e-12)


@pytest.mark.parametrize("suffix, factor", sorted(SIZE_SUFFIXES.items()))
def test_every_size_suffix(suffix, factor):
    assert parse_size(f"3{suffix.upper()}", "x") == 3 * factor


@pytest.mark.parametrize("suffix, factor", sorted(TIME_SUFFIXES.items()))
def test_every_time_suffix(suffix, factor):
    assert parse_duration(f"4{suffix}", "x") == pytest.approx(4 * factor, rel=1e-12)


def test_the_suffix_tables_above_are_complete():
    """A suffix added to railbed.units must be added (with its meaning) to the tables above."""
    from railbed import units

    assert set(units._RATE_UNITS) == set(RATE_SUFFIXES)
    assert set(units._SIZE_UNITS) == set(SIZE_SUFFIXES)
    assert set(units._TIME_UNITS) == set(TIME_SUFFIXES)
