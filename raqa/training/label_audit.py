"""`python -m raqa judge-labels`: read the answer judge's training labels by hand, and count what the reading says.

Distant supervision (judge_data.py) calls a page positive when a gold answer occurs in a sentence about the
question; whether that sentence really answers the question only a reader can tell. `draw` takes a seeded sample
of positive labels under the one-word rule (min_shared 1): one page a question, from the training part of the dev
questions (train-judge's split, held-out questions left out) or from SQuAD-open test. Each becomes one JSON line
with the question, gold answers, page, sentence and span, the content words the sentence (with its page title)
shares with the question besides the answer's, and `answers_question`: null, for the reader to set to true or
false. `summarise` counts a read file: how many positives of the one-word rule answer their question, and for
each stricter rule (min_shared 2, 3) how many it keeps and how many of those do (95% Wilson intervals).
Left out here: the labelling rule itself (judge_data.py) and training (judge.py).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.questions import QAItem, load_questions
from raqa.reading.grounding import content_words
from raqa.reading.judge import sentence_at
from raqa.retrieval.index import BM25Index
from raqa.stats import wilson
from raqa.training.judge_data import K, dev_questions, label_page

SOURCES = ("dev", "squad")  # dev: NQ-open + TriviaQA dev, training part; squad: SQuAD-open test
STRICTER = (2, 3)  # the min_shared rules the summary counts beside the one-word rule


def source_questions(source: str, holdout: int, seed: int, split_seed: int = 0) -> list[tuple[str, QAItem]]:
    """(dataset, question) of a source, shuffled (seeded): dev's training part (train-judge's split by split_seed,
    less its first `holdout` a set) mixed across sets, or SQuAD test."""
    if source not in SOURCES:
        raise ValueError(f"Invalid source: {source!r}. Choose from: {', '.join(SOURCES)}.")
    if source == "squad":
        items = load_questions("squad", "test")
        return [("squad", item) for item in random.Random(seed).sample(items, len(items))]
    rest = {d: items[holdout:] for d, items in dev_questions(split_seed).items()}
    mixed = [(d, item) for d, items in rest.items() for item in items]
    return random.Random(seed).sample(mixed, len(mixed))


def shared_words(question: str, title: str, sentence: str, answer: str) -> list[str]:
    """Content words of the question that the sentence, read with its title, shares, less the answer's own.

    Example:
        >>> shared_words("Triton is the largest moon of which planet?", "Ceres", "It orbits within Neptune.", "Neptune")
        []
    """
    return sorted((content_words(question) & content_words(f"{title} {sentence}")) - content_words(answer))


def draw(
    questions: Iterable[tuple[str, QAItem]], index: BM25Index, positives: PositiveIndex, sample: int, k: int = K
) -> list[dict]:
    """The first `sample` questions with a positive page among their top k: that page's label, to be read."""
    rows = []
    for dataset, item in questions:
        if len(rows) >= sample:
            break
        for hit in index.search(item.question, k):
            label, start, answer = label_page(item.question, item.answers, hit.page, positives)
            if label != "positive":
                continue
            sentence = sentence_at(hit.page.text, start)
            rows.append(
                {
                    "dataset": dataset,
                    "question_id": item.id,
                    "question": item.question,
                    "answers": list(item.answers[:5]),
                    "page": hit.page.title,
                    "rank": hit.rank,
                    "sentence": sentence,
                    "span": answer,
                    "shared": shared_words(item.question, hit.page.title, sentence, answer),
                    "answers_question": None,
                }
            )
            break
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows of a read file; ValueError naming the line where one is not JSON or not read (true/false)."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not JSON ({e.msg}).") from None
        if not isinstance(row, dict) or not isinstance(row.get("answers_question"), bool):
            raise ValueError(f"{path}:{number}: set answers_question to true or false (read the sentence).")
        if not isinstance(row.get("shared"), list):
            raise ValueError(f"{path}:{number}: 'shared' must be a list of words.")
        rows.append(row)
    return rows


def summarise(rows: Sequence[dict]) -> dict:
    """What the reading says of each rule: positives kept, and the share of them that answer their question."""
    right = [r["answers_question"] for r in rows]
    out = {"rows": len(rows), "rules": {"1": {"kept": len(rows), "right": wilson(sum(right), len(right)).as_dict()}}}
    for n in STRICTER:
        kept = [r["answers_question"] for r in rows if len(r["shared"]) >= n]
        out["rules"][str(n)] = {
            "kept": len(kept),
            "right": wilson(sum(kept), len(kept)).as_dict(),
            "right_positives_lost": sum(right) - sum(kept),
        }
    return out
