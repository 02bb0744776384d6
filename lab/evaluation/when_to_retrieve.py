"""The When-to-retrieve evaluation's rows: one per question, made from the one When-to-retrieve stream.

Both verbs run the stream of when_to_retrieve/pipeline.py and keep, per question, what their policies need to be
scored without running again (when_to_retrieve_scores.py scores them):

    experiment pipeline
                    the base model's closed-book answer with its signals, and each reader's ending after the
                    iterative windows ("always" once per reader, the closed-book part shared); dev questions (for
                    the thresholds) keep the closed-book part only
    experiment when_to_retrieve
                    each of the Adapt-LLM paper's policies (never, always, adapt; policies.py) with its answer, the
                    page it read and Adapt-LLM's P(<RET>), plus Adapt-LLM's answer the other way for the paper's
                    Table 3; on PopQA the popularity policy picks between the NR and AR answers already made

Answers are scored against the gold answers both ways: contained (the papers' accuracy) and exact match. Rows are
appended to a JSONL file as they are made, so an interrupted evaluation resumes where it stopped.
"""

from __future__ import annotations

import functools
import json
import math
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from lab.evaluation.rows_file import RowsFile, resumed
from lab.stats import best_accuracy
from raqa.config import ASSETS_DIR
from raqa.evaluation.metrics import answer_contained, exact_match
from raqa.evaluation.questions import QAItem
from raqa.reading.events import Final, Retrieved, RunFailed
from raqa.when_to_retrieve.pipeline import ClosedBookAnswered, PipelineEnded, by_policy, pipeline_events
from raqa.when_to_retrieve.policies import Popularity, decide, nr_answer
from raqa.when_to_retrieve.popularity import PopItem
from raqa.when_to_retrieve.prompts import closed_book_messages, context_messages
from raqa.when_to_retrieve.tuned import MEMORY_QUESTIONS
from raqa.when_to_retrieve.uncertainty import closed_book

READERS = ("base", "base+judge")  # the base model alone (answers as it gives them), and the model + answer judge
EVAL_POLICIES = ("never", "always", "adapt")  # experiment when_to_retrieve's policies on every question set


class Threshold(NamedTuple):
    threshold: float  # retrieve when popularity < threshold (inf: always retrieve; the smallest value: never)
    dev_accuracy: float
    dev_retrieval_rate: float
    n: int


def tune_threshold(
    popularity: Sequence[float], correct_closed: Sequence[bool], correct_retrieved: Sequence[bool]
) -> Threshold:
    """The threshold with the best accuracy on these dev questions (ties: the one that retrieves least)."""
    if not popularity or not len(popularity) == len(correct_closed) == len(correct_retrieved):
        raise ValueError("tune_threshold needs the same, non-zero number of popularities and outcomes.")
    n = len(popularity)

    def accuracy(t: float) -> float:
        outcomes = zip(popularity, correct_closed, correct_retrieved, strict=True)
        return sum(r if p < t else c for p, c, r in outcomes) / n

    best = best_accuracy(sorted(set(popularity)) + [math.inf], accuracy)  # ascending: ties retrieve least
    return Threshold(best, accuracy(best), sum(p < best for p in popularity) / n, n)


def _scores(text: str | None, golds: Sequence[str]) -> dict:
    return {"correct": answer_contained(text, golds), "exact": exact_match(text, golds)}


def _adapt_scores(text: str | None, golds: Sequence[str]) -> dict:
    return {"exact_match": exact_match(text, golds), "accuracy": answer_contained(text, golds)}


# -- experiment pipeline -----------------------------------------------------------------------------------------------
def closed_book_row(item: QAItem, dataset: str, split: str, answered: ClosedBookAnswered) -> dict:
    return {
        "id": item.id,
        "dataset": dataset,
        "split": split,
        "question": item.question,
        "answers": list(item.answers),
        "closed_book": {
            "answer": answered.answer,
            "signals": dict(answered.signals),
            "seconds": round(answered.seconds, 3),
            **_scores(answered.answer, item.answers),
        },
    }


def policy_row(
    item: QAItem, dataset: str, answer_closed_book: Callable, readers: dict[str, Callable], anywhere
) -> dict:
    """One test question: the closed-book part, whether the corpus holds a gold answer, and each reader's ending.

    readers: name -> read(question) yielding the reading engine's events (Service.events of the reader's plan).
    """
    once = functools.cache(answer_closed_book)
    row: dict | None = None
    endings = {}
    for name, read in readers.items():
        final, ended, closed_seconds = None, None, 0.0
        for event in pipeline_events(item.question, by_policy("always", None), once, read):
            if isinstance(event, ClosedBookAnswered):
                closed_seconds = event.seconds  # the first reader's pipeline pays for it; the others reuse it
                row = row or closed_book_row(item, dataset, "test", event)
            elif isinstance(event, (Final, RunFailed)):
                final = event
            elif isinstance(event, PipelineEnded):
                ended = event
        endings[name] = {
            "answer": ended.answer,
            "reason": ended.reason,
            "windows_read": final.windows_read if isinstance(final, Final) else 0,
            "verdict": final.verdict if isinstance(final, Final) else "failed",
            "seconds": round(ended.seconds - closed_seconds, 3),
            **_scores(ended.answer, item.answers),
        }
    row["answerable"] = bool(anywhere(item.answers))
    row["readers"] = endings
    return row


def dev_row(item: QAItem, dataset: str, answer_closed_book: Callable) -> dict:
    """One dev question (thresholds are chosen on these): the closed-book part of the never-retrieve pipeline."""
    for event in pipeline_events(
        item.question, by_policy("never", None), answer_closed_book, lambda question: iter(())
    ):
        if isinstance(event, ClosedBookAnswered):
            return closed_book_row(item, dataset, "dev", event)
    raise AssertionError("the pipeline always answers closed-book first")


def make_rows(
    work: Iterable[tuple[str, str, QAItem]],
    path: Path,
    settings_key: str,
    make: Callable[[str, str, QAItem], dict],
    progress: Callable[[], None] = lambda: None,
) -> list[dict]:
    """Every row of the work list (dataset, split, item), from the file where it is there, else made (up to
    fan_out.calls_at_once at a time) and appended as soon as it is made; the rows in the work list's order."""
    with RowsFile(path, settings_key, lambda row: (row["dataset"], row["split"], row["id"])) as rows:
        return resumed(work, rows, lambda w: (w[0], w[1], w[2].id), lambda w: make(*w), progress)


def interleave(sets: dict[str, Sequence[QAItem]], split: str) -> list[tuple[str, str, QAItem]]:
    """(dataset, split, item) taking one question of each dataset in turn, so a partial run stays balanced.

    Example:
        >>> [(d, i) for d, _, i in interleave({"a": [1, 2], "b": [3]}, "test")]
        [('a', 1), ('b', 3), ('a', 2)]
    """
    longest = max((len(v) for v in sets.values()), default=0)
    return [(d, split, items[i]) for i in range(longest) for d, items in sets.items() if i < len(items)]


# -- experiment when_to_retrieve ---------------------------------------------------------------------------------------
def policy_record(events: Sequence, golds: Sequence[str]) -> dict:
    """One paper policy's run as experiment when_to_retrieve's row keeps it: its answer, the page it read, its
    scores."""
    ended = events[-1]
    hit = next((e.hits[0] for e in events if isinstance(e, Retrieved)), None)
    failed = next((e.message for e in events if isinstance(e, RunFailed)), None)
    page = hit.page.title if hit else None
    record = {"answer": ended.answer, "with_context": ended.source == "pages", "page": page, "failed": failed}
    record.update(_adapt_scores(ended.answer, golds))
    read = next((e for e in events if isinstance(e, Final)), None)
    if read is not None:
        record["page_has_answer"] = answer_contained(read.passage, golds)
    return record


def evaluate_question(item: QAItem, model, search: Callable) -> dict:
    """Every policy's run for one question, scored, plus Adapt-LLM's counterfactual answer for Table 3."""
    row: dict = {"id": item.id, "question": item.question, "answers": list(item.answers)}
    memory = functools.cache(lambda question: nr_answer(model, question))  # never and always share NR-LLM's
    contexts: dict[str, str] = {}
    for policy in EVAL_POLICIES:
        events = list(decide(item.question, policy, model, search, memory=memory))
        row[policy] = policy_record(events, item.answers)
        contexts.update((policy, e.passage) for e in events if isinstance(e, Final))
        if policy == "adapt":
            closed, decision = events[0], events[1]
            ret = {"asked_ret": bool(decision.retrieve), "ret_probability": 1.0 - decision.confidence}
            row[policy].update(ret, first_reply=closed.answer)
    if row["adapt"]["asked_ret"]:
        # subtle: under the parametric prompt with <RET> forbidden, the trained adapter writes near-spellings
        # ("<RET >", "<RETURN>", measured on all 600 test questions), so its memory is asked closed-book
        closed = model.generate(closed_book_messages(item.question), "adapt", ban_ret=True)
        row["adapt_other"] = {"answer": closed, "with_context": False, **_adapt_scores(closed, item.answers)}
    elif "always" in contexts:
        with_page = model.generate(context_messages(item.question, contexts["always"]), "adapt")
        row["adapt_other"] = {"answer": with_page, "with_context": True, **_adapt_scores(with_page, item.answers)}
    else:
        row["adapt_other"] = None
    return row


def adapt_rows(path: Path | None, settings_key: str) -> RowsFile:
    """experiment when_to_retrieve's resumable rows (None: in memory), by (group, question id); group: the dataset,
    popqa-dev/-test."""
    return RowsFile(path, settings_key, lambda row: (row["group"], row["id"]))


def evaluate_policies(
    items: Iterable[QAItem],
    model,
    search: Callable,
    progress: Callable[[], None] = lambda: None,
    rows: RowsFile | None = None,
    group: str = "",
) -> list[dict]:
    """Each question's row (evaluate_question), from rows where it is there, else made (fan_out.calls_at_once
    questions at a time) and added to them; in the items' order. progress() is called once per row."""

    def make(item: QAItem) -> dict:
        return {"group": group, **evaluate_question(item, model, search)}

    rows = rows if rows is not None else adapt_rows(None, "")
    return resumed(items, rows, lambda item: (group, item.id), make, progress)


def popularity_rows(
    items: Sequence[PopItem], model, search: Callable, seed=0, progress=lambda: None, rows=None
) -> dict:
    """Tune the popularity threshold on half the PopQA questions (seeded); the other half's rows with the
    popularity policy's answer added (the NR or the AR answer already in the row: no model call)."""
    if len(items) < 4:
        raise ValueError(f"The popularity baseline needs at least 4 PopQA questions, got {len(items)}.")
    shuffled = random.Random(seed).sample(list(items), len(items))
    dev, test = shuffled[: len(shuffled) // 2], shuffled[len(shuffled) // 2 :]
    qa = {it.id: QAItem(it.id, it.question, it.answers) for it in shuffled}
    dev_rows = evaluate_policies(
        [qa[it.id] for it in dev], model, search, progress=progress, rows=rows, group="popqa-dev"
    )
    tuned = tune_threshold(
        [it.popularity for it in dev],
        [r["never"]["accuracy"] for r in dev_rows],
        [r["always"]["accuracy"] for r in dev_rows],
    )
    test_rows = evaluate_policies(
        [qa[it.id] for it in test], model, search, progress=progress, rows=rows, group="popqa-test"
    )
    for it, row in zip(test, test_rows, strict=True):
        reuse = _Reuse(row)
        events = list(decide(it.question, "popularity", reuse, search, Popularity(it.popularity, tuned.threshold)))
        row["popularity"] = {**policy_record(events, it.answers), "retrieved": it.popularity < tuned.threshold}
    return {"threshold": tuned._asdict(), "dev_n": len(dev), "rows": test_rows}


class _Reuse:
    """A stand-in model for the popularity policy: it returns the NR and AR answers already computed for a row,
    so the baseline costs no model calls and picks exactly between the answers the table reports."""

    name = "reuse"

    def __init__(self, row: dict):
        self._row = row

    def generate(self, messages, adapter: str, ban_ret: bool = False) -> str:
        if messages == closed_book_messages(self._row["question"]):
            return self._row["never"]["answer"] or ""
        return self._row["always"]["answer"] or ""

    def ret_probability(self, messages, adapter: str) -> float:
        raise AssertionError("The popularity policy never asks for P(<RET>).")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


# -- the page's example questions ------------------------------------------------------------------------
def example_questions() -> list[str]:
    """The page's example questions and a few the small model may know without a page (the slider's set)."""
    data = json.loads((ASSETS_DIR / "examples.json").read_text(encoding="utf-8"))
    return [*MEMORY_QUESTIONS, *(item["question"] for item in data["in_corpus"]), *data["outside"]]


def example_decisions(model, results: dict) -> list[dict]:
    """Each example question's closed-book answer and P(<RET>), for the page's threshold slider."""
    out = []
    for question in example_questions():
        answer, signals = closed_book(model, question)
        out.append(
            {
                "question": question,
                "closed_book": answer,
                "p_ret": round(1.0 - signals["not_ret"], 4),
                "signals": {k: round(v, 4) for k, v in signals.items()},
            }
        )
    return out
