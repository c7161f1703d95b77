"""RunResult: JSON round trip, derived values, the human summary."""

from railbed.results import ItemRecord, RunResult, comparison_table


def sample() -> RunResult:
    r = RunResult("emulator", "j", "fifo", "c", 10.0, makespan=3.0)
    r.items = {
        "t": ItemRecord("t", "task", 0.0, 0.0, 1.0, attrs={"iteration": 0}),
        "f": ItemRecord("f", "flow", 1.0, 1.0, 2.0, size=100, received=100, attrs={"iteration": 0}),
        "g": ItemRecord("g", "flow", 2.0, 2.0, 3.0, size=50, received=50, attrs={"iteration": 1}),
    }
    r.events = [(0.0, "start", "t"), (1.0, "end", "t"), (2.0, "end", "f"), (3.0, "end", "g")]
    r.fidelity = {"ok": False, "problems": ["x is slow"]}
    r.compute_iterations()
    return r


def test_round_trip_and_derived_values(tmp_path):
    r = sample()
    assert r.iterations == {0: 2.0, 1: 1.0}
    assert r.flow_completion_times() == {"f": 1.0, "g": 1.0}
    assert r.finish_order("flow") == ["f", "g"]
    r.save(tmp_path / "r.json")
    again = RunResult.load(tmp_path / "r.json")
    assert again == r


def test_summary_says_when_fidelity_is_broken():
    text = sample().summary()
    assert "BROKEN: x is slow" in text and "makespan        3 s" in text
    table = comparison_table([sample()])
    assert "fifo" in table and "BROKEN" in table


def test_one_percentile_definition_nearest_rank():
    import math

    from railbed.results import median_p99, percentile

    assert percentile([4, 1, 3, 2], 50) == 3 and percentile([1, 2, 3], 50) == 2
    assert percentile([5, 1], 0) == 1 and percentile([5, 1], 100) == 5
    assert percentile(range(1, 101), 99) == 100 and percentile(range(1, 1001), 99) == 991
    assert math.isnan(percentile([], 50))
    assert median_p99(x for x in [3, 1, 2]) == (2, 3)
