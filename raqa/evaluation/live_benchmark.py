"""A small benchmark run live in the page: N questions (at most 50) of NQ-open, TriviaQA or SQuAD-open read with the
page's settings, one row per question as it finishes, and the running summary.

Each question goes through Service.plan/events, the same run as the Ask tab's. A row says whether the final answer
matches a gold answer (exact match), and whether any retrieved page holds a gold answer at all ("answerable" in this
corpus): an answer to a question no retrieved page can answer is a false answer by construction. Left out:
intervals and the paper-scale runs (the Experiments tab shows those, from `python -m lab experiment`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from raqa.config import RunForm
from raqa.evaluation.fan_out import streamed
from raqa.evaluation.metrics import exact_match, is_positive
from raqa.evaluation.questions import load_questions
from raqa.reading.events import Final, Retrieved, RunFailed

MAX_QUESTIONS = 50
DATASET_CHOICES = {"NQ-open": "nq", "TriviaQA": "triviaqa", "SQuAD-open": "squad"}


class BenchmarkRow(NamedTuple):
    question: str
    gold: str  # the first few gold answers, joined
    answer: str  # the run's answer, or "" when it declined
    exact_match: bool
    answerable: bool  # a retrieved page holds a gold answer
    windows_read: int
    tokens: int  # prompt + reply
    seconds: float


def benchmark_questions(dataset: str, n: int, seed: int = 0):
    """n seeded test questions of the dataset; ValueError with the allowed choices otherwise."""
    if dataset not in DATASET_CHOICES.values():
        raise ValueError(f"Invalid dataset: {dataset!r}. Choose from: {', '.join(DATASET_CHOICES)}.")
    if isinstance(n, bool) or not isinstance(n, (int, float)) or n != int(n) or not 1 <= int(n) <= MAX_QUESTIONS:
        raise ValueError(f"The number of questions must be a whole number from 1 to {MAX_QUESTIONS}, got {n!r}.")
    return load_questions(dataset, "test", limit=int(n), seed=seed)


def run_benchmark(service, items, form: RunForm) -> Iterator[BenchmarkRow]:
    """One row per question, in order, as each run ends (each read with form). A model
    server reads as many questions at once as its endpoint entry's concurrency; the local model one at a time."""
    width = service.plan(items[0].question, form).backend.requests_at_once if items else 1
    return streamed(lambda item: _row(service, item, form), items, width)


def _row(service, item, form: RunForm) -> BenchmarkRow:
    hits, final = (), None
    for event in service.events(service.plan(item.question, form)):
        if isinstance(event, Retrieved):
            hits = event.hits
        elif isinstance(event, (Final, RunFailed)):
            final = event
    done = final if isinstance(final, Final) else None
    answer = done.answer if done and done.answer is not None else ""
    return BenchmarkRow(
        item.question,
        " | ".join(item.answers[:3]),
        answer,
        exact_match=bool(answer) and exact_match(answer, item.answers),
        answerable=any(is_positive(h.page.text, item.answers) for h in hits),
        windows_read=done.windows_read if done else 0,
        tokens=(done.prompt_tokens + done.completion_tokens) if done else 0,
        seconds=done.seconds if done else 0.0,
    )


def summarise_benchmark(rows: Sequence[BenchmarkRow]) -> dict:
    """Exact match, answer rate, false answers on questions no retrieved page answers, windows and tokens."""
    n = len(rows)
    unanswerable = [r for r in rows if not r.answerable]
    return {
        "questions": n,
        "exact_match": sum(r.exact_match for r in rows) / n if n else 0.0,
        "answered": sum(bool(r.answer) for r in rows) / n if n else 0.0,
        "unanswerable": len(unanswerable),
        "false_answers_unanswerable": sum(bool(r.answer) for r in unanswerable),
        "mean_windows": sum(r.windows_read for r in rows) / n if n else 0.0,
        "mean_tokens": sum(r.tokens for r in rows) / n if n else 0.0,
    }


def to_csv(rows: Sequence[BenchmarkRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(BenchmarkRow._fields)
    writer.writerows(rows)
    return out.getvalue()
