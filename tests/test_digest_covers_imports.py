"""A section's digest covers what its runs import (scenarios/block.py, issue 41 item 3).

The digest's code is found statically (:func:`scenarios.block.code_modules`: the import closure, the
backends the claims name, the schedulers the paper's files name). Here the small ``--quick``
sections are run for real in a fresh interpreter, and every module of the tree that the run
imported must be among those the digest counts: a module imported but not counted would let a
change to it leave the section "current". (Importing is more than running: a module imported and
never called is still counted, which errs on the safe side.)
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.block import code_modules
from scenarios.codegraph import packages
from scenarios.reproduce import HERE

ROOT = Path(__file__).resolve().parent.parent
# The digest's own computation (scenarios.block) loads every backend to read its capabilities: it is
# stubbed here, so that what is imported is what the runs import.
RUN = """
import json, sys
from pathlib import Path
import scenarios.reproduce as r
r.inputs_digest = lambda *a, **k: "v2_000000000000"
r.reproduce(sys.argv[1], Path(sys.argv[2]), quick=True, echo=lambda _m: None, plots=False)
print(json.dumps(sorted(sys.modules)))
"""


def imported_by_section(paper: str, out: Path) -> set[str]:
    """The modules of the tree a ``--quick`` run of ``paper``'s section imported (fresh process)."""
    done = subprocess.run([sys.executable, "-c", RUN, paper, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, check=True)  # fmt: skip
    pkgs = packages(ROOT)
    return {m for m in json.loads(done.stdout.strip().splitlines()[-1]) if m.split(".")[0] in pkgs}


@pytest.mark.parametrize("paper", ["crux", "cassini", "platform"])  # platform: a backend key (timeout)
def test_every_module_a_quick_section_imports_is_in_its_digest(tmp_path, paper):
    counted = code_modules(paper, " --quick", HERE)
    imported = imported_by_section(paper, tmp_path)
    assert "scenarios.reproduce" in imported and len(imported) > 40  # the run happened
    assert sorted(imported - counted) == []


def test_a_section_counts_the_schedulers_and_generators_its_paper_names_and_not_the_others():
    crux = code_modules("crux", " --quick", HERE)
    assert "schedulers.crux" in crux and "schedulers.hermod" not in crux and "schedulers.varys" not in crux
    assert "workloads.llm" in crux and not {"workloads.moe", "workloads.gnn"} & crux  # hybrid_parallel only
    hermod = code_modules("hermod", " --quick", HERE)
    assert {"schedulers.hermod", "schedulers.hermod_alg"} <= hermod and "schedulers.leo" not in hermod
    assert "workloads.moe" in hermod and "workloads.gnn" not in hermod
    assert {"schedulers.hermod", "schedulers.leo", "schedulers.dgtp"} <= code_modules("mechanisms", " --quick", HERE)
