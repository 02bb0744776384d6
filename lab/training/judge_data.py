"""(question, page) pairs for the answer judge, labelled by distant supervision over BM25's top pages.

For each question, each of its top-K BM25 pages gets one label:

- *positive*: a gold answer (normalised) occurs in a sentence of the page text that is about the question
  (grounding.about_question: the sentence, read with the page title, shares a content word with it). The
  label carries the character span of the first such occurrence in the page text, as the page writes it.
  With `min_shared` N of 2 or more the sentence must share N content words with the question besides the
  answer's own: read by hand, many positives of the one-word rule do not answer their question ("Triton is the
  largest moon of which planet?" -> "Neptune" on the Ceres page); docs/judge.md counts such readings.
- *negative*: no gold answer anywhere in the page's title or text (PositiveIndex); these are hard negatives,
  since BM25 ranked them for sharing the question's words.
- *ambiguous* (skipped): the page mentions a gold answer, but only in sentences unrelated to the question.

Pairs are taken per question, balanced: up to `per_question` positives and as many negatives (random among the
question's negatives, seeded), so the judge cannot tell the kinds apart by the question alone. Training reads
NQ-open dev and TriviaQA dev only; `measurement_pairs` draws the measurement's pairs from the test splits by the same
rule. Left out here: tokenisation and training (judge.py) and the runtime judge (reading/judge.py).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lab.evaluation.positives import PositiveIndex
from lab.training import TRAIN_DATASETS
from lab.training.reader_data import PAGES_RETRIEVED, answer_span
from raqa.evaluation.questions import QAItem, load_questions
from raqa.reading.grounding import about_question, content_words
from raqa.reading.judge import sentence_offsets
from raqa.retrieval.corpus import Page, load_corpus
from raqa.retrieval.index import BM25Index, Hit, load_or_build

MIN_SHARED = 1  # the positive rule's content words shared with the question: 1 is grounding.about_question
Label = Literal["positive", "negative", "ambiguous"]


@dataclass(frozen=True)
class JudgePair:
    dataset: str
    question_id: str
    question: str
    answers: tuple[str, ...]
    page: Page
    rank: int  # the page's BM25 rank for the question, 1 = best
    start: int | None  # character offset of the answer in page.text; None for a negative
    answer: str | None  # page.text[start : start + len(answer)]

    @property
    def positive(self) -> bool:
        return self.start is not None


def _locate(sentence: str, span: str) -> tuple[int, str] | None:
    """Where the span starts in the sentence and its text there (its words may be apart by other whitespace)."""
    match = re.search(r"\s+".join(re.escape(w) for w in span.split()), sentence)
    return (match.start(), match[0]) if match else None


def shares_enough(question: str, title: str, sentence: str, answer: str, min_shared: int = MIN_SHARED) -> bool:
    """Whether the sentence, read with its page title, is about the question by the positive rule: any shared
    content word for min_shared 1 (about_question), else min_shared of them besides the answer's own words.

    Example:
        >>> shares_enough("Triton is the largest moon of which planet?", "Ceres", "It orbits within Neptune.",
        ...               "Neptune", 2)
        False
    """
    if min_shared <= 1:
        return about_question(question, title, sentence)
    shared = content_words(question) & content_words(f"{title} {sentence}")
    return len(shared - content_words(answer)) >= min_shared


def label_page(
    question: str, answers: Sequence[str], page: Page, positives: PositiveIndex, min_shared: int = MIN_SHARED
) -> tuple[Label, int | None, str | None]:
    """(label, start, answer text) of one page for one question, by the module's rule.

    Example:
        >>> page = Page("p3", "Mona Lisa", "The Mona Lisa is a portrait painted by Leonardo da Vinci.")
        >>> label_page("Who painted the Mona Lisa?", ["leonardo da vinci"], page, PositiveIndex([page]))
        ('positive', 39, 'Leonardo da Vinci')
    """
    if not positives.is_positive(page, answers):
        return "negative", None, None
    for at, sentence in sentence_offsets(page.text):
        for answer in answers:
            span = answer_span(sentence, answer)
            found = _locate(sentence, span) if span else None
            if found and shares_enough(question, page.title, sentence, found[1], min_shared):
                return "positive", at + found[0], found[1]
    return "ambiguous", None, None


def question_pairs(
    item: QAItem,
    dataset: str,
    hits: Sequence[Hit],
    positives: PositiveIndex,
    rng: random.Random,
    per_question: int,
    k: int = PAGES_RETRIEVED,
    min_shared: int = MIN_SHARED,
) -> tuple[list[JudgePair], Counter]:
    """Up to per_question positive pages of one question and as many negatives; and the count of each label.

    Positives may come from any of the hits; negatives only from the top k (the pages a run reads)."""
    found: dict[str, list[JudgePair]] = {"positive": [], "negative": []}
    counts: Counter = Counter()
    for hit in hits:
        label, start, answer = label_page(item.question, item.answers, hit.page, positives, min_shared)
        counts[label] += 1
        if label == "positive" or (label == "negative" and hit.rank <= k):
            pair = JudgePair(
                dataset,
                item.id,
                item.question,
                answers=item.answers,
                page=hit.page,
                rank=hit.rank,
                start=start,
                answer=answer,
            )
            found[label].append(pair)
    chosen_positives = rng.sample(found["positive"], min(per_question, len(found["positive"])))
    chosen_negatives = rng.sample(found["negative"], min(len(chosen_positives), len(found["negative"])))
    if len(chosen_negatives) < len(chosen_positives):  # keep the balance within the question
        chosen_positives = chosen_positives[: len(chosen_negatives)]
    return chosen_positives + chosen_negatives, counts


def build_pairs(
    questions: dict[str, Sequence[QAItem]],
    index: BM25Index,
    positives: PositiveIndex,
    per_question: int = 1,
    limit: int | None = None,
    seed: int = 0,
    k: int = PAGES_RETRIEVED,
    progress: Callable[[Iterable], Iterable] = lambda items: items,
    depth: int | None = None,
    min_shared: int = MIN_SHARED,
) -> tuple[list[JudgePair], dict]:
    """Balanced pairs from each dataset's questions (in the given order), and the counts the card reports.

    Positives come from BM25's top `depth` pages (default k), negatives from the top k; limit caps the pairs per
    dataset (half positive); the result is shuffled (seeded).
    """
    depth = max(k, depth or k)
    rng = random.Random(seed)
    chosen: list[JudgePair] = []
    report: dict = {"k": k, "depth": depth, "per_question": per_question, "min_shared": min_shared, "datasets": {}}
    for dataset, items in questions.items():
        kept: list[JudgePair] = []
        labels: Counter = Counter()
        read = 0
        for item in progress(items):
            if limit is not None and len(kept) >= limit:
                break
            read += 1
            hits = index.search(item.question, depth)
            pairs, counts = question_pairs(
                item, dataset, hits, positives=positives, rng=rng, per_question=per_question, k=k, min_shared=min_shared
            )
            labels += counts
            kept += pairs[: None if limit is None else limit - len(kept)]
        report["datasets"][dataset] = {
            "questions_read": read,
            "questions_used": len({p.question_id for p in kept}),
            "pages_labelled": dict(labels),
            "pairs": dict(Counter("positive" if p.positive else "negative" for p in kept)),
        }
        chosen += kept
    rng.shuffle(chosen)
    report["pairs"] = len(chosen)
    return chosen, report


def dev_questions(seed: int = 0, limit: int | None = None) -> dict[str, list[QAItem]]:
    """NQ-open dev and TriviaQA dev, each shuffled (seeded); test splits are never read here."""

    out = {}
    for dataset in TRAIN_DATASETS:
        items = load_questions(dataset, "dev")
        out[dataset] = random.Random(seed).sample(items, len(items))[:limit]
    return out


def measurement_pairs(
    index: BM25Index, positives: PositiveIndex, dataset: str, per_kind: int, seed: int = 0, k: int = PAGES_RETRIEVED
) -> list[JudgePair]:
    """The measurement's pairs: per_kind positive and per_kind negative pages of seeded test questions,
    one of each per question that has both (the training rule, on the test split)."""

    items = load_questions(dataset, "test")
    items = random.Random(seed).sample(items, len(items))
    pairs, _ = build_pairs({dataset: items}, index, positives, per_question=1, limit=2 * per_kind, seed=seed, k=k)
    return pairs


def pair_counts(pairs: Sequence[JudgePair]) -> dict:
    return dict(sorted(Counter(f"{p.dataset}/{'positive' if p.positive else 'negative'}" for p in pairs).items()))


def dev_setup(cache_dir: Path, seed: int, holdout: int, say: Callable[[str], None]):
    """The corpus' index and answer index, and the dev questions split into (held out, for training)."""
    pages = load_corpus(None)
    index = load_or_build(pages, cache_dir, progress=lambda message, fraction: say(message))
    questions = dev_questions(seed)
    held = {d: items[:holdout] for d, items in questions.items()}
    rest = {d: items[holdout:] for d, items in questions.items()}
    return index, PositiveIndex(pages), held, rest
