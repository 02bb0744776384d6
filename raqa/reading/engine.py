"""Reading strategies as generators of events: Top-K standard prompting and iterative windows.

`run()` is the one entry point: it retrieves the top-K pages, then reads them with the chosen
strategy and yields the events of events.py. The UI, the CLI and the evaluation all iterate the same
generator; `run_to_final()` is the batch form (the last event of the stream).

With an answer judge (judge.py) every window's pages are also read by the judge, whose readings decide the
badge (agreement.py) and, in the judge reader modes, the window itself (judged.py).

What is left out here: anything about display (web/render.py) and scoring against gold answers (metrics).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Iterator, Sequence

from raqa.config import RunSettings
from raqa.models.base import Backend, Choice, ModelError, ReplyPlan, Step, Usage
from raqa.reading import grounding
from raqa.reading.agreement import check_agreement
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
from raqa.reading.grader import Grader, grading_messages
from raqa.reading.judge import AnswerJudge, JudgeReading
from raqa.reading.judged import best, judge_decides, judge_reply
from raqa.reading.prompts import (
    ANSWER_WORD,
    DEMONSTRATIONS,
    NOT_FOUND_WORD,
    ParsedReply,
    build_messages,
    parse_reply,
)
from raqa.retrieval.dense import HybridIndex
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


def in_reading_order(hits: Sequence[Hit], settings: RunSettings) -> tuple[Hit, ...]:
    """The window's pages in the order the prompt lists them: score order, or reversed (best nearest the question).

    Events keep score order; only the prompt changes.
    """
    return tuple(reversed(hits)) if settings.page_order == "best_last" else tuple(hits)


def prompt(
    question: str,
    hits: Sequence[Hit],
    backend: Backend,
    settings: RunSettings,
    leave_out: tuple[str, int] | None = None,
) -> list[dict[str, str]]:
    """The chat messages for reading these pages: the settings' shots, page cut and in-window order (leave_out: a
    (page id, sentence) to drop, for attribution)."""
    return build_messages(
        question,
        in_reading_order(hits, settings),
        settings.page_tokens,
        count_tokens=backend.count_tokens,
        shots=DEMONSTRATIONS[: settings.shots],
        leave_out=leave_out,
    )


def warm_up(backend: Backend, settings: RunSettings) -> None:
    """Have a graded reader's model read the fixed start of the reader's prompt (instructions and worked examples) and
    of the grader's, one token each, so that llama.cpp holds their keys and values before the first visitor asks (it
    reuses a cached prompt prefix): after a start, the first run's window 1 took 17 to 34 s against 5 to 8 s later.
    A failure only leaves the model cold."""
    for messages in (prompt("?", (), backend, settings), grading_messages("?", "?", "?", "?")):
        try:
            backend.first_token_probabilities(messages, ["Yes"])
        except ModelError:
            return


def _verdict(kind: str, check: grounding.Grounding | None) -> Verdict:
    if kind == "answer":
        if check is None or not check.supported:
            return "unsupported"
        return "weak" if check.weak else "answered"
    return "not_found" if kind == "not_found" else "unparseable"


def accepted(verdict: Verdict, settings: RunSettings) -> bool:
    """Whether a window's verdict ends an iterative run: an answer the judge supports (Answered or Weak
    support), or, unless grounded_only, any answer."""
    return verdict in ("answered", "weak") or (verdict == "unsupported" and not settings.grounded_only)


def ending_window(supports: Sequence[float | None], weak: float) -> int | None:
    """Where a run that ends only on supported answers ends, replayed from each window's support (None where no answer
    was graded): the first window whose support reaches weak, since the badge calls an answer supported from weak up
    and accepted() ends the run on it. The evaluations replay other cuts with it.

    Example:
        >>> ending_window([None, 0.4, 0.7, 0.9], 0.5), ending_window([0.4], 0.5)
        (2, None)
    """
    return next((i for i, support in enumerate(supports) if support is not None and support >= weak), None)


def read_window(
    question: str,
    hits: tuple[Hit, ...],
    number: int,
    of: int,
    backend: Backend,
    settings: RunSettings,
    judge: AnswerJudge | None = None,
    readings: tuple[JudgeReading, ...] | None = None,
    grader: Grader | None = None,
) -> Iterator[RunEvent]:
    """Read one window; yields WindowStarted, ReplyDelta*, WindowVerdict.

    With a judge, every page of the window is read by it (run() reads all retrieved pages at once and passes
    their readings, with support; alone, the window's pages are read here): its readings go into the verdict,
    settle the window when the reader mode says so (judged.py), and decide the badge of the model's answer
    (agreement.py). With a grader (grader.py) the badge is the reader's own P(yes) that the cited page states its
    answer. With neither, the badge comes from the lexical grounding check.
    """
    start = time.perf_counter()
    if settings.reader_mode != "model" and judge is None:
        raise ModelError("This reader needs the answer judge (assets/judge), which is not loaded.")
    if readings is None and judge is not None:
        readings = tuple(judge.read_ranked(question, hits))

    def verdict_of(reply: ParsedReply, check: grounding.Grounding | None, p_answer: float | None, usage: Usage):
        return WindowVerdict(
            window=number,
            hits=hits,
            verdict=_verdict(reply.kind, check),
            reply=reply,
            grounding=check,
            p_answer=p_answer,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            seconds=time.perf_counter() - start,
            judge=readings,
        )

    if readings is not None and judge_decides(readings, settings):
        yield WindowStarted(number, of, hits, 0)
        reply, check = judge_reply(hits, readings, settings)
        yield verdict_of(reply, check, readings[best(readings)].p_answer, Usage(0, 0))
        return
    messages = prompt(question, hits, backend, settings)
    prompt_tokens = backend.count_prompt_tokens(messages)
    yield WindowStarted(number, of, hits, prompt_tokens)
    text, p_answer, usage = "", None, Usage(prompt_tokens, 0)
    for piece in backend.reply(messages, reply_plan(settings), settings.answer_threshold):
        if isinstance(piece, Choice):
            p_answer = piece.probabilities.get(ANSWER_WORD) if piece.measured else None  # missing, not 1 or 0
        elif isinstance(piece, Usage):
            usage = piece
        else:
            text += piece
            yield ReplyDelta(number, piece)
    reply = parse_reply(text)
    check = None
    if reply.kind == "answer":
        if grader is not None:
            check = grader.grade(reply, hits, question, settings.page_tokens)
        elif readings is not None:
            check = check_agreement(reply, hits, readings, settings, question)
        else:
            check = grounding.check(reply, hits, question)
    yield verdict_of(reply, check, p_answer, usage)


def topk_prompt_tokens(question: str, hits: Sequence[Hit], backend: Backend, settings: RunSettings) -> int:
    """Prompt tokens of one Top-K prompt over all the hits (counted, not run)."""
    return backend.count_prompt_tokens(prompt(question, hits, backend, settings))


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


def run(
    question: str,
    index: BM25Index | HybridIndex,
    backend: Backend,
    settings: RunSettings,
    judge: AnswerJudge | None = None,
    grader: Grader | None = None,
) -> Iterator[RunEvent]:
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
    # the judge reads every retrieved page once, so each page's support can weigh what the other pages say
    ranked = dict(zip((h.page.id for h in hits), judge.read_ranked(question, hits), strict=True)) if judge else None
    verdicts: list[WindowVerdict] = []
    read = functools.partial(read_window, backend=backend, settings=settings, judge=judge, grader=grader)
    for number, window in enumerate(plan, start=1):
        readings = tuple(ranked[h.page.id] for h in window) if ranked is not None else None
        try:
            for event in read(question, window, number, len(plan), readings=readings):
                yield event
                if isinstance(event, WindowVerdict):
                    verdicts.append(event)
        except ModelError as e:  # a model or server failure ends the run with a message, not a crash
            yield RunFailed(f"The model failed on window {number}: {e}")
            return
        if accepted(verdicts[-1].verdict, settings):
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
    answered = accepted(last.verdict, settings)
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


def run_to_final(
    question: str,
    index: BM25Index | HybridIndex,
    backend: Backend,
    settings: RunSettings,
    judge: AnswerJudge | None = None,
    grader: Grader | None = None,
) -> Final | RunFailed:
    """The batch form of run(): only the last event."""
    (last,) = deque(run(question, index, backend, settings=settings, judge=judge, grader=grader), maxlen=1)
    return last


def window_verdict(
    question: str,
    window: Sequence[Hit],
    backend: Backend,
    settings: RunSettings,
    judge: AnswerJudge | None = None,
    grader: Grader | None = None,
) -> WindowVerdict:
    """One window read on its own (as window 1 of 1): its verdict event."""
    events = read_window(
        question, tuple(window), 1, of=1, backend=backend, settings=settings, judge=judge, grader=grader
    )
    return next(e for e in events if isinstance(e, WindowVerdict))
