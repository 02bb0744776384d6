"""When to retrieve, as one event stream: answer closed-book, decide whether to retrieve, read, or admit ignorance.

    ClosedBookAnswered   the closed-book answer and how sure the model is of it (uncertainty.py)
    RetrievalDecided     the policy's choice: answer from memory, or retrieve (retrieve None: it cannot decide)
    (reading events)     the iterative run's RunStarted ... Final, or the Adapt-LLM paper's top page (policies.py)
    PipelineEnded        the answer, from memory or from a page, or "I don't know" (answer None)

Every policy yields this stream, whichever model answers and whatever it reads. The page's policies (PIPELINE_POLICIES)
answer closed-book with the base model and read the iterative windows: never, always, adapt (retrieve when
Adapt-LLM's P(<RET>) is at or above the threshold: the paper's official code thresholds this probability), and one
per uncertainty signal (retrieve when the confidence is below the threshold). The Adapt-LLM paper's policies
(policies.py) answer with its adapters and read BM25's top page. After retrieval only a page's answer counts: a run
that ends without one ends in "I don't know", never in the memory answer the policy chose not to trust. The page,
the CLI (`pipeline`, `route`) and both evaluations (`experiment pipeline`, `experiment when_to_retrieve`) read this
stream, reading.events.to_json serialises it and from_json (with PIPELINE_EVENT_CLASSES) reads it back. Left out
here: loading the model (model.py), the reading engine (reading/engine.py) and choosing thresholds
(evaluation/when_to_retrieve_scores.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Union

from raqa.reading.events import EVENT_CLASSES, Event, Final, RunEvent, RunFailed
from raqa.when_to_retrieve.uncertainty import SIGNAL_TITLES, SIGNALS

PIPELINE_POLICIES = ("never", "always", "adapt", *[s for s in SIGNALS if s != "not_ret"])
POLICY_SIGNAL = {"adapt": "not_ret", **{s: s for s in SIGNALS if s != "not_ret"}}
PIPELINE_TITLES = {
    "never": "Never retrieve",
    "always": "Always retrieve",
    "adapt": "Adapt-LLM, P(<RET>) threshold",
    **{s: SIGNAL_TITLES[s] for s in SIGNALS if s != "not_ret"},
}
PROBABILITY_POLICIES = ("adapt", "sequence_probability", "token_probability", "p_true")  # thresholds from 0 to 1
DEFAULT_RET_THRESHOLD = 0.5  # retrieve when P(<RET>) >= this (the greedy <RET> token, roughly)
Source = Literal["memory", "pages", "none"]
IDK = "I don't know"


@dataclass(frozen=True)
class ClosedBookAnswered(Event):
    question: str
    answer: str
    signals: tuple[tuple[str, float], ...]  # (signal, confidence) for uncertainty.SIGNALS
    seconds: float


@dataclass(frozen=True)
class RetrievalDecided(Event):
    policy: str
    retrieve: bool | None  # None: the policy cannot decide for this question (its popularity is unknown)
    signal: str | None  # the confidence the policy read (None: never / always / the <RET> token)
    confidence: float | None
    threshold: float | None  # on the confidence: answer from memory at or above it
    reason: str


@dataclass(frozen=True)
class PipelineEnded(Event):
    answer: str | None  # None: "I don't know"
    source: Source
    reason: str
    seconds: float


PipelineEvent = Union[ClosedBookAnswered, RetrievalDecided, PipelineEnded, RunEvent]
Decide = Callable[[str, Mapping[str, float]], RetrievalDecided]  # (closed-book answer, signals) -> the decision

# what a recorded pipeline holds, for reading.events.from_json: a run's events and the pipeline's own steps
PIPELINE_EVENT_CLASSES = {
    **EVENT_CLASSES,
    **{cls.type_name(): cls for cls in (ClosedBookAnswered, RetrievalDecided, PipelineEnded)},
}


def check_policy(policy: str, threshold: float | None) -> None:
    """ValueError, naming what is allowed, for a policy or threshold the pipeline cannot use."""
    if policy not in PIPELINE_POLICIES:
        raise ValueError(f"Invalid policy: {policy!r}. Choose from: {', '.join(PIPELINE_POLICIES)}.")
    if policy in POLICY_SIGNAL:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold != threshold:
            raise ValueError(f"The {policy} policy needs a number as its threshold, got {threshold!r}.")
        if policy in PROBABILITY_POLICIES and not 0 <= threshold <= 1:
            raise ValueError(f"The {policy} threshold is a probability: from 0 to 1, got {threshold!r}.")


def decide_retrieval(policy: str, signals: Mapping[str, float], threshold: float | None) -> RetrievalDecided:
    """The policy's decision from the closed-book answer's signals; ValueError names the valid policies.

    For adapt the threshold is on P(<RET>) (retrieve at or above it), as the page's slider shows it; the event
    records it as a threshold on the confidence 1 - P(<RET>) like the other signals.

    Example:
        >>> decide_retrieval("adapt", {"not_ret": 0.1}, 0.5).retrieve
        True
        >>> decide_retrieval("p_true", {"p_true": 0.9}, 0.6).reason
        'P(True) 0.900 is at or above 0.600: answer from memory'
    """
    check_policy(policy, threshold)
    if policy == "never":
        return RetrievalDecided(
            policy, False, None, confidence=None, threshold=None, reason="never retrieves: answer from memory"
        )
    if policy == "always":
        return RetrievalDecided(policy, True, None, confidence=None, threshold=None, reason="always retrieves")
    signal = POLICY_SIGNAL[policy]
    confidence = signals[signal]
    if policy == "adapt":
        p_ret, limit = 1.0 - confidence, float(threshold)
        retrieve = p_ret >= limit
        relation, action = ("at or above", "retrieve") if retrieve else ("below", "answer from memory")
        reason = f"P(<RET>) {p_ret:.3f} is {relation} {limit:.3f}: {action}"
        return RetrievalDecided(policy, retrieve, signal, confidence=confidence, threshold=1.0 - limit, reason=reason)
    retrieve = confidence < threshold
    relation, action = ("below", "retrieve") if retrieve else ("at or above", "answer from memory")
    reason = f"{SIGNAL_TITLES[signal]} {confidence:.3f} is {relation} {threshold:.3f}: {action}"
    return RetrievalDecided(policy, retrieve, signal, confidence=confidence, threshold=threshold, reason=reason)


def ending(final: Final | RunFailed | None) -> tuple[str | None, Source, str]:
    """What a retrieval run ends the pipeline with: a window's answer, or "I don't know"."""
    if isinstance(final, Final) and not final.abstained and final.answer:
        return final.answer, "pages", f"window {final.window} answered ({final.verdict})"
    if isinstance(final, RunFailed):
        return None, "none", f"the reading failed: {final.message}"
    return None, "none", "no window gave an answer the reader stands by"


def pipeline_events(
    question: str,
    decide: Decide,
    answer_closed_book: Callable[[str], tuple[str, dict[str, float]]],
    read: Callable[[str], Iterator[RunEvent]],
) -> Iterator[PipelineEvent]:
    """The events for one question: answer_closed_book gives (answer, signals), decide reads them, and read(question)
    yields the reading's events when the decision is to retrieve (its Final, or RunFailed, ends the pipeline).

    Example:
        >>> never = lambda answer, signals: decide_retrieval("never", signals, None)
        >>> [type(e).__name__ for e in pipeline_events("Q?", never, lambda q: ("A", {}), lambda q: iter(()))]
        ['ClosedBookAnswered', 'RetrievalDecided', 'PipelineEnded']
    """
    start = time.perf_counter()
    answer, signals = answer_closed_book(question)
    yield ClosedBookAnswered(question, answer, tuple(signals.items()), time.perf_counter() - start)
    decision = decide(answer, signals)
    yield decision
    if decision.retrieve is None:
        yield PipelineEnded(None, "none", decision.reason, time.perf_counter() - start)
        return
    if not decision.retrieve:
        if answer.strip():
            yield PipelineEnded(answer, "memory", "answered from memory", time.perf_counter() - start)
        else:
            yield PipelineEnded(None, "none", "the closed-book answer was empty", time.perf_counter() - start)
        return
    last = None
    for event in read(question):
        yield event
        if isinstance(event, (Final, RunFailed)):
            last = event
    answer, source, reason = ending(last)
    yield PipelineEnded(answer, source, reason, time.perf_counter() - start)


def by_policy(policy: str, threshold: float | None) -> Decide:
    """The decision of one of PIPELINE_POLICIES at this threshold (checked now, before any model call)."""
    check_policy(policy, threshold)
    return lambda answer, signals: decide_retrieval(policy, signals, threshold)
