"""Job model: building, validation (errors name the field), JSON round trip, public view."""

import json

import pytest

from railbed.errors import SpecError
from railbed.job import Job, Leg, Location, PathOption
from workloads import generate
from workloads.llm import hybrid_parallel


def small_job() -> Job:
    job = Job("small", capacity={"gpu0": 2})
    job.endpoint("a", Location(0, "gpu0", 0))
    job.endpoint("b")
    job.task("t", "a", 1e-3, iteration=0, layer=1, tags={"k": "v"})
    job.flow("f", "a", "b", 1000, ["t"], reveal="on_ready", coflow="c1", coflow_type="DP", microbatch=2)
    job.flow("g", "a", "b", 10, ["t"], options=[PathOption("cpu", Leg("cpu0", "nic0", 1e-6)), PathOption("acc")])
    return job.validate()


def test_json_round_trip_keeps_everything(tmp_path):
    job = small_job()
    path = tmp_path / "job.json"
    job.save(path)
    again = Job.load(path)
    assert again.to_dict() == job.to_dict()
    assert again.items == job.items and again.endpoints == job.endpoints
    assert again.capacity_of("gpu0") == 2 and again.capacity_of("gpu1") == 1


def test_public_view_hides_sizes_revealed_on_ready():
    pub = small_job().public()
    assert pub.items["f"].size is None and pub.items["g"].size == 10


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda j: j.task("x", "nobody", 1.0), "items.x.endpoint"),
        (lambda j: j.task("x", "a", -1.0), "items.x.duration"),
        (lambda j: j.flow("x", "a", "b", -5), "items.x.size"),
        (lambda j: j.flow("x", "a", "b", 5, ["missing"]), "items.x.deps"),
        (lambda j: j.flow("x", "a", "b", 5, reveal="later"), "items.x.reveal"),
    ],
)
def test_bad_items_name_their_field(mutate, field):
    job = small_job()
    mutate(job)
    with pytest.raises(SpecError) as err:
        job.validate()
    assert err.value.field == field


def test_cycles_and_duplicates_are_errors():
    job = Job()
    job.endpoint("a")
    job.task("x", "a", 1.0, ["y"])
    job.task("y", "a", 1.0, ["x"])
    with pytest.raises(SpecError, match="cycle"):
        job.validate()
    with pytest.raises(SpecError) as err:
        job.task("x", "a", 1.0)
    assert err.value.field == "items.x"


def test_a_cycle_among_some_items_is_an_error():
    """A root item starts the order, so the order is not empty; the cycle b -> c -> d -> b
    behind it must still be found and named."""
    job = Job()
    job.endpoint("a")
    job.task("root", "a", 1.0)
    job.task("b", "a", 1.0, ["root", "d"])
    job.task("c", "a", 1.0, ["b"])
    job.task("d", "a", 1.0, ["c"])
    job.task("after", "a", 1.0, ["root"])
    with pytest.raises(SpecError, match="cycle through b, c, d") as err:
        job.validate()
    assert err.value.field == "items.b.deps"
    with pytest.raises(SpecError, match="cycle"):
        job.topological_order()


def test_malformed_json_is_a_spec_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError) as err:
        Job.load(bad)
    assert err.value.field == "job"
    bad.write_text(json.dumps({"items": [{"kind": "flow", "id": "f"}]}))
    with pytest.raises(SpecError) as err:
        Job.load(bad)
    assert err.value.field == "items[0].src"  # the first missing field


def test_hybrid_parallel_structure():
    dp, pp, mb = 4, 3, 2
    job = hybrid_parallel(dp=dp, pp=pp, microbatches=mb, iterations=2, layout="rail", gpus_per_server=4)
    ring = 2 * (dp - 1) * dp * pp  # flows per iteration of the rings
    p2p = 2 * (pp - 1) * mb * dp  # activations + gradients
    assert len(job.flows) == 2 * (ring + p2p)
    assert len(job.tasks) == 2 * 2 * pp * dp * mb
    assert {f.coflow_type for f in job.flows} == {"DP", "PP"}
    # rail layout: a stage's replicas on one GPU index (rail) of different servers
    locs = {job.endpoints[f"p1d{d}"].pin for d in range(dp)}
    assert {loc.nic for loc in locs} == {1} and len({loc.server for loc in locs}) == dp
    # the second iteration's first forward waits for the first iteration's all-reduce
    first = job.items["i1.fwd.p0d0.m0"]
    assert any(d.startswith("i0.ar.p0") for d in first.deps)
    job.topological_order()


def test_tensor_parallel_groups_fill_servers_and_keep_traffic_on_rails():
    """Hermod's simulation layout (TP 8, PP 8 on 8-GPU servers): a server is a tensor
    group; every pipeline and ring flow goes between servers on its tensor rank's rail."""
    dp, pp, tp, mb = 4, 8, 8, 2
    job = hybrid_parallel(dp=dp, pp=pp, tp=tp, microbatches=mb, gpus_per_server=8, layout="megatron")
    assert len(job.endpoints) == dp * pp * tp
    assert len(job.flows) == tp * (2 * (dp - 1) * dp * pp + 2 * (pp - 1) * mb * dp)
    assert len(job.tasks) == tp * 2 * pp * dp * mb
    servers = {}
    for name, ep in job.endpoints.items():
        servers.setdefault(ep.pin.server, set()).add(name[: name.index("t")])
    assert all(len(group) == 1 for group in servers.values())  # one (stage, replica) per server
    for f in job.flows:
        a, b = job.endpoints[f.src].pin, job.endpoints[f.dst].pin
        assert a.server != b.server and a.nic == b.nic == int(f.src.split("t")[1])
    with pytest.raises(SpecError) as err:
        hybrid_parallel(tp=2, layout="rail")
    assert err.value.field == "tp"
    with pytest.raises(SpecError) as err:
        hybrid_parallel(tp=3, gpus_per_server=8)
    assert err.value.field == "tp"


def test_generate_reads_units_and_names_bad_arguments():
    job = generate("all_to_all", {"n": 3, "size": "1MB", "compute": "2ms"})
    assert {f.size for f in job.flows} == {1_000_000}
    assert {t.duration for t in job.tasks} == {2e-3}
    for args, field in [
        ({"n": 1}, "job.args.n"),
        ({"size": "-3MB"}, "job.args.size"),
        ({"bogus": 1}, "job.args.bogus"),
    ]:
        with pytest.raises(SpecError) as err:
            generate("all_to_all", args)
        assert err.value.field == field
    with pytest.raises(SpecError) as err:
        generate("nope")
    assert err.value.field == "job.generator"


def test_edited_is_replace_without_init():
    """``edited`` (Job.public's and the array builder's copy per flow) makes the object
    ``dataclasses.replace`` makes, leaves the original alone, and rests on there being no
    ``__post_init__`` to skip."""
    from dataclasses import replace

    from railbed.job import Flow, Task, edited

    assert not hasattr(Flow, "__post_init__") and not hasattr(Task, "__post_init__")
    f = Flow("f", src="a", dst="b", size=7, deps=("t",), reveal="on_ready", coflow="c", layer=2, tags={"x": 1})
    t = Task("t", endpoint="a", duration=1.5, microbatch=3)
    for item, changes in [(f, {"size": None}), (f, {"id": "g", "src": "b", "dst": "a", "coflow": None}),
                          (t, {"duration": 2.0, "deps": ("u",)}), (f, {})]:  # fmt: skip
        got, want = edited(item, **changes), replace(item, **changes)
        assert type(got) is type(want) and got == want and vars(got) == vars(want)
        assert got is not item
    assert f.size == 7 and f.id == "f"
    with pytest.raises(AttributeError):
        edited(f, size=1).size = 2  # still frozen


def test_paused_gc_restores_the_collector():
    import gc

    from railbed.job import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer found it
    assert gc.isenabled()

    @paused_gc()
    def fails():
        assert not gc.isenabled()
        raise ValueError

    with pytest.raises(ValueError):
        fails()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
