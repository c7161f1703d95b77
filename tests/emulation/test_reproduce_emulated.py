"""``railbed reproduce platform --quick --emulate``: the emulated rows are run and reported.

Checks the report's form (every crossing row has a number, a quick row's verdict (none), the emulator's fidelity
verdict and a generated label naming the emulator and its k), not the numbers."""

import re
from pathlib import Path

from scenarios.claims import INPUT_CHECK, QUICK_VERDICT, load_claims
from scenarios.reproduce import reproduce

ROOT = Path(__file__).resolve().parents[2]


def test_emulated_rows_are_measured(tmp_path):
    report = reproduce("platform", tmp_path, quick=True, emulate=True, echo=lambda _: None)
    text = report.read_text()
    _, claims, _ = load_claims(ROOT / "scenarios" / "platform" / "claims.yaml")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(claims)
    for claim, row in zip(claims, rows):
        ran, value, verdict, fid, cmd = row[1], row[3], row[4], row[6], row[7]
        assert value != "-" and verdict in (QUICK_VERDICT, INPUT_CHECK, "measured"), row  # quick: never judged
        if claim.mode == "crosscheck":
            assert fid == "ok" or fid.startswith("BROKEN"), row
            assert cmd.startswith("`sudo railbed crosscheck ")
            assert re.search(r"; emulated, k = \d+ and simulated; quick$", ran), ran
    assert "Made with `railbed reproduce platform --quick --emulate`" in text
    assert re.search(r"figures/crosscheck-fct.png\)", text)
