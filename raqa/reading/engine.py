"""Reading strategies as generators of events: Top-K standard prompting and iterative windows.

`run()` is the one entry point: it retrieves the top-K pages, then reads them with the chosen
strategy and yields the events of events.py. The UI, the CLI and the evaluation all iterate the same
generator; `run_to_final()` is the batch form (the last event of the stream).

What is left out here: anything about display (render.py) and scoring against gold answers (metrics).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence

from raqa.config import RunSettings
from raqa.models.base import Backend, Choice, ModelError, ReplyPlan, Step, Usage
from raqa.reading import grounding
from raqa.reading.events import (
    Final,
    Notice,
    ReplyDelta,
    Retrieved,
    RunEvent,
    RunFailed,
    RunStarted,
    Verdict,
    WindowStarted,
    WindowVerdict,
)
from raqa.reading.prompts import (
    ANSWER_WORD,
    DEMONSTRATIONS,
    NOT_FOUND_WORD,
    build_messages,
    parse_reply,
)
from raqa.retrieval.index import BM25Index, Hit

CITATION_TOKENS = 8  # generation budget for the page id, and for the sentence number


def reply_plan(settings: RunSettings) -> ReplyPlan:
    """Verdict first; an answer then cites its page and sentence; a decline optionally gives a reason."""
    decline = (
        (Step(NOT_FOUND_WORD), Step("\nREASON:", settings.reason_tokens))
        if settings.rationale
        else (Step(NOT_FOUND_WORD),)
    )
    answer = (
        Step(ANSWER_WORD, settings.answer_tokens),
        Step("\nPAGE:", CITATION_TOKENS),
        Step("\nSENTENCE:", CITATION_TOKENS // 2),
    )
    return {ANSWER_WORD: answer, NOT_FOUND_WORD: decline}


def windows(hits: Sequence[Hit], size: int, order: str) -> list[tuple[Hit, ...]]:
    """Split ranked hits into windows of `size`, read best-first (forward) or worst-first (backward).

    Pages inside a window stay in score order; backward mirrors the forward split, so its first
    window holds the lowest-ranked pages.

    Example:
        >>> [[h for h in w] for w in windows([1, 2, 3, 4, 5], 2, "backward")]
        [[4, 5], [2, 3], [1]]
    """
    ranked = list(hits)
    if order == "backward":
        chunks = [ranked[max(0, end - size) : end] for end in range(len(ranked), 0, -size)]
    else:
        chunks = [ranked[start : start + size] for start in range(0, len(ranked), size)]
    return [tuple(chunk) for chunk in chunks]


def _verdict(kind: str, supported: bool) -> Verdict:
    if kind == "answer":
        return "answered" if supported else "unsupported"
    return "not_found" if kind == "not_found" else "unparseable"


def read_window(
    question: str,
    hits: tuple[Hit, ...],
    number: int,
    of: int,
    backend: Backend,
    settings: RunSettings,
) -> Iterator[RunEvent]:
    """Ask the model about one window; yields WindowStarted, ReplyDelta*, WindowVerdict."""
    start = time.perf_counter()
    messages = build_messages(
        question,
        hits,
        settings.page_tokens,
        backend.count_tokens,
        DEMONSTRATIONS[: settings.shots],
    )
    prompt_tokens = backend.count_prompt_tokens(messages)
    yield WindowStarted(number, of, hits, prompt_tokens)
    text, p_answer, usage = "", None, Usage(prompt_tokens, 0)
    for piece in backend.reply(messages, reply_plan(settings), settings.answer_threshold):
        if isinstance(piece, Choice):
            p_answer = piece.probabilities.get(ANSWER_WORD)
        elif isinstance(piece, Usage):
            usage = piece
        else:
            text += piece
            yield ReplyDelta(number, piece)
    reply = parse_reply(text)
    check = grounding.check(reply, hits, question) if reply.kind == "answer" else None
    verdict = _verdict(reply.kind, bool(check and check.supported))
    seconds = time.perf_counter() - start
    yield WindowVerdict(
        number,
        hits,
        verdict,
        reply,
        check,
        p_answer,
        usage.prompt_tokens,
        usage.completion_tokens,
        seconds,
    )


def topk_prompt_tokens(question: str, hits: Sequence[Hit], backend: Backend, settings: RunSettings) -> int:
    """Prompt tokens of one Top-K prompt over all the hits (counted, not run)."""
    messages = build_messages(
        question,
        hits,
        settings.page_tokens,
        backend.count_tokens,
        DEMONSTRATIONS[: settings.shots],
    )
    return backend.count_prompt_tokens(messages)


def fit_to_context(question: str, hits: Sequence[Hit], backend: Backend, settings: RunSettings) -> tuple[Hit, ...]:
    """The longest prefix of hits whose Top-K prompt leaves room for the reply in the model's context."""
    room = backend.context_tokens - settings.answer_tokens - 2 * CITATION_TOKENS - 8
    lo, hi = 0, len(hits)
    while lo < hi:  # binary search on the number of pages
        mid = (lo + hi + 1) // 2
        if topk_prompt_tokens(question, hits[:mid], backend, settings) <= room:
            lo = mid
        else:
            hi = mid - 1
    return tuple(hits[:lo])


def run(question: str, index: BM25Index, backend: Backend, settings: RunSettings) -> Iterator[RunEvent]:
    """Retrieve, then read with settings.strategy; the stream ends with Final or RunFailed."""
    start = time.perf_counter()
    yield RunStarted(question, settings, backend.name)
    hits = tuple(index.search(question, settings.k))
    yield Retrieved(hits, time.perf_counter() - start)
    if not hits:
        yield RunFailed("No page shares a word with the question, so there is nothing to read. Try other words.")
        return
    topk_tokens = topk_prompt_tokens(question, hits, backend, settings)
    if settings.strategy == "topk":
        fitted = fit_to_context(question, hits, backend, settings)
        if not fitted:
            yield RunFailed("Not even one page fits the model's context.")
            return
        if len(fitted) < len(hits):
            yield Notice(
                f"Only {len(fitted)} of the {len(hits)} pages fit the model's context; the first {len(fitted)} were used."
            )
        plan = [fitted]
    else:
        plan = windows(hits, settings.window, settings.order)
    verdicts: list[WindowVerdict] = []
    for number, window in enumerate(plan, start=1):
        try:
            for event in read_window(question, window, number, len(plan), backend, settings):
                yield event
                if isinstance(event, WindowVerdict):
                    verdicts.append(event)
        except ModelError as e:  # a model or server failure ends the run with a message, not a crash
            yield RunFailed(f"The model failed on window {number}: {e}")
            return
        last = verdicts[-1]
        accepted = last.verdict == "answered" or (last.verdict == "unsupported" and not settings.grounded_only)
        if accepted:
            break
    yield _final(question, settings, verdicts, topk_tokens, time.perf_counter() - start)


def _final(
    question: str,
    settings: RunSettings,
    verdicts: list[WindowVerdict],
    topk_tokens: int,
    seconds: float,
) -> Final:
    last = verdicts[-1]
    answered = last.verdict == "answered" or (last.verdict == "unsupported" and not settings.grounded_only)
    check = last.grounding if answered else None
    return Final(
        question=question,
        strategy=settings.strategy,
        order=settings.order,
        answer=last.reply.answer if answered else None,
        abstained=not answered,
        verdict=last.verdict if answered else "not_found",
        supported=check.supported if check else None,
        window=last.window if answered else None,
        page_id=check.page_id if check else None,
        passage=check.passage if check else None,
        windows_read=len(verdicts),
        pages_read=sum(len(v.hits) for v in verdicts),
        prompt_tokens=sum(v.prompt_tokens for v in verdicts),
        completion_tokens=sum(v.completion_tokens for v in verdicts),
        topk_prompt_tokens=topk_tokens,
        seconds=seconds,
    )


def run_to_final(question: str, index: BM25Index, backend: Backend, settings: RunSettings) -> Final | RunFailed:
    """The batch form of run(): only the last event."""
    (last,) = deque(run(question, index, backend, settings), maxlen=1)
    return last


def window_verdict(question: str, window: Sequence[Hit], backend: Backend, settings: RunSettings) -> WindowVerdict:
    """One window read on its own (as window 1 of 1): its verdict event."""
    events = read_window(question, tuple(window), 1, 1, backend, settings)
    return next(e for e in events if isinstance(e, WindowVerdict))
