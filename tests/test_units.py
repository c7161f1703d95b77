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
    "text, value",
    [
        ("100Gbit", 100e9),
        ("100gbit", 100e9),
        ("2.5 Gbps", 2.5e9),
        ("100Gb/s", 100e9),
        ("400e9", 400e9),
        (10_000, 1e4),
        ("1.5M", 1.5e6),
        ("100GBps", 800e9),
        ("12.5GB/s", 100e9),
        ("1MiB/s", 8 * 1024**2),
        ("10mbit", 10e6),
        ("1e12", 1e12),
    ],
)
def test_parse_rate(text, value):
    assert parse_rate(text, "x") == pytest.approx(value)


@pytest.mark.parametrize("text", ["2.5 gbps", "100mbps", "1kbps", "300bps", "4mb", "4gb/s"])
def test_parse_rate_refuses_ambiguous_bits_or_bytes(text):
    with pytest.raises(SpecError, match="ambiguous") as err:
        parse_rate(text, "servers[0].nic_rate")
    assert err.value.field == "servers[0].nic_rate"


@pytest.mark.parametrize(
    "text, nbytes", [("4MB", 4e6), ("4Mb", 5e5), ("4Mbit", 5e5), ("4MiB", 4 * 1024**2), (100, 100), ("1e3B", 1e3)]
)
def test_parse_size_tells_bits_from_bytes(text, nbytes):
    assert parse_size(text, "x") == nbytes


@pytest.mark.parametrize("text", ["4mb", "4M", "2 gb", "1 furlong", "-1MB", "1e19B", float("nan"), [1], "9" * 50])
def test_parse_size_rejects(text):
    with pytest.raises(SpecError) as err:
        parse_size(text, "job.args.size")
    assert err.value.field == "job.args.size" and len(str(err.value)) < 300


@pytest.mark.parametrize(
    "bad", ["-1Gbit", 0, "ten", "1 furlong", None, True, float("inf"), "1e30bit", 1e16, "x" * 10**5]
)
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
