"""BM25 over whole pages with bm25s: build, save, memory-mapped load, search.

The index is cached under `<cache>/index/<corpus fingerprint>-<tokenizer>-k1_<k1>-b_<b>/`, so a
changed corpus or parameter gets a new index and an unchanged one loads in milliseconds. Saving
writes into a temporary folder and renames it into place, so a crash mid-write never leaves a
half index behind; an index that fails to load is rebuilt. Pages themselves are not stored in the
index: the caller keeps the page list, and hits point into it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from raqa.retrieval.atomic import BuildProgress, replace_folder
from raqa.retrieval.corpus import Page, corpus_key
from raqa.retrieval.stream_index import build_streaming
from raqa.retrieval.tokenize import TokenizerName, get_tokenizer

K1 = 0.9
B = 0.8
TOKENIZE_CHUNK = 2000
STREAM_ABOVE_PAGES = 100_000  # larger corpora are indexed in chunks on disk (stream_index.py)


class Hit(NamedTuple):
    rank: int  # 1 = best
    score: float  # BM25's score
    page: Page
    similarity: float | None = None  # the dense encoder's cosine with the question, where it ranked the page (dense.py)


def _no_progress(message: str, fraction: float) -> None:
    pass


class BM25Index:
    """A bm25s retriever plus the pages it ranks."""

    def __init__(
        self,
        retriever,
        pages: Sequence[Page],
        tokenizer: TokenizerName,
        load_seconds: float = 0.0,
    ):
        self.retriever = retriever
        self.pages = pages
        self.tokenizer = tokenizer
        self._tokenize = get_tokenizer(tokenizer)
        self._vocab = retriever.vocab_dict
        self.load_seconds = load_seconds  # time spent building or loading, for the benchmark

    @classmethod
    def build(
        cls,
        pages: Sequence[Page],
        tokenizer: TokenizerName = "wordpiece",
        k1: float = K1,
        b: float = B,
        progress: BuildProgress = _no_progress,
    ) -> BM25Index:
        import bm25s

        start = time.perf_counter()
        tokenize = get_tokenizer(tokenizer)
        corpus_tokens: list[list[str]] = []
        for first in range(0, len(pages), TOKENIZE_CHUNK):
            chunk = pages[first : first + TOKENIZE_CHUNK]
            corpus_tokens.extend(tokenize([f"{p.title}\n{p.text}" for p in chunk]))
            progress(
                f"Tokenizing pages {first + len(chunk):,}/{len(pages):,}",
                0.8 * (first + len(chunk)) / len(pages),
            )
        progress("Building the BM25 matrix", 0.85)
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(corpus_tokens, show_progress=False)
        progress("Index ready", 1.0)
        return cls(retriever, pages, tokenizer, time.perf_counter() - start)

    def save(self, folder: Path) -> None:
        """Write the index atomically: into a temporary sibling folder, then rename (see atomic.py)."""

        def write(tmp: Path) -> None:
            self.retriever.save(str(tmp), show_progress=False)
            (tmp / "raqa.json").write_text(json.dumps({"pages": len(self.pages), "tokenizer": self.tokenizer}))

        replace_folder(folder, write)

    @classmethod
    def load(cls, folder: Path, pages: Sequence[Page], tokenizer: TokenizerName = "wordpiece") -> BM25Index:
        """Load a saved index memory-mapped; raise ValueError if it does not match the pages."""
        import bm25s

        start = time.perf_counter()
        meta = json.loads((folder / "raqa.json").read_text())
        if meta.get("pages") != len(pages) or meta.get("tokenizer") != tokenizer:
            raise ValueError(f"{folder} was built for another corpus or tokenizer.")
        retriever = bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
        if retriever.scores["num_docs"] != len(pages):
            raise ValueError(f"{folder} holds {retriever.scores['num_docs']} documents, expected {len(pages)}.")
        return cls(retriever, pages, tokenizer, time.perf_counter() - start)

    def query_ids(self, question: str) -> list[int]:
        return [self._vocab[t] for t in self._tokenize([question])[0] if t in self._vocab]

    def scores(self, question: str) -> np.ndarray:
        """BM25's score of every page for the question, in page order (zeros when no token is in the vocabulary)."""
        ids = self.query_ids(question)
        return self.retriever.get_scores_from_ids(ids) if ids else np.zeros(len(self.pages), np.float32)

    def search(self, question: str, k: int) -> list[Hit]:
        """The k best pages for the question, best first; pages with a zero score are left out.

        Example:
            >>> index.search("Who painted the Mona Lisa?", 3)[0].page.title  # doctest: +SKIP
            'Mona Lisa'
        """
        return self.best(self.scores(question), k)

    def best(self, scores: np.ndarray, k: int) -> list[Hit]:
        """The k best pages by these scores (one question's `scores`), best first; zero scores left out."""
        k = min(k, len(scores))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        # subtle: sort by score, then by page position, so ties rank the same on every run
        top = top[np.lexsort((top, -scores[top]))]
        return [Hit(r, float(scores[i]), self.pages[i]) for r, i in enumerate(top, start=1) if scores[i] > 0]


def index_folder(
    cache_dir: Path,
    pages: Sequence[Page],
    tokenizer: TokenizerName,
    k1: float = K1,
    b: float = B,
) -> Path:
    return Path(cache_dir) / "index" / f"{corpus_key(pages)}-{tokenizer}-k1_{k1}-b_{b}"


def load_or_build(
    pages: Sequence[Page],
    cache_dir: Path,
    tokenizer: TokenizerName = "wordpiece",
    progress: BuildProgress = _no_progress,
) -> BM25Index:
    """Load the cached index for these pages, or build and cache it (also when the cache is corrupt)."""
    folder = index_folder(cache_dir, pages, tokenizer)
    if folder.exists():
        try:
            return BM25Index.load(folder, pages, tokenizer)
        except Exception as e:  # a corrupt or foreign cache is rebuilt, never trusted
            progress(
                f"Rebuilding the index: the cached one could not be read ({type(e).__name__})",
                0.0,
            )
    if len(pages) > STREAM_ABOVE_PAGES or hasattr(pages, "fingerprint"):
        # a large corpus is indexed in chunks straight to disk; it must be cacheable, so errors propagate
        build_streaming(pages, folder, tokenizer, progress=progress)
        return BM25Index.load(folder, pages, tokenizer)
    index = BM25Index.build(pages, tokenizer, progress=progress)
    try:
        index.save(folder)
    except OSError as e:
        progress(f"The index works but could not be cached: {e}", 1.0)
    return index
