"""The paper's tables and figures as runnable experiments over real questions, written as JSON.

Each experiment takes questions from questions.py, runs the same event stream as the page
(engine.run, or engine.read_window for single windows), scores it with metrics.py, and returns a
results dict; `write()` adds what made it (command, dataset, sample, model, adapter, corpus, code
version) and saves it under assets/results/. Figures are drawn from these files by plots.py; nothing
is recomputed when the page loads.

Experiments: recall (Table 1), topk_vs_iterative (Table 2), window_order (Figure 5),
negative_windows (Figures 6-7), unanswerable. What they leave out: the paper's KILT corpus and
its strong model; everything here runs on the embedded corpus and the configured model.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from raqa import __version__
from raqa.config import ASSETS_DIR, RunSettings
from raqa.evaluation.metrics import answer_contained, exact_match, f1, mean_interval, proportion
from raqa.evaluation.questions import QAItem
from raqa.reading.engine import read_window, run, windows
from raqa.reading.events import Final, WindowVerdict
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index, Hit
from raqa.text import normalize_for_matching

RESULTS_DIR = ASSETS_DIR / "results"
RECALL_KS = (1, 5, 10, 20, 50, 100, 200, 500, 1000)
TOPK_KS = (5, 10, 20)
WINDOW_SIZES = (1, 2, 3, 5, 10)
SHOT_COUNTS = (0, 2, 4, 6, 8)
# Published numbers we can state with confidence: the paper's headline false-answer rate of a strong
# model on negative windows, zero-shot. Other tables are not repeated from memory.
PAPER = {"negative_windows": {"false_answer_rate_zero_shot": 0.543}}

Progress = Callable[[Iterable], Iterable]


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


def _est(flags_or_values, kind: str = "proportion") -> dict:
    return (proportion(flags_or_values) if kind == "proportion" else mean_interval(flags_or_values)).as_dict()


# -- 1. recall ---------------------------------------------------------------------------------
def recall(
    items: Sequence[QAItem], indexes: dict[str, BM25Index], positives: PositiveIndex, progress: Progress
) -> dict:
    """Share of questions with a positive page in the top K, per tokenizer."""
    first: dict[str, list[int | None]] = {name: [] for name in indexes}
    for item in progress(items):
        for name, index in indexes.items():
            first[name].append(first_positive_rank(index.search(item.question, max(RECALL_KS)), item, positives))
    return {
        "ks": list(RECALL_KS),
        "recall": {
            name: {str(k): _est([r is not None and r <= k for r in ranks]) for k in RECALL_KS}
            for name, ranks in first.items()
        },
        "answer_anywhere_in_corpus": _est([positives.anywhere(i.answers) for i in items]),
    }


# -- shared scoring of runs ----------------------------------------------------------------------
def _final(question: str, index: BM25Index, backend, settings: RunSettings) -> Final | None:
    last = None
    for event in run(question, index, backend, settings):
        last = event
    return last if isinstance(last, Final) else None


def score_runs(finals: Sequence[tuple[QAItem, Final | None]]) -> dict:
    answers = [(item, f.answer if f else None) for item, f in finals]
    return {
        "exact_match": _est([exact_match(a, i.answers) for i, a in answers]),
        "f1": _est([f1(a, i.answers) for i, a in answers], "mean"),
        "contains_gold": _est([answer_contained(a, i.answers) for i, a in answers]),
        "abstained": _est([f is None or f.abstained for _, f in finals]),
        "pages_read": _est([f.pages_read if f else 0 for _, f in finals], "mean"),
        "windows_read": _est([f.windows_read if f else 0 for _, f in finals], "mean"),
        "prompt_tokens": _est([f.prompt_tokens if f else 0 for _, f in finals], "mean"),
        "completion_tokens": _est([f.completion_tokens if f else 0 for _, f in finals], "mean"),
        "seconds": _est([f.seconds if f else 0.0 for _, f in finals], "mean"),
    }


# -- 2. Top-K versus iterative -----------------------------------------------------------------------
def topk_vs_iterative(items, index, backend, base: RunSettings, progress: Progress) -> dict:
    configs = {f"topk_k{k}": replace(base, strategy="topk", k=k) for k in TOPK_KS}
    configs[f"iterative_w{base.window}_k{base.k}"] = replace(base, strategy="iterative")
    finals: dict[str, list] = {name: [] for name in configs}
    for item in progress(items):
        for name, settings in configs.items():
            finals[name].append((item, _final(item.question, index, backend, settings)))
    return {"configs": {name: {"settings": _settings(s), **score_runs(finals[name])} for name, s in configs.items()}}


def _settings(s: RunSettings) -> dict:
    return {"strategy": s.strategy, "order": s.order, "window": s.window, "k": s.k, "shots": s.shots}


# -- 3. window size and order -----------------------------------------------------------------------
def negative_windows_before_first_positive(hits, item, positives, size: int, order: str) -> int | None:
    """Windows without a positive page read before the first window with one; None if none has one."""
    for count, window in enumerate(windows(hits, size, order)):
        if any(positives.is_positive(h.page, item.answers) for h in window):
            return count
    return None


def window_order(items, index, backend, base: RunSettings, positives: PositiveIndex, progress: Progress) -> dict:
    configs = {(w, o): replace(base, window=w, order=o) for w in WINDOW_SIZES for o in ("forward", "backward")}
    finals: dict[tuple, list] = {c: [] for c in configs}
    negatives: dict[tuple, list] = {c: [] for c in configs}
    for item in progress(items):
        hits = index.search(item.question, base.k)
        for (w, o), settings in configs.items():
            negatives[(w, o)].append(negative_windows_before_first_positive(hits, item, positives, w, o))
            finals[(w, o)].append((item, _final(item.question, index, backend, settings)))
    rows = []
    for w, o in configs:
        counted = [n for n in negatives[(w, o)] if n is not None]
        rows.append(
            {
                "window": w,
                "order": o,
                **score_runs(finals[(w, o)]),
                "negative_windows_before_first_positive": _est([float(n) for n in counted], "mean"),
                "questions_with_a_positive_window": _est([n is not None for n in negatives[(w, o)]]),
            }
        )
    return {"k": base.k, "rows": rows}


# -- 4. negative windows ----------------------------------------------------------------------------
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


def _verdict(item: QAItem, window, backend, settings: RunSettings) -> WindowVerdict:
    events = list(read_window(item.question, tuple(window), 1, 1, backend, settings))
    return next(e for e in events if isinstance(e, WindowVerdict))


def negative_windows(items, index, backend, base: RunSettings, positives, per_kind: int, progress: Progress) -> dict:
    negative, positive = sample_windows(items, index, positives, base, per_kind)
    rows = []
    for shots in progress(SHOT_COUNTS):
        settings = replace(base, shots=shots)
        on_negative = [_verdict(i, w, backend, settings) for i, w in negative]
        on_positive = [(i, _verdict(i, w, backend, settings)) for i, w in positive]
        answered = [v.reply.answer if v.verdict in ("answered", "unsupported") else None for _, v in on_positive]
        rows.append(
            {
                "shots": shots,
                "false_answer_rate_on_negative": _est([v.verdict in ("answered", "unsupported") for v in on_negative]),
                "declined_on_positive": _est([v.verdict == "not_found" for _, v in on_positive]),
                "exact_match_on_positive": _est(
                    [exact_match(a, i.answers) for (i, _), a in zip(on_positive, answered, strict=True)]
                ),
                "contains_gold_on_positive": _est(
                    [answer_contained(a, i.answers) for (i, _), a in zip(on_positive, answered, strict=True)]
                ),
                "grounded_on_positive": _est([v.verdict == "answered" for _, v in on_positive]),
                "mean_p_answer_negative": _est([v.p_answer or 0.0 for v in on_negative], "mean"),
                "mean_p_answer_positive": _est([v.p_answer or 0.0 for _, v in on_positive], "mean"),
            }
        )
    return {
        "window": base.window,
        "k": base.k,
        "negative_windows": len(negative),
        "positive_windows": len(positive),
        "rows": rows,
    }


# -- 5. unanswerable questions --------------------------------------------------------------------
def unanswerable(items, index, backend, base: RunSettings, positives, per_kind: int, progress: Progress) -> dict:
    chosen = [i for i in items if not positives.anywhere(i.answers)][:per_kind]
    rows = {}
    for grounded in (False, True):
        settings = replace(base, grounded_only=grounded)
        finals = [(item, _final(item.question, index, backend, settings)) for item in progress(chosen)]
        rows["grounded_only" if grounded else "default"] = {
            "ended_with_an_answer": _est([f is not None and not f.abstained for _, f in finals]),
            **score_runs(finals),
        }
    return {"questions": len(chosen), "runs": rows}


# -- provenance and files ------------------------------------------------------------------------
def code_version() -> str:
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return f"raqa {__version__} ({commit})"


def write(name: str, dataset: str, results: dict, provenance: dict, out_dir: Path = RESULTS_DIR) -> Path:
    record = {
        "experiment": name,
        "dataset": dataset,
        **provenance,
        "code_version": code_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "paper": PAPER.get(name, {}),
        "results": results,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}-{dataset}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def load_results(out_dir: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every committed result file, keyed by file stem; unreadable files are reported, not raised."""
    results = {}
    for path in sorted(out_dir.glob("*.json")):
        try:
            results[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            results[path.stem] = {"error": f"{path.name}: {e}"}
    return results


def timed(fn, *args, **kwargs) -> tuple[dict, float]:
    start = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - start


# -- 6. base model versus a trained reader -------------------------------------------------------------
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


def _answered(v: WindowVerdict) -> bool:
    return v.verdict in ("answered", "unsupported")


def score_windows(negative, positive, backend, settings: RunSettings) -> dict:
    """One reader on fixed negative and positive windows: false answers, exact match, grounding, P(ANSWER)."""
    on_negative = [_verdict(i, w, backend, settings) for i, w in negative]
    on_positive = [(i, _verdict(i, w, backend, settings)) for i, w in positive]
    answers = [v.reply.answer if _answered(v) else None for _, v in on_positive]
    every = on_negative + [v for _, v in on_positive]
    p_neg = [v.p_answer or 0.0 for v in on_negative]
    p_pos = [v.p_answer or 0.0 for _, v in on_positive]
    return {
        "false_answer_rate_on_negative": _est([_answered(v) for v in on_negative]),
        "exact_match_on_positive": _est(
            [exact_match(a, i.answers) for (i, _), a in zip(on_positive, answers, strict=True)]
        ),
        "contains_gold_on_positive": _est(
            [answer_contained(a, i.answers) for (i, _), a in zip(on_positive, answers, strict=True)]
        ),
        "declined_on_positive": _est([v.verdict == "not_found" for _, v in on_positive]),
        "grounded_share_of_answers": _est([v.verdict == "answered" for v in every if _answered(v)]),
        "grounded_on_positive": _est([v.verdict == "answered" for _, v in on_positive]),
        "mean_p_answer_negative": _est(p_neg, "mean"),
        "mean_p_answer_positive": _est(p_pos, "mean"),
        "auc_p_answer": auc(p_neg, p_pos),
    }


def reader_comparison(
    items: Sequence[QAItem],
    unanswerable_pool: Sequence[QAItem],
    index: BM25Index,
    readers: dict[str, tuple[object, RunSettings, dict]],
    positives: PositiveIndex,
    per_kind: int,
    questions_per_order: int,
    unanswerable_questions: int,
    progress: Progress,
) -> dict:
    """Each reader on the same test windows, the same iterative runs and the same unanswerable questions.

    readers: name -> (backend, its run settings, a description kept in the record).
    """
    demo = RunSettings()
    negative, positive = sample_windows(items, index, positives, demo, per_kind)
    questions = list(items[:questions_per_order])
    lost = [i for i in unanswerable_pool if not positives.anywhere(i.answers)][:unanswerable_questions]
    results = {}
    for name, (backend, settings, about) in progress(list(readers.items())):
        runs = {
            order: score_runs(
                [(item, _final(item.question, index, backend, replace(settings, order=order))) for item in questions]
            )
            for order in ("forward", "backward")
        }
        finals = [(item, _final(item.question, index, backend, settings)) for item in lost]
        results[name] = {
            **about,
            "settings": {**_settings(settings), "answer_threshold": settings.answer_threshold},
            "windows": score_windows(negative, positive, backend, settings),
            "iterative": runs,
            "unanswerable": {"ended_with_an_answer": _est([f is not None and not f.abstained for _, f in finals])},
        }
    return {
        "window": demo.window,
        "k": demo.k,
        "negative_windows": len(negative),
        "positive_windows": len(positive),
        "iterative_questions": len(questions),
        "unanswerable_questions": len(lost),
        "readers": results,
    }
