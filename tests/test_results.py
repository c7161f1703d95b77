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


def _asdict_twin(r: RunResult) -> dict:
    """The slow, obviously correct form: ``dataclasses.asdict`` of everything (what to_dict was)."""
    from dataclasses import asdict

    d = asdict(r)
    d["items"] = {i: asdict(x) for i, x in r.items.items()}
    d["iterations"] = {str(k): v for k, v in r.iterations.items()}
    d["packet"] = d["counters"].get("packet", {})  # the key before counters, still written (docs/packet.md)
    return d


def test_to_dict_writes_what_asdict_wrote_on_real_runs(tmp_path):
    """Byte for byte the same JSON as the deep-copying form, on a simulated run with analysis,
    link series and events, and on a hand-made one with a dataclass left in its analysis."""
    import json
    from dataclasses import dataclass
    from pathlib import Path

    from scenarios.runner import Scenario
    from schedulers import make
    from simulator.fluid.run import simulate

    sc = Scenario.load(Path(__file__).resolve().parents[1] / "examples/scenarios/llm-small.yaml")
    spec = sc.schedulers[0]
    run = simulate(sc.job, make(spec), sc.cluster, analysis=True)
    assert run.analysis and run.link_series and run.events and len(run.items) > 100
    run.save(tmp_path / "fast.json")
    slow = json.dumps(_asdict_twin(run), indent=1) + "\n"
    assert (tmp_path / "fast.json").read_text() == slow

    @dataclass
    class Left:
        x: int

    r = sample()
    r.analysis = {"left": Left(3), "list": [Left(4)]}
    r.save(tmp_path / "left.json")
    assert (tmp_path / "left.json").read_text() == json.dumps(_asdict_twin(r), indent=1) + "\n"
    assert json.loads((tmp_path / "left.json").read_text())["analysis"] == {"left": {"x": 3}, "list": [{"x": 4}]}
