"""LEO's path selection: eq. 6.5 and k_hat on a hand-computed sequence, kernel == reference,
the MILP (eqs. 6.1-6.4) == brute force, the schedulers in a simulated run."""

import numpy as np
import pytest

from railbed.spec import ClusterSpec
from schedulers import by_name
from schedulers.leo import PATHS, LeoLiteral
from schedulers.leo_alg import (
    LpInstance,
    brute_force,
    lp_choose,
    lp_cost,
    toll_choice,
    toll_choice_reference,
    update_khat,
)
from simulator import simulate
from workloads.requests import requests


def test_toll_heuristic_and_khat_by_hand():
    # T = [4, 3, 2, 1] us, Q_toll = [1, 2, 3, 4] us: idle paths favour acc-acc (T = 1)
    base = np.array([4.0, 3.0, 2.0, 1.0])
    toll = np.array([1.0, 2.0, 3.0, 4.0])
    khat = np.zeros(4)
    every = np.arange(4)
    assert toll_choice(base, toll, khat, every) == 3
    update_khat(khat, 3, measured=1.5, base=1.0)  # queued: k_hat[acc-acc] = 1 -> 1*4 + 1 = 5
    assert khat.tolist() == [0, 0, 0, 1]
    assert toll_choice(base, toll, khat, every) == 2  # acc-cpu: 0*3 + 2 = 2
    update_khat(khat, 2, measured=2.5, base=2.0)  # acc-cpu queued too: 1*3 + 2 = 5
    assert toll_choice(base, toll, khat, every) == 1  # cpu-acc: 3
    update_khat(khat, 3, measured=1.2, base=1.0)  # acc-acc again: k_hat 2 -> 2*4 + 1 = 9
    update_khat(khat, 1, measured=3.0, base=3.0)  # cpu-acc did not queue: stays 0
    assert khat.tolist() == [0, 0, 1, 2]
    assert toll_choice(base, toll, khat, every) == 1
    update_khat(khat, 3, measured=1.0, base=1.0)  # acc-acc drained: reset, 0*4 + 1 = 1
    assert khat.tolist() == [0, 0, 1, 0]
    assert toll_choice(base, toll, khat, every) == 3
    assert toll_choice(base, toll, khat, np.array([0, 2])) == 0  # only the allowed ones: 4 < 1*3 + 2


@pytest.mark.parametrize("seed", range(20))
def test_toll_kernel_matches_reference(seed):
    rng = np.random.default_rng(seed)
    base, toll = rng.uniform(0, 5, 4), rng.uniform(0, 5, 4)
    khat = rng.integers(0, 4, 4).astype(float)
    if seed % 3 == 0:
        base[:] = 1.0  # ties: the first allowed wins
        toll[:] = 0.0
    allowed = np.sort(rng.choice(4, size=int(rng.integers(1, 5)), replace=False))
    assert toll_choice(base, toll, khat, allowed) == toll_choice_reference(base, toll, khat, allowed)


@pytest.mark.parametrize("seed", range(25))
def test_milp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    r, p, e = 2, 4, 5
    k = int(rng.integers(1, 5))
    T = rng.uniform(1, 3, (r, p))
    T[1, rng.integers(0, p)] = np.nan  # type 1 may not take one path
    w = rng.uniform(0, 2, (r, p, e)) * (rng.random((r, p, e)) < 0.5)
    cap = rng.integers(1, 3, e).astype(float)
    backlog = rng.uniform(0, 2, e) * (rng.random(e) < 0.5)
    inst = LpInstance(T, w, cap, backlog, np.cumsum(rng.exponential(0.5, k)), rng.integers(0, r, k))
    value, choice = lp_choose(inst)
    best, _ = brute_force(inst)
    assert value == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert lp_cost(inst, choice) == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert all(not np.isnan(T[inst.rtype[t], choice[t]]) for t in range(k))


def test_lp_sees_the_toll_the_greedy_misses():
    # one element (cap 1); path 0 costs T = 1 and leaves 3 of work; path 1 costs T = 2 and leaves none.
    # Greedy (k = 1) takes path 0 and the next request, 1 later, waits 2 -> total 1 + 3 = 4 at best;
    # the 2-step optimum takes path 1 first: 2 + 1 = 3.
    T = np.array([[1.0, 2.0]])
    w = np.array([[[3.0], [0.0]]])
    two = LpInstance(T, w, np.ones(1), np.zeros(1), np.array([0.0, 1.0]), np.zeros(2, int))
    assert lp_choose(two) == (pytest.approx(3.0), [1, 0])
    one = LpInstance(T, w, np.ones(1), np.zeros(1), np.array([0.0]), np.zeros(1, int))
    assert lp_choose(one)[1] == [0]


def cluster(acc_cores=24):
    return ClusterSpec.from_dict(
        {
            "servers": [
                {"gpus": 0, "nic_rate": "100Gbit", "datapath": {"preset": "f-nic", "jitter": ["3us", "9us"]}},
                {"gpus": 0, "nic_rate": "100Gbit", "datapath": {"preset": "f-nic", "acc_cores": acc_cores}},
            ],
            "fabric": {"type": "single_switch"},
        }
    )


@pytest.mark.parametrize("name", ["leo", "leo-literal", "leo-lp", "greedy-intra", "greedy-e2e", "cpu-only", "acc-only"])
def test_every_request_keeps_one_path_and_puts_stay_on_the_cpu(name):
    job = requests("kvs-b", load=60e6, requests=300, keys=50)
    res = simulate(job, by_name(name), cluster())
    for i in range(300):
        paths = {res.items[f"q{i}.{k}{d}"].option for k in (0, 1) for d in "ob"}
        assert len(paths) == 1
        if job.items[f"q{i}.0o"].tags["rtype"] == "put":
            assert paths <= {"cpu-cpu", "acc-cpu"}
    used = {res.items[f"q{i}.0o"].option for i in range(300)}
    if name == "cpu-only":
        assert used == {"cpu-cpu"}
    if name == "acc-only":
        assert used <= {"acc-acc", "acc-cpu"}


def test_leo_learns_khat_from_completions():
    sched = LeoLiteral()
    seen = []
    completed = sched.completed
    sched.completed = lambda *a: (completed(*a), seen.append(sched.khat.max()))
    res = simulate(requests("kvs-c", load=6e6, requests=1500), sched, cluster(1))  # over the FPGA's 5 Mops
    assert set(sched.costs["get"]) == set(PATHS)
    t, toll = sched.costs["get"]["acc-acc"]
    # the accelerator's lookup (one lane: 0.2 us) and the 4 messages' 176 B over two 16 GB/s AXI hops each
    assert toll == pytest.approx(1 / 5e6 + 2 * (8 + 8 + 8 + 64) / 16e9, rel=1e-9)
    assert t == pytest.approx(1 / 5e6 + 8 * 0.5e-6, rel=1e-6)  # + 8 AXI hops' traverse time
    assert len(seen) == 1500 and max(seen) >= 6  # queues were seen, k_hat grew
    assert len({res.items[f"q{i}.0o"].option for i in range(1500)}) > 1  # and moved requests off acc-acc
    assert not sched.chosen and not sched.inflight  # every request completed and released
