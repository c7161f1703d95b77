"""A backend added from outside railbed's tree, in this file alone: registered by name in
:data:`railbed.backend.BACKENDS`, it owns a key of a scenario (``Capabilities.settings``) that it
parses itself (``parse_settings``), reads its settings from ``RunOptions.settings`` and puts its own
counters under its name in the result (``RunResult.counters``), through ``scenarios/runner.py``
unchanged (issue 43: "one module and one line").

The backend, ``slow-nics``: the fluid model on the same cluster with every NIC ``factor`` times
slower (its block: ``slowdown: {factor: 2}``). A job of flows alone on a cluster without latency
then takes ``factor`` times fluid's time: max-min rates scale with the capacities."""

import json
from dataclasses import dataclass

import pytest

from railbed.backend import BACKENDS, Capabilities, ModelBackend, RunOptions, backend
from railbed.errors import SpecError
from railbed.safeload import describe, positive
from railbed.spec import ClusterSpec
from scenarios.runner import Scenario, simulate_scenario

NAME = "slow-nics"


@dataclass(frozen=True)
class Slowdown:
    factor: float = 1.0


def parse_slowdown(block: dict, cluster: ClusterSpec) -> Slowdown:
    """``slowdown: {factor: F}`` (F >= 1) -> :class:`Slowdown`; errors name ``slowdown.<key>``."""
    raw = block["slowdown"]
    if not isinstance(raw, dict) or set(raw) - {"factor"}:
        raise SpecError("slowdown", f"expected {{factor: F}}, got {describe(raw)}")
    factor = positive(raw.get("factor", 1.0), "slowdown.factor")
    if factor < 1:
        raise SpecError("slowdown.factor", f"at least 1, got {factor:g}")
    return Slowdown(factor)


class SlowNics(ModelBackend):
    name = NAME
    summary = "the fluid model with every NIC `factor` times slower (a test's own backend)"
    capabilities = Capabilities(max_gpus=64, settings=("slowdown",))

    def parse_settings(self, block: dict, cluster: ClusterSpec) -> Slowdown:
        return parse_slowdown(block, cluster)

    def run(self, job, scheduler, cluster, options: RunOptions):
        own = options.own(self.name, Slowdown())
        doc = cluster.to_dict()
        for server in doc["servers"]:
            server["nic_rate"] = [rate / own.factor for rate in server["nic_rate"]]
        result = backend("fluid").run(job, scheduler, ClusterSpec.from_dict(doc), options)
        result.backend, result.cluster = self.name, cluster.name
        flows = sum(r.kind == "flow" for r in result.items.values())
        result.counters[self.name] = {"factor": own.factor, "flows": flows}
        return result


SCENARIO = {
    "name": "own",
    "cluster": {
        "servers": [{"count": 2, "gpus": 2, "nics": 2, "nic_rate": "10Gbit"}],
        "fabric": {"type": "single_switch"},
    },
    "job": {"generator": "all_to_all", "args": {"n": 4, "size": "1MB"}},
    "schedulers": ["fifo"],
}


@pytest.fixture
def registered():
    BACKENDS.register(NAME, SlowNics())
    yield
    BACKENDS.unregister(NAME)


def run(data, name, out):
    [result] = simulate_scenario(Scenario.from_dict(data), out, echo=lambda _: None, backend=name, plots=False)
    return result, json.loads((out / "fifo" / "result.json").read_text())


def test_its_block_reaches_it_and_its_counters_come_back(registered, tmp_path):
    slow, saved = run({**SCENARIO, "slowdown": {"factor": 2}}, NAME, tmp_path / "slow")
    fluid, _ = run({**SCENARIO, "slowdown": {"factor": 2}}, "fluid", tmp_path / "fluid")  # not fluid's key
    assert slow.makespan == pytest.approx(2 * fluid.makespan, rel=1e-9) and fluid.makespan > 0
    assert saved["backend"] == NAME and saved["counters"] == {NAME: {"factor": 2.0, "flows": 12}}
    assert fluid.counters == {}
    default, _ = run(SCENARIO, NAME, tmp_path / "default")  # no block: its defaults
    assert default.makespan == pytest.approx(fluid.makespan, rel=1e-9)
    assert default.counters[NAME]["factor"] == 1.0


def test_its_block_is_checked_when_the_scenario_is_read(registered):
    with pytest.raises(SpecError) as err:
        Scenario.from_dict({**SCENARIO, "slowdown": {"factor": 0.5}})
    assert err.value.field == "slowdown.factor"
    with pytest.raises(SpecError) as err:
        Scenario.from_dict({**SCENARIO, "slowdown": {"speed": 2}})
    assert err.value.field == "slowdown"


class Greedy(SlowNics):
    name = "greedy"
    capabilities = Capabilities(max_gpus=64, settings=("packet",))  # the packet backend's key


def test_its_key_is_unknown_once_it_is_gone_and_a_taken_key_is_refused(registered):
    BACKENDS.register("greedy", Greedy())
    try:
        with pytest.raises(ValueError, match="'packet' is owned by backends 'packet' and 'greedy'"):
            Scenario.from_dict({**SCENARIO, "packet": {"buffer": 10}})
    finally:
        BACKENDS.unregister("greedy")
    assert Scenario.from_dict({**SCENARIO, "packet": {"buffer": 10}}).settings["packet"].buffer == 10
    BACKENDS.unregister(NAME)
    with pytest.raises(SpecError) as err:
        Scenario.from_dict({**SCENARIO, "slowdown": {"factor": 2}})
    assert err.value.field == "slowdown" and "unknown key" in err.value.message


def test_the_runner_imports_no_backend():
    """scenarios/runner.py hands each backend its block: it imports nothing of emulator/ or of the
    simulators (crosscheck, a comparison of two results and no backend, is scenarios.crosscheck)."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[1] / "scenarios" / "runner.py").read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    backends = {m for m in names if m.split(".")[0] in ("emulator", "simulator")}
    assert backends == set()
