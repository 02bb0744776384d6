"""Load what a service runs on: the pages, the BM25 index and the base model at once; every other model (a trained
reader's adapter, a model server, the answer judge, the When-to-retrieve adapters) registered as a `Lazy`, loaded
when a run first needs it. So `python -m raqa ask` on the base model pays for the base model only.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from raqa.config import AppConfig, RunSettings
from raqa.models.base import Backend, ModelError
from raqa.models.endpoint import EndpointBackend
from raqa.models.endpoints_file import READER_PREFIX, EndpointConfigError, load_endpoints
from raqa.models.gguf_parts import QWEN_1P5B, part_files
from raqa.models.llamacpp import LlamaCppBackend
from raqa.models.local import EMBEDDED_MODEL_NAME, TransformersBackend
from raqa.models.torch_thread import one_pool
from raqa.reading.engine import warm_up
from raqa.reading.judge import JUDGE_CARD as JUDGE_CARD
from raqa.reading.judge import JUDGE_DIR, AnswerJudge
from raqa.reading.readers import (
    BASE_READER,
    GRADED_READER,
    JUDGE_READERS,
    MODEL_JUDGE_READER,
    Reader,
    available_readers,
)
from raqa.retrieval.corpus import Page, corpus_name, load_corpus
from raqa.retrieval.index import load_or_build
from raqa.retrieval.pagestore import PageStore
from raqa.when_to_retrieve.model import ADAPT_DIR, load_adapt_model
from raqa.when_to_retrieve.popularity import load_popularity

T = TypeVar("T")
Progress = Callable[[str], None]

# Corpus files larger than this are read from disk on demand (pagestore.py) instead of into memory.
PAGESTORE_ABOVE_BYTES = 64 * 1024 * 1024

# The reader the page starts with, unless RAQA_READER says otherwise: the 1.5B model graded against the page when its
# packages are installed (issue 37: the 135M model cannot read), else the model behind the answer judge's gate when
# the judge is shipped, else the base model.
DEFAULT_READERS = (GRADED_READER.name, MODEL_JUDGE_READER.name)


class Lazy(Generic[T]):
    """A thing loaded on first use, once, even when two visitors ask for it at the same moment.

    Example:
        >>> calls = []
        >>> model = Lazy(lambda: calls.append(1) or "weights")
        >>> model.get(), model.get(), calls
        ('weights', 'weights', [1])
        >>> Lazy().get() is None, Lazy(value=3).get()
        (True, 3)
    """

    def __init__(self, load: Callable[[], T] | None = None, value: T | None = None):
        self._load, self._value, self._lock = load, value, threading.Lock()

    @property
    def available(self) -> bool:
        """Whether there is something to get (loaded already, or a way to load it)."""
        return self._value is not None or self._load is not None

    @property
    def loaded(self) -> T | None:
        """The thing if it is loaded already, without loading it."""
        return self._value

    def get(self) -> T | None:
        """The thing, loaded now if it was not yet; None when there is nothing to load."""
        if self._value is None and self._load is not None:
            with self._lock:
                if self._value is None:
                    self._value = self._load()
        return self._value


class DeferredBackend:
    """The small model, standing in by its name until it is loaded: by the thread the page starts once it is built
    (`after_start`), or by the first run that needs it sooner (which then waits for it). So `python app.py` serves the page
    without first paying the 7 s of transformers and SmolLM2 that the 1.5B's visitors never use. Every attribute but
    the name and what the page asks before anyone reads (can_score, shares_passes) is the loaded backend's."""

    can_score = True  # the small model is on this machine (attribution needs it)
    runs_at_once = 1  # as every local model: a line need not load it to know

    def __init__(self, load: Callable[[], Backend], name: str, shares_passes: bool):
        self._backend, self._error = Lazy(load), None
        self.name, self.shares_passes = name, shares_passes  # shares_passes: it will have a batcher

    @property
    def loaded(self) -> bool:
        return self._backend.loaded is not None

    def resolve(self) -> Backend:
        """The backend, loaded now if no one has yet; a load that failed raises its ModelError again, untried."""
        if self._error is not None:
            raise self._error
        try:
            return self._backend.get()
        except ModelError as e:
            self._error = e
            raise

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):  # not the backend's: copy and pickle probe these before __init__ has run
            raise AttributeError(attribute)
        return getattr(self.resolve(), attribute)


def after_start(service) -> None:
    """What the page does in the background once it is built: the default reader's fixed prompts read once (when it is
    the graded 1.5B: engine.warm_up), then the deferred small model loaded."""
    # each is best effort: a run that needs the small model says why it could not load; the 1.5B's runs go on
    for step in (lambda: _warm_default_reader(service), lambda: resolved(service.backend)):
        try:
            step()
        except Exception as e:  # noqa: BLE001 - in a thread, an error would only print a traceback
            print(f"After start: {type(e).__name__}: {e}", file=sys.stderr)


def _warm_default_reader(service) -> None:
    reader, backend = service.reader()
    if reader.graded:
        warm_up(backend, reader.settings(RunSettings()))


def resolved(backend: Backend | DeferredBackend | None) -> Backend | None:
    """The backend itself: a deferred one loaded (now, if it was not yet)."""
    return backend.resolve() if isinstance(backend, DeferredBackend) else backend


def shares_passes(backend: Backend | DeferredBackend | None) -> bool:
    """Whether the model packs several runs' forward passes together (it has a batcher), asked without loading it."""
    if isinstance(backend, DeferredBackend):
        return backend.shares_passes
    return getattr(backend, "batcher", None) is not None


def load_service(
    cls, config: AppConfig, progress: Progress, backend: Backend | None, load_model: bool = True, defer_small=False
):
    """A service of class cls with corpus, index and the base model (or the given backend) loaded; the readers,
    servers, judge and When-to-retrieve adapters registered. Raises CorpusError or ModelError. With defer_small
    (the page), the embedded small model is a DeferredBackend when the 1.5B is the default reader."""
    timings: dict[str, float] = {}
    if backend is None and load_model:
        TransformersBackend.check_paths(config.model, config.adapter)  # before anything is cached
        one_pool()  # torch computes on its own thread only, beside llama.cpp (raqa/models/torch_thread.py)
    endpoints = _endpoint_readers(config.endpoints, config.public is not None) if config.endpoints else {}
    start = time.perf_counter()
    progress(f"Loading the corpus: {corpus_name(config.corpus)}")
    pages = open_corpus(config, progress)
    timings["corpus_s"] = time.perf_counter() - start
    start = time.perf_counter()
    index = load_or_build(pages, config.cache_dir, progress=lambda message, fraction: progress(message))
    timings["index_s"] = time.perf_counter() - start
    start = time.perf_counter()
    service = cls(config, pages, index, backend=backend, corpus_label=corpus_name(config.corpus), timings=timings)
    if backend is None and load_model:
        service.backend = _small_model(config, progress, defer_small and _defers(config))
        if config.model is None and config.adapter is None:  # the shipped adapters fit the embedded model only
            _register_readers(service, progress)
            _register_adapt_model(service, progress)
        _register_judge(service, progress)
        if config.model is None and config.adapter is None:
            _register_graded_reader(service, progress)
    if endpoints:
        service.readers = service.readers or {BASE_READER.name: BASE_READER}
        for name, (reader, endpoint_backend) in endpoints.items():
            service.readers[name] = reader
            service.backends[name] = Lazy(value=endpoint_backend)
    service.readers = _default_first(service.readers, config.reader)
    first = next(iter(service.readers), None)
    if first in service.backends and load_model and backend is None:
        service.backends[first].get()  # the default reader's own model: loaded before the first visitor asks
    timings["model_s"] = time.perf_counter() - start
    if load_model and RunSettings.retrieval == "hybrid":
        # the default retrieval's encoder (3 s) loads meanwhile, so the first visitor does not wait for it
        threading.Thread(target=service.hybrid.get, name="raqa-warm-encoder", daemon=True).start()
    service.popularity = load_popularity(config.popqa) if config.popqa else {}
    progress(f"Ready: {len(pages):,} pages, model {service.backend.name if service.backend else 'not loaded'}")
    return service


def _small_model(config: AppConfig, progress: Progress, defer: bool) -> Backend | DeferredBackend:
    """The base reader's model (the small one): loaded now, or deferred (see DeferredBackend)."""

    def load() -> Backend:
        return TransformersBackend.load(config.model, config.adapter, config.cache_dir, progress, config.speed)

    if not defer:
        return load()
    return DeferredBackend(load, EMBEDDED_MODEL_NAME, config.speed.lean_forward and config.speed.batching)


def _defers(config: AppConfig) -> bool:
    """Whether the small model can wait: it is the embedded one and the 1.5B, the default reader, can be offered."""
    default = config.reader in (None, GRADED_READER.name)
    return config.model is None and config.adapter is None and default and _graded_reader_missing() is None


def _register_readers(service, progress: Progress) -> None:
    """The shipped readers; each adapter is loaded when a visitor first chooses it."""
    service.readers = {BASE_READER.name: BASE_READER}
    cache_dir = service.config.cache_dir
    for reader in available_readers():
        if reader.adapter is not None:
            service.readers[reader.name] = reader
            adapter = str(reader.adapter)
            service.backends[reader.name] = Lazy(
                lambda a=adapter: TransformersBackend.load(None, a, cache_dir, progress)
            )


def _register_judge(service, progress: Progress) -> None:
    """The answer judge, when one is shipped: every run's badge then comes from it, and the readers it makes
    possible (the model + judge, the judge alone) are offered after the model's own."""
    if not (JUDGE_DIR / JUDGE_CARD).is_file():
        return

    def load() -> AnswerJudge:
        progress("Loading the answer judge")
        return AnswerJudge.load(JUDGE_DIR)

    service.judge = Lazy(load)
    service.readers = service.readers or {BASE_READER.name: BASE_READER}
    service.readers.update({reader.name: reader for reader in JUDGE_READERS})


def _register_graded_reader(service, progress: Progress) -> None:
    """The 1.5B reader in llama.cpp, when xllamacpp and the model's parts are installed; loaded now when it is the
    page's default (the first visitor should not wait for it), else when a visitor first chooses it."""
    if missing := _graded_reader_missing():
        progress(f"The 1.5B reader is not offered: {missing}")
        return
    cache_dir = service.config.cache_dir
    service.readers = {GRADED_READER.name: GRADED_READER, **(service.readers or {BASE_READER.name: BASE_READER})}
    service.backends[GRADED_READER.name] = Lazy(lambda: LlamaCppBackend.load(cache_dir=cache_dir, progress=progress))


def _graded_reader_missing() -> str | None:
    """Why the 1.5B reader cannot be offered here, or None when it can."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "llama.cpp is not installed (pip install -r requirements.txt)"
    try:
        part_files(QWEN_1P5B)
    except ModelError as e:
        return str(e)
    return None


def _register_adapt_model(service, progress: Progress) -> None:
    """The Adapt-LLM adapters on a copy of the embedded model, when they are shipped."""
    base = service.backend
    small = isinstance(base, (TransformersBackend, DeferredBackend))
    if small and (ADAPT_DIR / "adapt" / "adapter_config.json").is_file():
        cache_dir = service.config.cache_dir
        service.adapt = Lazy(lambda: load_adapt_model(cache_dir, ADAPT_DIR, progress, base=resolved(base)))


def _default_first(readers: dict[str, Reader], configured: str | None) -> dict[str, Reader]:
    """The configured reader first (RAQA_READER), else the first of DEFAULT_READERS offered, else the order they were found in."""
    if not readers:
        return readers
    first = (
        configured
        if configured in readers
        else next((name for name in DEFAULT_READERS if name in readers), next(iter(readers)))
    )
    return {first: readers[first], **{k: v for k, v in readers.items() if k != first}}


def open_corpus(config: AppConfig, progress: Progress) -> Sequence[Page]:
    """The corpus as a list of pages, or as a PageStore when the file is large."""
    if config.corpus is not None and Path(config.corpus).is_file():
        if Path(config.corpus).stat().st_size > PAGESTORE_ABOVE_BYTES:
            return PageStore.open(config.corpus, config.cache_dir, lambda message, fraction: progress(message))
    return load_corpus(config.corpus)


def _endpoint_readers(path: str, public_page: bool = False) -> dict[str, tuple[Reader, Backend]]:
    """The operator's model servers (RAQA_ENDPOINTS), each offered to visitors as a reader; on a public page only
    those the file marks "public": true (a server with a paid key is not offered to strangers by default)."""
    try:
        configs = load_endpoints(path)
    except EndpointConfigError as e:
        raise ModelError(str(e)) from None
    offered = [c for c in configs if c.public or not public_page]
    return {READER_PREFIX + c.name: (Reader(READER_PREFIX + c.name, c.name, None), EndpointBackend(c)) for c in offered}
