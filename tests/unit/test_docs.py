"""The documentation stands on its own: every relative link in docs/ and
README.md reaches a file (and heading) of the repository, and nothing
points outside it (a clone has no ../shared)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lowercase, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text()
    assert "../shared" not in text and "DESIGN.md" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path_text, _, anchor = target.partition("#")
        path = (page.parent / path_text).resolve() if path_text else page
        assert path.is_relative_to(REPO), f"{page.name}: {target} leaves the repository"
        assert path.exists(), f"{page.name}: {target} does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name}: no heading #{anchor} in {path.name}"


def test_docs_has_the_four_guides_and_a_schema_per_public_document() -> None:
    names = {p.name for p in (REPO / "docs").glob("*.md")}
    assert {"architecture.md", "contract.md", "operating.md", "integrating.md"} <= names
    schemas = {p.name for p in (REPO / "docs" / "schemas").glob("*.schema.json")}
    contract = (REPO / "docs" / "contract.md").read_text()
    for schema in schemas:
        assert f"schemas/{schema}" in contract, f"contract.md does not mention {schema}"
