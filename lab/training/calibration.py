"""The abstention-tuned reader's answer threshold on P(ANSWER), chosen on held-out dev windows.

A 135M model trained with LoRA still leans towards one verdict (DATA.md: plain LoRA collapsed to always
"NOT FOUND" under greedy decoding), so after training the threshold is chosen on held-out dev windows
against the base model's scores there (`choose_threshold`, `calibrate`) and stored with the adapter.
Left out here: the training (lora.py), the command around it (reader.py) and test questions (the
comparison is in experiments.reader_comparison).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.stats import auc
from raqa.evaluation.metrics import exact_match
from raqa.reading.engine import window_verdict


@dataclass(frozen=True)
class Calibration:
    threshold: float
    rule: str  # which rule chose it (the target was met, or which fallback)
    false_answer_rate: float  # on the held-out negative windows, at the threshold
    exact_match: float  # on the held-out positive windows, at the threshold
    base_false_answer_rate: float  # the base model on the same windows at its default threshold 0.5
    base_exact_match: float
    auc: float  # how well P(ANSWER) separates positive from negative windows (0.5 = not at all)
    negatives: int
    positives: int


def _rates(t: float, p_neg, p_pos, exact_pos) -> tuple[float, float]:
    far = sum(p >= t for p in p_neg) / len(p_neg)
    em = sum(p >= t and e for p, e in zip(p_pos, exact_pos, strict=True)) / len(p_pos)
    return far, em


def choose_reader_threshold(
    p_negative: Sequence[float],
    p_positive: Sequence[float],
    exact_positive: Sequence[bool],
    base_false_answer_rate: float,
    base_exact_match: float,
) -> tuple[float, str]:
    """The P(ANSWER) threshold that best meets the target on held-out windows.

    Target: at most half the base model's false-answer rate on negative windows, and exact match on
    positive windows (answering and right) at least the base model's. Among thresholds that meet it,
    the one with the highest exact match, then the lowest false-answer rate. If none does: the highest
    exact match among those that halve false answers; failing that, the largest gap between positive
    windows answered correctly and negative windows answered. Candidates lie halfway between observed
    scores, so the choice does not sit on one window's score.

    Example:
        >>> choose_threshold([0.2, 0.3], [0.6, 0.7], [True, False], 1.0, 0.5)
        (0.45, 'target met')
    """
    scores = sorted({0.0, 1.0, *p_negative, *p_positive})
    candidates = [round((a + b) / 2, 6) for a, b in zip(scores, scores[1:], strict=False)] or [0.5]
    rated = [(t, *_rates(t, p_negative, p_positive, exact_positive)) for t in candidates]
    halved = [r for r in rated if r[1] <= base_false_answer_rate / 2]
    met = [r for r in halved if r[2] >= base_exact_match]
    if met:
        best = max(met, key=lambda r: (r[2], -r[1], -r[0]))
        return best[0], "target met"
    if halved:
        best = max(halved, key=lambda r: (r[2], -r[1], -r[0]))
        return best[0], "false answers halved; exact match below the base model"
    best = max(rated, key=lambda r: (r[2] - r[1], -r[0]))
    return best[0], "target not reachable; best exact match minus false-answer rate"


def reader_window_scores(windows, backend, settings, answer: bool) -> list[tuple[float, object]]:
    """(P(ANSWER), WindowVerdict) for each (item, window): forced to answer, or forced to decline (score only)."""

    forced = settings.replace(answer_threshold=0.0 if answer else 2.0)
    scored = []
    for item, window in windows:
        verdict = window_verdict(item.question, window, backend, forced)
        scored.append((verdict.p_answer if verdict.p_answer is not None else 0.0, verdict))
    return scored


def calibrate(positive_windows, negative_windows, base_scores: dict, backend, settings) -> Calibration:
    """Score the tuned backend on held-out windows and choose its threshold against the base model's scores.

    base_scores: {"p_negative", "p_positive", "exact_positive"} of the base model on the same windows.
    """

    neg = [p for p, _ in reader_window_scores(negative_windows, backend, settings, answer=False)]
    pos = reader_window_scores(positive_windows, backend, settings, answer=True)
    p_pos = [p for p, _ in pos]
    exact = [exact_match(v.reply.answer, item.answers) for (item, _), (_, v) in zip(positive_windows, pos, strict=True)]
    base_far, base_em = _rates(0.5, base_scores["p_negative"], base_scores["p_positive"], base_scores["exact_positive"])
    threshold, rule = choose_reader_threshold(neg, p_pos, exact, base_far, base_em)
    far, em = _rates(threshold, neg, p_pos, exact)
    return Calibration(
        threshold,
        rule,
        far,
        exact_match=em,
        base_false_answer_rate=base_far,
        base_exact_match=base_em,
        auc=auc(neg, p_pos),
        negatives=len(neg),
        positives=len(pos),
    )


def base_scores(positive_windows, negative_windows, backend, settings) -> dict:
    neg = [p for p, _ in reader_window_scores(negative_windows, backend, settings, answer=False)]
    pos = reader_window_scores(positive_windows, backend, settings, answer=True)
    exact = [exact_match(v.reply.answer, item.answers) for (item, _), (_, v) in zip(positive_windows, pos, strict=True)]
    return {"p_negative": neg, "p_positive": [p for p, _ in pos], "exact_positive": exact}
