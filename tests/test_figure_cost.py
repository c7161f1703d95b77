"""Figures whose cost follows their lanes, not their items (issue 42): the critical-path
figure draws one artist per lane off the path and one per lane and category on it; a run's
exports are written before its figures, and both say what they are doing."""

from pathlib import Path

import pytest

from railbed import plots
from railbed.results import ItemRecord, RunResult


def synthetic(n: int) -> RunResult:
    items = {}
    for k in range(n):
        if k % 2:
            r = ItemRecord(f"f{k}", "flow", k, k, k + 3, server=k % 4, src_nic=0, dst_server=0, dst_nic=0,
                           size=10, dscp=0, attrs={"coflow_type": "DP" if k % 3 else "PP"})  # fmt: skip
        else:
            r = ItemRecord(f"t{k}", "task", k, k, k + 2, server=k % 4, device="gpu0")
        items[r.id] = r
    res = RunResult("fluid", "synthetic", "fifo", "c", items=items, makespan=n + 3.0)
    path = [i for k, i in enumerate(items) if k % 5 == 0]  # tasks and flows: every lane
    res.analysis = {"critical_path": {"items": path, "length": n + 3.0, "time": {"compute": 1.0, "DP": 1.0}}}
    return res


def test_the_critical_path_figure_draws_per_lane_not_per_item(tmp_path, monkeypatch):
    drawn = {}

    def keep(fig, png):
        drawn["bars"] = sum(len(ax.collections) for ax in fig.axes)
        drawn["rects"] = sum(len(c.get_paths()) for ax in fig.axes for c in ax.collections)
        return png

    monkeypatch.setattr(plots, "save_figure", keep)
    res = synthetic(2000)
    plots.critical_path(res, tmp_path / "critical")
    lanes = 8  # 4 servers x (gpu0, nic0)
    assert drawn["bars"] <= lanes + lanes * 3  # off the path per lane; on it per lane and category
    assert drawn["rects"] == 2000  # every item still drawn, as a rectangle of one of them


def test_exports_come_before_figures_and_both_report(tmp_path, monkeypatch):
    from scenarios import runner

    order: list[str] = []
    monkeypatch.setattr("railbed.export.export_run", lambda result, run_dir, trace=True: order.append("export") or [])
    monkeypatch.setattr(plots, "timeline", lambda *a, **k: order.append("figure"))
    for name in ("critical_path", "overlap_heatmap", "link_utilisation", "fct_cdf", "cct_cdf", "iterations"):
        monkeypatch.setattr(plots, name, lambda *a, **k: None)
    for name in ("a", "b"):  # the runs of the directory; their results are taken from memory
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text("{}")
    lines: list[str] = []
    runner.write_figures(Path(tmp_path), lines.append, have={"a": synthetic(10), "b": synthetic(10)})
    assert order == ["export", "export", "figure", "figure"], lines
    assert any(line.startswith("export: a (1 of 2 runs)") for line in lines)
    assert any(line.startswith("figures: b (2 of 2 runs, 10 items)") for line in lines)


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_critical_paths_still_draw(tmp_path, n):
    res = synthetic(max(n, 1))
    out = plots.critical_path(res, tmp_path / "c")
    assert out is not None and Path(out).exists()
