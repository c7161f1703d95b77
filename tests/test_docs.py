"""The user-facing documentation: every relative link in README.md, REPRODUCTION.md,
ARCHITECTURE.md, docs/*.md and scenarios/*/README.md points to a file that exists (and, for a
``#section`` of a Markdown page, to a heading that exists), and README.md stays a short guide."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 450

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    fixed = [ROOT / "README.md", ROOT / "REPRODUCTION.md", ROOT / "ARCHITECTURE.md"]
    return fixed + sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "scenarios").glob("*/README.md"))


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (a ``[x](y)`` there is no link)."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text()))}


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file (or heading) does not exist, as ``target: why``."""
    out = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{target}: no heading #{anchor} in {os.path.relpath(dest, page.parent)}")
    return out


def test_the_pages_exist():
    for name in ("README.md", "REPRODUCTION.md", "ARCHITECTURE.md"):
        assert (ROOT / name).is_file(), name
    assert len(list((ROOT / "docs").glob("*.md"))) >= 5
    assert len(list((ROOT / "scenarios").glob("*/README.md"))) >= 5


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(page):
    assert broken_links(page) == []


def test_the_checker_finds_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A `code` heading, here\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-code-heading-here) ![img](there.md) [web](https://x.org/none)\n"
        "[gone](missing.md) [bad anchor](there.md#nowhere) `[not a link](missing2.md)`\n"
        "```\n[in a block](missing3.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "there.md#nowhere: no heading #nowhere in there.md"]


def test_readme_is_a_short_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < README_MAX_LINES
    # the two commands at the top, exactly as CI and a newcomer run them
    head = "\n".join(text.splitlines()[:40])
    assert "bash scripts/provision.sh && railbed run examples/scenarios/llm-small.yaml" in head
    assert "bash scripts/provision.sh && bash scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
