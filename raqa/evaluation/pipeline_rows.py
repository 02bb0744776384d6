"""`eval-pipeline`'s measurements, one row per question, through the pipeline's own event stream.

Each test question runs through when_to_retrieve.pipeline with the "always" policy once per reader (the
closed-book answer and its signals are computed once and shared), and a row keeps what every policy needs to be
scored without running again: the closed-book answer, its signals and correctness, and each reader's ending
(answer or "I don't know"), windows read and time. A policy then only decides, per row, between the memory
answer and the reader's ending (pipeline_scores.py), with the same decide_retrieval the page and CLI call.
Dev questions (for the thresholds) need the closed-book part only. Rows are appended to a JSONL file as they
are made, so an interrupted evaluation resumes where it stopped. Left out here: scoring (pipeline_scores.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from raqa.evaluation.metrics import answer_contained, exact_match
from raqa.evaluation.questions import QAItem
from raqa.evaluation.rows_file import RowsFile, resumed
from raqa.reading.events import Final, RunFailed
from raqa.when_to_retrieve.pipeline import ClosedBookAnswered, PipelineEnded, pipeline

READERS = ("base", "base+judge")  # the base model alone (answers as it gives them), and the model + answer judge


def _scores(text: str | None, golds: Sequence[str]) -> dict:
    return {"correct": answer_contained(text, golds), "exact": exact_match(text, golds)}


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


def question_row(
    item: QAItem, dataset: str, answer_closed_book: Callable, readers: dict[str, Callable], anywhere
) -> dict:
    """One test question: the closed-book part, whether the corpus holds a gold answer, and each reader's ending.

    readers: name -> read(question) yielding the reading engine's events (Service.events of the reader's plan).
    """
    memo: dict = {}

    def once(question: str):
        if "value" not in memo:
            memo["value"] = answer_closed_book(question)
        return memo["value"]

    row: dict | None = None
    endings = {}
    for name, read in readers.items():
        final, ended, closed_seconds = None, None, 0.0
        for event in pipeline(item.question, "always", None, once, read):
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


def make_rows(
    work: Iterable[tuple[str, str, QAItem]],
    path: Path,
    settings_key: str,
    make: Callable[[str, str, QAItem], dict],
    progress: Callable[[], None] = lambda: None,
) -> list[dict]:
    """Every row of the work list (dataset, split, item), from the file where it is there, else made (up to
    fan_out.calls_at_once at a time) and appended as soon as it is made; the rows in the work list's order."""
    rows = RowsFile(path, settings_key, lambda row: (row["dataset"], row["split"], row["id"]))
    return resumed(work, rows, lambda w: (w[0], w[1], w[2].id), lambda w: make(*w), progress)


def dev_row(item: QAItem, dataset: str, answer_closed_book: Callable) -> dict:
    """One dev question (thresholds are chosen on these): the closed-book part of the never-retrieve pipeline."""
    for event in pipeline(item.question, "never", None, answer_closed_book, lambda question: iter(())):
        if isinstance(event, ClosedBookAnswered):
            return closed_book_row(item, dataset, "dev", event)
    raise AssertionError("the pipeline always answers closed-book first")


def interleave(sets: dict[str, Sequence[QAItem]], split: str) -> list[tuple[str, str, QAItem]]:
    """(dataset, split, item) taking one question of each dataset in turn, so a partial run stays balanced.

    Example:
        >>> [(d, i) for d, _, i in interleave({"a": [1, 2], "b": [3]}, "test")]
        [('a', 1), ('b', 3), ('a', 2)]
    """
    longest = max((len(v) for v in sets.values()), default=0)
    return [(d, split, items[i]) for i in range(longest) for d, items in sets.items() if i < len(items)]
