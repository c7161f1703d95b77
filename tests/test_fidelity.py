"""Pure parts of the fidelity report: interval overlap between NIC groups."""

import os
import random

import pytest

pytest.importorskip("pyroute2")

from emulator.fidelity import _merge, _overlapping  # noqa: E402


def brute(segments):
    out = set()
    for a in segments:
        for b in segments:
            if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]:
                out.update((a[2], b[2]))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_labels_that_overlap_another_label_match_brute_force(seed):
    rng = random.Random(seed)
    segments = []
    for label in range(rng.randint(1, 6)):
        ivs = []
        for _ in range(rng.randint(1, 4)):
            a = rng.uniform(0, 10)
            ivs.append((a, a + rng.uniform(0.01, 3)))
        segments += [(a, b, label) for a, b in _merge(ivs)]
    assert _overlapping(segments) == brute(segments)


def test_tcp_counters_are_read_by_name_from_line_pairs():
    from emulator.fidelity import RTO_COUNTERS, parse_counters, tcp_counters

    text = (
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm RtoMin RetransSegs InErrs\nTcp: 1 200 17 0\n"
        "TcpExt: TCPSackFailures SyncookiesSent TCPTimeouts\nTcpExt: 2 9 5\n"
    )
    assert parse_counters(text) == {"RetransSegs": 17, "TCPSackFailures": 2, "TCPTimeouts": 5}
    live = tcp_counters(os.getpid())  # this process's namespace: every counter this kernel has
    assert {"RetransSegs", "TCPSynRetrans", *RTO_COUNTERS} <= set(live) and all(v >= 0 for v in live.values())


def test_retransmission_timeouts_are_summed_and_warned_about():
    from emulator.fidelity import Sample, fidelity_report

    samples = [Sample(0.0, {}, (0, 10)), Sample(1.0, {}, (5, 20))]
    tcp = {"RetransSegs": 9, "TCPTimeouts": 2, "TCPSackFailures": 1, "TCPSpuriousRTOs": 1}
    _, fid = fidelity_report(samples, {}, {}, {}, tcp=tcp, rto_min_model=200e-6)
    assert fid["ok"] and fid["tcp_retransmits"] == 9 and fid["tcp_timeouts"] == 3
    assert fid["warnings"] == [
        "3 TCP retransmission timeouts (1 found spurious): each stalled a flow for at least 200 us of model time"
    ]
    _, syn = fidelity_report(samples, {}, {}, {}, tcp={"TCPSynRetrans": 2}, syn_timeout_model=2e-3)
    assert syn["tcp_syn_retransmits"] == 2 and syn["tcp_timeouts"] == 0
    assert syn["warnings"] == [
        "2 SYN retransmissions: each held a connection (a flow's start) for at least 2 ms of model time"
    ]
    _, quiet = fidelity_report(samples, {}, {}, {})
    assert quiet["tcp_timeouts"] == 0 and quiet["tcp_syn_retransmits"] == 0 and quiet["warnings"] == []


# (tcp counters, drops, makespan, rto_min / k, fluid makespan) of measured runs (docs/fidelity.md,
# "Packet loss"), model seconds; k = 200 unless named
LOSSY_A2A = ({"OutSegs": 71823, "RetransSegs": 3445, "TCPTimeouts": 2}, 2309, 8.628e-3, 25e-6, 8.030e-3)
LONE_STEP_DOWN = ({"OutSegs": 31910, "RetransSegs": 861}, 854, 5.614e-3, 25e-6, 5.613e-3)
CPU_BOUND_RING = ({"OutSegs": 89916, "RetransSegs": 140, "TCPTimeouts": 1}, 0, 2.871e-3, 25e-6, 1.403e-3)
INCAST_K1000 = ({"OutSegs": 69113, "RetransSegs": 1208, "TCPTimeouts": 16}, 1144, 1.455e-3, 5e-6, 1.338e-3)


@pytest.mark.parametrize(
    "case, flagged",
    [(LOSSY_A2A, True), (LONE_STEP_DOWN, False), (CPU_BOUND_RING, False), (INCAST_K1000, True)],
    ids=["lossy-all-to-all", "lone-step-down", "cpu-bound-ring", "incast-k1000"],
)
def test_loss_verdict_on_measured_runs(case, flagged):
    from emulator.fidelity import loss_verdict

    tcp, drops, makespan, rto, fluid = case
    loss, text = loss_verdict(tcp, drops, makespan, rto, fluid)
    assert loss["flagged"] is flagged and (text is not None) is flagged
    assert loss["excess_over_fluid"] == pytest.approx(makespan / fluid - 1)
    assert loss["resent_share"] == pytest.approx(tcp["RetransSegs"] / tcp["OutSegs"])
    assert loss["stall_floor"] == pytest.approx(min(tcp.get("TCPTimeouts", 0), drops) * rto)
    if flagged:
        assert text.startswith("packet loss cost a measurable share of the makespan: ")
        assert f"{drops} packets dropped" in text and "above the fluid model's" in text and "larger k" in text
    _, without_fluid = loss_verdict(tcp, drops, makespan, rto)  # only the timeouts' floor can flag then
    assert (without_fluid is not None) == (loss["stall_floor_share"] >= 0.01)


def test_loss_verdict_thresholds_are_inclusive_and_spurious_timeouts_stall_nothing():
    from emulator.fidelity import LOSS_EXCESS, LOSS_RESENT, LOSS_RTO_SHARE, loss_verdict

    at = {"OutSegs": 1000, "RetransSegs": round(1000 * LOSS_RESENT)}
    assert loss_verdict(at, 5, 1.0 + LOSS_EXCESS, 0.0, 1.0)[0]["flagged"]
    assert not loss_verdict(at, 5, 1.0 + LOSS_EXCESS - 1e-9, 0.0, 1.0)[0]["flagged"]
    below = {"OutSegs": 1000, "RetransSegs": round(1000 * LOSS_RESENT) - 1}
    assert not loss_verdict(below, 5, 2.0, 0.0, 1.0)[0]["flagged"]  # slow, but hardly any loss
    rto = {"OutSegs": 1000, "TCPTimeouts": 4}
    loss, text = loss_verdict(rto, 4, 4 * 25e-6 / LOSS_RTO_SHARE, 25e-6)
    assert loss["flagged"] and loss["stall_floor_share"] == pytest.approx(LOSS_RTO_SHARE) and "4 retransmission" in text
    spurious, _ = loss_verdict({**rto, "TCPSpuriousRTOs": 4}, 4, 4 * 25e-6 / LOSS_RTO_SHARE, 25e-6)
    assert not spurious["flagged"] and spurious["stall_floor"] == 0 and spurious["timeouts"] == 4
    # a timeout for a lost packet needs a dropped one: without drops they were delay spikes
    no_drop, _ = loss_verdict(rto, 0, 4 * 25e-6 / LOSS_RTO_SHARE, 25e-6)
    assert not no_drop["flagged"] and no_drop["stall_floor"] == 0 and no_drop["timeouts"] == 4
    fewer, _ = loss_verdict(rto, 2, 4 * 25e-6 / LOSS_RTO_SHARE, 25e-6)
    assert fewer["stall_floor"] == pytest.approx(2 * 25e-6) and not fewer["flagged"]
    # with the fluid model's makespan, the floor counts only if the run ended >= 1 % after it
    makespan = 4 * 25e-6 / LOSS_RTO_SHARE
    assert loss_verdict(rto, 4, makespan, 25e-6, makespan / (1 + LOSS_RTO_SHARE))[0]["flagged"]
    assert not loss_verdict(rto, 4, makespan, 25e-6, makespan / (1 + LOSS_RTO_SHARE - 1e-6))[0]["flagged"]
    assert not loss_verdict(rto, 4, makespan, 25e-6, makespan * 1.004)[0]["flagged"]  # ended before fluid


def test_the_report_carries_the_loss_verdict_as_a_problem():
    from emulator.fidelity import Sample, fidelity_report

    samples = [Sample(0.0, {}, (0, 10)), Sample(1.0, {}, (5, 20))]
    tcp, drops, makespan, rto, fluid = LOSSY_A2A
    _, fid = fidelity_report(samples, {}, {}, {}, tcp=tcp, rto_min_model=rto, makespan=makespan, fluid_makespan=fluid)
    assert not fid["ok"] and fid["loss"]["flagged"] and fid["problems"][0].startswith("packet loss")
    _, quiet = fidelity_report(samples, {}, {}, {}, tcp=tcp, rto_min_model=rto, makespan=makespan)
    assert quiet["ok"] and not quiet["loss"]["flagged"] and quiet["loss"]["fluid_makespan"] is None


def _leak_samples(high_backlog: int) -> list:
    """One port, class 5 (high) and class 0 (low), 1 s apart: the low class sent 100 kB of the
    port's 1 MB while the high class held ``high_backlog`` packets at both reads."""
    from emulator.fidelity import Sample
    from tc_policies.netlink import ClassCounters, PortCounters

    def port(t, low_bytes, high_bytes):
        classes = {
            0x10: ClassCounters(0x10, low_bytes, 0, 0, 0),
            0x15: ClassCounters(0x15, high_bytes, 0, 0, high_backlog),
        }
        return (t, 0.0, PortCounters(low_bytes + high_bytes, 0, 0, 0, classes, high_backlog))

    key = ("sw0", "sw0-eth0")
    return [Sample(0.0, {key: port(0.0, 0, 0)}, (0, 10)), Sample(1.0, {key: port(1.0, 100_000, 900_000)}, (5, 20))]


@pytest.mark.parametrize("backlog, leaks", [(1, False), (7, False), (8, True), (60, True)])
def test_leakage_counts_intervals_where_the_higher_class_was_really_backlogged(backlog, leaks):
    from emulator.fidelity import fidelity_report

    key = ("sw0", "sw0-eth0")
    links, fid = fidelity_report(_leak_samples(backlog), {key: 8e6}, {key: 8e9}, {key: {0: 0x10, 5: 0x15}})
    assert fid["priority_leakage"] == pytest.approx(0.1 if leaks else 0.0)
    assert fid["ok"] is not leaks and (fid["worst_leakage_port"] == "sw0:sw0-eth0") is leaks


# the DGCL emulation test with an empty numba cache, before the run-time compiled the kernels first
# (model seconds): the latest flow left 6.25 ms late, the makespan 18.36 ms against the fluid's 11.82
HELD = ([(4e-6, "a"), (6.25e-3, "e0.fwd2.k0.7-3"), (30e-6, "b")], 18.36e-3, 11.82e-3)


def test_a_controller_held_mid_run_is_a_problem_when_the_run_ended_late():
    from emulator.fidelity import LAG_SHARE, lag_verdict

    lags, makespan, fluid = HELD
    lag, problem = lag_verdict(lags, makespan, fluid)
    assert lag["start_lag_max"] == 6.25e-3 and lag["start_lag_worst"] == "e0.fwd2.k0.7-3"
    assert lag["start_lag_median"] == 30e-6
    assert problem and "e0.fwd2.k0.7-3" in problem and "6.25 ms" in problem and "34 %" in problem
    assert lag_verdict(lags, makespan)[1]  # without the fluid model's makespan: by the lag alone
    # the same lag on a run that ended on time (the flow was off the critical path), or a lag too small
    assert lag_verdict(lags, makespan, makespan / (1 + LAG_SHARE - 1e-6))[1] is None
    assert lag_verdict(lags, makespan, makespan / (1 + LAG_SHARE))[1]
    assert lag_verdict([(LAG_SHARE * makespan * 0.99, "a")], makespan, fluid)[1] is None
    assert lag_verdict([], makespan, fluid) == ({}, None)


def test_the_report_carries_the_lag_verdict_as_a_problem():
    from emulator.fidelity import Sample, fidelity_report

    samples = [Sample(0.0, {}, (0, 10)), Sample(1.0, {}, (5, 20))]
    lags, makespan, fluid = HELD
    _, fid = fidelity_report(samples, {}, {}, {}, makespan=makespan, fluid_makespan=fluid, start_lags=lags)
    assert not fid["ok"] and fid["problems"][0].startswith("the controller sent flow")
    assert fid["start_lag_max"] == 6.25e-3
    _, quiet = fidelity_report(samples, {}, {}, {}, makespan=makespan, fluid_makespan=fluid, start_lags=lags[:1])
    assert quiet["ok"] and quiet["start_lag_max"] == 4e-6


def test_a_saturated_cpu_is_a_problem_only_when_the_run_diverged():
    from emulator.fidelity import BUSY_EXCESS, CPU_SATURATION_LIMIT, cpu_verdict

    # measured (docs/hermod.md): CPU saturated in 66 % of samples, 390.76 ms against the fluid model's 228.57
    problem = cpu_verdict(0.66, 390.76e-3, 228.57e-3)
    assert problem and "66% of samples" in problem and "71.0 % above" in problem
    assert cpu_verdict(0.66, 390.76e-3) is None  # nothing to compare with: the warning only
    assert cpu_verdict(CPU_SATURATION_LIMIT, 2.0, 1.0) is None  # not saturated enough
    assert cpu_verdict(0.66, 1 + BUSY_EXCESS - 1e-9, 1.0) is None  # kept up
    assert cpu_verdict(0.66, 1 + BUSY_EXCESS, 1.0)


def test_the_report_carries_the_cpu_verdict_unless_loss_or_lag_explain_the_run():
    from emulator.fidelity import Sample, fidelity_report

    busy = [Sample(float(t), {}, (10 * t, 10 * t)) for t in range(5)]  # busy every interval
    _, fid = fidelity_report(busy, {}, {}, {}, makespan=0.39, fluid_makespan=0.23)
    assert not fid["ok"] and fid["problems"][0].startswith("host CPU >= 95% busy in 100% of samples")
    _, on_time = fidelity_report(busy, {}, {}, {}, makespan=0.24, fluid_makespan=0.23)
    assert on_time["ok"] and on_time["warnings"][0].startswith("host CPU")
    idle = [Sample(float(t), {}, (t, 10 * t)) for t in range(5)]
    assert fidelity_report(idle, {}, {}, {}, makespan=0.39, fluid_makespan=0.23)[1]["ok"]
    lags = [(0.1, "late")]  # the controller's lag explains it: one problem, not two
    _, lagged = fidelity_report(busy, {}, {}, {}, makespan=0.39, fluid_makespan=0.23, start_lags=lags)
    assert len(lagged["problems"]) == 1 and lagged["problems"][0].startswith("the controller sent flow")
