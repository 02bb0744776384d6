"""PageStore: a large corpus file read on demand, with the same checks as the in-memory loaders."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from scripted import ScriptedBackend

import raqa.loading as loading
import raqa.retrieval.pagestore as pagestore
from raqa.config import AppConfig
from raqa.retrieval.corpus import CorpusError, load_corpus
from raqa.retrieval.index import load_or_build
from raqa.retrieval.pagestore import PageStore
from raqa.service import Service


def _write_jsonl(path: Path, pages) -> Path:
    path.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in pages))
    return path


def test_pages_read_on_demand_equal_the_loaded_ones(tiny_pages, tmp_path) -> None:
    path = _write_jsonl(tmp_path / "pages.jsonl", tiny_pages)
    store = PageStore.open(path, tmp_path / "cache")
    assert len(store) == len(tiny_pages)
    assert list(store) == load_corpus(path) == tiny_pages
    assert store[-1] == tiny_pages[-1] and store[2:4] == tiny_pages[2:4]
    with pytest.raises(IndexError):
        store[len(tiny_pages)]


def test_kilt_files_and_blank_lines(tmp_path) -> None:
    path = tmp_path / "kilt.jsonl"
    records = [{"wikipedia_id": "7", "wikipedia_title": "Apple", "text": ["Apple", "Apples are red.", "Sweet."]}]
    path.write_text("\n" + json.dumps(records[0]) + "\n\n")
    store = PageStore.open(path)
    assert len(store) == 1 and store[0].text == "Apples are red.\nSweet." and store[0].id == "7"


def test_the_offset_table_is_cached_and_a_changed_file_rescanned(tiny_pages, tmp_path, monkeypatch) -> None:
    path = _write_jsonl(tmp_path / "pages.jsonl", tiny_pages)
    PageStore.open(path, tmp_path / "cache")
    scans = []
    original = pagestore.scan
    monkeypatch.setattr(pagestore, "scan", lambda *a: scans.append(1) or original(*a))
    assert list(PageStore.open(path, tmp_path / "cache")) == tiny_pages and scans == []
    _write_jsonl(path, tiny_pages[:3])
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert len(PageStore.open(path, tmp_path / "cache")) == 3 and scans == [1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "1", "title": "A", "text": "x"}\nnot json\n', "line 2: not valid JSON"),
        ('{"id": "1", "title": "A", "text": "x"}\n{"id": "2", "title": "B"}\n', "line 2: expected the page text"),
        ('{"id": "1", "title": "A", "text": "x"}\n{"id": "1", "title": "B", "text": "y"}\n', "line 2: page id '1'"),
        ("\n\n", "the corpus file is empty"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_line(tmp_path, content, message) -> None:
    path = tmp_path / "pages.jsonl"
    path.write_text(content)
    with pytest.raises(CorpusError, match=message):
        PageStore.open(path, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing cached for a file that was refused


def test_threads_can_share_a_store(tiny_pages, tmp_path) -> None:
    store = PageStore.open(_write_jsonl(tmp_path / "pages.jsonl", tiny_pages * 1))
    errors = []

    def read() -> None:
        for _ in range(200):
            for i, page in enumerate(tiny_pages):
                if store[i] != page:
                    errors.append(i)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_store_is_indexed_by_streaming_and_cached(tiny_pages, tiny_index, broad_question, tmp_path) -> None:
    store = PageStore.open(_write_jsonl(tmp_path / "pages.jsonl", tiny_pages), tmp_path / "cache")
    index = load_or_build(store, tmp_path / "cache")
    assert [h.page for h in index.search(broad_question, 8)] == [h.page for h in tiny_index.search(broad_question, 8)]
    folder = next((tmp_path / "cache" / "index").iterdir())
    assert json.loads((folder / "raqa.json").read_text())["built"] == "streaming"
    again = load_or_build(store, tmp_path / "cache")  # loaded, not rebuilt
    assert again.search(broad_question, 3) == index.search(broad_question, 3)


def test_the_service_opens_a_large_file_as_a_store(tiny_pages, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(loading, "PAGESTORE_ABOVE_BYTES", 10)
    path = _write_jsonl(tmp_path / "pages.jsonl", tiny_pages)
    config = AppConfig(corpus=str(path), cache_dir=tmp_path / "cache")
    service = Service.load(config, progress=lambda m: None, backend=ScriptedBackend(["NOT FOUND"] * 10))
    assert isinstance(service.pages, PageStore)
    assert service.index.search("Who painted the Mona Lisa?", 1)[0].page.title == "Mona Lisa"
