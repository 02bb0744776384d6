"""Corpus loaders: JSONL and KILT files written by the tests, their errors, and the embedded corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raqa.retrieval.corpus import (
    EMBEDDED_NAME,
    CorpusError,
    Page,
    corpus_name,
    fingerprint,
    iter_pages,
    load_corpus,
)


def write_lines(path: Path, lines: list[str | dict | list]) -> Path:
    """Write one line per item: dicts and lists as JSON, strings as they are."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl_page(number: int) -> dict:
    return {"id": str(number), "title": f"Title {number}", "text": f"Text of page {number}."}


def kilt_page(number: int) -> dict:
    return {
        "wikipedia_id": str(number),
        "wikipedia_title": f"Title {number}",
        "text": [f"Title {number}\n", f"First paragraph {number}.\n", "  \n", f"Second paragraph {number}.\n"],
    }


def test_jsonl_pages_load_in_file_order(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "pages.jsonl",
        [
            {"id": "b", "title": "Bees", "text": "Bees make honey. They live in hives."},
            "",
            {"id": "a", "title": "Dvořák", "text": "Antonín Dvořák was a Czech composer.", "extra": [1, 2]},
            "   ",
            {"id": 7, "title": "Seven", "text": ""},
        ],
    )
    assert load_corpus(path) == [
        Page("b", "Bees", "Bees make honey. They live in hives."),
        Page("a", "Dvořák", "Antonín Dvořák was a Czech composer."),
        Page("7", "Seven", ""),
    ]


def test_jsonl_accepts_a_string_path(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "pages.jsonl", [jsonl_page(1)])
    assert load_corpus(str(path)) == [Page("1", "Title 1", "Text of page 1.")]


def test_kilt_pages_drop_the_title_paragraph_and_blank_paragraphs(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "kilt.jsonl", [kilt_page(12), kilt_page(13)])
    assert load_corpus(path) == [
        Page("12", "Title 12", "First paragraph 12.\nSecond paragraph 12."),
        Page("13", "Title 13", "First paragraph 13.\nSecond paragraph 13."),
    ]


def test_kilt_page_with_one_paragraph_keeps_it(tmp_path: Path) -> None:
    record = {"wikipedia_id": 5, "wikipedia_title": "Only", "text": ["Only paragraph."]}
    path = write_lines(tmp_path / "kilt.jsonl", [record])
    assert load_corpus(path) == [Page("5", "Only", "Only paragraph.")]


def test_iter_pages_streams(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "pages.jsonl", [jsonl_page(1), jsonl_page(2), "not json"])
    pages = iter_pages(path)
    assert next(pages) == Page("1", "Title 1", "Text of page 1.")
    assert next(pages).id == "2"
    with pytest.raises(CorpusError, match="line 3"):
        next(pages)


@pytest.mark.parametrize(
    ("lines", "line_number", "fragments"),
    [
        pytest.param(
            [jsonl_page(1), jsonl_page(2), '{"id": "3", "title": "Three", "text": '],
            3,
            ["not valid JSON"],
            id="bad-json-line-3",
        ),
        pytest.param(
            [jsonl_page(1), {"id": "2", "title": "Two"}],
            2,
            ["'text'", "found missing"],
            id="missing-text",
        ),
        pytest.param(
            [jsonl_page(1), jsonl_page(2), jsonl_page(3), {"title": "Four", "text": "x"}],
            4,
            ["'id'", "found missing"],
            id="missing-id",
        ),
        pytest.param(
            [jsonl_page(1), {"id": "2", "title": ["Two"], "text": "x"}],
            2,
            ["'title'", "found a list"],
            id="title-is-a-list",
        ),
        pytest.param(
            [jsonl_page(1), {"id": "2", "title": "Two", "text": None}],
            2,
            ["'text'", "found a NoneType"],
            id="text-is-null",
        ),
        pytest.param(
            [{"id": True, "title": "One", "text": "x"}],
            1,
            ["'id'", "found a bool"],
            id="id-is-a-bool",
        ),
        pytest.param(
            [jsonl_page(1), [1, 2, 3]],
            2,
            ["expected a JSON object, got list"],
            id="array-line",
        ),
        pytest.param(
            [jsonl_page(1), jsonl_page(2), '"just a string"'],
            3,
            ["expected a JSON object, got str"],
            id="string-line",
        ),
        pytest.param(
            [kilt_page(1), {"wikipedia_id": "2", "wikipedia_title": "Two", "text": "not a list"}],
            2,
            ["'text'", "list of paragraph strings"],
            id="kilt-text-not-a-list",
        ),
        pytest.param(
            [kilt_page(1), {"wikipedia_id": "2", "wikipedia_title": "Two", "text": ["Two", 3]}],
            2,
            ["list of paragraph strings"],
            id="kilt-paragraph-not-a-string",
        ),
        pytest.param(
            [kilt_page(1), {"wikipedia_id": "2", "text": ["Two", "Body."]}],
            2,
            ["'wikipedia_title'", "found missing"],
            id="kilt-missing-title",
        ),
    ],
)
def test_malformed_files_name_the_file_and_line(
    tmp_path: Path, lines: list, line_number: int, fragments: list[str]
) -> None:
    path = write_lines(tmp_path / "broken.jsonl", lines)
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    message = str(error.value)
    assert str(path) in message
    assert f"line {line_number}:" in message
    for fragment in fragments:
        assert fragment in message


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "dup.jsonl", [jsonl_page(1), jsonl_page(2), jsonl_page(1)])
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert str(path) in str(error.value)
    assert "'1' already used on line 1" in str(error.value)


def test_duplicate_id_error_names_the_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "dup.jsonl", [jsonl_page(1), jsonl_page(2), jsonl_page(1)])
    with pytest.raises(CorpusError, match="line 3"):
        load_corpus(path)


def test_non_utf8_file_is_a_corpus_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "1", "title": "A", "text": "x"}\n{"id": "2", "title": "B", "text": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match="line 2"):
        load_corpus(path)


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_empty_file_is_rejected(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert str(error.value) == f"{path}: the corpus file is empty."


def test_missing_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert str(error.value) == f"{path}: no such corpus file."


def test_a_folder_is_not_a_corpus_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="cannot be read"):
        load_corpus(tmp_path)


def test_corpus_error_is_a_value_error() -> None:
    assert issubclass(CorpusError, ValueError)


def test_embedded_corpus_has_10033_pages_with_unique_ids(embedded_pages: list[Page]) -> None:
    assert len(embedded_pages) == 10_033
    ids = [page.id for page in embedded_pages]
    assert len(set(ids)) == 10_033
    assert ids == [str(n) for n in range(1, 10_034)]
    assert all(page.title and isinstance(page.text, str) for page in embedded_pages)
    assert "Mona Lisa" in {page.title for page in embedded_pages}


def test_embedded_ids_are_stable_across_loads(embedded_pages: list[Page]) -> None:
    again = load_corpus()
    assert {p.title: p.id for p in again} == {p.title: p.id for p in embedded_pages}
    assert fingerprint(again) == fingerprint(embedded_pages)


def test_fingerprint_is_a_short_hex_digest(tiny_pages: list[Page]) -> None:
    digest = fingerprint(tiny_pages)
    assert len(digest) == 16
    int(digest, 16)
    assert fingerprint(list(tiny_pages)) == digest


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda pages: [pages[0]._replace(text=pages[0].text + "!"), *pages[1:]], id="one-text"),
        pytest.param(lambda pages: [pages[0]._replace(title="Bee"), *pages[1:]], id="one-title"),
        pytest.param(lambda pages: [pages[0]._replace(id="p9"), *pages[1:]], id="one-id"),
        pytest.param(lambda pages: pages[::-1], id="order"),
        pytest.param(lambda pages: pages[:-1], id="one-page-less"),
    ],
)
def test_fingerprint_changes_with_the_pages(tiny_pages: list[Page], change) -> None:
    assert fingerprint(change(list(tiny_pages))) != fingerprint(tiny_pages)


def test_fingerprint_keeps_field_boundaries() -> None:
    assert fingerprint([Page("a", "bc", "")]) != fingerprint([Page("ab", "c", "")])


def test_corpus_name() -> None:
    assert corpus_name(None) == EMBEDDED_NAME
    assert corpus_name("/data/my pages.jsonl") == "my pages.jsonl"
