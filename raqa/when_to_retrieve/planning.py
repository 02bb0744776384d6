"""When-to-retrieve runs on a loaded service: the page's pipeline and the Adapt-LLM paper's policies.

`pipeline(service, question, policy, threshold, form)` is what the page, `python -m raqa pipeline` and the
recordings run: the base model's closed-book answer and its signals, the policy's decision, and the iterative
windows read by the chosen reader with grounded answers only (the run Service.plan decides). `route(service,
question, policy)` runs one of the paper's policies on the Adapt-LLM adapters, with the question's popularity
(RAQA_POPQA) and BM25's top page looked up here (`route`). Both yield the one stream of pipeline.py. Left out here:
loading the service and its models (Service.load), and rendering or printing the events.
"""

from __future__ import annotations

from collections.abc import Iterator

from raqa.config import RunForm, SettingsError
from raqa.models.base import ModelError
from raqa.retrieval.index import Hit
from raqa.text import normalize_answer
from raqa.when_to_retrieve import policies
from raqa.when_to_retrieve.pipeline import PipelineEvent, by_policy, pipeline_events
from raqa.when_to_retrieve.uncertainty import closed_book

NO_ADAPT_MODEL = (
    "The When-to-retrieve view needs the Adapt-LLM, NR-LLM and AR-LLM adapters (assets/adapt, made by "
    "python -m lab train adapt) on the embedded model; this service runs without them."
)
RUN_FORM = RunForm()  # the page's defaults: forward, its window and K, the default reader


def adapt_model(service):
    """The service's When-to-retrieve model; ModelError (NO_ADAPT_MODEL) when it has none."""
    model = service.adapt_model()
    if model is None:
        raise ModelError(NO_ADAPT_MODEL)
    return model


def top_page(service, question: str) -> list[Hit]:
    """BM25's best page for the question (the paper's context), as a list of at most one hit."""
    return service.index.search(question, 1)


def popularity_of(service, question: str) -> policies.Popularity:
    """The question's popularity (from RAQA_POPQA) with the configured threshold, as the policies take it."""
    item = service.popularity.get(normalize_answer(question))
    return policies.Popularity(item.popularity if item else None, service.config.pop_threshold)


def route(service, question: str, policy: str) -> Iterator[PipelineEvent]:
    """One of the paper's policies for the question; ModelError when the service has no adapters."""
    model = adapt_model(service)
    return policies.decide(question, policy, model, lambda q: top_page(service, q), popularity_of(service, question))


def retrieving_plan(service, question, form: RunForm = RUN_FORM, grounded: bool = True):
    """The iterative run a retrieving pipeline reads with the form's order, window, K and reader (Service.plan's
    RunPlan; SettingsError for bad choices): grounded answers only, unless the evaluation asks for the base reader's
    answers as it gives them."""
    return service.plan(question, form.replace(strategy="iterative", grounded_only=grounded, rationale=False))


def pipeline(service, question, policy: str, threshold: float | None, form=RUN_FORM) -> Iterator[PipelineEvent]:
    """The page's pipeline: closed-book answer, decision, the iterative windows read by the reader with grounded
    answers only, then an answer or "I don't know". SettingsError or ModelError before any model call."""
    plan = retrieving_plan(service, question, form)  # validates before any work
    try:
        decision = by_policy(policy, threshold)
    except ValueError as e:
        raise SettingsError(str(e)) from None
    model = adapt_model(service)
    return pipeline_events(plan.question, decision, lambda q: closed_book(model, q), lambda q: service.events(plan))
