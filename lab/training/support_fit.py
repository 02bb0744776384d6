"""Fit the support model (reading/support.py) and choose the badge's thresholds on held-out dev questions.

For each of train judge's held-out dev questions (never trained on; NQ-open and TriviaQA dev, never test,
never WebQuestions or CuratedTREC), the judge reads BM25's top CONTEXT_RANKS pages; every page where it finds
an answer is one row: its FEATURES and whether the extraction holds a gold answer (metrics.answer_contained).
A logistic regression (ridge, Newton's method) is fitted on all rows; the thresholds are chosen on out-of-fold
probabilities (questions split into folds, each scored by a model fitted without it), the way a viewer meets
the badge: a run with the page's defaults (forward, one page a window) ends at the first page whose support
reaches `weak`, and its badge is green when that support also reaches `answered`.

    weak      the lowest threshold at which at most `max_unanswerable` of the dev questions whose answer is nowhere
              in the corpus still end with an answer
    answered  the lowest threshold at or above weak at which the green finals are right at least `precision` of
              the time, over at least MIN_GREEN_FINALS of them; None when no threshold does (no answer is shown green)

The simulation assumes the model gives the judge's answer whenever it is asked (the model + judge reader keeps an
answer only where the two agree); the per-question evaluation with the model measures what runs really do.
Left out here: the features and the runtime (reading/support.py), the command line (cli/judge.py).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.evaluation.reading_eval import PRECISION
from lab.stats import wilson
from lab.training.judge_card import write_card
from lab.training.judge_data import dev_setup
from raqa.evaluation.metrics import answer_contained
from raqa.evaluation.records import provenance
from raqa.reading.engine import ending_window
from raqa.reading.judge import JUDGE_CARD, AnswerJudge
from raqa.reading.support import CONTEXT_RANKS, FEATURES, SUPPORT_FILE, SupportModel, page_features

MIN_GREEN_FINALS = 10  # green finals needed on dev before a precision counts
MAX_UNANSWERABLE = 0.2  # share of unanswerable dev questions that may still end with an answer
RIDGE = 1.0


@dataclass(frozen=True)
class QuestionRows:
    """One dev question: its pages in rank order as (features or None, extraction right), and whether its answer
    is anywhere in the corpus."""

    dataset: str
    pages: tuple[tuple[dict[str, float] | None, bool], ...]
    anywhere: bool


def fit_logistic(x: np.ndarray, y: np.ndarray, ridge: float = RIDGE) -> tuple[np.ndarray, float]:
    """(weights, bias) maximising the ridge-penalised log-likelihood of P(y=1 | x) = sigmoid(x @ w + b) (Newton).
    The bias is not penalised.

    Example:
        >>> w, b = fit_logistic(np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [-0.5]]),
        ...                     np.array([0, 0, 1, 1, 0, 1]), ridge=0.1)
        >>> bool(w[0] > 0)
        True
    """
    features = np.hstack([np.asarray(x, float), np.ones((len(x), 1))])
    y = np.asarray(y, float)
    penalty = ridge * np.eye(features.shape[1])
    penalty[-1, -1] = 1e-9
    w = np.zeros(features.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(features @ w, -30, 30)))
        gradient = features.T @ (p - y) + penalty @ w
        hessian = features.T @ (features * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w[:-1], float(w[-1])


def question_rows(item, hits, readings, anywhere: bool, dataset: str) -> QuestionRows:
    """One question's rows from the judge's readings of its hits (rank order)."""
    features = page_features(
        item.question,
        hits,
        [r.p_answer for r in readings],
        [r.answer for r in readings],
        [r.sentence for r in readings],
    )
    right = [answer_contained(r.answer, item.answers) for r in readings]
    return QuestionRows(dataset, tuple(zip(features, right, strict=True)), anywhere)


def collect_support(
    judge, index, positives, held: dict, progress: Callable[[Iterable], Iterable] = iter
) -> list[QuestionRows]:
    """The judge's readings of each held-out dev question's top pages, as rows."""
    out = []
    for dataset, item in progress([(d, item) for d, items in held.items() for item in items]):
        hits = index.search(item.question, CONTEXT_RANKS)
        readings = judge.read(item.question, hits) if hits else []
        out.append(question_rows(item, hits, readings, positives.anywhere(item.answers), dataset))
    return out


def _matrix(rows: Sequence[QuestionRows]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    x, y, where = [], [], []
    for q, question in enumerate(rows):
        for i, (features, right) in enumerate(question.pages):
            if features is not None:
                x.append([features[name] for name in FEATURES])
                y.append(right)
                where.append((q, i))
    return np.asarray(x, float).reshape(-1, len(FEATURES)), np.asarray(y, float), where


def fit_model(x: np.ndarray, y: np.ndarray, ridge: float = RIDGE) -> SupportModel:
    """A SupportModel fitted on standardised rows (thresholds left open: weak 0, answered None)."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    weights, bias = fit_logistic((x - mean) / scale, y, ridge)
    return SupportModel(
        tuple(map(float, weights)),
        bias,
        tuple(map(float, mean)),
        scale=tuple(map(float, scale)),
        weak=0.0,
        answered=None,
        card={},
    )


def out_of_fold(rows: Sequence[QuestionRows], folds: int = 5, ridge: float = RIDGE) -> dict[tuple[int, int], float]:
    """Each row's support from a model fitted without its question's fold (questions dealt round-robin)."""
    x, y, where = _matrix(rows)
    fold = np.array([q % folds for q, _ in where])
    support: dict[tuple[int, int], float] = {}
    for k in range(folds):
        model = fit_model(x[fold != k], y[fold != k], ridge)
        for row in np.flatnonzero(fold == k):
            support[where[row]] = model.probability(dict(zip(FEATURES, x[row], strict=True)))
    return support


def finals(rows: Sequence[QuestionRows], support: dict[tuple[int, int], float], weak: float) -> list:
    """Per question, the page a page-default run would end on: (support, right) of the first page whose support
    reaches weak, or None."""
    out = []
    for q, question in enumerate(rows):
        end = ending_window([support.get((q, i)) for i in range(len(question.pages))], weak)
        out.append(None if end is None else (support[(q, end)], question.pages[end][1]))
    return out


def summary(rows: Sequence[QuestionRows], support: dict, weak: float, answered: float | None) -> dict:
    """Per-question figures of the page-default run at these thresholds: answered, green precision, weak band's
    precision, answers on unanswerable questions (Wilson intervals)."""
    ends = finals(rows, support, weak)
    green = [right for end in ends if end and answered is not None and end[0] >= answered for right in [end[1]]]
    amber = [end[1] for end in ends if end and (answered is None or end[0] < answered)]
    unanswerable = [end is not None for end, question in zip(ends, rows, strict=True) if not question.anywhere]
    return {
        "questions": len(rows),
        "ended_with_answer": wilson(sum(end is not None for end in ends), len(rows)).as_dict(),
        "answered_precision": wilson(sum(green), len(green)).as_dict(),
        "weak_precision": wilson(sum(amber), len(amber)).as_dict(),
        "right_and_answered": wilson(sum(green), len(rows)).as_dict(),
        "unanswerable_with_answer": wilson(sum(unanswerable), len(unanswerable)).as_dict(),
    }


def choose_thresholds(
    rows: Sequence[QuestionRows],
    support: dict,
    precision: float = PRECISION,
    max_unanswerable: float = MAX_UNANSWERABLE,
) -> tuple[float, float | None]:
    """(weak, answered) by the rules of the module docstring, on out-of-fold supports."""
    cuts = sorted({round(s, 4) for s in support.values()})
    unanswerable = [q for q, question in enumerate(rows) if not question.anywhere]
    weak = 1.0
    for cut in cuts:
        ends = finals(rows, support, cut)
        if sum(ends[q] is not None for q in unanswerable) <= max_unanswerable * max(1, len(unanswerable)):
            weak = cut
            break
    ends = [end for end in finals(rows, support, weak) if end]
    for cut in cuts:
        if cut < weak:
            continue
        green = [right for s, right in ends if s >= cut]
        if len(green) >= MIN_GREEN_FINALS and sum(green) >= precision * len(green):
            return weak, cut
    return weak, None


def auc_of(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Rank AUC of scores for labels (ties count half)."""
    from scipy.stats import rankdata

    labels = np.asarray(labels, bool)
    ranks = rankdata(np.asarray(scores, float))
    positive, negative = labels.sum(), (~labels).sum()
    if not positive or not negative:
        return math.nan
    return float((ranks[labels].sum() - positive * (positive + 1) / 2) / (positive * negative))


def fit(
    rows: Sequence[QuestionRows],
    folds: int = 5,
    precision: float = PRECISION,
    max_unanswerable: float = MAX_UNANSWERABLE,
    ridge: float = RIDGE,
) -> SupportModel:
    """The support model fitted on every row, with thresholds and their measured figures from out-of-fold supports."""
    x, y, where = _matrix(rows)
    oof = out_of_fold(rows, folds, ridge)
    weak, answered = choose_thresholds(rows, oof, precision, max_unanswerable)
    logit_p = [row[FEATURES.index("logit_p")] for row in x]
    card = {
        "rows": {
            "pages": len(y),
            "right": int(y.sum()),
            "questions": len(rows),
            "datasets": sorted({r.dataset for r in rows}),
        },
        "auc": {"support_out_of_fold": auc_of([oof[w] for w in where], y), "judge_p_alone": auc_of(logit_p, y)},
        "rules": {
            "precision": precision,
            "min_green": MIN_GREEN_FINALS,
            "max_unanswerable": max_unanswerable,
            "folds": folds,
            "ridge": ridge,
        },
        "dev": summary(rows, oof, weak, answered),
    }
    model = fit_model(x, y, ridge)
    return SupportModel(
        model.weights, model.bias, model.mean, scale=model.scale, weak=weak, answered=answered, card=card
    )


def fit_folder(
    folder,
    cache_dir,
    command: str,
    folds: int = 5,
    precision: float = PRECISION,
    max_unanswerable: float = MAX_UNANSWERABLE,
    say: Callable[[str], None] = print,
) -> SupportModel:
    """Fit the support model of the judge in folder on its held-out dev questions; write support.json and the card."""

    from tqdm import tqdm

    start = time.time()
    folder = Path(folder)
    judge = AnswerJudge.load(folder)
    judge.support = None  # rows are read with the judge's own P(answer), whatever support model is there now
    card = judge.card
    index, positives, held, _ = dev_setup(cache_dir, card["settings"]["seed"], card["holdout_questions"], say)
    say(f"reading the top {CONTEXT_RANKS} pages of {sum(map(len, held.values()))} held-out dev questions")
    rows = collect_support(judge, index, positives, held, lambda items: tqdm(items, desc="dev questions", unit="q"))
    model = fit(rows, folds, precision, max_unanswerable)
    about = {
        "command": command,
        "data": f"held-out dev questions of train judge ({card['holdout_questions']} a set)",
        "seconds": round(time.time() - start, 1),
        **provenance(),
    }
    model = SupportModel(
        model.weights,
        model.bias,
        model.mean,
        scale=model.scale,
        weak=model.weak,
        answered=model.answered,
        card={**model.card, **about},
    )
    (folder / SUPPORT_FILE).write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    write_card(folder, json.loads((folder / JUDGE_CARD).read_text()))
    return model
