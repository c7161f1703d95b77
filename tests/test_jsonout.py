"""railbed.jsonout: result.json and job.json written piece by piece, the same bytes as json.dumps,
in memory bounded per batch, not per record (the 2.7-million-record Hermod result of issue
table52 needed 21 GB for json.dumps)."""

import json
import tracemalloc
from dataclasses import dataclass

import pytest

from railbed.job import Job
from railbed.jsonout import Pairs, read_keys, read_object, write_json
from railbed.results import ItemRecord, RunResult, _json_default


@dataclass
class Point:
    x: int = 1


CASES = [
    {},
    {"a": [], "b": {}, "c": (), "d": iter([])},
    {"a": [[]], "b": {"c": {}}, "e": [1, [2, {"f": ()}]]},
    {1: 2, False: [1, 2], None: {"x": [1, {"y": []}]}, 2.5: 's\n"é', "n": float("nan"), "i": float("-inf")},
    {"p": Point(), "q": [Point(), {"r": Point()}], "s": {3: Point()}},
    {"many": list(range(25)), "m": {str(k): [k] * (k % 3) for k in range(25)}},
]


@pytest.mark.parametrize("batch", [1, 2, 7, 1000])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_write_json_writes_json_dumps_bytes(tmp_path, case, batch):
    value = CASES[case]
    plain = {k: list(v) if isinstance(v, type(iter([]))) else v for k, v in value.items()}
    write_json(tmp_path / "v.json", dict(value), default=_json_default, batch=batch)
    assert (tmp_path / "v.json").read_text() == json.dumps(plain, indent=1, default=_json_default) + "\n"


def test_pairs_and_iterators_are_made_as_they_are_written(tmp_path):
    made = []

    def records():
        for k in range(5):
            made.append(k)
            yield f"r{k}", {"k": k}

    write_json(tmp_path / "v.json", {"items": Pairs(records()), "list": (x for x in "ab")}, batch=2)
    assert made == list(range(5))
    expected = {"items": {f"r{k}": {"k": k} for k in range(5)}, "list": ["a", "b"]}
    assert (tmp_path / "v.json").read_text() == json.dumps(expected, indent=1) + "\n"


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "v.json"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        write_json(path, {"a": [1] * 5, "b": [object()]}, batch=1)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]


def big_result(n: int) -> RunResult:
    r = RunResult("simulator", "j", "hermod", "c", 1.0, makespan=float(n))
    for k in range(n):
        i = f"f{k}.s{k % 7}"
        r.items[i] = ItemRecord(
            i, "flow", k * 1e-6, k * 1e-6, (k + 1) * 1e-6, server=k % 16, device=f"gpu{k % 8}",
            dst_server=(k + 1) % 16, src_nic=k % 8, dst_nic=k % 8, size=1000 + k, received=1000 + k,
            dscp=k % 64, spine=k % 8, parent=f"f{k}", attrs={"iteration": 0, "layer": k % 32},
        )  # fmt: skip
        r.events += [(k * 1e-6, "ready", i), (k * 1e-6, "start", i), ((k + 1) * 1e-6, "end", i)]
    return r


def test_saving_a_result_holds_a_batch_not_every_record(tmp_path):
    """The regression: json.dumps(result.to_dict(), indent=1) peaked at about 7.7 KB per
    record (tracemalloc: Python's own allocations, not RSS). Saving now holds a batch."""
    n = 20_000
    r = big_result(n)
    tracemalloc.start()
    r.save(tmp_path / "r.json")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1000 * n  # 1 KB per record (was 7.7); a 1000-record batch is about 6 MB
    assert (tmp_path / "r.json").read_text() == json.dumps(r.to_dict(), indent=1, default=_json_default) + "\n"
    assert RunResult.load(tmp_path / "r.json") == r


def test_saving_a_job_writes_what_json_dumps_wrote(tmp_path):
    job = Job("j")
    for e in ("a", "b"):
        job.endpoint(e)
    for k in range(30):
        job.task(f"t{k}", "a", 1e-3, deps=[f"f{k - 1}"] if k else [], iteration=k % 2)
        job.flow(f"f{k}", "a", "b", 1000 * (k + 1), deps=[f"t{k}"], coflow=f"c{k % 3}", tags={"k": k})
    job.save(tmp_path / "j.json")
    assert (tmp_path / "j.json").read_text() == json.dumps(job.to_dict(), indent=1) + "\n"
    assert Job.load(tmp_path / "j.json").to_dict() == job.to_dict()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_read_keys_gives_what_json_loads_gives(tmp_path, case):
    """Each top-level key read alone, any subset, a key the file lacks; values whose strings hold
    a newline, quotes and text like a key line (``\\n "x": ``) stay inside their value."""
    value = {**CASES[case], "t": 'a\n "x": 1,\n "y": "', 'k"\\': {'z\n "': ['\n "w": ']}}
    value = {k: list(v) if isinstance(v, type(iter([]))) else v for k, v in value.items()}
    write_json(tmp_path / "v.json", value, default=_json_default, batch=2)
    whole = json.loads((tmp_path / "v.json").read_text())
    assert read_keys(tmp_path / "v.json", list(whole) + ["absent"]) == whole
    for key in whole:
        assert read_keys(tmp_path / "v.json", [key]) == {key: whole[key]}
    for indent in (None, 2, 4):  # other layouts: read whole
        (tmp_path / "c.json").write_text(json.dumps(value, default=_json_default, indent=indent))
        assert read_keys(tmp_path / "c.json", ["t", "absent"]) == {"t": whole["t"]}


@pytest.mark.parametrize("batch", [1, 2, 1000])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_read_object_decodes_elements_a_batch_at_a_time_to_what_json_loads_gives(tmp_path, case, batch):
    """Every list and mapping at the top level read ``batch`` elements at a time (each through a function
    that marks it), the rest whole: what ``json.loads`` gives, with the marks; strings holding a
    newline, quotes and text like an element's line (``\\n  "x": ``) stay inside their value."""
    value = {**CASES[case], "t": 'a\n  "x": 1,\n  [', 'k"\\': {'z\n  "': ['\n  "w": ', {"v": [1, {}]}], "e": {}},
             "rows": [[1.5, "ready", "a"], [], {}, "s", None]}
    value = {k: list(v) if isinstance(v, type(iter([]))) else v for k, v in value.items()}
    write_json(tmp_path / "v.json", value, default=_json_default, batch=2)
    whole = json.loads((tmp_path / "v.json").read_text())
    containers = [k for k, v in whole.items() if isinstance(v, (dict, list))]

    def marked(v):
        return ("seen", v)

    want = {k: ({i: marked(x) for i, x in v.items()} if isinstance(v, dict) else [marked(x) for x in v])
            if k in containers else v for k, v in whole.items()}  # fmt: skip
    assert read_object(tmp_path / "v.json", dict.fromkeys(containers, marked), batch) == want
    assert read_object(tmp_path / "v.json", {}, batch) == whole
    (tmp_path / "c.json").write_text(json.dumps(value, default=_json_default, indent=2))  # another layout: whole
    assert read_object(tmp_path / "c.json", dict.fromkeys(containers, marked)) == want


def test_a_result_reads_back_equal_record_by_record(tmp_path):
    res = RunResult("fluid", "j", "fifo", "c", makespan=2.0, notes=["n"], analysis={"max_speedup": 1.5})
    for k in range(7):
        res.items[f"f{k}"] = ItemRecord(f"f{k}", "flow", 0.0, 0.1 * k, 0.2 * k, server=k, size=k, children=["x"] * k,
                                        attrs={"iteration": k % 2, "s": 'q"\n  "z": '})  # fmt: skip
        res.events.append((0.1 * k, "end", f"f{k}"))
    res.save(tmp_path / "r.json")
    back = RunResult.load(tmp_path / "r.json")
    assert back == RunResult.from_dict(json.loads((tmp_path / "r.json").read_text())) == res
    assert all(type(e) is tuple for e in back.events)
    RunResult("fluid", "j", "fifo", "c").save(tmp_path / "e.json")  # no records, no events
    assert RunResult.load(tmp_path / "e.json") == RunResult("fluid", "j", "fifo", "c")
