"""Chakra execution traces (workloads/chakra.py): a trace from Chakra's own generator and a hand-built
multi-rank one run on the fluid backend against their closed forms (and on ns-3, marked ``packet``);
export and re-import give the same items; bad traces are one line naming the node."""

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra is not installed (railbed[chakra])")

from chakra.schema.protobuf import et_def_pb2 as pb  # noqa: E402
from chakra.src.third_party.utils.protolib import encodeMessage  # noqa: E402

from railbed.errors import SpecError  # noqa: E402
from railbed.job import Task  # noqa: E402
from railbed.spec import ClusterSpec  # noqa: E402
from railbed.units import wire_bytes  # noqa: E402
from scenarios.runner import Scenario, simulate_scenario  # noqa: E402
from schedulers import by_name  # noqa: E402
from simulator import simulate  # noqa: E402
from workloads import generate  # noqa: E402
from workloads.chakra import Options, export_trace, import_trace  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
B, LAT = 10e9, 1e-6  # NIC rate, per-link latency: a flow's alpha is its 2 links' latency
ALPHA = 2 * LAT


def star(n: int) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"servers": [{"count": n, "gpus": 1, "nic_rate": B}], "fabric": {"type": "single_switch", "latency": LAT}}
    )


def t(payload: int) -> float:
    """Seconds to put ``payload`` bytes on a link in full frames (railbed/units.py's framing)."""
    return 8 * wire_bytes(payload) / B


def test_an_all_reduce_made_by_chakras_generator_runs_as_its_ring_closed_form(tmp_path):
    exe = shutil.which("chakra_generator") or str(Path(sys.executable).parent / "chakra_generator")
    size = 1 << 22
    subprocess.run([exe, "--num_npus", "16", "--default_comm_size", str(size)], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    for algorithm, closed in (
        ("ring", 2 * 15 * (ALPHA + t(-(-size // 16)))),
        ("halving-doubling", sum(ALPHA + t(size >> (k + 1)) + ALPHA + t((size << k) // 16) for k in range(4))),
        ("direct", 2 * (ALPHA + 15 * t(size // 16))),
    ):  # fmt: skip
        job, notes = import_trace(tmp_path / "ALL_REDUCE", Options(algorithm=algorithm))
        assert notes == [f"chakra: 16 ranks, {len(job.items)} items; all modelled"]
        assert {f.tags["collective"] for f in job.flows} == {"all-reduce"} and len({f.coflow for f in job.flows}) == 1
        res = simulate(job, by_name("fifo"), star(16))
        assert res.makespan == pytest.approx(closed, rel=1e-6), algorithm
    # the generator's memory nodes are counted, once, not dropped silently
    job, notes = import_trace(tmp_path / "one_remote_mem_load_node")
    assert len(job.items) == 0 and "16 MEM_LOAD_NODE not modelled" in notes[0]


# ----------------------------------------------------------- a hand-built trace
COMP1, COMP2 = 100, 50  # us
P2P, COLL = 1 << 20, 1 << 22  # bytes
N = 4


def attr(name, **value):
    return pb.AttributeProto(name=name, **value)


def hand_trace(folder: Path, gz_rank: int = 2, edit=None) -> Path:
    """Rank r: compute COMP1 us, send P2P bytes to r + 1 (priority 46) and receive from r - 1 (both
    after the compute), an all-reduce of COLL bytes after both (its ctrl deps), a memory load, and a
    compute of COMP2 us after the all-reduce (data dep) and the load."""
    folder.mkdir(exist_ok=True)
    for r in range(N):
        n = []
        n.append(pb.Node(id=0, name=f"fwd{r}", type=pb.COMP_NODE, duration_micros=COMP1))
        n.append(pb.Node(id=1, name=f"send{r}", type=pb.COMM_SEND_NODE, data_deps=[0], attr=[
            attr("comm_dst", int64_val=(r + 1) % N), attr("comm_tag", int64_val=7), attr("comm_size", int64_val=P2P),
            attr("comm_priority", int64_val=46)]))  # fmt: skip
        n.append(pb.Node(id=2, name="recv", type=pb.COMM_RECV_NODE, data_deps=[0], attr=[
            attr("comm_src", int64_val=(r - 1) % N), attr("comm_tag", int64_val=7),
            attr("comm_size", int64_val=P2P)]))  # fmt: skip
        n.append(pb.Node(id=3, name="grad_ar", type=pb.COMM_COLL_NODE, ctrl_deps=[1, 2], attr=[
            attr("comm_type", int64_val=pb.ALL_REDUCE), attr("comm_size", int64_val=COLL)]))  # fmt: skip
        n.append(pb.Node(id=4, name="load", type=pb.MEM_LOAD_NODE, attr=[attr("tensor_size", uint64_val=10)]))
        n.append(pb.Node(id=5, name=f"opt{r}", type=pb.COMP_NODE, duration_micros=COMP2, data_deps=[3, 4]))
        if edit:
            edit(r, n)
        path = folder / f"hand.{r}.et"
        with (gzip.open if r == gz_rank else open)(path, "wb") as f:
            encodeMessage(f, pb.GlobalMetadata(version="0.0.4"))
            for node in n:
                encodeMessage(f, node)
    return folder / "hand"


def hand_closed_form() -> float:
    """The compute, the p2p shift (each NIC sends one flow and receives one: alone on its ports),
    the ring all-reduce, the last compute."""
    return COMP1 * 1e-6 + (ALPHA + t(P2P)) + 2 * (N - 1) * (ALPHA + t(COLL // N)) + COMP2 * 1e-6


def test_a_hand_built_trace_with_compute_send_recv_and_a_collective(tmp_path):
    job, notes = import_trace(hand_trace(tmp_path / "t"))
    assert "4 MEM_LOAD_NODE not modelled" in notes[0]
    assert sorted(i for i, it in job.items.items() if isinstance(it, Task)) == sorted(
        [f"fwd{r}" for r in range(N)] + [f"opt{r}" for r in range(N)]
    )
    p2p = [f for f in job.flows if f.coflow is None]
    assert sorted((f.id, f.src, f.dst, f.size, f.tags["dscp"]) for f in p2p) == [
        (f"send{r}", f"rank{r}", f"rank{(r + 1) % N}", P2P, 46) for r in range(N)
    ]
    assert all(set(f.deps) == {f"fwd{f.src[4:]}", f"fwd{f.dst[4:]}"} for f in p2p)  # both sides' deps
    ring = [f for f in job.flows if f.coflow is not None]
    assert len(ring) == 2 * (N - 1) * N and {f.tags["algorithm"] for f in ring} == {"ring"}
    assert job.endpoints["rank3"].pin.server == 3
    res = simulate(job, by_name("fifo"), star(N))
    assert res.makespan == pytest.approx(hand_closed_form(), rel=1e-6)


@pytest.mark.packet
def test_the_hand_built_trace_on_ns3(tmp_path):
    """TCP adds a handshake and store-and-forward per flow (tests/test_packet.py): within 5 % here."""
    from railbed.backend import RunOptions, backend
    from simulator.packet import engine

    if not engine.available():
        pytest.skip("the ns3 package is not installed (railbed[packet])")
    job, _ = import_trace(hand_trace(tmp_path / "t"))
    res = backend("packet").run(job, by_name("fifo"), star(N), RunOptions(analysis=False))
    assert res.makespan == pytest.approx(hand_closed_form(), rel=0.05)
    assert res.makespan > hand_closed_form()


def test_a_scenario_names_the_trace(tmp_path):
    prefix = hand_trace(tmp_path / "t")
    lines = []
    sc = Scenario.from_dict(
        {"cluster": star(N).to_dict(), "job": {"chakra": "t/hand", "algorithm": "direct"}, "schedulers": ["fifo"]},
        base=tmp_path,
    )
    assert prefix.parent == tmp_path / "t" and {f.tags.get("algorithm") for f in sc.job.flows} == {None, "direct"}
    (res,) = simulate_scenario(sc, tmp_path / "out", echo=lines.append, plots=False)
    closed = COMP1 * 1e-6 + (ALPHA + t(P2P)) + 2 * (ALPHA + (N - 1) * t(COLL // N)) + COMP2 * 1e-6
    assert res.makespan == pytest.approx(closed, rel=1e-6)
    with pytest.raises(SpecError) as e:
        Scenario.from_dict({"cluster": star(N).to_dict(), "job": {"chakra": "t/hand", "algo": "x"},
                            "schedulers": ["fifo"]}, base=tmp_path)  # fmt: skip
    assert e.value.field == "job.algo"


# ------------------------------------------------------------------ round trip
def items_of(job):
    """What a Chakra trace carries of each item (workloads/chakra.py: coflows and iterations are not)."""
    out = {}
    for iid, it in job.items.items():
        where = (it.endpoint, it.duration) if isinstance(it, Task) else (it.src, it.dst, it.size, it.tags.get("dscp"))
        out[iid] = (it.kind, where, frozenset(it.deps))
    return out


def test_export_then_import_gives_the_same_items(tmp_path):
    job = generate("hybrid_parallel", {"dp": 2, "pp": 2, "microbatches": 2, "iterations": 2, "fwd": 0.001,
                                       "bwd": 0.002, "gpus_per_server": 1, "dscp": {"PP": 46, "DP": 8}})  # fmt: skip
    paths = export_trace(job, tmp_path / "et" / "llm")
    assert [p.name for p in paths] == [f"llm.{r}.et" for r in range(len(job.endpoints))]
    back, notes = import_trace(tmp_path / "et" / "llm")
    assert items_of(back) == items_of(job)
    assert {n: e.pin for n, e in back.endpoints.items()} == {n: e.pin for n, e in job.endpoints.items()}
    spec = star(4)
    assert simulate(back, by_name("fifo"), spec).makespan == simulate(job, by_name("fifo"), spec).makespan
    # the imported hand trace survives a second round trip too (its collective now as send/recv pairs)
    hand, _ = import_trace(hand_trace(tmp_path / "t"))
    export_trace(hand, tmp_path / "again" / "h")
    assert items_of(import_trace(tmp_path / "again" / "h")[0]) == items_of(hand)


# ------------------------------------------------------------------ bad traces
def drop_rank_1(folder):
    (folder / "hand.1.et").unlink()


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda r, n: n[5].data_deps.append(9) if r == 1 else None, "rank 1 node 5 (opt1): depends on node 9"),
        (lambda r, n: n[0].ctrl_deps.append(5) if r == 2 else None, "(fwd2): a dependency cycle through it"),
        (
            lambda r, n: n[2].attr[1].__setattr__("int64_val", 8) if r == 3 else None,
            "rank 2 node 1 (send2): no matching receive for its send to rank 3 (tag 7)",
        ),
        (lambda r, n: n[3].attr.append(attr("comm_priority", int64_val=99)) if r == 0 else None, "comm_priority 99"),
        ("missing", "no file "),
    ],
)
def test_a_bad_trace_is_one_line_naming_the_node(tmp_path, edit, says):
    prefix = hand_trace(tmp_path / "t", edit=None if edit == "missing" else edit)
    if edit == "missing":
        drop_rank_1(tmp_path / "t")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cli", "import-chakra", str(prefix), "-o", str(tmp_path / "job.json")]
    got = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and len(lines) == 1 and says in lines[0], got.stderr
    assert not (tmp_path / "job.json").exists()


def test_process_groups_a_placement_file_and_the_roofline(tmp_path):
    """Ranks 0, 1 all-reduce in group ``a`` and ranks 2, 3 in ``b`` (both at once, on their own
    ports) after a compute node with no duration: 989e9 operations at the H100's 989 TFLOP/s = 1 ms
    (its tensor_size would take less: 1 GB at 3.35 TB/s). Ranks placed in reverse by a file."""
    folder = tmp_path / "g"
    folder.mkdir()
    for r in range(N):
        with open(folder / f"pg.{r}.et", "wb") as f:
            encodeMessage(f, pb.GlobalMetadata(version="0.0.4"))
            encodeMessage(f, pb.Node(id=0, name=f"mm{r}", type=pb.COMP_NODE, attr=[
                attr("num_ops", int64_val=989 * 10**9), attr("tensor_size", uint64_val=10**9)]))  # fmt: skip
            encodeMessage(f, pb.Node(id=1, name="ar", type=pb.COMM_COLL_NODE, data_deps=[0], attr=[
                attr("comm_type", int64_val=pb.ALL_REDUCE), attr("comm_size", int64_val=COLL),
                attr("pg_name", string_val="a" if r < 2 else "b")]))  # fmt: skip
    (tmp_path / "place.yaml").write_text("[[3, 0, 0], [2, 0, 0], [1, 0, 0], [0, 0, 0]]\n")
    (tmp_path / "groups.yaml").write_text("{a: [0, 1], b: [2, 3]}\n")
    sc = Scenario.from_dict(
        {"cluster": star(N).to_dict(), "schedulers": ["fifo"],
         "job": {"chakra": "g/pg", "placement": "place.yaml", "groups": "groups.yaml"}},
        base=tmp_path,
    )  # fmt: skip
    job = sc.job
    assert [job.endpoints[f"rank{r}"].pin.server for r in range(N)] == [3, 2, 1, 0]
    assert job.items["mm0"].duration == pytest.approx(1e-3, rel=1e-12)
    assert {(f.src, f.dst) for f in job.flows} == {("rank0", "rank1"), ("rank1", "rank0"), ("rank2", "rank3"),
                                                    ("rank3", "rank2")}  # fmt: skip
    res = simulate(job, by_name("fifo"), star(N))
    assert res.makespan == pytest.approx(1e-3 + 2 * (ALPHA + t(COLL // 2)), rel=1e-6)
    (tmp_path / "groups.yaml").write_text("{a: [0, 1]}\n")
    with pytest.raises(SpecError) as e:
        Scenario.from_dict({"cluster": star(N).to_dict(), "schedulers": ["fifo"],
                            "job": {"chakra": "g/pg", "groups": "groups.yaml"}}, base=tmp_path)  # fmt: skip
    assert "process group 'b' is not in the groups given" in e.value.message


def test_the_commands_import_and_export(tmp_path):
    """railbed import-chakra writes the job JSON; export-chakra of it (or of a results directory
    holding it) and import again give the same items."""
    from railbed.job import Job

    prefix = hand_trace(tmp_path / "t")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def railbed(*args):
        got = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                             timeout=120)  # fmt: skip
        assert got.returncode == 0, got.stderr
        return got.stdout

    out = railbed("import-chakra", str(prefix), "-o", str(tmp_path / "job.json"), "--algorithm", "direct")
    assert "4 MEM_LOAD_NODE not modelled" in out and "wrote" in out
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "job.json").write_bytes((tmp_path / "job.json").read_bytes())
    railbed("export-chakra", str(tmp_path / "res"), "-o", str(tmp_path / "back" / "hand"))
    railbed("import-chakra", str(tmp_path / "back" / "hand"), "-o", str(tmp_path / "again.json"))
    first, again = Job.load(tmp_path / "job.json"), Job.load(tmp_path / "again.json")
    assert items_of(again) == items_of(first) and {f.tags.get("algorithm") for f in first.flows} == {None, "direct"}
