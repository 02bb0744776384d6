"""The streamed index build scores exactly like the in-memory one, in bounded memory."""

from __future__ import annotations

import numpy as np
import pytest

from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.retrieval.stream_index import build_streaming

QUESTIONS = [
    "Who painted the Mona Lisa?",
    "highest mountain above sea level",
    "Which river ends in the Black Sea?",
    "bee everest mona photosynthesis danube chess curie wall",
    "Nobel Prizes",
]


@pytest.mark.parametrize("chunk_pages", [1, 3, 100])
@pytest.mark.parametrize("tokenizer", ["wordpiece", "word"])
def test_streamed_index_scores_like_the_in_memory_one(tiny_pages, tmp_path, chunk_pages, tokenizer) -> None:
    folder = tmp_path / "index"
    stats = build_streaming(tiny_pages, folder, tokenizer, chunk_pages=chunk_pages)
    streamed = BM25Index.load(folder, tiny_pages, tokenizer)
    built = BM25Index.build(tiny_pages, tokenizer)
    for question in QUESTIONS:
        a, b = streamed.search(question, 8), built.search(question, 8)
        assert [h.page.id for h in a] == [h.page.id for h in b], question
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], rtol=1e-5)
    assert stats["pages"] == len(tiny_pages) and stats["postings"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["index"]  # the scratch folder is gone


def test_streamed_index_on_the_embedded_corpus(embedded_pages, embedded_index, tmp_path) -> None:
    folder = tmp_path / "index"
    messages = []
    build_streaming(embedded_pages, folder, chunk_pages=2500, progress=lambda m, f: messages.append((m, f)))
    streamed = BM25Index.load(folder, embedded_pages)
    for question in ["Who painted the Mona Lisa?", "When did the Titanic sink?", "chemical symbol for gold"]:
        a, b = streamed.search(question, 20), embedded_index.search(question, 20)
        assert [h.page.id for h in a] == [h.page.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], rtol=1e-5)
    fractions = [f for _, f in messages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(messages) >= 8


def test_an_empty_page_and_a_page_without_tokens_are_indexed(tmp_path) -> None:
    pages = [Page("a", "Apple", "Apples are red."), Page("b", "", ""), Page("c", "?!", "...")]
    build_streaming(pages, tmp_path / "index", chunk_pages=2)
    index = BM25Index.load(tmp_path / "index", pages)
    assert [h.page.id for h in index.search("red apples", 5)] == ["a"]


def test_scale_bench_command_measures_a_generated_corpus(tmp_path, monkeypatch) -> None:
    import json

    from lab.cli import main, ops

    monkeypatch.setattr(ops, "sample_questions", lambda count, seed: ["Who painted the Mona Lisa?"] * count)
    out = tmp_path / "scale.json"
    assert (
        main(["bench", "scale", "--pages", "600", "--queries", "5", "--work", str(tmp_path / "w"), "--out", str(out)])
        == 0
    )
    record = json.loads(out.read_text())
    result = record["results"]
    assert record["command"].startswith("python -m lab bench scale --pages 600")
    assert result["pages"] == 600 and result["build"]["pages"] == 600 and result["build"]["postings"] > 600
    assert result["query_ms"]["n"] == 5 and result["rss_peak_mib"] > 0
    assert result["kilt_extrapolation"]["pages"] == 5_900_000 and result["kilt_extrapolation"]["build_hours"] > 0
    lines = (tmp_path / "w" / "generated-600.jsonl").read_text().splitlines()
    assert len(lines) == 600 and len({json.loads(line)["id"] for line in lines}) == 600


def test_scale_record_carries_the_shared_provenance() -> None:
    from lab.ops import scale

    record = scale.scale_record("python -m lab bench scale --pages 600", {"pages": 600})
    assert list(record)[:3] == ["measurement", "command", "results"] and record["results"] == {"pages": 600}
    assert {"code_version", "created", "machine", "load_average_before"} <= record.keys()
