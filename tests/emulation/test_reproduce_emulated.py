"""``railbed reproduce platform --quick --emulate``: the emulated rows are run and reported.

Checks the report's form (every crossing row has a number, a verdict and
the emulator's fidelity verdict), not the numbers."""

import re
from pathlib import Path

from scenarios.reproduce import load_claims, reproduce

ROOT = Path(__file__).resolve().parents[2]


def test_emulated_rows_are_measured(tmp_path):
    report = reproduce("platform", tmp_path, quick=True, emulate=True, echo=lambda _: None)
    text = report.read_text()
    _, claims = load_claims(ROOT / "scenarios" / "platform" / "claims.yaml")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(claims)
    for claim, row in zip(claims, rows):
        assert row[2] != "-" and row[3] in ("holds", "does not hold", "measured"), row
        if claim.backend == "crosscheck":
            assert row[4] == "ok" or row[4].startswith("BROKEN"), row
            assert row[5].startswith("`sudo railbed crosscheck ")
    assert re.search(r"figures/crosscheck-fct.png\)", text)
