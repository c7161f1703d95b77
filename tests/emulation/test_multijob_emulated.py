"""Several jobs on the emulator (issue 45), written to be run by the lead (one emulated testbed per
machine): the two-job mechanism (scenarios/mechanisms/two-jobs.yaml, hand arithmetic in
scenarios/mechanisms/__init__.py and tests/test_multijob.py) within the emulator's band, a release
time and the job hooks on real TCP flows, and per-job results written by ``railbed run``.

Unshifted, TCP may split the port unevenly and the jobs drift out of step (the packet backend did:
a 9.65 ms, b 10.55 ms against the fluid model's 12 ms), so ``fifo`` is held between the jobs' times
alone and the fair-sharing time (``Mechanism.tcp_range``); shifted by half a period, each job runs
as if alone, within the band.
"""

import json
import tempfile
from pathlib import Path

import pytest
from loadcheck import tolerance_or_load

from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.jobs import JobEntry, merge
from railbed.scheduler import Decision, Scheduler
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from scenarios.mechanisms import JOB_MECHANISMS
from scenarios.runner import Scenario, run_scenario
from workloads.mechanisms import periodic

MECH = Path(__file__).resolve().parents[2] / "scenarios" / "mechanisms" / "two-jobs.yaml"
K = 10
LINK = 1e9
SPEC = ClusterSpec.from_dict(
    {"servers": [{"count": 3, "gpus": 2, "nic_rate": LINK}], "fabric": {"type": "single_switch"}}
)


@pytest.fixture(scope="module")
def emulated():
    """Mechanism -> scheduler -> JCT, from one emulated run of the two-job scenario (both mechanisms
    read it: job a's and job b's JCT), and the runs (their fidelity reports say whether the machine
    was loaded)."""
    mech = JOB_MECHANISMS[0]
    labels = list(mech.expected(mech.source()))
    with tempfile.TemporaryDirectory(prefix="railbed-two-jobs-") as tmp:
        runs = run_scenario(Scenario.load(mech.scenario), Path(tmp), echo=lambda _m: None, schedulers=labels,
                            plots=False)  # fmt: skip
    return {m.name: {r.scheduler: m.value(r) for r in runs} for m in JOB_MECHANISMS}, runs


@pytest.mark.parametrize("mech", JOB_MECHANISMS, ids=lambda m: m.name)
def test_the_two_job_mechanism_within_the_band(emulated, mech):
    values, runs = emulated
    with tolerance_or_load(*runs):  # timing checks: a loaded machine's run skips, naming the load
        for label, expected in mech.expected(mech.source()).items():
            got = values[mech.name][label]
            assert mech.holds(label, got, packets=True), (mech.name, label, got, expected)


def test_the_shift_gains_beyond_the_band(emulated):
    """The jobs' JCTs together are shorter shifted than unshifted by more than the band (fluid: 8 + 9
    against 12 + 12 ms; packet: against 9.65 + 10.55 ms). Not each job's: unshifted, TCP lets the jobs
    drift out of step, and either may end near its time alone (8 quiet runs on the 2-core VM: a 9.77-11.26
    ms, b 9.73-11.72 ms; shifted a 8.05-8.16, b 9.07-9.12 ms), but not both (their sum 20.76-21.98 ms
    against 17.1-17.3 ms). A run with b unshifted at 9.24 ms and shifted at 9.65 ms, beside another
    section's run, failed the per-job check this test had until 2026-11-29."""
    values, runs = emulated
    a, b, band = values["two-jobs-a"], values["two-jobs-b"], JOB_MECHANISMS[0].band
    with tolerance_or_load(*runs):
        assert a["shifted"] + b["shifted"] < (a["fifo"] + b["fifo"]) * (1 - band), (a, b)


class Hooks(Scheduler):
    """Records the job hooks; job b shifted by 0.1 s model."""

    name = "hooks"

    def __init__(self):
        self.log = []

    def on_job_arrived(self, job_name, job, view):
        self.log.append(("arrive", job_name, view.now))
        return 0.1 if job_name == "b" else None

    def on_job_finished(self, job_name, view):
        self.log.append(("done", job_name, view.now))

    def on_ready(self, item, view):
        return Decision(dscp=46 if item.job == "a" else 0)


def test_release_times_and_job_hooks_on_real_flows():
    size = 12_500_000
    alone = 8 * wire_bytes(size) / LINK  # 0.1 s model, 1 s real
    placement = ("explicit", {"g": 0, "r": 2})
    job = merge([JobEntry("a", periodic(iterations=1, compute=0.05, size=size), 0.0, placement, "jobs[0]"),
                 JobEntry("b", periodic(iterations=1, compute=0.05, size=size), 0.02, ("explicit", {"g": 1, "r": 2}),
                          "jobs[1]")], SPEC)  # fmt: skip
    sched = Hooks()
    with Testbed(SPEC, scale=K) as tb:
        res = run(job, sched, tb)
    assert res.items["b.c0"].start == pytest.approx(0.12, abs=0.01)  # arrival 0.02 + shift 0.1
    assert res.items["a.f0"].end - res.items["a.f0"].start == pytest.approx(alone, rel=0.1)
    assert [x[:2] for x in sched.log if x[0] == "arrive"] == [("arrive", "a"), ("arrive", "b")]
    assert {x[1] for x in sched.log if x[0] == "done"} == {"a", "b"}


def test_a_multi_job_scenario_writes_per_job_results(tmp_path):
    results = run_scenario(Scenario.load(MECH), tmp_path, echo=lambda _: None, schedulers=["fifo"], plots=True)
    doc = json.loads((tmp_path / "fifo" / "result.json").read_text())
    assert set(doc["jobs"]["per_job"]) == {"a", "b"} and doc["jobs"]["per_job"]["a"]["slowdown"] > 1.0
    assert "job a" in (tmp_path / "fifo" / "summary.txt").read_text()
    assert results[0].jobs["cluster"]["interference"]["jobs"] == ["a", "b"]


def test_cassini_shifts_the_two_jobs_on_real_tcp(tmp_path):
    """CASSINI (registered ``cassini``) on the two-job scenario, emulated: its plan from the jobs'
    fluid profiles alone shifts b by half a period (1 ms model), so a ends as alone (n (c + p) =
    8 ms) and b at its shift + 8 ms = 9 ms, each within the emulator's band (the simulators:
    exact, tests/test_multijob_schedulers.py)."""
    from scenarios.mechanisms import BAND, two_jobs_numbers

    want = two_jobs_numbers(JOB_MECHANISMS[0].source())
    results = run_scenario(Scenario.load(MECH), tmp_path, echo=lambda _: None, schedulers=["cassini"], plots=False)
    per = results[0].jobs["per_job"]
    assert per["a"]["end"] == pytest.approx(want["alone"], rel=BAND), per["a"]
    assert per["b"]["end"] == pytest.approx(want["alone"] + want["period"] / 2, rel=BAND), per["b"]
    assert any("b shifted 0.001s" in line for line in results[0].notes), results[0].notes


def test_cassini_re_shifts_a_running_job_on_real_tcp():
    """The three-job re-shift of tests/test_multijob_schedulers.py on the emulator (8 Gbit/s model,
    scale 100): CASSINI pauses b 0.5 ms before its third iteration when c arrives at 6 ms, so by
    hand a ends at 12 ms (as alone), b at 13 ms and c at 12.5 ms; the simulators give these
    exactly, the emulator within its band. Written for the lead (not run by its author)."""
    from scenarios.mechanisms import BAND
    from schedulers.cassini import Cassini

    cl = ClusterSpec.from_dict({"servers": [{"count": 4, "gpus": 3, "nic_rate": "8Gbit"}],
                                "fabric": {"type": "single_switch"}})  # fmt: skip
    spec = (("a", 0, 0.0, 2e-3, 956_374), ("b", 1, 0.0, 2.5e-3, 478_154), ("c", 2, 6e-3, 1e-3, 478_154))
    job = merge([JobEntry(n, periodic(4, comp, size), at, ("explicit", {"g": s, "r": 3}), f"jobs[{s}]")
                 for n, s, at, comp, size in spec], cl)  # fmt: skip
    sched = Cassini()
    with Testbed(cl, scale=100) as tb:
        res = run(job, sched, tb)
    assert any("b paused 0.0005s" in line for line in sched.notes()), sched.notes()
    assert res.items["b.c2"].start == pytest.approx(7e-3, rel=BAND)
    for name, end in (("a", 12e-3), ("b", 13e-3), ("c", 12.5e-3)):
        assert res.items[f"{name}.f3"].end == pytest.approx(end, rel=BAND), name
