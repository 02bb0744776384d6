"""Load what a run needs, once, and turn a visitor's or a command's choices into a run.

`Service.load` reads the pages, the BM25 index and the base model (raqa/loading.py); everything else a run may need
is a `Lazy`, loaded when it is first used.

`Service.plan(question, form)` is the one place where raw choices (a `RunForm` from the page, a link, the command
line, a batch file or an experiment) become a `RunPlan`: the cleaned question, the chosen reader with its
backend, and validated settings with the reader's calibrated threshold. `Service.events(plan)` streams the
engine's events for it. The page, `ask`, `batch` and the experiments all go through these two calls, so the
same choices give the same event stream everywhere; When-to-retrieve runs build on them in
when_to_retrieve/planning.py.

Left out here: rendering (web/), printing (cli/) and scoring (evaluation/).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from raqa.config import AppConfig, RunForm, RunSettings, SettingsError, SpeedOptions, clean_question, validate_settings
from raqa.loading import Lazy, Progress, load_service, resolved, shares_passes
from raqa.models.base import Backend, ModelError
from raqa.models.local import TransformersBackend
from raqa.reading.engine import run
from raqa.reading.events import RunEvent
from raqa.reading.grader import Grader, shipped_thresholds
from raqa.reading.judge import AnswerJudge
from raqa.reading.line import OFFER_AFTER_S, Line, new_line
from raqa.reading.readers import BASE_READER, Reader
from raqa.retrieval.corpus import Page
from raqa.retrieval.dense import HybridIndex, shared_encoder
from raqa.retrieval.index import BM25Index

# Runs the page serves at once when its model shares forward passes between them (models/batcher.py); a model
# that does not (an endpoint, transformers' own forward) serves one run at a time, as the queue always did.
CONCURRENT_RUNS = 8


@dataclass(frozen=True)
class RunPlan:
    """One run, fully decided: what the engine reads, with which reader, judge and settings."""

    question: str
    reader: Reader
    backend: Backend
    settings: RunSettings
    judge: AnswerJudge | None = None  # reads every window's pages when there is one: the badge's evidence
    grader: Grader | None = None  # a graded reader's model asked whether the cited page states each answer


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
    # the backends of readers with a model of their own (a trained adapter, a model server), by reader name
    backends: dict[str, Lazy[Backend]] = field(default_factory=dict)
    # the When-to-retrieve model (the default model with the Adapt-LLM, NR-LLM and AR-LLM adapters,
    # when_to_retrieve.model.GreedyModel); not available when there is nothing to load
    adapt: Lazy = field(default_factory=Lazy)
    popularity: dict = field(default_factory=dict)  # normalised question -> popularity.PopItem (RAQA_POPQA)
    judge: Lazy[AnswerJudge] = field(default_factory=Lazy)  # the answer judge (reading/judge.py); none: no badge
    # BM25's and the nearest pages by MiniLM (retrieval/dense.py), made on first use; settings.retrieval picks it
    hybrid: Lazy[HybridIndex] = field(default=None)  # type: ignore[assignment]
    # each model's line of runs (reading/line.py), by id of its backend; made on a model's first run
    lines: dict[int, Line] = field(default_factory=dict)
    _lines_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        if self.hybrid is None:
            self.hybrid = Lazy(lambda: HybridIndex.with_shipped_vectors(self.index, shared_encoder()))

    @property
    def concurrent_runs(self) -> int:
        return CONCURRENT_RUNS if shares_passes(self.backend) else 1

    def with_speed(self, speed: SpeedOptions) -> Service:
        """This service with its base model computing under other speed options (the load test's off and on); the
        weights, index and pages are shared, not copied. Readers with their own adapter keep the default options."""
        small = resolved(self.backend)
        backend = small.with_speed(speed) if isinstance(small, TransformersBackend) else small
        config = replace(self.config, speed=speed)
        return replace(self, config=config, backend=backend)

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
        own = self.backends.get(name)  # the base and judge readers ask the base model (or nobody)
        return self.readers[name], own.get() if own is not None else self.backend

    # -- runs ------------------------------------------------------------------------------------------
    def plan(self, question: object, form: RunForm | None = None) -> RunPlan:
        """Validate a question and a form's raw choices into a run; SettingsError says what was wrong and what is
        allowed (within the public page's caps when config.public is set)."""
        question, form = clean_question(question), form or RunForm()
        settings = validate_settings(form, self.config.public)
        if form.reader is not None and not isinstance(form.reader, str):
            raise SettingsError(f"The reader must be a name, got {type(form.reader).__name__}.")
        reader, backend, settings, judge = self.reading(form.reader, settings)
        return RunPlan(question, reader, backend, settings=settings, judge=judge, grader=self.grader(reader, backend))

    def reading(
        self, reader: str | None, settings: RunSettings
    ) -> tuple[Reader, Backend, RunSettings, AnswerJudge | None]:
        """The reader called reader (None = the default), its backend, the settings with its calibration and the
        judge's threshold, and the judge: what a run needs besides its question (plan() and the experiments)."""
        chosen, backend = self.reader(reader)
        if backend is None:
            raise ModelError("This service was loaded without a model, so it cannot read pages.")
        judge = None if chosen.graded else self.answer_judge()
        if chosen.mode != "model" and judge is None:
            raise SettingsError(f"The reader {chosen.name!r} needs the answer judge (assets/judge), which is missing.")
        settings = chosen.settings(settings)
        if judge is not None:  # with a support model: gate and judge at Weak support, Answered from its threshold
            support = judge.support
            settings = settings.replace(
                judge_threshold=support.weak if support else judge.threshold,
                gate_threshold=judge.gate(settings.window),
                answered_threshold=support.answered if support else None,
            )
        return chosen, backend, settings, judge

    def grader(self, reader: Reader, backend: Backend) -> Grader | None:
        """The grader of a graded reader (its own model, with the calibrated thresholds); None for the others."""
        if not reader.graded:
            return None
        weak, answered = shipped_thresholds()
        return Grader(backend, weak, answered)

    def events(self, plan: RunPlan) -> Iterator[RunEvent]:
        """The engine's events for the plan, RunStarted ... Final, with its wait in its model's line after its pages."""
        events = run(
            plan.question,
            self.searcher(plan.settings),
            plan.backend,
            settings=plan.settings,
            judge=plan.judge,
            grader=plan.grader,
        )
        offer = (lambda: None) if plan.backend is self.backend else self.small_model_offer
        return self.line(plan.backend).through(events, offer)

    def line(self, backend: Backend) -> Line:
        """The line of runs for backend (made on its first run)."""
        with self._lines_lock:
            if id(backend) not in self.lines:
                self.lines[id(backend)] = new_line(backend, CONCURRENT_RUNS, shares_passes(backend))
            return self.lines[id(backend)]

    def small_model_offer(self) -> str | None:
        """The small model's reader, offered to a run waiting long for another model, when it would read soon."""
        small = self.backend  # a deferred small model not loaded yet would not read soon
        if small is None or not getattr(small, "loaded", True) or BASE_READER.name not in self.reader_names():
            return None
        return BASE_READER.label if self.line(self.backend).wait_s() < OFFER_AFTER_S else None

    def searcher(self, settings: RunSettings) -> BM25Index | HybridIndex:
        """What finds a run's pages: BM25 alone, or hybrid (BM25's and the nearest pages, by the encoder)."""
        return self.hybrid.get() if settings.retrieval == "hybrid" else self.index

    def answer_judge(self) -> AnswerJudge | None:
        """The answer judge, loaded on first use; None when this service has none."""
        return self.judge.get()

    # -- When to retrieve ------------------------------------------------------------------------------
    def has_adapt_model(self) -> bool:
        return self.adapt.available

    def adapt_model(self):
        """The When-to-retrieve model, loaded on first use; None when this service has none."""
        return self.adapt.get()

    # -- loading ---------------------------------------------------------------------------------------
    @classmethod
    def load(cls, config: AppConfig, progress: Progress = print, backend: Backend | None = None, **options) -> Service:
        """Load corpus, index and the base model (or use the given backend; options: load_model=False, defer_small=True
        for the page, loading.DeferredBackend); readers, servers, judge and adapters are registered, not loaded."""
        return load_service(cls, config, progress, backend, **options)
