"""Scoring against gold answers: exact match, token F1, answer containment, a positive page.

Normalisation is the standard open-domain QA one (text.normalize_answer). Intervals, AUCs and thresholds are
lab/stats.py's. Nothing here runs a model or reads events; see experiments.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from raqa.text import contains_answer, normalize_answer, token_f1


def exact_match(prediction: str | None, golds: Sequence[str]) -> bool:
    """Normalised prediction equals a normalised gold answer.

    Example:
        >>> exact_match("the Beatles", ["Beatles"])
        True
    """
    if not prediction:
        return False
    normalized = normalize_answer(prediction)
    return any(normalized == normalize_answer(g) for g in golds)


def f1(prediction: str | None, golds: Sequence[str]) -> float:
    """Best token-level F1 of the prediction against any gold answer."""
    return max((token_f1(prediction, gold) for gold in golds), default=0.0) if prediction else 0.0


def answer_contained(prediction: str | None, golds: Sequence[str]) -> bool:
    """A normalised gold answer occurs in the normalised prediction (the Adapt-LLM 'accuracy')."""
    return bool(prediction) and any(contains_answer(prediction, g) for g in golds)


def is_positive(page_text: str, golds: Sequence[str]) -> bool:
    """A page is positive for a question when it contains a normalised gold answer."""
    return any(contains_answer(page_text, g) for g in golds)
