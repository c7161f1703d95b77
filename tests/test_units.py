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


# What every unit means, written out here from the convention README.md and docs/checks.md state (b and bit
# are bits, B bytes; k/K/M/G/T decimal, Ki/Mi/Gi/Ti binary; tc's lower-case mbit/gbit/tbit), not
# read from railbed.units: a wrong factor in railbed.units' tables fails below.
PREFIX = {
    "": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
    "m": 1e6, "g": 1e9, "t": 1e12, "ki": 1024.0, "mi": 1024.0**2, "gi": 1024.0**3, "ti": 1024.0**4,
}  # fmt: skip
BITS_PER_UNIT = {"bit/s": 1, "bit": 1, "b/s": 1, "bps": 1, "b": 1, "B/s": 8, "Bps": 8, "B": 8}
SIZE_BYTES = {"": 1, "B": 1, "kB": 1000, "KB": 1000, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 1024,
              "MiB": 1024**2, "GiB": 1024**3, "Mb": 125_000, "Mbit": 125_000, "Gbit": 125_000_000}  # fmt: skip
TIME_SUFFIXES = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}


def bits_per_second(unit: str) -> float:
    if unit in PREFIX:
        return PREFIX[unit]  # a bare prefix: "1.5G"
    for suffix, bits in sorted(BITS_PER_UNIT.items(), key=lambda kv: -len(kv[0])):
        if unit.endswith(suffix) and unit[: -len(suffix)] in PREFIX:
            return PREFIX[unit[: -len(suffix)]] * bits
    raise AssertionError(f"the test's convention has no meaning for {unit!r}")


def accepted_rate_units() -> list[str]:
    from railbed import units

    return sorted(set(units._UNITS) - units._AMBIGUOUS)


@pytest.mark.parametrize("unit", accepted_rate_units(), ids=str)
def test_every_rate_suffix_means_its_power_of_ten(unit):
    assert parse_rate(f"2.5{unit}", "x") == pytest.approx(2.5 * bits_per_second(unit), rel=1e-12)
    assert parse_rate(f"3 {unit}", "x") == pytest.approx(3 * bits_per_second(unit), rel=1e-12)


def test_the_unit_table_covers_the_conventional_spellings():
    """Units every example in the docs uses are accepted (so the parametrized test above sees them)."""
    for unit in ("bit", "kbit", "mbit", "gbit", "tbit", "Mbit", "Gbit", "Gbps", "Gb", "GB/s", "GBps", "MiB"):
        assert unit in accepted_rate_units()


@pytest.mark.parametrize("suffix, factor", sorted(SIZE_BYTES.items()))
def test_every_size_suffix(suffix, factor):
    assert parse_size(f"3{suffix}", "x") == 3 * factor


@pytest.mark.parametrize("suffix, factor", sorted(TIME_SUFFIXES.items()))
def test_every_time_suffix(suffix, factor):
    assert parse_duration(f"4{suffix}", "x") == pytest.approx(4 * factor, rel=1e-12)


def test_the_time_table_above_is_complete():
    """A time unit added to railbed.units must be added (with its meaning) to the table above."""
    from railbed import units

    assert set(units._TIME_UNITS) == set(TIME_SUFFIXES)
