"""The DGX-1 / PCIe models beside DGCL's measurements (scenarios/dgcl/calibration.yaml).

Tolerances, and why:
* stored numbers: recomputed to 0.1 % (they are rounded to 4 decimals when written), so the file
  never goes stale;
* Table 6 (8 GPUs on PCIe, one graphAllgather, feature 128: the paper's least ambiguous
  measurement): per graph, the calibrated model's peer-to-peer / DGCL ratio within a factor 1.4
  of the paper's. Ratios, not milliseconds: absolute times scale with the exchanged bytes, which
  depend on how partitionable the generated graph is (the ``metis`` variant moves the sparse
  graphs' times 3x while their ratios move by 0.2); and the paper's own ratios differ by a factor
  1.3 between graphs on the same box, so closer agreement per generated graph would be luck.
  Reddit's and Com-Orkut's peer-to-peer times are what ``QPI_FIT`` was fitted to, so on those two
  rows the check is of DGCL's time; Web-Google and Wiki-Talk are the independent ones;
* §7.2 (DGX-1, 4.45x on average): the unchanged model overstates it more than threefold (the
  issue's finding), and the calibrated model still does, about twofold: the note in docs/dgcl-notes.md says
  so, and this pins that gap (1.5-3x) so that a change closing or widening it updates the note.
"""

import math

import pytest

from scenarios.dgcl import calibration as cal

DOC = cal.load()
PAPER = DOC["paper"]


@pytest.mark.parametrize("variant", ["model", "calibrated"])
@pytest.mark.parametrize("graph", ["web-google", "reddit"])
def test_stored_numbers_are_the_models(variant, graph):
    assert cal.measure(graph, variant) == pytest.approx(DOC["model"][variant][graph], rel=1e-3)


def test_summary_is_computed_from_the_stored_rows():
    assert cal.summary(DOC["model"]) == DOC["summary"]


@pytest.mark.parametrize("graph", list(PAPER["table6_pcie_ms"]))
def test_pcie_ratio_within_a_factor_of_table6(graph):
    row, paper = DOC["model"]["calibrated"][graph], PAPER["table6_pcie_ms"][graph]
    ours = row["pcie_p2p_ms"] / row["pcie_dgcl_ms"]
    assert abs(math.log(ours / (paper["p2p"] / paper["dgcl"]))) <= math.log(1.4)


def test_dgx1_gap_to_section_7_2_as_documented():
    paper = PAPER["p2p_over_dgcl_dgx1"]["mean"]
    summary = DOC["summary"]
    assert summary["model"]["mean"] > 3 * paper  # the issue: 15-21x against 4.45x
    assert 1.5 < summary["calibrated"]["mean"] / paper < 3.0
    assert summary["calibrated"]["mean"] < summary["model"]["mean"] / 2  # the candidates explain half


def test_each_candidate_measured_alone():
    s = DOC["summary"]
    assert s["qpi"]["mean"] < s["latency"]["mean"] < s["model"]["mean"]  # QPI matters most, then latency
    assert s["pcie_switch"]["mean"] == pytest.approx(s["model"]["mean"], rel=0.01)  # QPI-bound, not PLX


def test_readme_table_is_the_stored_summary():
    """The docs' calibration table is written from calibration.yaml (``--readme``), never typed:
    exactly one page of README.md and docs/*.md holds it."""
    from pathlib import Path

    root = Path(cal.__file__).resolve().parents[2]
    pages = [p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))]]
    [page] = [text for text in pages if cal.BEGIN in text]
    block = page.split(cal.BEGIN)[1].split(cal.END)[0].strip()
    assert block == cal.table(DOC) and "| paper (§7.2) | 4.45x | 7.04x |" in block
