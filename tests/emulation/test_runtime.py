"""The traffic engine on a real emulated cluster: agents, real TCP flows, the run-time.

Cluster: 4 servers with one 1 Gbit/s NIC (model) on one switch, k = 10, so
links are shaped at 100 Mbit/s real. Expected durations use wire bytes (a
rate is a wire rate: 1448 payload bytes ride in 1514-byte frames).
"""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from loadcheck import tolerance_or_load

from emulator.runtime import Faults, RunFailed, run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from railbed.units import wire_bytes
from schedulers import Decision, Scheduler, by_name

K = 10
LINK = 1e9
SPEC = ClusterSpec.from_dict({"servers": [{"count": 4, "nic_rate": LINK}], "fabric": {"type": "single_switch"}})


def endpoints(job: Job, n: int = 4) -> None:
    for s in range(n):
        job.endpoint(f"w{s}", Location(s, "gpu0", 0))


def ideal(size: int, rate: float) -> float:
    return wire_bytes(size) * 8 / rate


@pytest.mark.parametrize("tcp", ["reno", "cubic"])
def test_every_flow_runs_the_testbeds_congestion_control(tcp):
    """A namespace inherits the host's default congestion control (bbr on some machines, cubic on
    Debian) and may not change it: the agents set the testbed's on each socket. With both names
    one of them differs from the host's, whichever it is. Read from the sender's sockets (``ss``)
    while the flow runs, and from the agents' own report (``result.own["congestion"]``)."""
    job = Job("cc")
    endpoints(job, 2)
    job.flow("f", "w0", "w1", 3_000_000)
    seen: set[str] = set()
    done = threading.Event()
    with Testbed(SPEC, scale=K, tcp=tcp) as tb:
        pid = str(tb.node(tb.topology.hosts[0]).pid)

        def watch():
            while not done.is_set():
                out = subprocess.run(["nsenter", "-t", pid, "-n", "ss", "-tin", "dport", "= :7000"],
                                     capture_output=True, text=True).stdout  # fmt: skip
                seen.update(line.split()[0] for line in out.splitlines() if "rtt:" in line)
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            res = run(job, by_name("fifo"), tb)
        finally:
            done.set()
            watcher.join()
    assert res.own["congestion"] == tcp  # its backend's counters (railbed.results.CONGESTION)
    assert seen == {tcp}, seen


def test_three_stage_dag_respects_every_dependency():
    job = Job("dag")
    endpoints(job)
    for s in range(4):
        job.task(f"load{s}", f"w{s}", 0.01 * (s + 1))
    for s in range(4):  # shuffle: every server sends to the next two
        for d in (1, 2):
            job.flow(f"x{s}-{(s + d) % 4}", f"w{s}", f"w{(s + d) % 4}", 200_000 * (s + 1), [f"load{s}"])
    for s in range(4):
        ins = [i for i in job.items if i.startswith("x") and i.endswith(f"-{s}")]
        job.task(f"reduce{s}", f"w{s}", 0.005, ins)
    with Testbed(SPEC, scale=K) as tb:
        res = run(job, by_name("fifo"), tb)
    ended: dict[str, float] = {}
    for t, what, i in res.events:
        if what in ("ready", "start"):
            for dep in job.items[i].deps:
                assert dep in ended and ended[dep] <= t, f"{i} {what} at {t} before {dep} ended"
        if what == "end":
            ended[i] = t
    assert set(ended) == set(job.items)
    assert res.makespan == pytest.approx(max(ended.values()))
    assert all(r.received == r.size for r in res.items.values() if r.kind == "flow")


class Tagged(Scheduler):
    """DSCP and rate from tags; halves flow ``big`` when ``trigger`` becomes active."""

    name = "tagged"

    def on_ready(self, item, view):
        return Decision(dscp=int(item.tags.get("dscp", 0)), rate=item.tags.get("rate"))

    def on_flows_changed(self, view):
        big = view.active.get("big")
        if big is not None and "trigger" in view.active and big.rate == big.flow.tags["rate"]:
            return {"big": big.rate / 2}
        return {}


def test_paced_flow_takes_size_over_rate_and_two_flows_share_a_bottleneck():
    """Sharing: the port is work-conserving (the pair's last flow ends at twice a flow's solo
    time) and shared (the first ends well after its solo time). How evenly is TCP's business:
    with 4 MB flows one of two flows finished at 1.4-2.0x its solo time, with 20 MB at 1.78-2.0x
    (5-8 runs each on the 2-core VM, bbr then), and at 40 MB under cubic once at 1.71x; the
    fluid model's max-min is 2.0x for both (docs/fidelity.md, "Sharing a port")."""
    size, rate = 4_000_000, 0.5 * LINK
    big = 40_000_000
    with Testbed(SPEC, scale=K) as tb:
        job = Job("paced")
        endpoints(job)
        job.flow("f", "w0", "w1", size, tags={"rate": rate})
        paced = run(job, Tagged(), tb).items["f"].duration
        alone_job = Job("alone")
        endpoints(alone_job)
        alone_job.flow("a", "w1", "w0", big)
        alone = run(alone_job, by_name("fifo"), tb).items["a"].duration
        pair = Job("pair")
        endpoints(pair)
        pair.flow("a", "w1", "w0", big)
        pair.flow("b", "w2", "w0", big)
        shared = run(pair, by_name("fifo"), tb)
    assert paced == pytest.approx(ideal(size, rate), rel=0.05)
    assert alone == pytest.approx(ideal(big, LINK), rel=0.05)
    first, last = sorted(shared.items[f].duration for f in ("a", "b"))
    assert last == pytest.approx(2 * alone, rel=0.05)
    assert first > 1.4 * alone


def test_halving_a_cap_half_way_halves_the_delivery_rate():
    size, rate = 6_000_000, 0.8 * LINK
    t_half = ideal(size, rate) / 2
    job = Job("rerate")
    endpoints(job)
    job.flow("big", "w0", "w1", size, tags={"rate": rate})
    job.task("timer", "w2", t_half)
    job.flow("trigger", "w2", "w3", 1000, ["timer"])
    with Testbed(SPEC, scale=K) as tb:
        res = run(job, Tagged(), tb, trace=0.02)
    trace = res.traces["big"]

    def goodput(t1, t2):  # payload bit/s (model) between model times t1 and t2, interpolated
        def at(t):
            for (ta, ba), (tb_, bb) in zip(trace, trace[1:]):
                if ta <= t <= tb_:
                    return ba + (bb - ba) * (t - ta) / (tb_ - ta)
            raise AssertionError(f"{t} outside the trace")

        return (at(t2) - at(t1)) * 8 / (t2 - t1)

    switch = res.items["trigger"].start
    end = res.items["big"].end
    before = goodput(0.2 * switch, 0.9 * switch)
    after = goodput(switch + 0.1 * (end - switch), end - 0.1 * (end - switch))
    payload_rate = rate * 1448 / 1514
    assert before == pytest.approx(payload_rate, rel=0.08)
    assert after == pytest.approx(payload_rate / 2, rel=0.08)


def test_high_dscp_flow_started_later_finishes_first():
    size = 3_000_000
    job = Job("prio")
    endpoints(job)
    job.flow("low", "w1", "w0", size, tags={"dscp": 0})
    job.task("later", "w2", ideal(size, LINK) / 4)
    job.flow("high", "w2", "w0", size, ["later"], tags={"dscp": 46})
    with Testbed(SPEC, policy="dscp-priority", scale=K) as tb:
        res = run(job, Tagged(), tb)
    assert res.items["high"].start > res.items["low"].start
    assert res.items["high"].end < res.items["low"].end
    # strict priority: the high flow runs nearly at link rate despite the low one
    assert res.items["high"].duration == pytest.approx(ideal(size, LINK), rel=0.10)


def test_third_task_waits_for_a_slot_on_a_device_of_capacity_two():
    job = Job("slots", capacity={"gpu0": 2})
    endpoints(job)
    for i in range(3):
        job.task(f"t{i}", "w0", 0.02)
    with Testbed(SPEC, scale=K) as tb:
        res = run(job, by_name("fifo"), tb)
    t = res.items
    assert t["t0"].start == t["t1"].start == 0.0
    # t2 takes the first slot freed, at that task's reported end: the run's record, exactly
    assert t["t2"].ready == 0.0 and t["t2"].start == min(t["t0"].end, t["t1"].end)
    # each wait lasts its 20 ms of model time; an agent reports the deadline when its timer wakes
    # within 2 ms real of it (TIMER_SLACK) and the true time when later (seen once in a full suite on
    # 2 cores: 3.3 ms real), so a task's own end is within a few ms real of its deadline
    with tolerance_or_load(res):  # a timer's wake-up is late on a saturated machine
        for i in range(3):
            assert t[f"t{i}"].end - t[f"t{i}"].start == pytest.approx(0.02, abs=5e-3 / K)


def test_a_short_flow_fails_the_run_naming_it():
    job = Job("short")
    endpoints(job)
    job.flow("f", "w0", "w1", 500_000)
    with Testbed(SPEC, scale=K) as tb:
        with pytest.raises(RunFailed, match=r"flow f .*got 499000 bytes of 500000"):
            run(job, by_name("fifo"), tb, faults=Faults(truncate={"f": 1000}))


def test_killing_an_agent_fails_the_run_within_two_seconds():
    job = Job("long")
    endpoints(job)
    job.flow("f", "w0", "w2", 50_000_000)  # ~4 s real
    killed: dict[str, float] = {}

    def kill_later(pids):
        def go():
            time.sleep(0.5)
            killed["t"] = time.monotonic()
            subprocess.run(["kill", "-9", str(pids[2])], check=True)

        threading.Thread(target=go, daemon=True).start()

    with Testbed(SPEC, scale=K) as tb:
        with pytest.raises(RunFailed) as err:
            run(job, by_name("fifo"), tb, on_agents=kill_later)
        failed = time.monotonic()
    assert "h2" in str(err.value) and "signal 9" in str(err.value)
    assert failed - killed["t"] < 2.0


def test_a_replayed_job_gives_the_same_event_order(tmp_path):
    job = Job("replay")
    endpoints(job)
    job.task("a", "w0", 0.01)
    job.task("b", "w1", 0.03)
    job.flow("ab", "w0", "w1", 300_000, ["a"])
    job.flow("ba", "w1", "w2", 900_000, ["b"])
    job.task("c", "w2", 0.01, ["ab", "ba"])
    job.flow("c3", "w2", "w3", 100_000, ["c"])
    job.save(tmp_path / "job.json")
    with Testbed(SPEC, scale=K) as tb:
        first = run(job, by_name("fifo"), tb)
        second = run(Job.load(tmp_path / "job.json"), by_name("fifo"), tb)
    assert [(w, i) for _, w, i in first.events] == [(w, i) for _, w, i in second.events]


def test_agents_apply_link_latency_when_asked():
    latency = 5e-3  # per link, model seconds: a flow crosses 2 links on one switch
    spec = ClusterSpec.from_dict(
        {"servers": [{"count": 2, "nic_rate": LINK}], "fabric": {"type": "single_switch", "latency": latency}}
    )
    job = Job("lat")
    endpoints(job, 2)
    job.flow("f", "w0", "w1", 1_000_000)
    with Testbed(spec, scale=K, latency="agents") as tb:
        res = run(job, by_name("fifo"), tb)
    assert tb.latency_mode == "agents"
    assert any("traffic agents" in n for n in res.notes)
    assert res.items["f"].duration == pytest.approx(ideal(1_000_000, LINK) + 2 * latency, rel=0.05)


def test_ctrl_c_during_a_cli_run_cleans_up(tmp_path):
    scenario = {
        "name": "interrupt",
        "cluster": SPEC.to_dict(),
        "job": {"generator": "all_to_all", "args": {"n": 4, "size": "20MB"}},
        "schedulers": ["fifo"],
        "scale": K,
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "run", str(path), "--out", str(tmp_path / "out")],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:
        if line.startswith("running fifo"):
            break
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert time.monotonic() - sent < 10


def test_cli_run_writes_a_results_directory(tmp_path):
    from railbed.results import RunResult

    scenario = {
        "name": "tiny",
        "cluster": SPEC.to_dict(),
        "job": {"generator": "all_to_all", "args": {"n": 3, "size": "500KB", "compute": 0.005, "iterations": 2}},
        "schedulers": ["fifo", "tag-priority"],
        "scale": K,
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "run", str(path), "--out", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "fifo" in (out / "comparison.txt").read_text() and "tag-priority" in proc.stdout
    for sched in ("fifo", "tag-priority"):
        res = RunResult.load(out / sched / "result.json")
        assert res.scheduler == sched and len(res.flow_completion_times()) == 12
        assert res.fidelity_report["samples"] >= 2 and res.links
        check_analysis(res, out / sched / "summary.txt")
    assert len(Job.load(out / "job.json")) == 18


def check_analysis(res, summary) -> None:
    """An emulated run's analysis (railbed/analysis.py) with sane values. The job: each of 3
    servers computes 5 ms, then sends 500 KB to the two others (EP), twice; so without a
    network it takes 10 ms exactly, and with one (1 Gbit/s NICs, two flows out and two in per
    NIC) longer."""
    a = res.analysis
    assert a["network_free_makespan"] == pytest.approx(0.010, rel=1e-9)
    assert a["max_speedup"] == pytest.approx(res.makespan / 0.010) and a["max_speedup"] > 1.2
    cp = a["critical_path"]
    assert sum(cp["time"].values()) == pytest.approx(res.makespan, rel=1e-9)
    # both compute phases are on it; an emulated task ends at its deadline or a little after (real waits)
    assert 0.010 * (1 - 1e-9) <= cp["time"]["compute"] < 0.011
    assert 0 < a["exposed_comm_fraction"] < 1 and cp["time"]["EP"] > 0
    assert cp["items"][0].startswith("i0.c") and cp["items"][-1].startswith("i1.f")
    assert a["overlap"]["types"] == ["EP"] and 0 <= a["overlap"]["share"]["EP"]["EP"] < 0.5  # iterations barely meet
    assert a["contention"]["method"].startswith("estimate") and a["contention"]["share"] == 0  # one type only
    text = summary.read_text()
    assert "max speedup" in text and "exposed comm" in text
