"""Load what a run needs, once, and turn a visitor's or a command's choices into a run.

`Service.load` reads the pages, the BM25 index and the base model. Everything else a run may need is
loaded when it is first used: a trained reader's adapter, a model server's backend, the When-to-retrieve
adapters. So `python -m raqa ask` on the base model pays for the base model only.

`Service.plan(question, ...)` is the one place where raw choices (from the page's form, the command line,
a batch file or an experiment) become a `RunPlan`: the cleaned question, the chosen reader with its
backend, and validated settings with the reader's calibrated threshold. `Service.events(plan)` streams the
engine's events for it. The page, `ask`, `batch` and the experiments all go through these two calls, so the
same choices give the same event stream everywhere. `Service.decide(question, policy)` is the same for the
When-to-retrieve policies (with the question's popularity and BM25's top page looked up here).

Left out here: rendering (web/), printing (cli/) and scoring (evaluation/).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from raqa.config import AppConfig, RunSettings, SettingsError, SpeedOptions, clean_question, validate_settings
from raqa.models.base import Backend, ModelError
from raqa.models.local import TransformersBackend
from raqa.reading.engine import run
from raqa.reading.events import RunEvent
from raqa.reading.judge import CARD_FILE as JUDGE_CARD
from raqa.reading.judge import JUDGE_DIR, AnswerJudge
from raqa.reading.readers import BASE_READER, JUDGE_READERS, MODEL_JUDGE_READER, Reader, available_readers
from raqa.retrieval.corpus import Page, corpus_name, load_corpus
from raqa.retrieval.index import BM25Index, load_or_build
from raqa.text import normalize_answer
from raqa.when_to_retrieve.popularity import load_popularity

# Corpus files larger than this are read from disk on demand (pagestore.py) instead of into memory.
PAGESTORE_ABOVE_BYTES = 64 * 1024 * 1024

# The reader the page starts with, unless RAQA_READER says otherwise (see README: chosen by measurement): the
# model behind the answer judge's gate when the judge is shipped, else the base model.
DEFAULT_READER = MODEL_JUDGE_READER.name
# Runs the page serves at once when its model shares forward passes between them (models/batcher.py); a model
# that does not (an endpoint, transformers' own forward) serves one run at a time, as the queue always did.
CONCURRENT_RUNS = 8

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunPlan:
    """One run, fully decided: what the engine reads, with which reader, judge and settings."""

    question: str
    reader: Reader
    backend: Backend
    settings: RunSettings
    judge: AnswerJudge | None = None  # reads every window's pages when there is one: the badge's evidence


@dataclass
class Service:
    config: AppConfig
    pages: Sequence[Page]  # a list, or a PageStore reading a large file on demand
    index: BM25Index
    backend: Backend | None  # the base reader's model; None only when loaded without a model (retrieval only)
    corpus_label: str
    timings: dict[str, float]
    # the readers a visitor can choose, by name, the default first; {} means one reader, the base model
    readers: dict[str, Reader] = field(default_factory=dict)
    # backends already loaded, by reader name; a reader missing here is loaded by `loaders` on first use
    loaded: dict[str, Backend] = field(default_factory=dict)
    loaders: dict[str, Callable[[], Backend]] = field(default_factory=dict)
    # the When-to-retrieve model (the default model with the Adapt-LLM, NR-LLM and AR-LLM adapters,
    # when_to_retrieve.model.GreedyModel), loaded by adapt_loader on first use; both None: not available
    adapt: object | None = None
    adapt_loader: Callable[[], object] | None = None
    popularity: dict = field(default_factory=dict)  # normalised question -> popularity.PopItem (RAQA_POPQA)
    # the answer judge (reading/judge.py), loaded by judge_loader on first use; both None: runs have no judge
    judge: AnswerJudge | None = None
    judge_loader: Callable[[], AnswerJudge] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def concurrent_runs(self) -> int:
        return CONCURRENT_RUNS if getattr(self.backend, "batcher", None) is not None else 1

    def with_speed(self, speed: SpeedOptions) -> Service:
        """This service with its base model computing under other speed options (the load test's off and on); the
        weights, index and pages are shared, not copied. Readers with their own adapter keep the default options."""
        backend = self.backend.with_speed(speed) if isinstance(self.backend, TransformersBackend) else self.backend
        config = replace(self.config, speed=speed)
        return replace(self, config=config, backend=backend, loaded={}, _lock=threading.Lock())

    # -- readers ---------------------------------------------------------------------------------------
    def reader_names(self) -> list[str]:
        return list(self.readers) or [BASE_READER.name]

    def reader(self, name: str | None = None) -> tuple[Reader, Backend]:
        """The reader called name (None = the default) with its backend, loaded now if it was not yet.

        Raises SettingsError listing the names when there is no such reader, ModelError when it cannot load.
        """
        if not self.readers:
            if name in (None, BASE_READER.name):
                return BASE_READER, self.backend
            raise SettingsError(f"Invalid reader: {name!r}. Choose from: {BASE_READER.name}.")
        if name is None:
            name = next(iter(self.readers))
        if not isinstance(name, str) or name not in self.readers:
            raise SettingsError(f"Invalid reader: {name!r}. Choose from: {', '.join(self.readers)}.")
        return self.readers[name], self._backend_of(name)

    def _backend_of(self, name: str) -> Backend:
        if name not in self.loaded and (name == BASE_READER.name or self.readers[name].mode != "model"):
            return self.backend  # the judge readers ask the base model (or nobody)
        with self._lock:  # two visitors choosing the same reader at once load it once
            if name not in self.loaded:
                self.loaded[name] = self.loaders[name]()
            return self.loaded[name]

    # -- runs ------------------------------------------------------------------------------------------
    def plan(
        self,
        question: object,
        strategy: object = "iterative",
        order: object = "forward",
        window: object = RunSettings.window,
        k: object = RunSettings.k,
        grounded_only: object = False,
        rationale: object = False,
        reader: object = None,
    ) -> RunPlan:
        """Validate raw choices into a run; SettingsError says what was wrong and what is allowed (within the public
        page's caps when config.public is set)."""
        question = clean_question(question)
        settings = validate_settings(strategy, order, window, k, grounded_only, rationale, self.config.public)
        if reader is not None and not isinstance(reader, str):
            raise SettingsError(f"The reader must be a name, got {type(reader).__name__}.")
        return RunPlan(question, *self.reading(reader, settings))

    def reading(
        self, reader: str | None, settings: RunSettings
    ) -> tuple[Reader, Backend, RunSettings, AnswerJudge | None]:
        """The reader called reader (None = the default), its backend, the settings with its calibration and the
        judge's threshold, and the judge: what a run needs besides its question (plan() and the experiments)."""
        chosen, backend = self.reader(reader)
        if backend is None:
            raise ModelError("This service was loaded without a model, so it cannot read pages.")
        judge = self.answer_judge()
        if chosen.mode != "model" and judge is None:
            raise SettingsError(f"The reader {chosen.name!r} needs the answer judge (assets/judge), which is missing.")
        settings = chosen.settings(settings)
        if judge is not None:  # with a support model: gate and judge at Weak support, Answered from its threshold
            support = judge.support
            settings = settings.replace(judge_threshold=support.weak if support else judge.threshold,
                                        gate_threshold=judge.gate(settings.window),
                                        answered_threshold=support.answered if support else None)  # fmt: skip
        return chosen, backend, settings, judge

    def events(self, plan: RunPlan) -> Iterator[RunEvent]:
        """The engine's events for the plan: RunStarted ... Final (or RunFailed)."""
        return run(plan.question, self.index, plan.backend, plan.settings, plan.judge)

    def answer_judge(self) -> AnswerJudge | None:
        """The answer judge, loaded on first use; None when this service has none."""
        if self.judge is None and self.judge_loader is not None:
            with self._lock:
                if self.judge is None:
                    self.judge = self.judge_loader()
        return self.judge

    def top_page(self, question: str) -> list:
        """BM25's best page for the question (the When-to-retrieve context), as a list of at most one hit."""
        return self.index.search(question, 1)

    # -- When to retrieve ------------------------------------------------------------------------------
    def has_adapt_model(self) -> bool:
        return self.adapt is not None or self.adapt_loader is not None

    def adapt_model(self):
        """The When-to-retrieve model, loaded on first use; None when this service has none."""
        if self.adapt is None and self.adapt_loader is not None:
            with self._lock:
                if self.adapt is None:
                    self.adapt = self.adapt_loader()
        return self.adapt

    def popularity_of(self, question: str):
        """The question's popularity (from RAQA_POPQA) with the configured threshold, as the policies take it."""
        from raqa.when_to_retrieve.policies import Popularity

        item = self.popularity.get(normalize_answer(question))
        return Popularity(item.popularity if item else None, self.config.pop_threshold)

    def decide(self, question: str, policy: str) -> Iterator:
        """One When-to-retrieve policy's events for the question; ModelError when there is no such model."""
        from raqa.when_to_retrieve.policies import decide

        model = self.adapt_model()
        if model is None:
            raise ModelError(NO_ADAPT_MODEL)
        return decide(question, policy, model, self.top_page, self.popularity_of(question))

    def pipeline(self, question, policy: str, threshold: float | None, order="forward", window=RunSettings.window,
                 k=RunSettings.k, reader: str | None = None) -> Iterator:  # fmt: skip
        """Both papers in one run (when_to_retrieve/pipeline.py): closed-book answer, decision, the iterative
        windows read by the reader with grounded answers only, then an answer or "I don't know"."""
        from raqa.when_to_retrieve.pipeline import check_policy, pipeline
        from raqa.when_to_retrieve.uncertainty import closed_book

        plan = self.plan(question, "iterative", order, window, k, True, False, reader)  # validates before any work
        try:
            check_policy(policy, threshold)
        except ValueError as e:
            raise SettingsError(str(e)) from None
        model = self.adapt_model()
        if model is None:
            raise ModelError(NO_ADAPT_MODEL)
        return pipeline(plan.question, policy, threshold, lambda q: closed_book(model, q), lambda q: self.events(plan))

    # -- loading ---------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        config: AppConfig,
        progress: Progress = print,
        backend: Backend | None = None,
        load_model: bool = True,
    ) -> Service:
        """Load corpus, index and the base model (or use the given backend); raises CorpusError or ModelError.

        Trained readers, model servers and the When-to-retrieve adapters are registered, not loaded.
        """
        timings: dict[str, float] = {}
        if backend is None and load_model:
            TransformersBackend.check_paths(config.model, config.adapter)  # before anything is cached
        endpoints = _endpoint_backends(config.endpoints, config.public is not None) if config.endpoints else {}
        start = time.perf_counter()
        progress(f"Loading the corpus: {corpus_name(config.corpus)}")
        pages = open_corpus(config, progress)
        timings["corpus_s"] = time.perf_counter() - start
        start = time.perf_counter()
        index = load_or_build(pages, config.cache_dir, progress=lambda message, fraction: progress(message))
        timings["index_s"] = time.perf_counter() - start
        start = time.perf_counter()
        service = cls(config, pages, index, backend, corpus_name(config.corpus), timings)
        if backend is None and load_model:
            service.backend = TransformersBackend.load(
                config.model, config.adapter, config.cache_dir, progress, config.speed
            )
            service._register_readers(progress)
            service._register_adapt_model(progress)
            service._register_judge(progress)
        if endpoints:
            service.readers = service.readers or {BASE_READER.name: BASE_READER}
            for name, (reader, endpoint_backend) in endpoints.items():
                service.readers[name] = reader
                service.loaded[name] = endpoint_backend
        service.readers = _default_first(service.readers, config.reader)
        timings["model_s"] = time.perf_counter() - start
        service.popularity = load_popularity(config.popqa) if config.popqa else {}
        progress(f"Ready: {len(pages):,} pages, model {service.backend.name if service.backend else 'not loaded'}")
        return service

    def _register_readers(self, progress: Progress) -> None:
        """The shipped readers, when the page runs the embedded model they were trained on and no adapter of
        its own; each adapter is loaded when a visitor first chooses it."""
        if self.config.model is not None or self.config.adapter is not None:
            return
        self.readers = {BASE_READER.name: BASE_READER}
        for reader in available_readers():
            if reader.adapter is not None:
                self.readers[reader.name] = reader
                self.loaders[reader.name] = _adapter_loader(reader.adapter, self.config.cache_dir, progress)

    def _register_judge(self, progress: Progress) -> None:
        """The answer judge, when one is shipped: every run's badge then comes from it, and the readers it makes
        possible (the model + judge, the judge alone) are offered after the model's own."""
        if not (JUDGE_DIR / JUDGE_CARD).is_file():
            return

        def load() -> AnswerJudge:
            progress("Loading the answer judge")
            return AnswerJudge.load(JUDGE_DIR)

        self.judge_loader = load
        self.readers = self.readers or {BASE_READER.name: BASE_READER}
        self.readers.update({reader.name: reader for reader in JUDGE_READERS})

    def _register_adapt_model(self, progress: Progress) -> None:
        """The Adapt-LLM adapters on a copy of the embedded model, when they are shipped and the page runs it."""
        from raqa.when_to_retrieve.model import ADAPT_DIR, load_adapt_model

        base = self.backend
        if (
            self.config.model is not None
            or self.config.adapter is not None
            or not isinstance(base, TransformersBackend)
        ):
            return
        if not (ADAPT_DIR / "adapt" / "adapter_config.json").is_file():
            return
        cache_dir = self.config.cache_dir
        self.adapt_loader = lambda: load_adapt_model(cache_dir, ADAPT_DIR, progress, base=base)


NO_ADAPT_MODEL = (
    "The When-to-retrieve view needs the Adapt-LLM, NR-LLM and AR-LLM adapters (assets/adapt, made by "
    "python -m raqa train-adapt) on the embedded model; this service runs without them."
)


def _adapter_loader(adapter: Path, cache_dir: Path, progress: Progress) -> Callable[[], Backend]:
    return lambda: TransformersBackend.load(None, str(adapter), cache_dir, progress)


def _default_first(readers: dict[str, Reader], configured: str | None) -> dict[str, Reader]:
    """The configured reader first (RAQA_READER), else DEFAULT_READER, else the order they were found in."""
    if not readers:
        return readers
    first = (
        configured if configured in readers else DEFAULT_READER if DEFAULT_READER in readers else next(iter(readers))
    )
    return {first: readers[first], **{k: v for k, v in readers.items() if k != first}}


def open_corpus(config: AppConfig, progress: Progress) -> Sequence[Page]:
    """The corpus as a list of pages, or as a PageStore when the file is large."""
    if config.corpus is not None and Path(config.corpus).is_file():
        if Path(config.corpus).stat().st_size > PAGESTORE_ABOVE_BYTES:
            from raqa.retrieval.pagestore import PageStore

            return PageStore.open(config.corpus, config.cache_dir, lambda message, fraction: progress(message))
    return load_corpus(config.corpus)


def _endpoint_backends(path: str, public_page: bool = False) -> dict[str, tuple[Reader, Backend]]:
    """The operator's model servers (RAQA_ENDPOINTS), each offered to visitors as a reader; on a public page only
    those the file marks "public": true (a server with a paid key is not offered to strangers by default)."""
    from raqa.models.endpoint import EndpointBackend
    from raqa.models.endpoints_file import READER_PREFIX, EndpointConfigError, load_endpoints

    try:
        configs = load_endpoints(path)
    except EndpointConfigError as e:
        raise ModelError(str(e)) from None
    offered = [c for c in configs if c.public or not public_page]
    return {READER_PREFIX + c.name: (Reader(READER_PREFIX + c.name, c.name, None), EndpointBackend(c)) for c in offered}
