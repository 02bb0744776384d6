"""Scoring against gold answers: exact match, token F1, answer containment, and 95% intervals.

Normalisation is the standard open-domain QA one (text.normalize_answer). Intervals: Wilson score
intervals for proportions (well behaved near 0 and 1 and for small samples), and a percentile
bootstrap for means. Nothing here runs a model or reads events; see experiments.py.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from raqa.text import contains_answer, normalize_answer

Z95 = 1.959963984540054


class Estimate(NamedTuple):
    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


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
    if not prediction:
        return 0.0
    predicted = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        common = sum((Counter(predicted) & Counter(expected)).values())
        if common == 0:
            continue
        precision, recall = common / len(predicted), common / len(expected)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def answer_contained(prediction: str | None, golds: Sequence[str]) -> bool:
    """A normalised gold answer occurs in the normalised prediction (the Adapt-LLM 'accuracy')."""
    return bool(prediction) and any(contains_answer(prediction, g) for g in golds)


def is_positive(page_text: str, golds: Sequence[str]) -> bool:
    """A page is positive for a question when it contains a normalised gold answer."""
    return any(contains_answer(page_text, g) for g in golds)


def wilson(successes: int, n: int) -> Estimate:
    """A proportion with its 95% Wilson score interval.

    Example:
        >>> round(wilson(5, 10).low, 3), round(wilson(5, 10).high, 3)
        (0.237, 0.763)
    """
    if n == 0:
        return Estimate(float("nan"), 0.0, 1.0, 0)
    p = successes / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    # subtle: rounding can put the bound a hair inside p at 0 or 1; the interval always holds p
    return Estimate(p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), n)


def proportion(flags: Sequence[bool]) -> Estimate:
    return wilson(sum(bool(f) for f in flags), len(flags))


def mean_interval(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> Estimate:
    """A mean with its 95% percentile-bootstrap interval (seeded, so reruns agree)."""
    n = len(values)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return Estimate(sum(values) / n, means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1], n)


def estimate(flags_or_values, kind: str = "proportion") -> dict:
    """A share (Wilson interval) or a mean (bootstrap interval) as a JSON-ready dict."""
    return (proportion(flags_or_values) if kind == "proportion" else mean_interval(flags_or_values)).as_dict()


def auc(negative: Sequence[float], positive: Sequence[float]) -> float:
    """Probability that a random positive window scores above a random negative one (ties count half).

    Example:
        >>> auc([0.1, 0.2], [0.3, 0.2])
        0.875
    """
    if not negative or not positive:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(negative) * len(positive))


def auc_interval(negative: Sequence[float], positive: Sequence[float], resamples: int = 2000, seed: int = 0) -> dict:
    """AUC (ties count half) with a 95% percentile-bootstrap interval, positives and negatives resampled apart.

    Example:
        >>> auc_interval([0.1, 0.2], [0.3, 0.2])["value"]
        0.875
    """
    neg, pos = np.asarray(negative, float), np.asarray(positive, float)
    if not len(neg) or not len(pos):
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n_positive": 0, "n_negative": 0}

    def auc(n: np.ndarray, p: np.ndarray) -> float:
        n = np.sort(n)
        below = np.searchsorted(n, p, "left")
        ties = np.searchsorted(n, p, "right") - below
        return float((below + 0.5 * ties).sum() / (len(n) * len(p)))

    rng = np.random.default_rng(seed)
    draws = sorted(auc(rng.choice(neg, len(neg)), rng.choice(pos, len(pos))) for _ in range(resamples))
    return {
        "value": auc(neg, pos),
        "low": draws[int(0.025 * resamples)],
        "high": draws[int(0.975 * resamples) - 1],
        "n_positive": len(pos),
        "n_negative": len(neg),
    }
