"""A claim too large for this machine runs at the largest probed size that fits, and says so
(scenarios.sizeprobe; issue 41, item 2). The fit and the decision by hand-computed numbers; a tiny
claims file through ``reproduce_paper`` with a budget forced small (it falls back) and large (it does not)."""

import re
from pathlib import Path

import pytest

from railbed.errors import SpecError
from scenarios import block
from scenarios.claims import REDUCED_VERDICT, load_claims
from scenarios.reproduce import reproduce_paper
from scenarios.sizeprobe import BUDGET_ENV, Build, Decision, decide, next_fits, power_law, reduced_text
from scenarios.sweep import get_dotted
from workloads import generate

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "scenarios" / "crosscheck-small.yaml"


def test_the_power_law_goes_through_the_last_two_points():
    assert power_law((1, 10), (2, 20), 8) == pytest.approx(80)  # linear: k = 1
    assert power_law((0.01, 100), (0.02, 400), 1.0) == pytest.approx(400 * 50**2)  # 4x per doubling: k = 2
    assert power_law((1, 30), (2, 20), 8) == pytest.approx(20)  # a shrinking quantity is held (k >= 0)
    assert power_law((1, 0), (2, 4), 4) == pytest.approx(16)  # 0 read as 1: k = 2


def _b(size, items, deps, gb):
    return Build(size, items, deps, int(gb * 1e9))


def test_the_decision_runs_at_the_claims_size_or_the_largest_probe_that_fits():
    one = [[_b(0.25, 100, 10, 1), _b(0.5, 200, 40, 2)]]  # items x2, deps x4, memory x2 per doubling
    fits = decide(one, 1.0, 5e9)
    assert fits.fits and fits.size == 1.0
    assert (fits.items, fits.deps, fits.bytes) == pytest.approx((400, 160, 4e9))
    assert fits.probed == (0.25, 0.5)
    three = [[_b(0.125, 50, 10, 0.1), *one[0]]]  # an earlier, flatter point: only the last two count
    assert (decide(three, 1.0, 5e9).deps, decide(three, 1.0, 5e9).bytes) == pytest.approx((160, 4e9))
    assert decide(one, 1.0, 3e9).size == 0.5 and not decide(one, 1.0, 3e9).fits  # 4 GB > 3; 2 GB fits
    assert decide(one, 1.0, 1.5e9).size == 0.25 and decide(one, 1.0, 1.5e9).size_fits
    none = decide(one, 1.0, 0.5e9)
    assert none.size == 0.25 and not none.size_fits  # nothing fits: the smallest probed
    # two points of a sweep: the estimate is the larger, a value must fit at both
    two = [*one, [_b(0.25, 100, 10, 2), _b(0.5, 200, 40, 8)]]
    d = decide(two, 1.0, 5e9)
    assert d.bytes == pytest.approx(32e9) and d.size == 0.25  # 0.5 took 8 GB at the second point


def test_memory_grows_no_faster_than_the_items_or_their_dependencies():
    noisy = [_b(1, 100, 100, 0.001), _b(2, 200, 400, 0.064)]  # memory 64x per doubling: capped at deps' 4x
    assert decide([noisy], 4, 1e12).bytes == pytest.approx(0.064e9 * 2**2)
    slow = [_b(1, 100, 100, 1), _b(2, 200, 400, 1.5)]  # slower than the deps: its own exponent
    assert decide([slow], 4, 1e12).bytes == pytest.approx(1.5e9 * 1.5)


def test_probing_stops_before_a_size_estimated_over_the_budget():
    builds = [_b(0.25, 10, 10, 1), _b(0.5, 20, 40, 4)]  # memory 4x per doubling (as deps): 16 GB at 1.0
    assert not next_fits(builds, 1.0, 10e9) and next_fits(builds, 1.0, 20e9)
    assert next_fits(builds[:1], 100.0, 1.0)  # one build says nothing yet


def test_the_rows_words_carry_the_probes_numbers():
    d = Decision(1.0, 0.01, False, 8.3e6, 1.9e11, 1234e9, 10e9, (0.002, 0.005, 0.01))
    assert reduced_text(d, "job.args.scale") == (
        "cannot run here: the claims' size (scale 1) needs about 8.3 M items, 1.9e+11 dependencies, ~1,234 GB to "
        "build (extrapolated from scale 0.002-0.01, measured; budget 10 GB); ran at scale 0.01, "
        "the largest probed size that fits"
    )


CLAIMS = f"""
claims:
  - id: prio
    claim: priority helps
    paper: {{value: -10, unit: '%', source: Fig. 1}}
    scenario: {SCENARIO}
    scheduler: tag-priority
    relative_to: fifo
    metric: makespan
    set: {{job.args.microbatches: 16}}
    size_probe: {{set: job.args.microbatches, values: [1, 2]}}
"""


def _run(tmp_path, monkeypatch, budget_gb):
    papers = tmp_path / "papers"
    (papers / "dgtp").mkdir(parents=True, exist_ok=True)
    (papers / "dgtp" / "claims.yaml").write_text(CLAIMS)
    monkeypatch.setenv(BUDGET_ENV, str(budget_gb))
    said = []
    _, (row,) = reproduce_paper("dgtp", tmp_path / f"out{budget_gb}", False, False, said.append, papers, plots=False)
    return row, said


def _items(microbatches: int) -> tuple[int, int]:
    args = {**get_dotted(block.yaml.safe_load(SCENARIO.read_text()), "job.args"), "microbatches": microbatches}
    job = generate("hybrid_parallel", args, "job")
    return len(job.items), sum(len(i.deps) for i in job.items.values())


def test_a_claim_too_large_for_the_budget_runs_at_a_probe_size_and_gives_no_verdict(tmp_path, monkeypatch):
    row, said = _run(tmp_path, monkeypatch, 0)  # a budget nothing fits
    assert get_dotted(row.best.source, "job.args.microbatches") == 1  # the run was at the probe value
    assert row.verdict == REDUCED_VERDICT and row.value is not None
    assert row.ran.endswith("; reduced size: job.args.microbatches 1 (the claims' 16 does not fit here)")
    (i1, d1), (i2, d2) = _items(1), _items(2)  # what the probe built, measured here again
    assert f"size probe: job.args.microbatches 1: {i1:,} items, {d1:,} dependencies" in "\n".join(said)
    items = power_law((1, i1), (2, i2), 16)
    words = re.search(r"; (cannot run here: .*)$", row.fidelity).group(1)
    assert words.startswith(f"cannot run here: the claims' size (microbatches 16) needs about {items:.0f} items, "
                            f"{power_law((1, d1), (2, d2), 16):.2g} dependencies, ~")  # fmt: skip
    assert "(extrapolated from microbatches 1-2, measured; budget 0 GB)" in words
    assert words.endswith("ran at microbatches 1, the smallest probed (none fits)")
    assert block._column(row.verdict) == "reduced size: no verdict" and block._rank(row.verdict) == 1


def test_a_claim_that_fits_runs_at_the_claims_size(tmp_path, monkeypatch):
    row, said = _run(tmp_path, monkeypatch, 1000)
    assert get_dotted(row.best.source, "job.args.microbatches") == 16
    assert row.verdict in ("holds", "does not hold") and "reduced" not in row.ran
    assert "cannot run here" not in row.fidelity and "size probe of prio: fits" in "\n".join(said)


@pytest.mark.parametrize(
    "probe, field",
    [
        ("[1, 2]", "claims[0].size_probe"),
        ("{set: job.args.microbatches}", "claims[0].size_probe.values"),
        ("{set: job.args.microbatches, values: [2, 1]}", "claims[0].size_probe.values"),
        ("{set: job.args.microbatches, values: [0, 1]}", "claims[0].size_probe.values"),
        ("{set: scale, values: [1, 2]}", "claims[0].size_probe.set"),
        ("{set: job.args.microbatches, values: [1, 2], at: 3}", "claims[0].size_probe.at"),
    ],
)
def test_a_bad_size_probe_names_its_field(tmp_path, probe, field):
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS.replace("{set: job.args.microbatches, values: [1, 2]}", probe))
    with pytest.raises(SpecError) as e:
        load_claims(path)
    assert e.value.field == field


def test_a_size_probe_cannot_set_a_sweep_axis(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS.replace("metric: makespan", "metric: makespan\n    kind: up_to\n"
                                   "    sweep: {job.args.microbatches: [8, 16]}"))  # fmt: skip
    with pytest.raises(SpecError) as e:
        load_claims(path)
    assert e.value.field == "claims[0].size_probe.set"


def test_the_summary_counts_a_reduced_row_as_not_judged_in_a_column_of_its_own():
    row = "| {} | r | p | 1x | {} | - | - | `c` |"
    head = "| claim | ran | paper | railbed | verdict | room (baseline) | fidelity | command |\n| --- |\n"
    quick = head + row.format("a", "quick: no verdict") + "\n" + row.format("b", "quick: no verdict")
    full = head + row.format("a", REDUCED_VERDICT) + "\n" + row.format("b", "holds")
    lines = block.summary({("p", " --quick"): quick, ("p", ""): full}, ("p",))
    assert lines[0].endswith("| measured | reduced size: no verdict |")
    counts = dict(zip((*block.COLUMNS, block.REDUCED_COLUMN), lines[2].strip(" |").split(" | ")[2:]))
    assert counts["claims"] == "2" and counts["hold"] == "1" and counts[REDUCED_VERDICT] == "1"
    assert counts["quick: no verdict"] == "0"  # the paper-size section's reduced row, not the quick one
    without = block.summary({("p", " --quick"): quick}, ("p",))  # no reduced row: today's columns
    assert without[0] == "| paper | sections | " + " | ".join(block.COLUMNS) + " |"


def test_the_budget_is_half_the_machines_memory_not_what_is_free(monkeypatch):
    """Two sections made at once saw less MemAvailable than one alone and could run another
    size: the budget is half of MemTotal, the same whatever runs beside the probe."""
    import scenarios.sizeprobe as sizeprobe

    monkeypatch.delenv(BUDGET_ENV, raising=False)
    seen = []
    monkeypatch.setattr(sizeprobe, "meminfo", lambda key: seen.append(key) or 24e9)
    assert sizeprobe.budget_bytes() == 12e9 and seen == ["MemTotal"]
    monkeypatch.setattr(sizeprobe, "meminfo", lambda key: float("inf"))
    with pytest.raises(SpecError, match="MemTotal"):
        sizeprobe.budget_bytes()
    monkeypatch.setenv(BUDGET_ENV, "3")
    assert sizeprobe.budget_bytes() == 3e9


def test_a_full_size_rows_probe_builds_its_arrays_and_compacts_them_under_its_scheduler(tmp_path, monkeypatch):
    """A ``full_size`` row's job is built as arrays (``Claim.arrays``) and compacted before it runs:
    its probe builds the arrays (a ``Job`` of its size is refused) and compacts them under the row's
    scheduler, so the memory it measures is the run's largest stage, not the arrays' alone
    (Hermod's Fig. 5.12 rows at 8192 GPUs: the arrays are a third of the run's peak)."""
    import scenarios.sizeprobe as sizeprobe
    from scenarios.runner import Scenario
    from simulator.rules.backend import FluidRules
    from tests.test_reproduce import TINY_MOE
    from workloads import generate_arrays

    (tmp_path / "moe.yaml").write_text(TINY_MOE)
    papers = tmp_path / "papers"
    (papers / "hermod").mkdir(parents=True)
    (papers / "hermod" / "claims.yaml").write_text(
        "claims:\n  - {claim: c, paper: {value: 1.5, unit: speedup, source: Fig. 1}, "
        f"scenario: {tmp_path / 'moe.yaml'}, scheduler: hermod, relative_to: megatron, metric: makespan, "
        "engine: compact, full_size: true, set: {job.args.microbatches: 8}, "
        "size_probe: {set: job.args.microbatches, values: [1, 2]}}\n"
    )
    monkeypatch.setenv(BUDGET_ENV, "0")  # nothing fits: the row runs at the smallest probe value
    said = []
    _, (row,) = reproduce_paper("hermod", tmp_path / "out", False, False, said.append, papers, plots=False,
                                full_size=True)  # fmt: skip
    assert row.verdict == REDUCED_VERDICT and get_dotted(row.best.source, "job.args.microbatches") == 1
    assert (row.run_dir / "hermod" / "items.npz").exists()  # it ran as arrays
    aj = generate_arrays("moe_training", {**block.yaml.safe_load(TINY_MOE)["job"]["args"], "microbatches": 2})
    assert f"size probe: job.args.microbatches 2: {aj.items:,} items, {len(aj.deps):,} dependencies" in "\n".join(said)
    compacted = []  # in this process: the child's function, its engine's compaction seen
    monkeypatch.setattr(FluidRules, "prepare", lambda self, aj, s, c, o: compacted.append((s.name, c.name, o.policy)))
    sc = Scenario.from_dict(block.yaml.safe_load(TINY_MOE), tmp_path, arrays="always")
    assert sc.job is None and sizeprobe._arrays_built(sc, "hermod", "fluid-rules") == (aj.items, len(aj.deps))
    assert compacted == [("hermod", sc.cluster.name, "dscp-priority")]
    assert sizeprobe._arrays_built(sc, None, "fluid-rules") == (aj.items, len(aj.deps)) and len(compacted) == 1
    assert sizeprobe._arrays_built(sc, "hermod", None) == (aj.items, len(aj.deps)) and len(compacted) == 1


def test_the_probe_imports_no_engine_so_every_sections_digest_need_not_hold_one():
    """The probe reaches the compact engine by the claim's engine name (``railbed.backend``), not
    by an import: through ``scenarios.reproduce`` every section's digest holds the probe's module,
    and an import there would put ``simulator.rules`` into every section's digest (a change to the
    compact engine would then stale LEO's and the GNN papers' sections, whose runs never reach it)."""
    from scenarios.block import code_modules

    modules = code_modules("leo", "", ROOT / "scenarios", ROOT)
    assert "scenarios.sizeprobe" in modules and not any(m.startswith("simulator.rules") for m in modules)


def test_a_size_probe_on_an_emulated_row_names_its_field(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS.replace("metric: makespan", "metric: makespan\n    backend: emulate"))
    with pytest.raises(SpecError) as e:
        load_claims(path)
    assert e.value.field == "claims[0].size_probe" and "emulated" in e.value.message
