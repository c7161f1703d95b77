"""Pre-flight: what a run can know before it starts is checked before anything is built or written."""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path

import pytest

from railbed import machine
from railbed.backend import backend
from railbed.errors import SpecError
from railbed.job import Job, Location
from railbed.scheduler import Scheduler
from railbed.spec import ClusterSpec
from railbed.topology import Topology, default_scale
from railbed.units import RateScale
from scenarios.runner import PARTIAL, Scenario, preflight, results_dir, simulate_scenario
from scenarios.sweep import scenario_mapping, set_dotted
from schedulers import REGISTRY, SchedulerSpec, _parameters, make
from schedulers.tagged import TagPriority
from simulator import simulate

SECONDS = 20.0  # pre-flight with an accepted argument: ETP, SPST or a MILP on a small job takes ~1 s

CLUSTER = {"servers": [{"count": 4, "nics": 2, "nic_rate": "100Gbit"}], "fabric": {"type": "rail_optimized"}}


def two_endpoint_job(pin_server: int = 1, pin_nic: int = 0, tags: dict | None = None) -> Job:
    job = Job("j")
    job.endpoint("a", Location(0))
    job.endpoint("b", Location(pin_server, "gpu0", pin_nic))
    job.flow("f", "a", "b", 1 << 20, tags=tags or {})
    return job.validate()


def scenario(job: Job, schedulers=("fifo",)) -> Scenario:
    return Scenario("s", ClusterSpec.from_dict(CLUSTER), job, specs(*schedulers), source={})


def specs(*names: str) -> list[SchedulerSpec]:
    return [SchedulerSpec(n) for n in names]


@pytest.mark.parametrize(
    "pin, field",
    [((99, 0), "job.endpoints.b.pin.server"), ((1, 2), "job.endpoints.b.pin.nic")],
)
def test_pins_outside_the_cluster_are_named(tmp_path, pin, field):
    with pytest.raises(SpecError) as err:
        preflight(scenario(two_endpoint_job(*pin)), specs("fifo"), tmp_path / "out")
    assert err.value.field == field


@pytest.mark.parametrize("dscp", [64, -1, "EF", 46.0, True, None])
def test_tag_priority_checks_the_tags_it_reads(tmp_path, dscp):
    sc = scenario(two_endpoint_job(tags={"dscp": dscp}), ["fifo", "tag-priority"])
    preflight(sc, specs("fifo"), tmp_path / "out")  # fifo reads no tags
    with pytest.raises(SpecError) as err:
        preflight(sc, specs("fifo", "tag-priority"), tmp_path / "out")
    assert err.value.field == "job.items.f.tags.dscp" and "tag-priority" in str(err.value)
    TagPriority().check(two_endpoint_job(tags={"dscp": 46, "rate": 1e9}), sc.cluster)  # accepted
    with pytest.raises(SpecError, match="rate"):
        TagPriority().check(two_endpoint_job(tags={"rate": "fast"}), sc.cluster)


def test_a_placement_the_scheduler_gets_wrong_is_bad_input(tmp_path):
    class Offside(Scheduler):
        name = "offside"

        def place(self, job, cluster):
            placement = super().place(job, cluster)
            placement.locations["b"] = Location(7)
            return placement

    REGISTRY.register("offside", Offside)
    job = Job("j")
    job.endpoint("a")
    job.endpoint("b")
    job.flow("f", "a", "b", 1)
    try:
        with pytest.raises(SpecError) as err:
            preflight(scenario(job.validate(), ["offside"]), specs("fifo", "offside"), tmp_path / "out")
    finally:
        REGISTRY.unregister("offside")
    assert err.value.field == "schedulers[1]" and "server 7" in str(err.value)


def test_out_must_not_be_a_file(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(SpecError) as err:
        preflight(scenario(two_endpoint_job()), specs("fifo"), tmp_path / "out")
    assert err.value.field == "--out"


def test_emulation_limits_come_from_the_measurement(tmp_path):
    big = ClusterSpec.from_dict(
        {"servers": [{"count": 10_000, "nic_rate": "100Gbit"}], "fabric": {"type": "single_switch"}}
    )
    topo = Topology(big)
    reasons = [r for f, r in machine.problems(big, topo, RateScale(1e5), cores=2, memory=24e9) if f == "servers"]
    assert len(reasons) == 3  # namespaces (build time), memory, NICs per core
    assert "10001 namespaces" in reasons[0] and str(machine.MAX_NODES) in reasons[0]
    assert "GB" in reasons[1] and "at most 1200" in reasons[2]
    assert machine.MAX_NODES == int(machine.MAX_BUILD_SECONDS / machine.BUILD_SECONDS_PER_NODE)
    small = ClusterSpec.from_dict(CLUSTER)
    topo = Topology(small)
    assert machine.problems(small, topo, default_scale(small, topo), cores=2, memory=24e9) == []
    slow = dict(machine.problems(small, topo, RateScale(1e6), cores=2, memory=24e9))
    assert "below 1 Mbit/s" in slow["scale"]
    fast = dict(machine.problems(small, topo, RateScale(1), cores=2, memory=24e9))
    assert "above the 10 Gbit/s" in fast["scale"]
    with pytest.raises(SpecError) as err:
        preflight(scenario(two_endpoint_job()), specs("fifo"), tmp_path / "out", scale=1e6, backend=backend("emulate"))
    assert err.value.field == "scale"


def test_results_dir_is_marked_partial_until_the_run_ends(tmp_path):
    sc = scenario(two_endpoint_job())
    with results_dir(sc, tmp_path / "ok") as out:
        assert (out / PARTIAL).exists() and (out / "job.json").exists()
    assert not (tmp_path / "ok" / PARTIAL).exists()
    with pytest.raises(RuntimeError), results_dir(sc, tmp_path / "bad"):
        raise RuntimeError("agent h1 died")
    assert "agent h1 died" in (tmp_path / "bad" / PARTIAL).read_text()


def test_simulate_writes_nothing_for_bad_input(tmp_path):
    sc = scenario(two_endpoint_job(tags={"dscp": 64}), ["tag-priority"])
    with pytest.raises(SpecError):
        simulate_scenario(sc, tmp_path / "out", echo=lambda _: None)
    assert not (tmp_path / "out").exists()
    sc = scenario(two_endpoint_job(tags={"dscp": 46}), ["tag-priority"])
    simulate_scenario(sc, tmp_path / "out", echo=lambda _: None)
    assert (tmp_path / "out" / "index.json").exists() and not (tmp_path / "out" / PARTIAL).exists()


def test_an_out_directory_under_a_file_is_named_before_anything_runs(tmp_path):
    (tmp_path / "f").write_text("a file\n")
    with pytest.raises(SpecError) as err:
        preflight(scenario(two_endpoint_job()), specs("fifo"), tmp_path / "f" / "out")
    assert err.value.field == "--out" and "is a file" in err.value.message
    preflight(scenario(two_endpoint_job()), specs("fifo"), tmp_path / "new" / "deeper")  # fine


# ---------------------------------------------------- scheduler arguments at their extremes
ROOT = Path(__file__).resolve().parent.parent
EXTREMES = [-1, 0, 1, 3, 2**31, 2**63, 10**12, 1e-300, 1e300, -0.0, math.nan, math.inf, True, "7", None]
# a scenario each scheduler can place (pre-flight runs its place(): ETP, SPST, ...); base arguments keep
# ETP short where the fuzzed argument is not the step count
SCENARIOS = {
    "schedulers.dgtp": (
        ROOT / "scenarios/dgtp/testbed-products.yaml",
        {"job.args.iterations": 1, "job.args.scale": 0.005, "job.args.profile": 3},
        {"iterations": 50, "eval_iterations": 2},
    ),
    "schedulers.dgcl": (ROOT / "scenarios/dgcl/testbed-dgx1x2-web-google.yaml", {}, {}),
    "schedulers.leo": (ROOT / "scenarios/leo/kvs.yaml", {}, {}),
}
DEFAULT_SCENARIO = (ROOT / "examples/scenarios/crosscheck-small.yaml", {}, {})


def _fuzz_cases():
    for name, cls in sorted(REGISTRY.items()):
        for arg in _parameters(cls):
            for value in EXTREMES:
                yield pytest.param(name, arg, value, id=f"{name}-{arg}-{value!r:.12}")


@functools.cache
def _scenario_for(module: str) -> tuple[Scenario, dict]:
    path, overrides, base = SCENARIOS.get(module, DEFAULT_SCENARIO)
    data, where = scenario_mapping(str(path), Path("."))
    for key, value in overrides.items():
        set_dotted(data, key, value, key)
    return Scenario.from_dict(data, where), base


@pytest.mark.parametrize("name, arg, value", list(_fuzz_cases()))
def test_every_scheduler_argument_at_its_extremes_is_refused_by_name_or_placed(tmp_path, name, arg, value):
    """make() refuses a value with a SpecError naming ``args.<arg>``, or the scheduler takes it,
    pre-flight (its place() on a job it schedules) ends without a traceback within SECONDS and, on
    the small crosscheck job, the simulated run finishes (small-first's chunk 0 divided by zero there)."""
    module = REGISTRY[name].__module__
    sc, base = _scenario_for(module)
    args = {**{k: v for k, v in base.items() if k in _parameters(REGISTRY[name])}, arg: value}
    spec = SchedulerSpec(name, args)
    try:
        make(spec, "schedulers[0]")
    except SpecError as exc:
        assert exc.field == f"schedulers[0].args.{arg}", exc
        assert len(str(exc)) < 300 and "\n" not in str(exc)
        return
    if name != min(n for n, c in REGISTRY.items() if c.__module__ == module):  # one placement per module
        return
    t0 = time.perf_counter()
    try:
        preflight(sc, [spec], tmp_path / "out")
    except SpecError as exc:
        assert "\n" not in str(exc)
        return
    assert time.perf_counter() - t0 < SECONDS, f"pre-flight of {name} with {arg}={value!r} took too long"
    if module not in SCENARIOS:  # the small job: its run, too, ends without a traceback
        result = simulate(sc.job, make(spec), sc.cluster)
        assert result.makespan > 0
