"""The maths of scores and thresholds, in one place: 95% intervals, AUC, and the rules that choose a threshold.

Intervals: Wilson score intervals for proportions (well behaved near 0 and 1 and for small samples), and percentile
bootstraps (seeded, so reruns agree) for means and AUCs. Thresholds, each rule once:

    youden               the cut that maximises true-positive minus false-positive rate (Youden's J)
    best_accuracy        the candidate with the best accuracy, ties to the earliest candidate
    lowest_under         the lowest cut that lets at most a given share of negatives through

Callers say what a candidate is and in which order ties go; nothing here knows about pages, models or questions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

Cut = TypeVar("Cut")
Z95 = 1.959963984540054


class Estimate(NamedTuple):
    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


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


def youden(
    negative: Sequence[float],
    positive: Sequence[float],
    candidates: Iterable[Cut],
    flagged: Callable[[float, Cut], bool],
    default: Cut,
) -> Cut:
    """The candidate cut with the highest share of positives flagged minus share of negatives flagged (Youden's J);
    ties go to the earliest candidate; default when there is no candidate.

    Example:
        >>> youden([0.1, 0.4], [0.3, 0.8], sorted({0.3, 0.8}), lambda score, cut: score >= cut, 0.5)
        0.8
    """
    best, best_j = default, -1.0
    for cut in candidates:
        j = sum(flagged(p, cut) for p in positive) / len(positive) - sum(flagged(n, cut) for n in negative) / len(
            negative
        )
        if j > best_j:
            best, best_j = cut, j
    return best


def best_accuracy(candidates: Iterable[Cut], accuracy: Callable[[Cut], float]) -> Cut:
    """The candidate with the highest accuracy; ties go to the earliest candidate (order them by the tie rule).

    Example:
        >>> best_accuracy([3, 2, 1], lambda t: {3: 0.5, 2: 0.7, 1: 0.7}[t])
        2
    """
    best, best_score = None, -math.inf
    for cut in candidates:
        score = accuracy(cut)
        if score > best_score:
            best, best_score = cut, score
    return best


def lowest_under(negative: Sequence[float], positive: Sequence[float], max_false: float) -> float:
    """The lowest threshold (halfway between observed scores, 4 decimals) that at most max_false of the negatives
    reach; 1.0 when none does.

    Example:
        >>> lowest_under([0.1, 0.2, 0.3, 0.9], [0.5, 0.8], max_false=0.25)
        0.4
    """
    scores = sorted({0.0, 1.0, *negative, *positive})
    for low, high in zip(scores, scores[1:], strict=False):
        t = round((low + high) / 2, 4)
        if sum(p >= t for p in negative) <= max_false * len(negative):
            return t
    return 1.0
