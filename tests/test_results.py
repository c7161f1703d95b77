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
    r.counters["emulator"] = {"fidelity": {"ok": False, "problems": ["x is slow"]}, "congestion": "reno"}
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


def test_fidelity_and_tcp_are_the_backends_own_counters_and_a_result_json_of_before_still_reads(tmp_path):
    """Issue 43: the fidelity report and the TCP a run used live in ``counters[its backend]``
    (``FIDELITY``, ``CONGESTION``), not in fields of the core's RunResult. A result.json written
    before has them as top-level ``fidelity`` and ``tcp`` (``{}`` and ``""`` from a model's run):
    they read into the backend's counters, and a file written now has no such keys."""
    import json

    from railbed.results import CONGESTION, FIDELITY

    r = sample()
    d = json.loads(json.dumps(r.to_dict()))
    assert "fidelity" not in d and "tcp" not in d
    assert d["counters"]["emulator"] == {FIDELITY: {"ok": False, "problems": ["x is slow"]}, CONGESTION: "reno"}
    before = {k: v for k, v in d.items() if k != "counters"}
    before |= {"fidelity": {"ok": False, "problems": ["x is slow"]}, "tcp": "reno"}
    assert RunResult.from_dict(before) == r
    (tmp_path / "before.json").write_text(json.dumps(before))
    assert RunResult.load(tmp_path / "before.json").fidelity_report == {"ok": False, "problems": ["x is slow"]}
    head = {"job": "j", "scheduler": "s", "cluster": "c"}
    model = head | {"backend": "simulator", "fidelity": {}, "tcp": "", "packet": {}}
    assert RunResult.from_dict(model).counters == {}
    packet = head | {"backend": "packet", "tcp": "cubic", "packet": {"drops": 3}}
    assert RunResult.from_dict(packet).own == {"drops": 3, CONGESTION: "cubic"}
    both = packet | {"counters": {"packet": {"drops": 3, CONGESTION: "dctcp"}}}  # counters win over the old key
    assert RunResult.from_dict(both).own[CONGESTION] == "dctcp"


def test_summary_and_comparison_read_only_the_runs_own_backends_counters():
    from railbed.metrics import metric

    r = sample()
    text = r.summary()
    assert "(k = 10, TCP reno)" in text and "  fidelity        BROKEN: x is slow" in text
    assert metric(r, "fidelity_ok") == 0.0
    r.counters["emulator"]["fidelity"] = {"ok": True, "problems": [], "warnings": ["CPU busy"]}
    text = r.summary()
    assert "  fidelity        ok" in text and "  warning         CPU busy" in text
    assert metric(r, "fidelity_ok") == 1.0 and comparison_table([r]).splitlines()[2].endswith("  ok")
    other = sample()  # another backend's counters are not this run's
    other.counters = {"packet": other.counters["emulator"]}
    assert other.fidelity_report == {} and other.own == {}
    text = other.summary()
    assert "(model time)" in text and "TCP" not in text and "fidelity" not in text
    assert comparison_table([other]).splitlines()[2].endswith("n/a (simulated)")
    packet = RunResult("packet", "j", "fifo", "c", counters={"packet": {"congestion": "dctcp", "drops": 0}})
    assert "(model time, TCP dctcp)" in packet.summary()
