"""Load what a run needs, once: the pages, the BM25 index and the model backend.

Shared by the web app, the CLI and the benchmark, so all three read the same corpus with the same
index and model. Progress messages go to a callback (a progress bar, the log, a UI status line).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from raqa.config import AppConfig
from raqa.corpus import Page, corpus_name, load_corpus
from raqa.index import BM25Index, load_or_build
from raqa.llm import Backend, TransformersBackend


@dataclass
class Service:
    config: AppConfig
    pages: list[Page]
    index: BM25Index
    backend: Backend | None  # None only when loaded without a model (retrieval-only work)
    corpus_label: str
    timings: dict[str, float]

    @classmethod
    def load(
        cls,
        config: AppConfig,
        progress: Callable[[str], None] = print,
        backend: Backend | None = None,
        load_model: bool = True,
    ) -> Service:
        """Load corpus, index and model (or use the given backend); raises CorpusError or ModelError."""
        timings: dict[str, float] = {}
        if backend is None and load_model:
            TransformersBackend.check_paths(config.model, config.adapter)  # before anything is cached
        start = time.perf_counter()
        progress(f"Loading the corpus: {corpus_name(config.corpus)}")
        pages = load_corpus(config.corpus)
        timings["corpus_s"] = time.perf_counter() - start
        start = time.perf_counter()
        index = load_or_build(
            pages,
            config.cache_dir,
            progress=lambda message, fraction: progress(message),
        )
        timings["index_s"] = time.perf_counter() - start
        start = time.perf_counter()
        if backend is None and load_model:
            backend = TransformersBackend.load(config.model, config.adapter, config.cache_dir, progress)
        timings["model_s"] = time.perf_counter() - start
        progress(f"Ready: {len(pages):,} pages, model {backend.name if backend else 'not loaded'}")
        return cls(config, pages, index, backend, corpus_name(config.corpus), timings)
