"""The documentation stands on its own: every relative link in docs/ and
README.md reaches a file (and heading) of the repository, every backticked
path names one, and nothing points outside it (a clone has nothing beside
it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# The design notes the project started from live outside the repository;
# built from pieces so that this file does not match itself.
OUTSIDE = re.compile(r"\bDES" + r"IGN\b|\.\./sha" + r"red\b")


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lowercase, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text()
    assert not OUTSIDE.search(text)
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


TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".json", ".sh", ""}


def git_files() -> list[Path]:
    """The files of the repository as git sees them (tracked, or new and not
    ignored): a venv (``.venv-3.13/bin/python3.13``), a cache or a soak
    run's output in an ignored folder is no file of the repository."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [REPO / name for name in listed.stdout.splitlines() if (REPO / name).is_file()]


def repository_files() -> list[Path]:
    """Every text file of the repository."""
    return [p for p in git_files() if p.suffix in TEXT_SUFFIXES]


def test_no_file_refers_to_the_design_notes_outside_the_repository() -> None:
    """Docstrings, comments, tests, dashboards and configuration point into
    docs/, never at a design file a clone does not have."""
    found = []
    for path in repository_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "references outside the repository:\n" + "\n".join(found)


# How code, tests and comments point at a section: the page, then the
# heading in double quotes, e.g. docs/operating.md, then "Pause" quoted.
SECTION_REFERENCE = re.compile(r'docs/(\w+)\.md,?\s+\(?"([^"]+)"')


def headings(page: Path) -> set[str]:
    """A page's headings as text, without Markdown backticks."""
    return {h.replace("`", "").strip() for h in re.findall(r"^#+ (.+)$", page.read_text(), re.M)}


def test_section_references_in_code_name_a_heading_that_exists() -> None:
    """A reference that names a section keeps naming one when docs/ is
    reorganised (docstrings wrap, so lines are joined first)."""
    found = []
    for path in repository_files():
        if path.suffix != ".py":
            continue
        text = re.sub(r"\s*\n\s*(#\s*)?", " ", path.read_text())
        for page, section in SECTION_REFERENCE.findall(text):
            target = REPO / "docs" / f"{page}.md"
            if not target.exists() or section not in headings(target):
                found.append(f"{path.relative_to(REPO)}: docs/{page}.md, {section!r}")
    assert not found, "section references that name no heading:\n" + "\n".join(found)


def test_every_alerts_runbook_points_at_its_section_of_operating_md() -> None:
    rules = yaml.safe_load((REPO / "dashboards" / "alerts.yml").read_text())
    alerts = [r for group in rules["groups"] for r in group["rules"] if "alert" in r]
    sections = anchors(REPO / "docs" / "operating.md")
    assert alerts
    for rule in alerts:
        anchor = rule["alert"].lower()
        runbook = rule["annotations"]["runbook"]
        assert runbook.endswith(f"Runbook: docs/operating.md#{anchor}"), rule["alert"]
        assert anchor in sections, f"operating.md has no section for {rule['alert']}"


# --- every path the prose names resolves ------------------------------------------

PATH_SUFFIXES = (".py", ".toml", ".json", ".sh", ".md", ".yml", ".yaml", ".service")
# Not paths: bucket keys and templates ({root}/...), globs, URLs, options,
# absolute paths of a host, formulas.
NOT_A_PATH = re.compile(r"[{}*<>$~()=|\[\]]|\.\.\.|://|^[/-]")
OUTSIDE_THE_REPOSITORY = {
    "conf/spark-env.sh": "Spark's own configuration file, on a worker",
}


def generated_folders() -> tuple[str, ...]:
    """Folders .gitignore keeps out of the repository (``bench/results/``):
    a path into one names a file a run writes, not a file of the clone."""
    lines = (REPO / ".gitignore").read_text().splitlines()
    return tuple(line.lstrip("/") for line in lines if line.endswith("/") and "*" not in line)


def inline_code_words(text: str) -> set[str]:
    """The words of every inline code span (fenced blocks hold commands,
    trees and bucket examples, not references, and are left out)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {word for span in re.findall(r"`([^`\n]+)`", text) for word in span.split()}


def path_problem(word: str, page: Path, file_names: set[str]) -> str | None:
    """Why ``word``, a path-looking word of ``page``, names no file of the
    repository; ``None`` if it does or if it is no repository path."""
    if NOT_A_PATH.search(word) or word in OUTSIDE_THE_REPOSITORY:
        return None
    if word.startswith(generated_folders()):
        return None
    if "/" not in word:
        named = word.endswith(".py") or (bool(Path(word).suffix) and word in file_names)
        if (REPO / word).exists() or not named:
            return None
        return "a bare file name: write it with its directory"
    first = word.split("/", maxsplit=1)[0]
    package_dirs = {p.name for p in (REPO / "epochgc").iterdir() if p.is_dir()}
    top_level = {p.name for p in REPO.iterdir()}
    page_dirs = {p.name for p in page.parent.iterdir() if p.is_dir()}
    if not (first in top_level | package_dirs | page_dirs or word.endswith(PATH_SUFFIXES)):
        return None  # a bucket key (meta/nodes/), a pair of words (create/delete)
    places = (REPO / word, REPO / "epochgc" / word, page.parent / word)
    return None if any(place.exists() for place in places) else "no such file"


def test_every_path_in_the_docs_names_a_file_of_the_repository() -> None:
    """A backticked path (``tests/unit/test_docs.py``, ``bench/peers.py``,
    or package-relative ``gc/daemon/health.py``, read under ``epochgc/``)
    must exist; a bare ``probe.py`` says too little to be found."""
    file_names = {p.name for p in git_files()}
    found = {
        f"{page.relative_to(REPO)}: {word}": why
        for page in PAGES
        for word in inline_code_words(page.read_text())
        if (why := path_problem(word, page, file_names)) is not None
    }
    stale = sorted(f"{place} ({why})" for place, why in found.items())
    assert not stale, "paths in the docs that name no file:\n" + "\n".join(stale)


def outline(text: str) -> list[str]:
    """The ``##`` and ``###`` headings outside code blocks, as the contents
    list links them."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        found = None if fenced else re.match(r"^(##|###) (.+)$", line)
        if found:
            title = found.group(2).strip()
            slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            lines.append(f"{'' if found.group(1) == '##' else '  '}* [{title}](#{slug})")
    return lines


def test_operating_md_lists_its_sections_first() -> None:
    """A 1,300-line page needs a way in: its contents list is every section
    and subsection, in order, each linking its heading."""
    text = (REPO / "docs" / "operating.md").read_text()
    block = re.search(
        r"<!-- contents -->\n\*\*Contents\*\*\n\n(.*?)\n<!-- /contents -->", text, re.S
    )
    assert block, "docs/operating.md has no contents list"
    assert block.group(1).splitlines() == outline(text)


def test_operating_md_tunes_every_concurrency_setting_by_its_full_name() -> None:
    # store.delete_concurrency and gc.delete_concurrency read alike; a guide
    # that tunes only one leaves an operator raising the wrong one.
    import dataclasses  # noqa: PLC0415

    from epochgc.config import Config  # noqa: PLC0415

    text = (REPO / "docs" / "operating.md").read_text()
    names = [
        f"{section.name}.{f.name}"
        for section in dataclasses.fields(Config)
        for f in dataclasses.fields(section.default_factory())  # type: ignore[misc]
        if f.name.endswith("_concurrency")
    ]
    assert len(names) >= 4, names
    missing = [name for name in names if f"`{name}`" not in text]
    assert missing == [], missing
