"""docs/dgtp.md's typed testbed table is tied to REPRODUCTION.md's `dgtp` section at the claims'
size (issue 41 item 6): where both compare the same schedulers, the numbers agree to the digit."""

import re
from pathlib import Path

from scenarios.block import BEGIN, END, block_sections

ROOT = Path(__file__).resolve().parent.parent
# the section's claim (its start) -> the doc table's scheduler, per dataset
ROWS = {
    "DGTP's training time against synchronous DistDGL (the paper's baseline)": "dgtp",
    "Alg. 2 as written (dgtp-literal) against synchronous DistDGL": "dgtp-literal",
    "ablation: dgtp-oes": "dgtp-oes",
    "ablation: dgtp-place": "dgtp-place",
}


def section_values() -> dict[tuple[str, str], str]:
    text = (ROOT / "REPRODUCTION.md").read_text()
    section = block_sections(text.split(BEGIN, 1)[1].split(END, 1)[0])[("dgtp", "")]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("testbed ("):
            continue
        data = "products" if "ogbn-products" in cells[0] else "reddit"
        for start, name in ROWS.items():
            if start in cells[0] and "20 iterations" in cells[1] and "packet" not in cells[1]:
                out[data, name] = cells[3]
    return out


def doc_values() -> dict[tuple[str, str], str]:
    doc = (ROOT / "docs" / "dgtp.md").read_text()
    table = doc.split("**Testbed, simulated**", 1)[1].split("\n\n", 2)[1]  # the table after its heading
    out = {}
    for line in table.splitlines():
        m = re.match(r"\| \**`([a-z-]+)`\**(?: \([^|]*\))? \|", line)
        if not m or m.group(1) not in ROWS.values():
            continue
        cells = [c.strip().replace("*", "") for c in line.strip("|").split("|")]
        for data, cell in (("products", cells[2]), ("reddit", cells[4])):
            pct = re.match(r"[−-]?\d+\.\d %", cell)
            if pct:
                out[data, m.group(1)] = pct.group(0).replace("−", "-")
    return out


def test_the_doc_table_agrees_with_the_generated_section_where_both_compare_the_same_schedulers():
    generated, typed = section_values(), doc_values()
    assert len(generated) == 8 and len(typed) >= 8  # every pair found on both sides
    assert {k: typed[k] for k in generated} == generated
