"""Which retrieved pages hold a gold answer, and the answer-bearing and answer-free windows built from them.

A page is *positive* for a question when its normalised title and text contain a normalised gold answer.
That is a lexical test: a page that names the answer in an unrelated sentence still counts (the reader's
training data applies the stricter sentence rule, training/reader_data.py). Used by the experiments, the
reader's training data and the evaluations alike, so all three draw windows the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from raqa.config import RunSettings
from raqa.evaluation.questions import QAItem
from raqa.reading.engine import windows
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.text import normalize_for_matching


class PositiveIndex:
    """Which pages contain a gold answer: page texts are normalised once, then checked per question."""

    def __init__(self, pages: Sequence[Page]):
        self._texts = {p.id: f" {normalize_for_matching(p.title + ' ' + p.text)} " for p in pages}

    def is_positive(self, page: Page, answers: Sequence[str]) -> bool:
        text = self._texts[page.id]
        return any(f" {a} " in text for a in (normalize_for_matching(x) for x in answers) if a)

    def anywhere(self, answers: Sequence[str]) -> bool:
        needles = [f" {normalize_for_matching(a)} " for a in answers if normalize_for_matching(a)]
        return any(n in text for text in self._texts.values() for n in needles)


def first_positive_rank(hits: Sequence[Hit], item: QAItem, positives: PositiveIndex) -> int | None:
    return next((h.rank for h in hits if positives.is_positive(h.page, item.answers)), None)


def sample_windows(items, index, positives, base: RunSettings, per_kind: int) -> tuple[list, list]:
    """Up to per_kind negative windows (before the first positive window) and positive windows."""
    negative, positive = [], []
    for item in items:
        hits = index.search(item.question, base.k)
        chunks = windows(hits, base.window, "forward")
        flags = [any(positives.is_positive(h.page, item.answers) for h in w) for w in chunks]
        if True not in flags:
            continue
        first = flags.index(True)
        if first > 0 and len(negative) < per_kind:
            negative.append((item, chunks[first - 1]))  # the window just before the first positive one
        if len(positive) < per_kind:
            positive.append((item, chunks[first]))
        if len(negative) >= per_kind and len(positive) >= per_kind:
            break
    return negative, positive
