"""The answer judge's measurement and card: threshold on held-out dev pairs, metrics on test pairs, README.

Measured with the saved judge as the runtime loads it (reading.judge.AnswerJudge), so the numbers are the
shipped model's. On answer-bearing vs answer-free pages from BM25's top 15 (judge_data's rule):

    auc            P(a random positive page scores above a random negative one), percentile-bootstrap 95% interval
    exact_match    of the extracted answer on positive pages (Wilson 95% interval); f1 (bootstrap interval)
    at_threshold   share of positive / negative pages at or above the card's threshold (Wilson intervals)
    ms_per_page    wall time of read() per page, pages of one question read together

Per question (`per_question`, n seeded test questions a set, each one's BM25 top 15 read), the judge alone as a
run meets it: `best_right` the share whose most confident extraction holds a gold answer, `auc` of that
extraction's p_answer for right vs wrong ones, and per cut t `first_at` the run's view: the first page in rank
order with p_answer >= t ends the question (share answered, and precision: right among those answered).

p_answer's scale and bias (Platt scaling of the span-vs-no-answer margin) and the threshold (Youden's J: true-positive
minus false-positive rate) are fitted on held-out dev pairs, balanced, so p_answer reads as P(answer) at even odds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from lab.stats import auc_interval, estimate, proportion, youden
from lab.training.judge_data import JudgePair, measurement_pairs
from raqa.evaluation.metrics import answer_contained, exact_match, f1
from raqa.evaluation.questions import load_questions
from raqa.reading.judge import probability


def choose_judge_threshold(negative: Sequence[float], positive: Sequence[float]) -> float:
    """The p_answer cut (answer when p >= cut) with the highest true-positive minus false-positive rate."""
    best = youden(negative, positive, sorted(set(positive)), lambda score, cut: score >= cut, 0.5)
    return float(np.floor(best * 1e4) / 1e4)  # rounded down, so the chosen pages stay at or above it


def fit_platt(negative: Sequence[float], positive: Sequence[float], ridge: float = 1e-3) -> tuple[float, float]:
    """(scale, bias) of the logistic fit P(positive | margin) = sigmoid(scale * margin + bias) (Newton's method).

    Example:
        >>> scale, bias = fit_platt([-3.0, -2.0, -1.0, 0.5], [-0.5, 1.0, 2.0, 3.0])
        >>> scale > 0 and abs(bias) < 1
        True
    """
    x = np.asarray([*negative, *positive], float)
    floor = x[np.isfinite(x)].min(initial=0.0) - 1.0
    x = np.where(np.isfinite(x), x, floor)  # a page without a span scores below every other
    y = np.asarray([0.0] * len(negative) + [1.0] * len(positive))
    features = np.stack([x, np.ones_like(x)], axis=1)
    w = np.zeros(2)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(features @ w)))
        gradient = features.T @ (p - y) + ridge * w
        hessian = features.T @ (features * (p * (1 - p))[:, None]) + ridge * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return round(float(w[0]), 6), round(float(w[1]), 6)


def read_pairs(judge, pairs: Sequence[JudgePair]) -> tuple[list, float]:
    """(margin, answer, sentence) for each pair (in order), pages of one question read in one call; ms per page."""
    by_question: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_question.setdefault(pair.question_id, []).append(i)
    found: list = [None] * len(pairs)
    started = time.perf_counter()
    for rows in by_question.values():
        for row, span in zip(rows, judge.spans(pairs[rows[0]].question, [pairs[r].page for r in rows]), strict=True):
            found[row] = span
    return found, 1000 * (time.perf_counter() - started) / max(1, len(pairs))


def measure_judge(judge, pairs: Sequence[JudgePair], threshold: float, spans: tuple[list, float] | None = None) -> dict:
    """The judge's metrics on labelled pairs (see the module docstring); spans: read_pairs' result, if at hand."""
    found, ms = spans or read_pairs(judge, pairs)
    readings = [(probability(m, judge.scale, judge.bias), answer) for m, answer, _ in found]
    pos = [(p, r) for p, r in zip(pairs, readings, strict=True) if p.positive]
    neg = [r for p, r in zip(pairs, readings, strict=True) if not p.positive]
    return {
        "pairs": {"positive": len(pos), "negative": len(neg), "questions": len({p.question_id for p in pairs})},
        "auc": auc_interval([p for p, _ in neg], [p for _, (p, _) in pos]),
        "exact_match": proportion([exact_match(a, p.answers) for p, (_, a) in pos]).as_dict(),
        "f1": estimate([f1(a, p.answers) for p, (_, a) in pos], "mean"),
        "at_threshold": {
            "threshold": threshold,
            "positive_pages_answered": proportion([p >= threshold for _, (p, _) in pos]).as_dict(),
            "negative_pages_answered": proportion([p >= threshold for p, _ in neg]).as_dict(),
        },
        "ms_per_page": round(ms, 1),
        "examples": [
            {"question": p.question, "page": p.page.title, "gold": p.answers[:3], "judge": a, "p": round(pr, 3)}
            for p, (pr, a) in pos[:5]
        ],
    }


def evaluate_judge(judge, held_pairs, index, positives, seed: int, test_per_kind: int, say=print) -> dict:
    """Fit p_answer and the threshold on the held-out dev pairs, then measure on NQ and TriviaQA test pairs.

    Sets judge.scale, judge.bias and judge.threshold; returns the card's fields for them and the metrics."""

    say(f"Fitting p_answer and the threshold on {len(held_pairs)} held-out dev pairs")
    held = read_pairs(judge, held_pairs)
    margins = [m for m, _, _ in held[0]]
    negative = [m for m, p in zip(margins, held_pairs, strict=True) if not p.positive]
    judge.scale, judge.bias = fit_platt(negative, [m for m, p in zip(margins, held_pairs, strict=True) if p.positive])
    calibrated = [probability(m, judge.scale, judge.bias) for m in margins]
    judge.threshold = choose_judge_threshold(
        [c for c, p in zip(calibrated, held_pairs, strict=True) if not p.positive],
        [c for c, p in zip(calibrated, held_pairs, strict=True) if p.positive],
    )
    fields = {"margin_scale": judge.scale, "margin_bias": judge.bias, "threshold": judge.threshold}
    fields["calibration"] = measure_judge(judge, held_pairs, judge.threshold, held)
    fields["test"] = {}
    for dataset in ("nq", "triviaqa"):
        say(f"Measuring on {dataset} test pairs")
        pairs = measurement_pairs(index, positives, dataset, test_per_kind, seed)
        fields["test"][dataset] = measure_judge(judge, pairs, judge.threshold)
        say(f"Reading {test_per_kind} {dataset} test questions' top 15 pages (per question)")
        fields["test"][dataset]["per_question"] = question_level(judge, index, dataset, test_per_kind, seed)
    timing_questions = [q.question for q in load_questions("nq", "test", limit=100, seed=seed)]
    fields["timing"] = window_timing(judge, index, timing_questions)
    return fields


PER_QUESTION_CUTS = (0.5, 0.7, 0.8, 0.9, 0.95)


def question_outcome(judge, index, item, k: int = 15) -> dict | None:
    """One test question read as a run meets it: the most confident extraction's p_answer and whether it is right,
    and per cut whether the first page in rank order reaching it is right (None: no page reaches it)."""
    readings = judge.read(item.question, index.search(item.question, k))
    if not readings:
        return None
    right = [answer_contained(r.answer, item.answers) for r in readings]
    top = max(range(len(readings)), key=lambda i: readings[i].p_answer)
    first = {
        cut: next((right[i] for i, r in enumerate(readings) if r.p_answer >= cut), None) for cut in PER_QUESTION_CUTS
    }
    return {"best_p": readings[top].p_answer, "best_right": right[top], "first": first}


def summarise_questions(outcomes: Sequence[dict]) -> dict:
    """question_outcome's results as the card's `per_question` (see the module docstring)."""
    best = [(o["best_p"], o["best_right"]) for o in outcomes]
    return {
        "questions": len(outcomes),
        "best_right": proportion([r for _, r in best]).as_dict(),
        "auc": auc_interval([p for p, r in best if not r], [p for p, r in best if r]),
        "first_at": {
            str(cut): {
                "answered": proportion([o["first"][cut] is not None for o in outcomes]).as_dict(),
                "precision": proportion([o["first"][cut] for o in outcomes if o["first"][cut] is not None]).as_dict(),
            }
            for cut in PER_QUESTION_CUTS
        },
    }


def question_level(judge, index, dataset: str, n: int, seed: int = 0, k: int = 15) -> dict:
    """The judge alone over n seeded test questions' top k pages (see the module docstring)."""
    outcomes = [question_outcome(judge, index, item, k) for item in load_questions(dataset, "test", limit=n, seed=seed)]
    return summarise_questions([o for o in outcomes if o is not None])


def window_timing(judge, index, questions: Sequence[str], window: int = 3) -> dict:
    """ms per page and per window when the judge reads each question's top `window` BM25 pages in one call."""
    judge.read(questions[0], index.search(questions[0], window))  # warm-up
    pages, started = 0, time.perf_counter()
    for question in questions:
        hits = index.search(question, window)
        judge.read(question, hits)
        pages += len(hits)
    seconds = time.perf_counter() - started
    return {
        "window": window,
        "windows": len(questions),
        "ms_per_window": round(1000 * seconds / len(questions), 1),
        "ms_per_page": round(1000 * seconds / max(1, pages), 1),
    }
