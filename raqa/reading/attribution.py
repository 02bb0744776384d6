"""Why did the model answer that? Attribution by leaving one sentence out.

For a window the model answered, the model itself is asked how likely its own answer is (teacher-forced: the same
prompt and reply format, the answer's tokens after "ANSWER:") with the window as it read it, with each shown
sentence left out in turn, with the cited page left out, and with no page at all. Where the answer's probability
falls when a sentence goes, the answer came from that sentence; where it stays up with no page, it came from
memory. Unlike attention weights (RAGViz draws those), this asks what the answer depends on.

A sentence or page *matters* when leaving it out at least halves P(answer) (`MATTERS`). The finding, in order:
    memory    the answer is at least half as likely with no page at all: the pages are not what it rests on;
    sentence  one sentence matters (the one whose removal lowers P(answer) most is named);
    page      no single sentence matters, but the cited page does (the answer is spread over its sentences);
    spread    neither: removing any one sentence or the cited page leaves the answer about as likely.
In a window of several pages that cites one of them, that page is taken sentence by sentence and the others stay
whole (they are not left out one by one: the cost of a window grows with every sentence tried). Left out: pairs of
sentences, and windows the answer judge settled without asking the model (nothing to ask).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator

from raqa.config import RunSettings
from raqa.models.base import Backend, ModelError
from raqa.reading.engine import in_reading_order, prompt
from raqa.reading.events import Attribution, Finding, Notice, RunEvent, SentenceEffect, WindowVerdict
from raqa.reading.prompts import ANSWER_WORD, shown_sentences

MATTERS = math.log(2)  # leaving a sentence (or page) out at least halves P(answer): the answer depends on it
MAX_SENTENCES = 60  # sentences left out one at a time in one attribution (each costs a prompt's worth of compute)


def can_attribute(verdict: WindowVerdict) -> str | None:
    """None when the window can be attributed; otherwise why not, in one sentence for the viewer."""
    if verdict.reply.kind != "answer" or not verdict.reply.answer:
        return f"Window {verdict.window} has no answer to explain."
    if verdict.prompt_tokens == 0:
        return f"The answer judge settled window {verdict.window} without asking the model: there is no model answer to explain."
    return None


def attribute(question: str, verdict: WindowVerdict, backend: Backend, settings: RunSettings) -> Attribution:
    """The Attribution of an answered window, computed with the backend that answered it and the run's settings.

    ModelError when the window has no model answer or the backend cannot score (a remote server).
    """
    problem = can_attribute(verdict)
    if problem:
        raise ModelError(problem)
    start = time.perf_counter()
    answer = verdict.reply.answer
    hits = verdict.hits
    cited = verdict.reply.page_id if any(h.page.id == verdict.reply.page_id for h in hits) else None
    # in a window of several pages, the cited page sentence by sentence (it is also left out whole)
    ablated = [h for h in in_reading_order(hits, settings) if cited is None or len(hits) == 1 or h.page.id == cited]
    shown = [
        (hit.page.id, number)
        for hit in ablated
        for number in range(1, len(shown_sentences(hit, settings.page_tokens, backend.count_tokens)) + 1)
    ]
    if len(shown) > MAX_SENTENCES:
        raise ModelError(
            f"This window shows {len(shown)} sentences and cites no page of it; attribution leaves out at most "
            f"{MAX_SENTENCES} one at a time (a smaller window will do)."
        )
    prompts = [prompt(question, hits, backend, settings)]
    prompts += [prompt(question, hits, backend, settings, leave_out=where) for where in shown]
    prompts.append(prompt(question, (), backend, settings))
    if cited is not None:
        prompts.append(prompt(question, [h for h in hits if h.page.id != cited], backend, settings))
    scores = backend.answer_logprobs(prompts, ANSWER_WORD, answer)
    full, by_sentence, no_pages = scores[0], scores[1 : 1 + len(shown)], scores[1 + len(shown)]
    without_page = scores[-1] if cited is not None else None
    effects = tuple(
        SentenceEffect(page_id, number, lp) for (page_id, number), lp in zip(shown, by_sentence, strict=True)
    )
    measured = dict(without_page=without_page, without_pages=no_pages, cited_page=cited)
    measured |= dict(sentences=effects, cited_sentence=verdict.reply.sentence)
    finding, summary = explain(answer, full, **measured)
    seconds = time.perf_counter() - start
    return Attribution(verdict.window, answer, full, **measured, finding=finding, summary=summary, seconds=seconds)


def shown_p(logprob: float) -> str:
    """A probability as the page and the CLI print it: two decimals, or two significant digits when it is small.

    Example:
        >>> shown_p(math.log(0.81)), shown_p(math.log(0.000021))
        ('0.81', '2.1e-05')
    """
    p = math.exp(logprob)
    return f"{p:.2f}" if p >= 0.01 else f"{p:.1e}"


def _times(before: float, after: float) -> str:
    """How many times less likely, when that is more than the two probabilities show on their own."""
    ratio = math.exp(before - after)
    return f" ({ratio:,.0f} times less likely)" if ratio >= 10 else ""


def explain(
    answer: str,
    full: float,
    sentences: tuple[SentenceEffect, ...],
    without_page: float | None,
    without_pages: float,
    cited_page: str | None,
    cited_sentence: int | None,
) -> tuple[Finding, str]:
    """The finding and its one-line summary, from the log-probabilities (rules in the module docstring).

    Example:
        >>> effects = (SentenceEffect("7", 1, math.log(0.8)), SentenceEffect("7", 2, math.log(0.02)))
        >>> explain("Paris", math.log(0.81), effects, math.log(0.01), math.log(0.01), "7", 2)[1]
        'Removing sentence 2 of page 7 lowers the probability of "Paris" from 0.81 to 0.02 (40 times less likely): the answer comes from it, the sentence the model cited.'
    """
    p = shown_p(full)
    if without_pages >= full - MATTERS:
        return "memory", (
            f'No page is needed: with no page at all the model still gives "{answer}" with probability '
            f"{shown_p(without_pages)} (with the window: {p}): from memory."
        )
    top = max(sentences, key=lambda e: full - e.logprob, default=None)
    if top is not None and full - top.logprob >= MATTERS:
        cited = top.page_id == cited_page and top.sentence == cited_sentence
        which = "the sentence the model cited" if cited else "not the sentence the model cited"
        return "sentence", (
            f'Removing sentence {top.sentence} of page {top.page_id} lowers the probability of "{answer}" from '
            f"{p} to {shown_p(top.logprob)}{_times(full, top.logprob)}: the answer comes from it, {which}."
        )
    if without_page is not None and full - without_page >= MATTERS:
        return "page", (
            f'No single sentence matters, but without page {cited_page} the probability of "{answer}" falls from '
            f"{p} to {shown_p(without_page)}{_times(full, without_page)}: the answer rests on the page as a whole."
        )
    return "spread", (
        f'Leaving out any one sentence{" or the cited page" if cited_page else ""} keeps "{answer}" about as likely '
        f"(it is {p} with the window, {shown_p(without_pages)} with no page): no single piece carries it."
    )


def with_attributions(
    events: Iterable[RunEvent], question: str, backend: Backend, settings: RunSettings
) -> Iterator[RunEvent]:
    """The run's events, each answered window's verdict followed by its Attribution (`ask --why`): a window the
    model did not answer gets none, and one that cannot be attributed gets a Notice saying why."""
    for event in events:
        yield event
        if not isinstance(event, WindowVerdict) or event.reply.kind != "answer":
            continue
        try:
            yield attribute(question, event, backend, settings)
        except ModelError as e:
            yield Notice(f"Why this answer? {e}")
