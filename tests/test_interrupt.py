"""Ctrl-C reaches a run inside the compact engine's kernel (issue 42): the kernel runs in a
worker thread without the GIL and stops when asked; the results folder's ``PARTIAL`` marker
says the model time it reached. A child process runs a long kernel; the test sends SIGINT."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import simulator.rules.run as compact_module
from railbed.job import Job
from railbed.spec import ClusterSpec
from schedulers import by_name
from simulator.rules import compact, run_compact

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys
from pathlib import Path
from railbed.spec import ClusterSpec
from scenarios.runner import Scenario, results_dir
from schedulers import by_name
from simulator.rules import compact, run_compact

out = Path(sys.argv[1])
cluster = ClusterSpec.load("examples/rail-4x4.yaml")
sys.path.insert(0, str(Path(ROOT) / "tests"))
from test_interrupt import _flows_job as job  # every ordered pair a flow: about one network step per flow
run_compact(compact(job(3), by_name("fifo"), cluster))  # the kernel compiled (or loaded) first
cj = compact(job(150), by_name("fifo"), cluster)
sc = Scenario.from_dict({"name": "long", "cluster": "examples/rail-4x4.yaml",
                         "job": {"generator": "all_to_all", "args": {"n": 2}}, "schedulers": ["fifo"]}, Path(ROOT))
with results_dir(sc, out):
    print("running", flush=True)
    run_compact(cj)
print("finished", flush=True)
"""


def test_sigint_stops_a_long_kernel_within_seconds_and_says_where(tmp_path):
    out = tmp_path / "results"
    child = subprocess.Popen(
        [sys.executable, "-c", "ROOT = " + repr(str(ROOT)) + "\n" + CHILD, str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "running", child.stderr.read()
        time.sleep(1.5)  # inside the kernel: its run takes tens of seconds
        child.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        child.wait(timeout=30)
        waited = time.monotonic() - t0
    finally:
        child.kill()
    stderr = child.stderr.read()
    assert "KeyboardInterrupt" in stderr and "finished" not in child.stdout.read()
    assert waited < 5.0, f"SIGINT took {waited:.1f} s to stop the run"
    marker = (out / "PARTIAL").read_text()
    assert "compact engine stopped at model time" in marker and "items done" in marker


def _flows_job(n: int) -> Job:
    """Every ordered pair of ``n`` endpoints a flow of its own size (all active at once)."""
    j = Job("some")
    for e in range(n):
        j.endpoint(f"e{e}")
    for a in range(n):
        for b in range(n):
            if a != b:
                j.flow(f"f{a}-{b}", f"e{a}", f"e{b}", 1000 + 37 * (a * n + b))
    return j.validate()


def test_the_kernel_in_its_thread_gives_the_run_of_a_direct_call(monkeypatch):
    """One thread runs the kernel, the other waits: every time equal to the bit to a direct call."""
    cj = compact(_flows_job(7), by_name("fifo"), ClusterSpec.load(ROOT / "examples" / "rail-4x4.yaml"))
    threaded = run_compact(cj)
    monkeypatch.setattr(compact_module, "_interruptible", lambda kernel, args, ctl, stats, n: kernel(*args))
    direct = run_compact(cj)
    for a, b in ((threaded.ready, direct.ready), (threaded.start, direct.start), (threaded.end, direct.end)):
        assert np.array_equal(a, b)
    assert threaded.makespan == direct.makespan > 0 and np.array_equal(threaded.link_bits, direct.link_bits)


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # no item ended: the makespan of nothing
def test_a_stop_asked_before_the_kernel_runs_returns_at_once(monkeypatch):
    """The kernel reads ``ctl[0]`` at every event: set, it returns 4 with the model time reached."""
    cj = compact(_flows_job(4), by_name("fifo"), ClusterSpec.load(ROOT / "examples" / "rail-4x4.yaml"))
    seen = {}

    def stopped(kernel, args, ctl, stats, n):
        ctl[0] = 1.0
        seen["code"], seen["time"] = kernel(*args), ctl[1]
        return 0

    monkeypatch.setattr(compact_module, "_interruptible", stopped)
    run = run_compact(cj)
    assert seen == {"code": 4, "time": 0.0} and np.isnan(run.end).all()


def test_ctrl_c_inside_a_numba_function_exits_130_with_the_message(monkeypatch, capsys):
    """Ctrl-C while numba runs Python code (the graph sampler) surfaces as a SystemError whose
    context is the KeyboardInterrupt: the command says "interrupted" and exits 130, and a
    SystemError of any other cause is not swallowed."""
    import importlib

    cli = importlib.import_module("cli.main")

    def stopped(_args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("<numba function> returned a result with an exception set")  # noqa: B904

    def broken(_args):
        raise SystemError("a real one")

    args = cli.build_parser().parse_args(["doctor"])
    monkeypatch.setattr(cli, "build_parser", lambda: _Fixed(args, stopped))
    assert cli.main(["doctor"]) == 130
    assert "interrupted (SIGINT)" in capsys.readouterr().err
    monkeypatch.setattr(cli, "build_parser", lambda: _Fixed(args, broken))
    with pytest.raises(SystemError, match="a real one"):
        cli.main(["doctor"])


class _Fixed:
    """A parser whose arguments run ``func``."""

    def __init__(self, args, func):
        self.args, self.func = args, func

    def parse_args(self, _argv):
        self.args.func = self.func
        return self.args
