"""The paper's tables and figures as runnable experiments over real questions, written as JSON.

Each experiment takes questions from questions.py, runs the same event stream as the page
(engine.run, or engine.window_verdict for single windows), scores it with metrics.py, and returns a
results dict; write_record() adds what made it (command, dataset, sample, model, adapter, corpus,
code version) and saves it under assets/results/. Figures are drawn from these files by
lab/figures/experiments.py; nothing is recomputed when the page loads.

Experiments: recall (Table 1), topk_vs_iterative (Table 2), window_order (Figure 5),
negative_windows (Figures 6-7), unanswerable, reader_comparison. registry.py names each with its default
limit and what it needs, and is what `python -m lab experiment NAME` runs. What they leave out: the
paper's KILT corpus and its strong model; everything here runs on the embedded corpus and the configured model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lab.evaluation.call_journal import call_key, remembered
from lab.evaluation.positives import PositiveIndex, first_positive_rank, sample_windows
from lab.evaluation.window_scores import score_windows
from lab.stats import estimate
from raqa.config import RunSettings
from raqa.evaluation.fan_out import fan_out
from raqa.evaluation.metrics import answer_contained, exact_match, f1
from raqa.evaluation.questions import ProgressBar, QAItem
from raqa.reading.engine import run_to_final, windows
from raqa.reading.events import Final
from raqa.retrieval.index import BM25Index

RECALL_KS = (1, 5, 10, 20, 50, 100, 200, 500, 1000)
TOPK_KS = (5, 10, 20)
SWEPT_WINDOW_SIZES = (1, 2, 3, 5, 10)
SHOT_COUNTS = (0, 2, 4, 6, 8)


# -- 1. recall ---------------------------------------------------------------------------------
def recall(
    items: Sequence[QAItem], indexes: dict[str, BM25Index], positives: PositiveIndex, progress: ProgressBar
) -> dict:
    """Share of questions with a positive page in the top K, per tokenizer."""
    first: dict[str, list[int | None]] = {name: [] for name in indexes}
    for item in progress(items):
        for name, index in indexes.items():
            first[name].append(first_positive_rank(index.search(item.question, max(RECALL_KS)), item, positives))
    return {
        "ks": list(RECALL_KS),
        "recall": {
            name: {str(k): estimate([r is not None and r <= k for r in ranks]) for k in RECALL_KS}
            for name, ranks in first.items()
        },
        "answer_anywhere_in_corpus": estimate([positives.anywhere(i.answers) for i in items]),
    }


# -- shared scoring of runs ----------------------------------------------------------------------
def final_or_none(question: str, index: BM25Index, backend, settings: RunSettings, judge=None) -> Final | None:
    """The run's Final event, or None when it ended in RunFailed (from the call journal when it holds it)."""

    def make() -> Final | None:
        final = run_to_final(question, index, backend, settings, judge)
        return final if isinstance(final, Final) else None

    return remembered(call_key("run", question, (), settings=settings, backend=backend, judge=judge), make)


def finals_of(items: Sequence[QAItem], index, backend, settings: RunSettings, judge=None, progress=None) -> list:
    """(item, its run's Final or None) for each item, its runs fanned out (fan_out.calls_at_once)."""
    return fan_out(lambda item: (item, final_or_none(item.question, index, backend, settings, judge)), items, progress)


def score_runs(finals: Sequence[tuple[QAItem, Final | None]]) -> dict:
    answers = [(item, f.answer if f else None) for item, f in finals]
    return {
        "exact_match": estimate([exact_match(a, i.answers) for i, a in answers]),
        "f1": estimate([f1(a, i.answers) for i, a in answers], "mean"),
        "contains_gold": estimate([answer_contained(a, i.answers) for i, a in answers]),
        "abstained": estimate([f is None or f.abstained for _, f in finals]),
        "pages_read": estimate([f.pages_read if f else 0 for _, f in finals], "mean"),
        "windows_read": estimate([f.windows_read if f else 0 for _, f in finals], "mean"),
        "prompt_tokens": estimate([f.prompt_tokens if f else 0 for _, f in finals], "mean"),
        "completion_tokens": estimate([f.completion_tokens if f else 0 for _, f in finals], "mean"),
        "seconds": estimate([f.seconds if f else 0.0 for _, f in finals], "mean"),
    }


# -- 2. Top-K versus iterative -----------------------------------------------------------------------
def topk_vs_iterative(items, index, backend, base: RunSettings, progress: ProgressBar) -> dict:
    configs = {f"topk_k{k}": replace(base, strategy="topk", k=k) for k in TOPK_KS}
    configs[f"iterative_w{base.window}_k{base.k}"] = replace(base, strategy="iterative")
    work = [(item, name) for item in items for name in configs]
    done = fan_out(lambda w: final_or_none(w[0].question, index, backend, configs[w[1]]), work, progress)
    finals: dict[str, list] = {name: [] for name in configs}
    for (item, name), final in zip(work, done, strict=True):
        finals[name].append((item, final))
    return {
        "configs": {name: {"settings": settings_record(s), **score_runs(finals[name])} for name, s in configs.items()}
    }


def settings_record(s: RunSettings) -> dict:
    return {
        "strategy": s.strategy,
        "order": s.order,
        "window": s.window,
        "page_order": s.page_order,
        "k": s.k,
        "shots": s.shots,
    }


# -- 3. window size and order -----------------------------------------------------------------------
def negative_windows_before_first_positive(hits, item, positives, size: int, order: str) -> int | None:
    """Windows without a positive page read before the first window with one; None if none has one."""
    for count, window in enumerate(windows(hits, size, order)):
        if any(positives.is_positive(h.page, item.answers) for h in window):
            return count
    return None


def window_order(items, index, backend, base: RunSettings, positives: PositiveIndex, progress: ProgressBar) -> dict:
    configs = {(w, o): replace(base, window=w, order=o) for w in SWEPT_WINDOW_SIZES for o in ("forward", "backward")}
    finals: dict[tuple, list] = {c: [] for c in configs}
    negatives: dict[tuple, list] = {c: [] for c in configs}
    for item in items:
        hits = index.search(item.question, base.k)
        for w, o in configs:
            negatives[(w, o)].append(negative_windows_before_first_positive(hits, item, positives, w, o))
    work = [(item, config) for item in items for config in configs]
    done = fan_out(lambda w: final_or_none(w[0].question, index, backend, configs[w[1]]), work, progress)
    for (item, config), final in zip(work, done, strict=True):
        finals[config].append((item, final))
    rows = []
    for w, o in configs:
        counted = [n for n in negatives[(w, o)] if n is not None]
        rows.append(
            {
                "window": w,
                "order": o,
                **score_runs(finals[(w, o)]),
                "negative_windows_before_first_positive": estimate([float(n) for n in counted], "mean"),
                "questions_with_a_positive_window": estimate([n is not None for n in negatives[(w, o)]]),
            }
        )
    return {"k": base.k, "rows": rows}


# -- 4. negative windows ----------------------------------------------------------------------------
def negative_windows(items, index, backend, base: RunSettings, positives, per_kind: int, progress: ProgressBar) -> dict:
    negative, positive = sample_windows(items, index, positives, base, per_kind)
    rows = [
        {"shots": shots, **score_windows(negative, positive, backend, replace(base, shots=shots))}
        for shots in progress(SHOT_COUNTS)
    ]
    return {
        "window": base.window,
        "k": base.k,
        "negative_windows": len(negative),
        "positive_windows": len(positive),
        "rows": rows,
    }


# -- 5. unanswerable questions --------------------------------------------------------------------
def unanswerable(items, index, backend, base: RunSettings, positives, per_kind: int, progress: ProgressBar) -> dict:
    chosen = [i for i in items if not positives.anywhere(i.answers)][:per_kind]
    rows = {}
    for grounded in (False, True):
        settings = replace(base, grounded_only=grounded)
        finals = finals_of(chosen, index, backend, settings, progress=progress)
        rows["grounded_only" if grounded else "default"] = {
            "ended_with_an_answer": estimate([f is not None and not f.abstained for _, f in finals]),
            **score_runs(finals),
        }
    return {"questions": len(chosen), "runs": rows}
