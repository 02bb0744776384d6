"""Readers compared on the same test windows, iterative runs and unanswerable questions, and the badge measured.

Each reader (the base model, a trained reader, the model + answer judge, the judge alone) reads the same
answer-free ("negative") and answer-bearing ("positive") windows (scored by window_scores.py, with the badge's
precision and recall), the same questions forward and backward, and the same questions whose answer is
nowhere in the corpus. Left out here: drawing the figure (lab/figures/experiments.py) and choosing the readers
(registry.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lab.evaluation.experiments import finals_of, score_runs, settings_record
from lab.evaluation.positives import PositiveIndex, sample_windows
from lab.evaluation.window_scores import score_windows
from lab.stats import estimate
from raqa.config import RunSettings
from raqa.evaluation.questions import ProgressBar, QAItem
from raqa.retrieval.index import BM25Index


def reader_comparison(
    items: Sequence[QAItem],
    unanswerable_pool: Sequence[QAItem],
    index: BM25Index,
    readers: dict[str, tuple[object, RunSettings, dict]],
    positives: PositiveIndex,
    per_kind: int,
    questions_per_order: int,
    unanswerable_questions: int,
    progress: ProgressBar,
    judge=None,
    window: int = RunSettings.window,
) -> dict:
    """Each reader on the same test windows, the same iterative runs and the same unanswerable questions.

    readers: name -> (backend, its run settings, a description kept in the record); judge: the answer judge
    every reader's windows are also read by (None: the badge is the lexical check).
    """
    demo = RunSettings(window=window)
    negative, positive = sample_windows(items, index, positives, demo, per_kind)
    questions = list(items[:questions_per_order])
    lost = [i for i in unanswerable_pool if not positives.anywhere(i.answers)][:unanswerable_questions]
    results = {}
    for name, (backend, settings, about) in progress(list(readers.items())):
        runs = {
            order: score_runs(finals_of(questions, index, backend, replace(settings, order=order), judge))
            for order in ("forward", "backward")
        }
        finals = finals_of(lost, index, backend, settings, judge)
        results[name] = {
            **about,
            "settings": {
                **settings_record(settings),
                "answer_threshold": settings.answer_threshold,
                "reader_mode": settings.reader_mode,
                "judge_threshold": settings.judge_threshold if judge is not None else None,
                "gate_threshold": settings.gate_threshold if settings.reader_mode != "model" else None,
            },
            "windows": score_windows(negative, positive, backend, settings, judge),
            "iterative": runs,
            "unanswerable": {"ended_with_an_answer": estimate([f is not None and not f.abstained for _, f in finals])},
        }
    return {
        "window": demo.window,
        "k": demo.k,
        "negative_windows": len(negative),
        "positive_windows": len(positive),
        "iterative_questions": len(questions),
        "unanswerable_questions": len(lost),
        "judge": _judge_record(judge),
        "readers": results,
    }


def _judge_record(judge) -> dict | None:
    """Which answer judge read the windows: its threshold and what its card says made it."""
    if judge is None:
        return None
    card = getattr(judge, "card", None) or {}
    return {"threshold": judge.threshold, **{k: card.get(k) for k in ("command", "format", "code_version", "created")}}
