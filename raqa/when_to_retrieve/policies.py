"""The Adapt-LLM paper's policies, each a run of the one When-to-retrieve stream (pipeline.py) on its adapters:

    never       the NR-LLM adapter answers from memory, with the plain question prompt
    always      BM25's top page is retrieved and the AR-LLM adapter answers with the context prompt
    adapt       the Adapt-LLM adapter sees the parametric prompt; if its reply holds <RET>, the top page is
                retrieved and the same adapter answers again with the context prompt
    popularity  (Mallen et al.) retrieve when the question's popularity is below a tuned threshold; the
                NR-LLM answer when it is not, the AR-LLM answer when it is; unknown popularity says so

`decide` yields ClosedBookAnswered, RetrievalDecided, the top page's Retrieved and Final (or RunFailed when BM25
finds no page) and PipelineEnded, as the page's pipeline does with the iterative windows; `route` prints it and
experiment when_to_retrieve scores it. Left out here: the prompts (prompts.py), loading models (model.py), training
(training/when_to_retrieve*.py) and scoring (evaluation/when_to_retrieve_scores.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, Protocol

from raqa.reading.events import Final, Retrieved, RunEvent, RunFailed
from raqa.retrieval.index import Hit
from raqa.when_to_retrieve.pipeline import Decide, PipelineEvent, RetrievalDecided, by_policy, pipeline_events
from raqa.when_to_retrieve.prompts import (
    RET,
    Messages,
    asks_retrieval,
    closed_book_messages,
    context_messages,
    context_text,
    parametric_messages,
)

Policy = Literal["never", "always", "adapt", "popularity"]
POLICIES: tuple[Policy, ...] = ("never", "always", "adapt", "popularity")
# which trained adapter answers for each policy (the popularity baseline borrows NR's and AR's)
ADAPTERS = ("adapt", "never", "always")
NO_PAGE = "BM25 found no page sharing a word with the question, so there is no context."
Search = Callable[[str], Sequence[Hit]]  # a question -> BM25's hits (the paper reads the first)


class AdaptModel(Protocol):
    """What the policies need from a model holding the three adapters."""

    name: str

    def generate(self, messages: Messages, adapter: str, ban_ret: bool = False) -> str:
        """The greedy reply of the adapter ("base" = no adapter); ban_ret forbids writing <RET>."""

    def ret_probability(self, messages: Messages, adapter: str) -> float:
        """The probability the adapter's reply starts with <RET>."""

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class Popularity:
    value: float | None  # e.g. PopQA's s_pop (monthly Wikipedia page views); None when unknown
    threshold: float | None  # retrieve below this; None when no threshold was tuned


def read_top_page(question: str, model: AdaptModel, search: Search, adapter: str) -> Iterator[RunEvent]:
    """The paper's retrieval as reading events: BM25's top page (Retrieved), the adapter's answer with it as the
    context prompt shows it (a Final of one unchecked window; its passage is that context), or RunFailed."""
    start = time.perf_counter()
    hits = tuple(search(question))[:1]
    if not hits:
        yield RunFailed(NO_PAGE)
        return
    yield Retrieved(hits, time.perf_counter() - start)
    context = context_text(hits[0], model.count_tokens)
    messages = context_messages(question, context)
    answer = model.generate(messages, adapter).strip()
    prompt, verdict = model.count_tokens(messages[-1]["content"]), "unsupported" if answer else "not_found"
    # one window of one page, its answer unchecked: what a Top-K run over BM25's top page ends with
    window = dict(window=1, page_id=hits[0].page.id, passage=context, windows_read=1, pages_read=1)
    tokens = dict(prompt_tokens=prompt, completion_tokens=model.count_tokens(answer), topk_prompt_tokens=prompt)
    seconds = time.perf_counter() - start
    outcome = dict(answer=answer or None, abstained=not answer, verdict=verdict, supported=None)
    yield Final(question, "topk", "forward", **outcome, **window, **tokens, seconds=seconds)


def ret_token(answer: str, signals) -> RetrievalDecided:
    """Adapt-LLM's own decision: retrieve when its reply to the parametric prompt holds <RET>."""
    retrieve = asks_retrieval(answer)
    reason = f"asked for retrieval with {RET}" if retrieve else "answered from memory"
    return RetrievalDecided("adapt", retrieve, "not_ret", confidence=signals["not_ret"], threshold=None, reason=reason)


def by_popularity(popularity: Popularity | None) -> Decide:
    pop = popularity or Popularity(None, None)
    if pop.value is None or pop.threshold is None:
        missing = "no popularity is known for this question" if pop.value is None else "no threshold was tuned"
        reason = f"cannot decide: {missing} (needs PopQA-format data with s_pop)"
        undecided = RetrievalDecided(
            "popularity", None, "popularity", confidence=pop.value, threshold=None, reason=reason
        )
        return lambda answer, signals: undecided
    retrieve = pop.value < pop.threshold
    relation = "below" if retrieve else "at or above"
    reason = f"popularity {pop.value:g} is {relation} the threshold {pop.threshold:g}"
    decided = RetrievalDecided(
        "popularity", retrieve, "popularity", confidence=pop.value, threshold=pop.threshold, reason=reason
    )
    return lambda answer, signals: decided


def decide(
    question: str,
    policy: Policy,
    model: AdaptModel,
    search: Search,
    popularity: Popularity | None = None,
    memory: Callable[[str], tuple[str, dict]] | None = None,
) -> Iterator[PipelineEvent]:
    """One policy's run for the question: its closed-book answer, decision, the page it read if any, its ending.
    memory: NR-LLM's closed-book answer for the question (default: asked now), which never, always and popularity
    share (experiment when_to_retrieve asks it once per question)."""
    if policy not in POLICIES:
        raise ValueError(f"Invalid policy: {policy!r}. Choose from: {', '.join(POLICIES)}.")
    read = partial(read_top_page, model=model, search=search, adapter="adapt" if policy == "adapt" else "always")
    if policy == "adapt":
        return pipeline_events(question, ret_token, partial(parametric, model), read)
    decision = by_popularity(popularity) if policy == "popularity" else by_policy(policy, None)
    return pipeline_events(question, decision, memory or partial(nr_answer, model), read)


def nr_answer(model: AdaptModel, question: str) -> tuple[str, dict[str, float]]:
    """NR-LLM's closed-book answer (the plain question prompt), with no signals."""
    return model.generate(closed_book_messages(question), "never"), {}


def parametric(model: AdaptModel, question: str) -> tuple[str, dict[str, float]]:
    """Adapt-LLM's reply to the parametric prompt (an answer, or <RET>) and its confidence 1 - P(<RET>)."""
    messages = parametric_messages(question)
    p_ret = model.ret_probability(messages, "adapt")
    return model.generate(messages, "adapt"), {"not_ret": 1.0 - p_ret}
