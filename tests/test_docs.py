"""The README and docs/ hold no number that could drift from its record, and no link that leads nowhere: every marked
table re-renders from the committed records to exactly what the page holds (`python -m lab.ops.render_docs`), and
every relative link, anchor included, names a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.ops.render_docs import BLOCK, TABLES, render

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_table_in_the_page_is_what_its_records_render(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert render(text) == text, f"{page.name} differs from its records: run python -m lab.ops.render_docs"


def test_every_table_is_shown_on_some_page_and_names_the_file_it_reads_and_the_command_that_makes_it() -> None:
    shown = {
        m["name"] for page in [ROOT / "README.md", *PAGES] for m in BLOCK.finditer(page.read_text(encoding="utf-8"))
    }
    assert shown == set(TABLES)
    for name, table in TABLES.items():
        text = table()
        assert re.search(r"`(assets|raqa)/", text.splitlines()[0] + text.splitlines()[1]), name
        # the limits are the code's, not a run's
        assert re.search(r"`python -m (raqa|lab)", text) or name == "deploy/limits", name


def test_render_rewrites_only_between_the_markers_and_refuses_an_unknown_table() -> None:
    page = "prose 1.0\n<!-- table: t -->\nold 2.0\n<!-- /table -->\nmore prose\n"
    assert render(page, {"t": lambda: "new"}) == "prose 1.0\n<!-- table: t -->\nnew\n<!-- /table -->\nmore prose\n"
    with pytest.raises(KeyError, match="Unknown table: t. Choose from: u"):
        render(page, {"u": lambda: ""})


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not this test's to reach
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_file() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
            broken.append(target)
        elif ROOT not in file.parents:
            broken.append(f"{target} (outside the repository)")
    assert broken == []


def test_the_readme_is_one_screen_of_orientation_that_points_at_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 130
    linked = {Path(target.partition("#")[0]).name for target in LINK.findall(readme)}
    assert {page.name for page in PAGES} <= linked
