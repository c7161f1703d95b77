"""The safe loader: every YAML/JSON input ends in plain data or one bounded SpecError, fast."""

import time

import pytest

from railbed.errors import SpecError
from railbed.safeload import describe, load_json, load_yaml, load_yaml_file, read_text
from railbed.spec import ClusterSpec


def alias_bomb(levels: int, width: int = 9) -> str:
    """A "billion laughs" cluster file, the bomb as ``servers[0].count``: ``width ** levels``
    values from a few hundred bytes (each level's anchor is defined inside the next)."""
    value = "&a0 [" + ", ".join(["1"] * width) + "]"
    for i in range(1, levels):
        value = f"&a{i} [{value}, " + ", ".join([f"*a{i - 1}"] * (width - 1)) + "]"
    return f"servers: [{{nic_rate: 1e9, count: {value}}}]\nfabric: {{type: single_switch}}\n"


@pytest.mark.parametrize("levels", [6, 9, 12])
def test_alias_bomb_is_refused_at_once_or_described_in_a_short_line(levels):
    text = alias_bomb(levels)
    assert len(text) < 1000
    t0 = time.monotonic()
    with pytest.raises(SpecError) as err:
        ClusterSpec.from_yaml(text, "bomb.yaml")
    assert time.monotonic() - t0 < 2.0
    assert len(str(err.value)) < 400
    if levels > 6:  # 9**7 values > the limit
        assert err.value.field == "bomb.yaml" and "expands" in str(err.value)
    else:
        assert err.value.field == "servers[0].count" and "list" in str(err.value)


def test_recursive_alias_and_deep_nesting():
    with pytest.raises(SpecError, match="contains it"):
        load_yaml("a: &a [1, *a]", "f.yaml")
    for text in ["[" * 100 + "]" * 100, "[" * 100_000]:
        with pytest.raises(SpecError) as err:
            load_yaml(text, "f.yaml")
        assert err.value.field == "f.yaml"
    with pytest.raises(SpecError, match="nested|JSON"):
        load_json("[" * 100_000 + "]" * 100_000, "job")


def test_yaml_reads_exponents_as_numbers_and_refuses_impossible_values():
    assert load_yaml("scale: 1e12\nx: 2.5e-3\ny: 1_000\nz: 1e3x", "f") == {
        "scale": 1e12,
        "x": 2.5e-3,
        "y": 1000,
        "z": "1e3x",
    }
    for text in ["d: 2001-13-45", "n: 1" + "0" * 5000, "{[1]: 2}"]:
        with pytest.raises(SpecError) as err:
            load_yaml(text, "f")
        assert err.value.field == "f"


def test_binary_files_devices_and_size_cap(tmp_path):
    binary = tmp_path / "x.yaml"
    binary.write_bytes(b"servers: \xff\xfe\x00")
    with pytest.raises(SpecError, match="not a text file: byte 0xff at offset 9"):
        load_yaml_file(binary, "x.yaml")
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"a: 1\x00")
    with pytest.raises(SpecError, match="NUL"):
        load_yaml_file(nul, "nul.yaml")
    with pytest.raises(SpecError, match="device"):
        read_text("/dev/zero", 100, "cluster")
    big = tmp_path / "big.yaml"
    big.write_text("a" * 101)
    with pytest.raises(SpecError, match="larger than 100 bytes"):
        read_text(big, 100, "cluster")
    with pytest.raises(SpecError, match="directory"):
        read_text(tmp_path, 100, "cluster")


def test_describe_is_short_and_names_the_type():
    assert describe(1.5) == "1.5" and describe("abc") == "'abc'"
    long = describe("x" * 10**6)
    assert len(long) < 100 and "str of 1000000 chars" in long
    nested = [[[[1] * 10**3] * 10**3] * 10**3]  # 10^9 values, shared
    t0 = time.monotonic()
    text = describe(nested)
    assert time.monotonic() - t0 < 0.1 and len(text) < 100 and "list" in text
    assert "int" in describe(10**5000)


def test_blank_keys_are_named_quoted_not_as_an_empty_field():
    """SpecError keeps a field to one stripped line: a key of spaces would vanish (hypothesis found it)."""
    from railbed.errors import SpecError
    from railbed.safeload import key_name
    from railbed.spec import ClusterSpec

    assert key_name(" ") == "' '" and key_name(" a") == "' a'" and key_name("a b") == "a b"
    try:
        ClusterSpec.from_dict({" ": None})
    except SpecError as err:
        assert err.field == "' '"
    else:
        raise AssertionError("a blank key was accepted")
