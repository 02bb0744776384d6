"""Load what a run needs, once: the pages, the BM25 index and the model backend.

Shared by the web app, the CLI and the benchmark, so all three read the same corpus with the same
index and model. Progress messages go to a callback (a progress bar, the log, a UI status line).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raqa.config import AppConfig
from raqa.models.local import Backend, ModelError, TransformersBackend
from raqa.reading.readers import BASE_READER, Reader, available_readers
from raqa.retrieval.corpus import Page, corpus_name, load_corpus
from raqa.retrieval.index import BM25Index, load_or_build

# Corpus files larger than this are read from disk on demand (pagestore.py) instead of into memory.
PAGESTORE_ABOVE_BYTES = 64 * 1024 * 1024

# The reader the page starts with, unless RAQA_READER says otherwise (see README: chosen by measurement).
DEFAULT_READER = BASE_READER.name


@dataclass
class Service:
    config: AppConfig
    pages: Sequence[Page]  # a list, or a PageStore reading a large file on demand
    index: BM25Index
    backend: Backend | None  # None only when loaded without a model (retrieval-only work)
    corpus_label: str
    timings: dict[str, float]
    # the readers a visitor can choose, name -> (reader, its backend); the first is the default.
    # Empty means one reader: the base model on `backend`.
    readers: dict[str, tuple[Reader, Backend]] = field(default_factory=dict)
    # the "When to retrieve" model: the default model with the Adapt-LLM, NR-LLM and AR-LLM adapters
    # (adapt_model.GreedyModel); None when the adapters are not shipped or another model is configured
    adapt: object | None = None
    popularity: dict = field(default_factory=dict)  # normalised question -> popularity.PopItem (RAQA_POPQA)

    def reader(self, name: str | None = None) -> tuple[Reader, Backend]:
        """The reader called name (None = the default) with its backend; KeyError lists the names."""
        if not self.readers:
            if name in (None, BASE_READER.name):
                return BASE_READER, self.backend
            raise KeyError(f"Invalid reader: {name!r}. Choose from: {BASE_READER.name}.")
        if name is None:
            return next(iter(self.readers.values()))
        if name not in self.readers:
            raise KeyError(f"Invalid reader: {name!r}. Choose from: {', '.join(self.readers)}.")
        return self.readers[name]

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
        endpoints = _load_endpoints(config.endpoints) if config.endpoints else {}
        start = time.perf_counter()
        progress(f"Loading the corpus: {corpus_name(config.corpus)}")
        pages = open_corpus(config, progress)
        timings["corpus_s"] = time.perf_counter() - start
        start = time.perf_counter()
        index = load_or_build(
            pages,
            config.cache_dir,
            progress=lambda message, fraction: progress(message),
        )
        timings["index_s"] = time.perf_counter() - start
        start = time.perf_counter()
        readers: dict[str, tuple[Reader, Backend]] = {}
        adapt = None
        if backend is None and load_model:
            backend = TransformersBackend.load(config.model, config.adapter, config.cache_dir, progress)
            readers = _load_readers(config, backend, progress)
            adapt = _load_adapt(config, backend, progress)
        if endpoints:
            readers = {**(readers or {BASE_READER.name: (BASE_READER, backend)}), **endpoints}
            if config.reader in readers:  # e.g. RAQA_READER=endpoint:NAME starts the page on that server
                readers = {config.reader: readers[config.reader], **readers}
        timings["model_s"] = time.perf_counter() - start
        popularity = _load_popularity(config.popqa) if config.popqa else {}
        progress(f"Ready: {len(pages):,} pages, model {backend.name if backend else 'not loaded'}")
        return cls(config, pages, index, backend, corpus_name(config.corpus), timings, readers, adapt, popularity)


def _load_adapt(config: AppConfig, base: Backend, progress: Callable[[str], None]):
    """The Adapt-LLM adapters on a copy of the embedded model, when they are shipped and the page runs that model."""
    from raqa.when_to_retrieve.model import ADAPT_DIR, load_adapt_model

    if config.model is not None or config.adapter is not None or not isinstance(base, TransformersBackend):
        return None
    if not (ADAPT_DIR / "adapt" / "adapter_config.json").is_file():
        return None
    return load_adapt_model(config.cache_dir, ADAPT_DIR, progress, base=base)


def _load_popularity(path: str) -> dict:
    """PopQA questions by normalised text; a broken file stops the start with the loader's message."""
    from raqa.when_to_retrieve.popularity import PopularityError, load_popqa, lookup

    try:
        return lookup(load_popqa(path))
    except PopularityError as e:
        raise ModelError(f"RAQA_POPQA: {e}") from None


def open_corpus(config: AppConfig, progress: Callable[[str], None]) -> Sequence[Page]:
    """The corpus as a list of pages, or as a PageStore when the file is large."""
    from pathlib import Path

    if config.corpus is not None and Path(config.corpus).is_file():
        if Path(config.corpus).stat().st_size > PAGESTORE_ABOVE_BYTES:
            from raqa.retrieval.pagestore import PageStore

            return PageStore.open(config.corpus, config.cache_dir, lambda message, fraction: progress(message))
    return load_corpus(config.corpus)


def _load_endpoints(path: str) -> dict[str, tuple[Reader, Backend]]:
    """The operator's model servers (RAQA_ENDPOINTS), each offered to visitors as a reader."""
    from raqa.models.endpoint import EndpointBackend
    from raqa.models.endpoints_file import EndpointConfigError, load_endpoints

    try:
        configs = load_endpoints(path)
    except EndpointConfigError as e:
        raise ModelError(str(e)) from None
    return {f"endpoint:{c.name}": (Reader(f"endpoint:{c.name}", c.name, None), EndpointBackend(c)) for c in configs}


def _load_readers(
    config: AppConfig, base: Backend, progress: Callable[[str], None]
) -> dict[str, tuple[Reader, Backend]]:
    """The shipped readers, when the page runs the embedded model they were trained on and no adapter of
    its own; the configured default reader first."""
    if config.model is not None or config.adapter is not None:
        return {}
    readers = {BASE_READER.name: (BASE_READER, base)}
    for reader in available_readers():
        if reader.adapter is not None:
            readers[reader.name] = (
                reader,
                TransformersBackend.load(None, str(reader.adapter), config.cache_dir, progress),
            )
    first = (
        config.reader if config.reader in readers else DEFAULT_READER if DEFAULT_READER in readers else BASE_READER.name
    )
    return {first: readers[first], **{k: v for k, v in readers.items() if k != first}}
