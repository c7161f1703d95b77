"""The requests generator (LEO's case studies): arrivals, types, paths, round trips, dependencies."""

import numpy as np
import pytest

from railbed.errors import SpecError
from workloads import generate
from workloads.requests import arrivals, requests


def flows_of(job, i):
    return [it for it in job.items.values() if it.kind == "flow" and it.tags["request"] == i]


def test_kvs_get_is_two_round_trips_on_one_path_set():
    job = requests("kvs-c", load=1e6, requests=5)
    f = flows_of(job, 3)
    assert [(x.id, x.size) for x in f] == [("q3.0o", 8), ("q3.0b", 8), ("q3.1o", 8), ("q3.1b", 64)]
    assert [x.deps for x in f] == [("a3",), ("q3.0o",), ("q3.0b",), ("q3.1o",)]
    assert all([o.name for o in x.options] == ["cpu-cpu", "cpu-acc", "acc-cpu", "acc-acc"] for x in f)
    first = f[0].options[1]  # cpu-acc: the responder's accelerator runs the lookup on the first arrival
    assert (first.src_leg.src, first.src_leg.dst, first.dst_leg.dst, first.dst_leg.work) == ("cpu", "nic", "acc", "kvs")
    back = f[1].options[1]
    assert (back.src_leg.src, back.dst_leg.dst, back.src_leg.work) == ("acc", "cpu", None)
    assert [x.tags["last"] for x in f] == [False, False, False, True]


def test_ycsb_b_puts_only_on_the_cpu_and_share_addresses():
    job = requests("kvs-b", load=1e6, requests=4000, keys=1000)
    firsts = [it for it in job.items.values() if it.kind == "flow" and it.id.endswith(".0o")]
    puts = [f for f in firsts if f.tags["rtype"] == "put"]
    assert 0.03 < len(puts) / len(firsts) < 0.07  # YCSB-B: 5 % updates
    assert all({o.name for o in f.options} == {"cpu-cpu", "acc-cpu"} for f in puts)
    keys = [f.tags["dep"] for f in firsts]
    assert len(set(keys)) < len(keys)  # popular addresses repeat


def test_dfs_chunks_of_a_file_are_one_message():
    job = requests("dfs", load=1e3, requests=8)
    firsts = [job.items[f"q{i}.0o"] for i in range(8)]
    assert [f.tags["dep"] for f in firsts] == ["mchunk0"] * 4 + ["mchunk1"] * 4
    assert firsts[0].size == round(256 * 1024 * 0.518)
    opt = firsts[0].options[0]
    assert (opt.src_leg.work, opt.dst_leg.work) == ("compress", "decompress")


def test_arrivals_open_loop_and_seeded():
    a = arrivals(20000, 2e6, "poisson", 3)
    assert a[0] == 0 and np.all(np.diff(a) >= 0)
    assert 20000 / a[-1] == pytest.approx(2e6, rel=0.03)
    assert np.array_equal(a, arrivals(20000, 2e6, "poisson", 3))
    assert not np.array_equal(a, arrivals(20000, 2e6, "poisson", 4))
    assert np.allclose(np.diff(arrivals(10, 1e6, "constant", 0)), 1e-6)
    job = requests("ebs-4k", load=5e5, requests=10, arrival="constant")
    assert [job.items[f"a{i}"].duration for i in range(3)] == pytest.approx([0, 2e-6, 4e-6])


def test_bad_arguments_name_the_field():
    with pytest.raises(SpecError, match=r"job\.args\.preset"):
        generate("requests", {"preset": "kvs-z"})
    with pytest.raises(SpecError, match=r"job\.args\.load"):
        generate("requests", {"load": -1.0})
    with pytest.raises(SpecError, match=r"job\.args\.size"):
        generate("requests", {"preset": "dml", "size": "1 parsec"})
    assert generate("requests", {"preset": "dml", "size": "4MB", "requests": 2}).items["q0.0o"].size == 2_000_000
