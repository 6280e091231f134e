"""The README stays a newcomer's page and the docs/ pages hang together: every relative link
resolves to a file and, where it names an #anchor, to a heading of that file.

The examples the pages show are run by tests/tools/test_readme_examples.py (shell) and
spark_tests/baseline/test_readme_pyspark.py (PySpark)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
# Markdown links [text](target), not images' sources nor links inside code.
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def pages() -> list[Path]:
    return [README, ROOT / "perf" / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced blocks, where a heading or a link is one."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens dropped, spaces
    made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated one gets -1, -2, … as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(prose(page.read_text())):
        slug = anchor(heading)
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def relative_links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", prose(page.read_text()))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and fragment not in anchors(linked):
            broken.append(f"{target}: no such heading in {linked.relative_to(ROOT)}")
    assert not broken, broken


def test_anchor_is_githubs() -> None:
    assert anchor("Over several hosts: `--node-map FILE`") == "over-several-hosts---node-map-file"
    assert anchor("Kafka's own tools") == "kafkas-own-tools"


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[a](missing.md) [b](#top) [c](#nowhere) `[d](code.md)`\n")
    assert relative_links(page) == ["missing.md", "#top", "#nowhere"]
    assert anchors(page) == {"top"}


def linked_files(page: Path) -> set[Path]:
    return {(page.parent / target.partition("#")[0]).resolve() for target in relative_links(page)}


def test_the_readme_stays_short_and_it_and_the_index_link_every_docs_page() -> None:
    assert len(README.read_text().splitlines()) <= README_MAX_LINES
    assert set(DOCS.glob("*.md")) <= linked_files(README)
    assert set(DOCS.glob("*.md")) - {DOCS / "README.md"} <= linked_files(DOCS / "README.md")


def test_the_readmes_first_commands_start_the_broker_and_run_the_suite() -> None:
    """CI (.ci/run) runs `make test` as the README tells a new user to."""
    first_block = re.search(r"^```sh\n(.*?)^```", README.read_text(), re.M | re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block[1].splitlines()]
    assert [command for command in commands if command][:2] == ["make serve", "make test"]
