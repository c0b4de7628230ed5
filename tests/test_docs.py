"""The docs a newcomer reads: every relative link resolves, and the pages stay short enough to read.

Logs (`docs/*-log.md`) keep the record as it was written and are outside the word budget; their links
are checked like every other page's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
LABELS_README = REPO_ROOT / "supersede_lib" / "labelling" / "data" / "README.md"
PAGES = sorted(
    {
        README,
        REPO_ROOT / "CONTRIBUTING.md",
        REPO_ROOT / "environments" / "README.md",
        LABELS_README,
        *(REPO_ROOT / "docs").glob("*.md"),
    }
)
README_MAX_BYTES = 12_000
README_MAX_PARAGRAPH_WORDS = 120
DOCS_MAX_WORDS = 30_000  # README, docs/*.md and the labels README, logs excluded

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"```.*?```", flags=re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.*)$", flags=re.MULTILINE)


def _prose(path: Path) -> str:
    return CODE_BLOCK.sub("", path.read_text(encoding="utf-8"))


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page offers; a repeated heading gets GitHub's -1, -2 suffixes."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(_prose(path)):
        anchor = heading_anchor(heading)
        count = seen.get(anchor, 0)
        found.add(anchor if count == 0 else f"{anchor}-{count}")
        seen[anchor] = count + 1
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of a page whose file or heading does not exist."""
    broken = []
    for target in LINK.findall(_prose(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target} (no such heading)")
    return broken


def test_heading_anchors_follow_github() -> None:
    assert heading_anchor("The instrument: the matcher against human labels") == (
        "the-instrument-the-matcher-against-human-labels"
    )
    assert heading_anchor("The CPU proof (`cpu_proof`)") == "the-cpu-proof-cpu_proof"


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert not broken_links(path), f"{path.relative_to(REPO_ROOT)}: {broken_links(path)}"


def test_the_readme_reads_in_minutes() -> None:
    assert README.stat().st_size <= README_MAX_BYTES
    for paragraph in re.split(r"\n\s*\n", _prose(README)):
        if not paragraph.lstrip().startswith("|"):  # tables are not paragraphs
            words = len(paragraph.split())
            assert words <= README_MAX_PARAGRAPH_WORDS, f"{words} words: {paragraph[:80]!r}"


def test_the_docs_stay_within_their_word_budget() -> None:
    pages = [page for page in PAGES if page.parent.name == "docs" and not page.name.endswith("-log.md")]
    words = sum(len(page.read_text(encoding="utf-8").split()) for page in [README, LABELS_README, *pages])
    assert words <= DOCS_MAX_WORDS, f"{words} words; move chronology to a docs/*-log.md page"
