"""scenarios.crosscheck: the order check against brute force; compare() on two results."""

from hypothesis import given, settings
from hypothesis import strategies as st

from railbed.results import ItemRecord, RunResult
from scenarios.crosscheck import compare, order_violations


def brute(ends, margin):
    checked, bad = set(), set()
    for a, sa, ea in ends:
        for _, sb, eb in ends:
            if sa < sb and sb - sa > margin * sb:
                checked.add(a)
                if not ea < eb:
                    bad.add(a)
    return checked, bad


times = st.floats(0, 10, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(times, times), max_size=25), st.sampled_from([0.0, 0.2, 0.5]))
def test_order_check_finds_exactly_the_flows_brute_force_finds(pairs, margin):
    ends = [(f"f{i}", s, e) for i, (s, e) in enumerate(pairs)]
    checked, bad = order_violations(ends, margin)
    want_checked, want_bad = brute(ends, margin)
    assert checked == len(want_checked)
    assert {a for a, _ in bad} == want_bad
    emu = {f: e for f, _, e in ends}
    sim = {f: s for f, s, _ in ends}
    for a, b in bad:  # every reported pair is a real violation
        assert sim[a] < sim[b] and sim[b] - sim[a] > margin * sim[b] and emu[a] >= emu[b]


def result(backend, ends, local=()):
    items = {}
    for fid, (start, end) in ends.items():
        dst = 0 if fid in local else 1
        items[fid] = ItemRecord(fid, "flow", start=start, end=end, server=0, dst_server=dst)
    items["t"] = ItemRecord("t", "task", start=0.0, end=1.0, server=0)
    return RunResult(backend, "j", "fifo", "c", makespan=max(e for _, e in ends.values()), items=items)


def test_compare_reports_makespan_flows_and_order():
    sim = result("simulator", {"a": (0, 1.0), "b": (0, 2.0), "c": (0, 2.1), "loc": (0, 0.0)}, local={"loc"})
    emu = result("emulator", {"a": (0, 1.1), "b": (0, 2.2), "c": (0, 2.15), "loc": (0, 1e-5)}, local={"loc"})
    c = compare(emu, sim)
    assert abs(c.makespan_rel - (2.2 - 2.1) / 2.1) < 1e-12
    assert {f.id for f in c.flows} == {"a", "b", "c"} and c.local_flows == 1
    assert abs({f.id: f.rel for f in c.flows}["a"] - 0.1) < 1e-12
    assert c.order_pairs == 1 and not c.order_violations  # b, c are 5 % apart: may swap
    swapped = result("emulator", {"a": (0, 2.3), "b": (0, 2.2), "c": (0, 2.15), "loc": (0, 0.0)}, local={"loc"})
    c = compare(swapped, sim)
    assert c.order_violations and c.order_violations[0][0] == "a"
    assert "out of order" in c.report()


def test_each_side_is_labelled_by_its_backend():
    """``--backends fluid,packet``: fluid is the first side, and is called fluid (not "emulated")."""
    first = result("fluid", {"a": (0, 1.0), "b": (0, 2.0)})
    second = result("packet", {"a": (0, 1.1), "b": (0, 2.2)})
    c = compare(first, second)
    report = c.report()
    assert c.sides == ("fluid", "packet") and c.to_dict()["backends"] == ["fluid", "packet"]
    assert "makespan fluid 2 s, packet 2.2 s" in report and "|fluid - packet| / packet" in report
    assert "emulat" not in report and "simulat" not in report
