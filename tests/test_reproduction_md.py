"""The committed REPRODUCTION.md's ``--quick`` sections are what the code produces now.

Regenerates each paper's quick section (simulated rows, no figures) into a
copy of the committed file and compares it with the committed section. A
change to a scheduler, a scenario, a claims file or the report that moves a
number fails here until ``railbed reproduce PAPER --quick --write
REPRODUCTION.md`` is rerun and the new tables committed (with the reason).
Sections made with other flags (``--emulate``, ``--full-size``) are not
regenerated: they are wall-clock runs or minutes each; they stay as made.
The comparison leaves out each section's inputs line (its digest and the
commit it was made at: ``railbed reproduce --check`` judges those) and its
"Stale since" mark.

A section whose inputs line is current (:func:`scenarios.block.stale`: the
digest of its claims, scenario and cluster files and of the code its runs can
execute, read statically) was made by this code from these inputs, and the
runs are deterministic: it is not run again here unless
``RAILBED_REGENERATE_SECTIONS=1`` (say, to check another platform's floats).
Hermod's and LEO's quick sections alone took 21 and 14 minutes of CPU here, and
CI has 40 minutes for everything. A change that moves a section's inputs makes
it stale, and the test then regenerates it: commit sections regenerated with
the code they depend on (``railbed reproduce --check REPRODUCTION.md``).
"""

import os
from pathlib import Path

import pytest

from scenarios.block import stale, without_inputs
from scenarios.reproduce import HERE as CLAIMS_DIR
from scenarios.reproduce import PAPERS, block_sections, reproduce

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "REPRODUCTION.md"
QUICK = [p for p in PAPERS if (p, " --quick") in block_sections(COMMITTED.read_text())]


def test_every_paper_has_a_committed_quick_section():
    assert QUICK == list(PAPERS)


@pytest.mark.parametrize("paper", QUICK)
def test_committed_quick_section_is_what_the_code_produces(tmp_path, paper):
    key = (paper, " --quick")
    committed = {key: block_sections(COMMITTED.read_text())[key]}
    if not stale(committed, CLAIMS_DIR) and os.environ.get("RAILBED_REGENERATE_SECTIONS") != "1":
        pytest.skip(f"{paper} --quick is current: made by this code from these inputs (its digest)")
    fresh = tmp_path / "REPRODUCTION.md"
    fresh.write_text(COMMITTED.read_text())
    reproduce(paper, tmp_path / "out", quick=True, echo=lambda _m: None, write=fresh, plots=False)
    want = without_inputs(block_sections(fresh.read_text())[(paper, " --quick")])
    have = without_inputs(block_sections(COMMITTED.read_text())[(paper, " --quick")])
    assert have == want, f"regenerate: railbed reproduce {paper} --quick --write REPRODUCTION.md"
