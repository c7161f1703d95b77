"""Mechanism tests with known answers (issue 22): the instrument's sensitivity tests.

For each scheduler family a tiny job (``scenarios/mechanisms/*.yaml``, jobs
from :mod:`workloads.mechanisms`) whose time under each scheduler is
computed by hand (the arithmetic is in each :class:`Mechanism`'s ``arithmetic``
and in ``tests/test_mechanisms.py``). The simulator must give it exactly
(1e-9 relative); the emulator within ``band`` (its fidelity band, the
platform's crosscheck target). ``railbed reproduce mechanisms`` puts them in
the report: expected by hand beside each backend's measurement.

A mechanism may list, per scheduler, what it *should* give where railbed
does not yet (``expected`` against ``today``): the report and the tests
show both, and the tests mark that case as an expected failure with the
reason (issue 25: Hermod with PP and DP of one microbatch).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from railbed.results import RunResult, fmt_time
from railbed.units import wire_bytes

HERE = Path(__file__).resolve().parent
BAND = 0.10  # the emulator's band: the platform's crosscheck target (scenarios/platform/claims.yaml)


@dataclass(frozen=True, eq=False)
class Mechanism:
    name: str
    family: str
    scenario: Path
    measure: str  # "makespan", "end:<item id>", "span:<item>:<item>" (end to end) or "jct:<job>" (jobs:)
    expected: Callable[[dict], dict[str, float]]  # the scenario (a mapping) -> scheduler -> seconds
    arithmetic: str  # how, with {fields} of numbers(scenario)
    numbers: Callable[[dict], dict[str, float]]
    today: dict[str, str] = field(default_factory=dict)  # scheduler -> why railbed does not give it yet
    band: float = BAND
    # scheduler -> (numbers key of a lower bound, why): the hand time assumes max-min sharing, which TCP
    # does not give on this job; a packet-level backend is held between that bound and the hand time
    tcp_range: dict[str, tuple[str, str]] = field(default_factory=dict)

    def holds(self, scheduler: str, got: float, packets: bool) -> bool:
        """``got`` (a measured value) agrees with the hand arithmetic: within ``band`` of it, or on a
        packet-level backend, for a ``tcp_range`` scheduler, between its bound and it (each +- band)."""
        sc = self.source()
        expected = self.expected(sc)[scheduler]
        if packets and scheduler in self.tcp_range:
            low = self.numbers(sc)[self.tcp_range[scheduler][0]]
            return low * (1 - self.band) <= got <= expected * (1 + self.band)
        return abs(got / expected - 1) <= self.band

    def value(self, result: RunResult) -> float:
        if self.measure == "makespan":
            return result.makespan
        kind, *ids = self.measure.split(":")
        if kind == "jct":
            return result.jobs["per_job"][ids[0]]["jct"]
        ends = [result.items[i].end for i in ids]
        if any(e is None for e in ends):
            return math.nan
        return ends[0] if kind == "end" else ends[1] - ends[0]

    def source(self) -> dict:
        from railbed.safeload import load_yaml_file

        return load_yaml_file(self.scenario, "scenario")

    def explain(self) -> str:
        """The arithmetic with this scenario's numbers."""
        values = self.numbers(self.source())
        counts = lambda k: k == "n" or k.startswith("n_")  # noqa: E731 - the rest are times
        return " ".join(self.arithmetic.format(**{k: f"{v:g}" if counts(k) else fmt_time(v)
                                                  for k, v in values.items()}).split())  # fmt: skip


def _args(sc: dict) -> dict:
    return sc["job"]["args"]


def _rate(sc: dict) -> float:
    from railbed.units import parse_rate

    return parse_rate(sc["cluster"]["servers"][0]["nic_rate"], "nic_rate")


def _seconds(value) -> float:
    from railbed.units import parse_duration

    return parse_duration(value, "compute")


def _solo(size: int, sc: dict) -> float:
    """A flow alone: its wire bits (TCP payload in full segments plus headers) over the NIC rate."""
    return 8 * wire_bytes(int(size)) / _rate(sc)


def chain_numbers(sc: dict) -> dict[str, float]:
    """c (a task), p (a PP flow alone), g (a DP bucket alone, at most p), n tasks, n_shared PP flows
    0 -> 1 each beside a DP bucket, and the chain's end under fair sharing (a shared PP flow ends
    when both have sent: p + g) and under strict priority (p)."""
    a = _args(sc)
    c, p, n = _seconds(a["compute"]), _solo(a["activation"], sc), int(a["tasks"])
    g = _solo(a.get("gradient", a["activation"]), sc)
    shared = (n - 1 + 1) // 2  # f0, f2, ...: the flows from server 0
    fair = n * c + (n - 1 - shared) * p + shared * (p + g)
    strict = n * c + (n - 1) * p
    return {
        "c": c,
        "p": p,
        "g": g,
        "n": n,
        "n_flows": n - 1,
        "n_shared": shared,
        "n_other": n - 1 - shared,
        "fair": fair,
        "strict": strict,
    }


CHAIN = """c = {c} a task; p = {p} a PP flow alone (8 x wire bytes of the activation over the NIC rate: full
segments of 1448 B with 66 B of headers each); g = {g} a DP bucket alone (g <= p). Each of the {n_shared}
PP flows 0 -> 1 starts with a DP bucket 0 -> 1 (both released by the same task) and shares server 0's
NIC with it; the {n_other} flows 1 -> 0 share nothing. Fair sharing (one class): both at half rate until
the bucket ends, so the PP flow ends when the port has sent both, p + g: the last task ends at {n} c +
{n_other} p + {n_shared} x (p + g) = {fair}. Strict priority for PP: every flow p (a bucket waits, then
leaves during the next tasks): {n} c + {n_flows} p = {strict}."""


def oes_numbers(sc: dict) -> dict[str, float]:
    """s (one flow alone), w (the compute), and the makespans under max-min and OES."""
    a = _args(sc)
    s, w = _solo(a["size"], sc), _seconds(a["compute"])
    return {"s": s, "w": w, "s15": 1.5 * s, "s2": 2 * s, "s3": 3 * s, "solo": max(s + w, 3 * s),
            "fair": max(1.5 * s + w, 3 * s), "oes": max(2 * s + w, 3 * s)}  # fmt: skip


OES = """s = {s} one flow alone at rate B. Flows A->C, B->C, B->D, B->E, all ready at 0. Max-min (distdgl):
B's NIC carries 3 flows (B/3 each), so A->C gets the rest of C's NIC, 2B/3, and ends at 1.5 s = {s15}; the
compute after it ({w}) ends at {fair}; B's flows end at 3 s = {s3}. OES (dgtp-oes, Alg. 1 lines 18-21):
A->C = min(B_in(C) / 2, B_out(A) / 1) = B/2, ends at 2 s = {s2}, the compute at {oes}; B's flows
min(B_in / 1 or 2, B_out(B) / 3) = B/3, end at 3 s. OES leaves B/6 of C's NIC idle. TCP is not max-min
here: B->C crosses two loaded ports and gets less than B/3, A->C more than 2B/3 (proportional fairness
would give 3B/4), so on a packet-level backend distdgl lies between A->C alone (its compute at s + w,
but not before B's flows at 3 s): {solo}, and max-min's {fair}."""


def relay_numbers(sc: dict) -> dict[str, float]:
    """DGX-1 (Table 1 speeds, 1 us per hop, hwmodels/graph.py): GPU 0 -> 5 peer-to-peer through
    gpu0-plx0-cpu0-cpu1-plx2-gpu5 (5 hops, QPI the slowest at 9.56 GB/s); SPST over two NVLinks,
    0 -> 4 (NV2, 48.35 GB/s) then 4 -> 5 (NV1, 24.22 GB/s), one hop and one stage each."""
    from hwmodels.graph import DGCL_TABLE1_GBPS as T1

    a = _args(sc)
    size, w = float(a["size"]), _seconds(a["compute"])
    hop = 1e-6
    p2p = size / (T1["qpi"] * 1e9) + 5 * hop
    nv2, nv1 = size / (T1["nv2"] * 1e9) + hop, size / (T1["nv1"] * 1e9) + hop
    return {"p2p": p2p, "nv2": nv2, "nv1": nv1, "w": w, "p2p_end": p2p + w, "dgcl_end": nv2 + nv1 + w}


RELAY = """One vertex of the job's size on GPU 0, needed by GPU 5 (no NVLink between them). Peer-to-peer:
PCIe, QPI, PCIe, the slowest hop QPI (Table 1, 9.56 GB/s), plus 5 hops of 1 us: {p2p}; then the compute
({w}): {p2p_end}. DGCL (SPST): two stages over NVLinks, 0 -> 4 on NV2 (48.35 GB/s, 1 us): {nv2}, then
4 -> 5 on NV1 (24.22 GB/s, 1 us): {nv1}; with the compute {dgcl_end}. (0 -> 1 -> 5, NV1 then NV2,
costs the same; SPST's tie-break takes 4.)"""


def leo_numbers(sc: dict) -> dict[str, float]:
    """The off-path host's legs (hwmodels/leo.py): a PCIe hop 1 us, an AXI hop 0.5 us (traverse,
    its T); a leg that computes nothing (DMA) crosses the links only; a leg's time is the queues it
    finds plus its T; the link serialization (8 bytes / BW) joins the queues (the toll), not T."""
    from hwmodels import leo

    a, dp = _args(sc), sc["cluster"]["servers"][1]["datapath"]["compute"]["mech"]
    cpu, acc = _seconds(dp["cpu"]), _seconds(dp["acc"])
    out, back, times = int(a["out"]), int(a["back"]), [float(t) for t in a["times"]]
    t_cpu, t_acc = 4 * leo.PCIE_TRAVERSE + cpu, 4 * leo.AXI_TRAVERSE + acc
    axi = leo.AXI_GBPS * 8e9
    toll_acc = acc + 2 * 8 * (out + back) / axi
    net = (8 * wire_bytes(out) + 8 * wire_bytes(back)) / _rate(sc)
    khat = 2.0  # requests 1 and 2 found the accelerator busy (intra-host JCT above T): +1 each
    leo_cpu = khat * toll_acc + t_acc > t_cpu
    return {
        "t_cpu": t_cpu, "t_acc": t_acc, "cpu": cpu, "acc": acc, "toll": toll_acc, "wire": net,
        "cost_acc": khat * toll_acc + t_acc, "w1": acc - (times[1] - times[0]), "w2": 2 * acc - (times[2] - times[0]),
        "leo": (t_cpu if leo_cpu else t_acc) + net, "acc_only": t_acc + net, "cpu_only": t_cpu + net,
    }  # fmt: skip


LEO = """Paths cpu-cpu and acc-acc of two off-path hosts (one core each). T(acc-acc) = 4 AXI hops of 0.5 us
+ the accelerator's {acc} = {t_acc}; T(cpu-cpu) = 4 PCIe hops of 1 us + the CPU's {cpu} = {t_cpu}. Requests
0, 1, 2 all take acc-acc (k_hat = 0: the least T); 1 and 2 find the accelerator busy
({w1} and {w2} of queue), so their intra-host JCT exceeds T and k_hat(acc-acc) becomes 2 (§6.2.2).
Request 3 (the accelerator long idle again): eq. 6.5 gives acc-acc 2 x Q_toll + T = 2 x {toll} +
{t_acc} = {cost_acc} against cpu-cpu's {t_cpu}, so LEO sends it to the CPU: its latency is T(cpu-cpu)
+ the network ({wire}: 64 B and 8 B at 100 Gbit/s with headers) = {leo} (``leo-literal``); acc-only
{acc_only}; cpu-only {cpu_only}. The literal toll, fed by completions, steers away from an accelerator that
is idle again; ``leo``'s ``bound`` variant caps k_hat by the requests in progress (none at request 3), so it
keeps acc-acc: {acc_only}."""


def two_jobs_numbers(sc: dict) -> dict[str, float]:
    """c (a compute), p (a flow alone), n iterations per job, the shift of job b, and each job's JCT:
    alone, unshifted (fifo: flows in step, sharing the port), shifted."""
    job = sc["jobs"][0]
    c, p, n = _seconds(job["args"]["compute"]), _solo(job["args"]["size"], sc), int(job["iterations"])
    shift = float(sc["schedulers"][1]["args"]["shift"])
    return {"c": c, "p": p, "n": n, "shift": shift, "period": c + p, "alone": n * (c + p),
            "fair_period": c + 2 * p, "fair": n * (c + 2 * p), "shifted_b": shift + n * (c + p),
            "n_slowdown": (c + 2 * p) / (c + p)}  # fmt: skip


TWO_JOBS = """Each job: {n} iterations of c = {c} compute, then a flow of p = {p} alone (8 x wire bytes over the
NIC rate), the next compute after it: a period of c + p = {period}, {alone} alone. Both send into server 2
through one switch port. Unshifted (fifo, both arriving at 0): they compute in step, their flows start
together and share the port at half rate (2p each), so every period is c + 2p = {fair_period} and each
JCT {fair}: a slowdown of {n_slowdown}. Shifted (`delay`: job b starts {shift} after its arrival, half a
period): b's flows run while a computes and a's while b computes (a shift s with p <= s <= c never
overlaps), so a ends at {alone} and b at its shift + {alone} = {shifted_b}: both as if alone."""


MECHANISMS = (
    Mechanism(
        "pp-chain", "tag-priority", HERE / "pp-chain.yaml", "end:t8",
        lambda sc: {"fifo": chain_numbers(sc)["fair"], "tag-priority": chain_numbers(sc)["strict"]},
        CHAIN, chain_numbers,
    ),
    Mechanism(
        "pp-chain-hermod", "hermod", HERE / "pp-chain.yaml", "end:t8",
        lambda sc: {"megatron": chain_numbers(sc)["fair"], "hermod": chain_numbers(sc)["strict"],
                    "pp-first": chain_numbers(sc)["strict"]},
        CHAIN + " Hermod: PP of microbatch 0 (MID level 7) above DP of microbatch 1 (level 6): strict.",
        chain_numbers,
    ),
    Mechanism(
        "pp-dp-same-microbatch", "hermod", HERE / "pp-chain-same-microbatch.yaml", "end:t8",
        lambda sc: {"megatron": chain_numbers(sc)["fair"], "hermod": chain_numbers(sc)["strict"],
                    "pp-first": chain_numbers(sc)["strict"]},
        CHAIN + " Issue 25: PP and DP of microbatch 0; Hermod orders PP before DP (CType), so it should give "
        "the strict time.",
        chain_numbers,
    ),
    Mechanism(
        "relay-allgather", "dgcl", HERE / "relay-allgather.yaml", "makespan",
        lambda sc: {"p2p": relay_numbers(sc)["p2p_end"], "dgcl": relay_numbers(sc)["dgcl_end"]}, RELAY,
        relay_numbers,
    ),
    Mechanism(
        "leo-toll", "leo-literal", HERE / "leo-toll.yaml", "span:a3:q3.0b",
        lambda sc: {"leo-literal": leo_numbers(sc)["leo"], "leo": leo_numbers(sc)["acc_only"],
                    "acc-only": leo_numbers(sc)["acc_only"],
                    "cpu-only": leo_numbers(sc)["cpu_only"]}, LEO, leo_numbers,
    ),
    Mechanism(
        "oes-incast", "dgtp-oes", HERE / "oes-incast.yaml", "makespan",
        lambda sc: {"distdgl": oes_numbers(sc)["fair"], "dgtp-oes": oes_numbers(sc)["oes"]}, OES, oes_numbers,
        tcp_range={"distdgl": ("solo", "TCP gives A->C more than max-min's 2B/3 (emulated: A->C ended at "
                                       "11.8-13.1 ms against 15.7 ms, under cubic and bbr)")},
    ),
)  # fmt: skip


_DRIFT = (
    "alone",
    "TCP does not split the port evenly: one job's flow ends first and the jobs drift out of "
    "step, so they share less than in the fluid model's lockstep (packet backend: a 9.65 ms, b 10.55 ms "
    "against 12 ms)",
)


# Several jobs (issue 45); kept out of MECHANISMS until REPRODUCTION.md's mechanisms section is made again
# with them (the lead's: tests/test_reproduction_md.py compares it), tested by tests/test_multijob.py
# and tests/emulation/test_multijob_emulated.py.
JOB_MECHANISMS = (
    Mechanism(
        "two-jobs-a", "multi-job", HERE / "two-jobs.yaml", "jct:a",
        lambda sc: {"fifo": two_jobs_numbers(sc)["fair"], "shifted": two_jobs_numbers(sc)["alone"]},
        TWO_JOBS, two_jobs_numbers, tcp_range={"fifo": _DRIFT},
    ),
    Mechanism(
        "two-jobs-b", "multi-job", HERE / "two-jobs.yaml", "jct:b",
        lambda sc: {"fifo": two_jobs_numbers(sc)["fair"], "shifted": two_jobs_numbers(sc)["shifted_b"]},
        TWO_JOBS, two_jobs_numbers, tcp_range={"fifo": _DRIFT},
    ),
)  # fmt: skip


def cases() -> list[tuple[str, str, str | None]]:
    """(mechanism, scheduler, why railbed does not give it yet or None) of every case the tests run."""
    return [(m.name, s, m.today.get(s)) for m in MECHANISMS for s in m.expected(m.source())]


def by_name(name: str) -> Mechanism:
    return next(m for m in (*MECHANISMS, *JOB_MECHANISMS) if m.name == name)


def run(mech: Mechanism, mode: str, out: Path | None = None) -> dict[str, float]:
    """Scheduler -> the measured value, ``mode`` simulate (fluid) or emulate, in model seconds."""
    import tempfile

    from scenarios.runner import Scenario, run_scenario, simulate_scenario

    sc = Scenario.load(mech.scenario)
    labels = list(mech.expected(mech.source()))
    quiet = lambda _m: None  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="railbed-mechanism-") as tmp:
        where = out or Path(tmp)
        if mode == "simulate":
            results = simulate_scenario(sc, where, echo=quiet, schedulers=labels, plots=False)
        else:
            results = run_scenario(sc, where, echo=quiet, schedulers=labels, plots=False)
    return {r.scheduler: mech.value(r) for r in results}


# ------------------------------------------------------------------ report
@dataclass
class MechanismRow:
    mechanism: Mechanism
    scheduler: str
    expected: float
    simulated: float
    emulated: float | None  # None: not run (no --emulate)

    def verdict(self) -> str:
        m = self.mechanism
        sim_ok = math.isclose(self.simulated, self.expected, rel_tol=1e-9)
        emu = None if self.emulated is None else m.holds(self.scheduler, self.emulated, packets=True)
        words = ["simulator exact" if sim_ok else "simulator differs"]
        if emu is not None:
            within = f"within {100 * m.band:.0f} %"
            if self.scheduler in m.tcp_range:
                within = f"between {m.tcp_range[self.scheduler][0]} and max-min (TCP is not max-min here)"
            words.append(f"emulator {within}" if emu else "emulator outside band")
        if self.scheduler in self.mechanism.today:
            words.append("known gap: " + self.mechanism.today[self.scheduler])
        return "; ".join(words)


def mechanism_rows(emulate: bool, echo: Callable[[str], None] = print) -> list[MechanismRow]:
    rows = []
    for mech in MECHANISMS:
        echo(f"  mechanism {mech.name} ({mech.family})")
        expected = mech.expected(mech.source())
        simulated = run(mech, "simulate")
        emulated = run(mech, "emulate") if emulate else {}
        rows += [MechanismRow(mech, s, v, simulated[s], emulated.get(s)) for s, v in expected.items()]
    return rows


def mechanism_table(rows: list[MechanismRow]) -> list[str]:
    head = "| mechanism | family | scheduler | measured | expected by hand | simulated | emulated | verdict |"
    lines = [head, "|" + " --- |" * 8]
    for r in rows:
        m = r.mechanism
        emulated = "needs --emulate" if r.emulated is None else fmt_time(r.emulated)
        lines.append(f"| {m.name} | {m.family} | {r.scheduler} | {m.measure} | {fmt_time(r.expected)} | "
                     f"{fmt_time(r.simulated)} | {emulated} | {r.verdict()} |")  # fmt: skip
    lines += ["", "How each expected time is computed (`scenarios/mechanisms/__init__.py`):", ""]
    for m in dict.fromkeys(r.mechanism for r in rows):
        lines.append(f"- *{m.name}* (`{m.scenario.relative_to(HERE.parent.parent)}`): {m.explain()}")
    return lines
