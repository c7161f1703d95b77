"""Hermod's scenario files and claims (scenarios/hermod/): every claim loads and names a
scheduler of its scenario; the reduced scenarios load (cluster, job, schedulers) and their
jobs fit their clusters; the full-scale files are well-formed and sized."""

from pathlib import Path

import pytest
import yaml

from railbed.dispatch import check_placement
from railbed.job import Placement
from scenarios.reproduce import load_claims
from scenarios.runner import Scenario
from workloads import SIZE_HINTS
from workloads.moe import crossing, moe_training

LAYOUTS = ("megatron", "dp-outer")

HERE = Path(__file__).resolve().parents[1] / "scenarios" / "hermod"


def test_claims_name_schedulers_their_scenarios_run():
    _, claims, _ = load_claims(HERE / "claims.yaml")
    assert len(claims) >= 20
    for claim in claims:
        names = {s if isinstance(s, str) else s.get("label") or s["name"] for s in _doc(claim.scenario)["schedulers"]}
        assert claim.scheduler in names and claim.relative_to in names, claim.claim


def _doc(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("name", ["testbed-gpt3-sim.yaml", "testbed-gpt3-interleaved-sim.yaml"])
def test_small_scenarios_load_and_fit_their_cluster(name):
    sc = Scenario.load(HERE / name)
    check_placement(sc.job, sc.cluster, Placement({n: e.pin for n, e in sc.job.endpoints.items()}))


def test_full_scale_files_are_sized():
    files = sorted((HERE / "full").glob("sim-*.yaml"))
    assert len(files) == 12
    for f in files:
        doc = _doc(f)
        assert (f.parent / doc["cluster"]).exists()
        assert SIZE_HINTS["moe_training"](**doc["job"]["args"]) > 0


# every scenario file (not the claims, the clusters, or a sweep over a scenario)
RULED = sorted(
    p.name for p in HERE.glob("*.yaml") if p.name != "claims.yaml" and not p.name.startswith(("cluster", "sweep"))
)


# Megatron's two rank orders with its own expert grid first, then with the strided grid (ours)
PREFERENCE = [(lay, "megatron") for lay in LAYOUTS] + [(lay, "strided") for lay in LAYOUTS]


def _orders(args: dict) -> tuple[tuple[str, str], tuple[str, str], dict]:
    """(the rank order and expert grid ``args`` take, the pair the rule takes, what each keeps):
    of Megatron's two orders, each with Megatron-Core's expert grid or the strided one, the pair
    under which more of DP, PP and EP cross servers, the first of :data:`PREFERENCE` on a tie."""
    args = dict(args)
    chosen = (args.pop("layout", "megatron"), args.pop("expert_grid", "megatron"))
    pp = args.get("pp") or __import__("workloads.moe", fromlist=["PRESETS"]).PRESETS[args["model"]]["pp"]
    small = dict(args, layers=pp * args.get("chunks", 1), microbatches=pp if args.get("schedule") else 1,
                 iterations=1)  # fmt: skip
    kept = {
        (lay, grid): len(crossing(moe_training(**small, layout=lay, expert_grid=grid)) & {"DP", "PP", "EP"})
        for lay, grid in PREFERENCE
    }
    return chosen, next(pair for pair in PREFERENCE if kept[pair] == max(kept.values())), kept


@pytest.mark.parametrize("name", RULED)
def test_each_scenario_takes_the_rank_order_that_keeps_most_of_table_5_1s_scopes(name):
    """The thesis names no rank order nor expert grid; Table 5.1 puts DP, PP and EP across servers.
    A scenario takes the pair :func:`_orders` names (workloads/moe.py, "Parallelism" and "Experts";
    scenarios/hermod/README.md)."""
    chosen, best, kept = _orders(_doc(HERE / name)["job"]["args"])
    assert chosen == best, kept


def test_each_claims_points_take_the_rank_order_the_rule_takes():
    """The same rule for what a claim runs: its scenario's args with its ``set`` and each sweep
    point (Fig. 5.8's row sets pp 2 on a t4 p4 file: the order is chosen again). Rows at a tuned
    parameter's value before (``tuned_from``) run the order before by design."""
    from scenarios.reproduce import _mapping

    _, claims, _ = load_claims(HERE / "claims.yaml")
    checked = 0
    for claim in claims:
        if not claim.measured or claim.tuned_from is not None:
            continue
        for point in claim.points():
            job = _mapping(claim, point, False, None)[0]["job"]
            if job.get("generator") != "moe_training":
                continue
            chosen, best, kept = _orders(job["args"])
            assert chosen == best, (claim.id, point, kept)
            checked += 1
    assert checked >= 20


def test_calibration_table_recomputes_the_compute_model_by_hand():
    """GPT-3 175B (TP 8, 2048 tokens per GPU): an attention + MLP layer is 2048 (8 h^2 + 4 s h +
    4 h ffn) FLOPs at 156 TFLOP/s; its PP flow 2048 h bf16 bytes."""
    from scenarios.hermod.calibration import rows

    got = {r["model"]: r for r in rows()}
    h, s = 12288, 2048
    assert got["gpt3-175b"]["attn_ms"] == pytest.approx(2048 * (8 * h * h + 4 * s * h + 16 * h * h) / 156e12 * 1e3)
    assert got["gpt3-175b"]["pp_MB"] == pytest.approx(2048 * h * 2 / 1e6)
    assert set(got) == {"qwen-moe-12l", "qwen-moe-24l", "mixtral-8x7b", "mixtral-8x22b", "gpt3-13b", "gpt3-175b"}


def test_hermod_rows_say_what_sets_the_price_of_a_lost_packet():
    from scenarios.hermod.rows import _backend

    packet = {"backend": "packet", "tcp": "cubic", "packet": {"settings": {"rto_min": 0.0002}}}
    assert _backend(packet) == "packet (cubic, min RTO 200 us)"
    assert _backend({"backend": "emulator", "tcp": "cubic", "scale": 1000.0}) == (
        "emulator (k = 1000, cubic, min RTO 5 ms real = 5 us model)"
    )
    assert _backend({"backend": "fluid"}) == "fluid"
    before = {"backend": "packet", "tcp": "cubic", "counters": {"packet": {"settings": {"rto_min": 0.0002}}}}
    assert _backend(before) == "packet (cubic, min RTO 200 us)"  # counters, tcp beside them
    assert _backend({"backend": "emulate", "tcp": "cubic", "scale": 1000.0}).startswith("emulate (k = 1000, cubic")
    # as a result.json has them now: the TCP in the backend's own counters (railbed.results.CONGESTION)
    now = {"backend": "packet", "counters": {"packet": {"settings": {"rto_min": 0.0002}, "congestion": "dctcp"}}}
    assert _backend(now) == "packet (dctcp, min RTO 200 us)"
    emulated = {"backend": "emulate", "scale": 1000.0, "counters": {"emulate": {"congestion": "reno", "fidelity": {}}}}
    assert _backend(emulated).startswith("emulate (k = 1000, reno, min RTO 5 ms real")


def test_hermod_rows_compare_one_iteration_or_the_mean(tmp_path):
    """``--iteration N`` compares iteration N's times (the first starts a cold pipeline); the seed
    of a routing draw other than 0 is named."""
    import json

    from scenarios.hermod.rows import markdown, row

    args = {"model": "qwen-moe-12l", "dp": 8, "iterations": 2, "seed": 3, "nics_per_server": 2}
    (tmp_path / "scenario.yaml").write_text(json.dumps({"name": "probe", "job": {"args": args}}))
    for name, its in (("megatron", {"0": 2.0, "1": 4.0}), ("hermod", {"0": 3.0, "1": 3.0})):
        (tmp_path / name).mkdir()
        result = {"iterations": its, "makespan": sum(its.values()), "backend": "fluid"}
        (tmp_path / name / "result.json").write_text(json.dumps(result))
    assert row(tmp_path)["change"]["hermod"] == pytest.approx(0.0)  # 3 against 3
    first = row(tmp_path, only=0)
    assert first["change"]["hermod"] == pytest.approx(0.5)  # 3 against 2
    text = markdown([first], ["megatron", "hermod"])
    assert "2 iterations (iteration 0 alone), routing seed 3" in text and "+50.0 %" in text
    assert "ETP" not in text  # no etp given: Megatron-Core's default
    (tmp_path / "scenario.yaml").write_text(json.dumps({"name": "probe", "job": {"args": {**args, "etp": 1}}}))
    assert "order, ETP 1, 8 microbatches" in markdown([row(tmp_path)], ["megatron", "hermod"])


def test_hermod_rows_block_names_the_command_that_remakes_it(tmp_path):
    """The 'Generated by' line of a written block carries every flag that shaped it (columns,
    baseline, iteration): running that command again leaves the page as it is."""
    import json
    import shlex

    from scenarios.hermod.rows import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.yaml").write_text(json.dumps({"name": "p", "job": {"args": {"model": "qwen-moe-12l", "dp": 8}}}))
    for name, t in (("megatron", 2.0), ("lina", 3.0), ("hermod", 1.0)):
        (run / name).mkdir()
        (run / name / "result.json").write_text(json.dumps({"iterations": {"0": t}, "makespan": t}))
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- rows:b:begin -->\n<!-- rows:b:end -->\ny\n")
    main([str(run), "--schedulers", "megatron,lina,hermod", "--baseline", "lina", "--iteration", "0",
          "--write", str(page), "--block", "b"])  # fmt: skip
    first = page.read_text()
    assert "| megatron | lina | hermod |" in first and "-66.7 %" in first  # hermod 1 against lina 3
    command = first.split("Generated by `python -m scenarios.hermod.rows ", 1)[1].split("`", 1)[0]
    main(shlex.split(command))
    assert page.read_text() == first
