"""When to retrieve: Adapt-LLM's <RET> decision and the fixed and popularity baselines, as events.

Four policies answer one question each:

    never       the NR-LLM adapter answers from memory, with the plain question prompt
    always      BM25's top page is retrieved and the AR-LLM adapter answers with the context prompt
    adapt       the Adapt-LLM adapter sees the parametric prompt; if its reply holds <RET>, the top page is
                retrieved and the same adapter answers again with the context prompt
    popularity  (Mallen et al.) retrieve when the question's popularity is below a tuned threshold; the
                NR-LLM answer when it is not, the AR-LLM answer when it is; unknown popularity says so

`decide` yields Decision, Retrieved (only when a page is read), then Answer, or PolicyFailed: the page, the
CLI and eval-adapt all read this stream, and serialise it with reading.events.to_json like a run's. Left out
here: the prompts (prompts.py), loading models (model.py), training (training/when_to_retrieve*.py) and
scoring (evaluation/when_to_retrieve.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, Union

from raqa.reading.events import Event
from raqa.retrieval.index import Hit
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
POLICY_TITLES = {
    "never": "Never retrieve (NR-LLM)",
    "always": "Always retrieve (AR-LLM)",
    "adapt": "Adapt-LLM",
    "popularity": "Popularity threshold",
}
# which trained adapter answers for each policy (the popularity baseline borrows NR's and AR's)
ADAPTERS = ("adapt", "never", "always")


class AdaptModel(Protocol):
    """What the policies need from a model holding the three adapters."""

    name: str

    def generate(self, messages: Messages, adapter: str, ban_ret: bool = False) -> str:
        """The greedy reply of the adapter ("base" = no adapter); ban_ret forbids writing <RET>."""

    def ret_probability(self, messages: Messages, adapter: str) -> float:
        """The probability the adapter's reply starts with <RET>."""

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class Decision(Event):
    policy: Policy
    retrieve: bool | None  # None: the policy cannot decide for this question (popularity unknown)
    reason: str  # one line a viewer reads
    ret_probability: float | None = None  # Adapt-LLM: P(reply starts with <RET>)
    first_reply: str | None = None  # Adapt-LLM: its reply to the parametric prompt
    popularity: float | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class PageRead(Event):
    policy: Policy
    hit: Hit | None  # None: BM25 found no page for the question
    context: str  # the text the context prompt showed


@dataclass(frozen=True)
class Answer(Event):
    policy: Policy
    text: str
    with_context: bool
    adapter: str


@dataclass(frozen=True)
class PolicyFailed(Event):
    policy: Policy
    message: str


PolicyEvent = Union[Decision, PageRead, Answer, PolicyFailed]


@dataclass(frozen=True)
class Popularity:
    value: float | None  # e.g. PopQA's s_pop (monthly Wikipedia page views); None when unknown
    threshold: float | None  # retrieve below this; None when no threshold was tuned


def read_page(
    policy: Policy, question: str, search: Callable[[str], Sequence[Hit]], count_tokens: Callable[[str], int]
) -> PageRead:
    hits = list(search(question))
    if not hits:
        return PageRead(policy, None, "")
    return PageRead(policy, hits[0], context_text(hits[0], count_tokens))


def decide(
    question: str,
    policy: Policy,
    model: AdaptModel,
    search: Callable[[str], Sequence[Hit]],
    popularity: Popularity | None = None,
) -> Iterator[PolicyEvent]:
    """Yield one policy's decision for the question, the page it read if any, and its answer."""
    if policy not in POLICIES:
        raise ValueError(f"Invalid policy: {policy!r}. Choose from: {', '.join(POLICIES)}.")
    if policy == "never":
        yield Decision(policy, False, "never retrieves")
        yield Answer(policy, model.generate(closed_book_messages(question), "never"), False, "never")
        return
    if policy == "always":
        yield Decision(policy, True, "always retrieves")
        yield from _answer_with_page(question, policy, model, search, "always")
        return
    if policy == "popularity":
        pop = popularity or Popularity(None, None)
        if pop.value is None or pop.threshold is None:
            missing = "no popularity is known for this question" if pop.value is None else "no threshold was tuned"
            yield Decision(policy, None, f"cannot decide: {missing} (needs PopQA-format data with s_pop)")
            return
        retrieve = pop.value < pop.threshold
        relation = "below" if retrieve else "at or above"
        reason = f"popularity {pop.value:g} is {relation} the threshold {pop.threshold:g}"
        yield Decision(policy, retrieve, reason, popularity=pop.value, threshold=pop.threshold)
        if retrieve:
            yield from _answer_with_page(question, policy, model, search, "always")
        else:
            yield Answer(policy, model.generate(closed_book_messages(question), "never"), False, "never")
        return
    messages = parametric_messages(question)
    p_ret = model.ret_probability(messages, "adapt")
    first = model.generate(messages, "adapt")
    if not asks_retrieval(first):
        yield Decision(policy, False, "answered from memory", p_ret, first)
        yield Answer(policy, first, False, "adapt")
        return
    yield Decision(policy, True, f"asked for retrieval with {RET}", p_ret, first)
    yield from _answer_with_page(question, policy, model, search, "adapt")


def _answer_with_page(question, policy, model, search, adapter) -> Iterator[PolicyEvent]:
    page = read_page(policy, question, search, model.count_tokens)
    yield page
    if page.hit is None:
        yield PolicyFailed(policy, "BM25 found no page sharing a word with the question, so there is no context.")
        return
    yield Answer(policy, model.generate(context_messages(question, page.context), adapter), True, adapter)


def final_answer(events: Sequence[PolicyEvent]) -> Answer | None:
    return next((e for e in events if isinstance(e, Answer)), None)
