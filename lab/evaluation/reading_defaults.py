"""Which window the small model can read: window size and the order of pages inside a window, measured.

For each window size w and in-window page order (best page first, or best page nearest the question), the
base model reads answer-bearing ("positive") and answer-free ("negative") test windows of that size, drawn
the same way as the other experiments (positives.sample_windows). The scores per configuration come from
window_scores.score_windows: exact match on positive windows, false answers on negative windows, and, with an
answer judge, the badge's precision and recall and the judge's AUC at that window size. `choose` names the
configuration the page should default to. Left out here: the figure (lab/figures/experiments.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.evaluation.positives import PositiveIndex, sample_windows
from lab.evaluation.window_scores import score_windows
from raqa.config import RunSettings
from raqa.evaluation.questions import ProgressBar, QAItem
from raqa.retrieval.index import BM25Index

# (w, page order); one page has no order, so w=1 is measured once
CONFIGS: tuple[tuple[int, str], ...] = (
    (1, "best_first"),
    (2, "best_first"),
    (2, "best_last"),
    (3, "best_first"),
    (3, "best_last"),
)


def configuration_label(window: int, page_order: str) -> str:
    """A configuration's name in records and figures.

    Example:
        >>> label(1, "best_first"), label(3, "best_last")
        ('w=1', 'w=3, best page last')
    """
    if window == 1:
        return "w=1"
    return f"w={window}, best page {'first' if page_order == 'best_first' else 'last'}"


def reading_defaults(
    items: Sequence[QAItem],
    index: BM25Index,
    backend,
    base: RunSettings,
    positives: PositiveIndex,
    per_kind: int,
    progress: ProgressBar,
    judge=None,
) -> dict:
    """Each configuration of CONFIGS on per_kind negative and per_kind positive windows of its size."""
    rows = []
    for window, page_order in progress(list(CONFIGS)):
        settings = base.replace(window=window, page_order=page_order)
        negative, positive = sample_windows(items, index, positives, settings, per_kind)
        scores = score_windows(negative, positive, backend, settings, judge)
        rows.append(
            {"label": configuration_label(window, page_order), "window": window, "page_order": page_order, **scores}
        )
    return {"rows": rows, "chosen": choose(rows), "k": base.k, "judge": judge is not None}


def choose(rows: Sequence[dict]) -> dict:
    """The default: the highest exact match on positive windows; ties (within 1 point) go to fewer false answers.

    Example:
        >>> rows = [{"label": "a", "exact_match_on_positive": {"value": 0.2},
        ...          "false_answer_rate_on_negative": {"value": 0.9}},
        ...         {"label": "b", "exact_match_on_positive": {"value": 0.205},
        ...          "false_answer_rate_on_negative": {"value": 0.5}}]
        >>> choose(rows)["label"]
        'b'
    """

    def em(row: dict) -> float:
        return row["exact_match_on_positive"]["value"] or 0.0

    top = max(em(r) for r in rows)
    close = [r for r in rows if em(r) >= top - 0.01]
    best = min(close, key=lambda r: r["false_answer_rate_on_negative"]["value"] or 0.0)
    return {"label": best["label"], "window": best.get("window"), "page_order": best.get("page_order")}
