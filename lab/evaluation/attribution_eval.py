"""How often does the model's answer depend on the sentence it cites? Attribution measured over test windows.

The same answer-bearing and answer-free windows the other window experiments draw (positives.sample_windows), each
read as the page reads it (the base model, the answer judge giving the badge), and every window the model answers
attributed (reading/attribution.py). Each answered window becomes one row; `summarise` turns rows into the record's
figures, so a test recomputes them from the committed rows. Left out: windows the model declines (nothing to
attribute) and drawing the figure (lab/figures/experiments.py).

A row *depends on* the cited sentence when leaving it out at least halves P(answer) (attribution.MATTERS), on another
sentence when that holds for some other sentence but not the cited one, and on no sentence otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import get_args

from lab.evaluation.positives import PositiveIndex, sample_windows
from lab.stats import auc_interval, estimate
from raqa.config import RunSettings
from raqa.evaluation.metrics import answer_contained
from raqa.evaluation.questions import ProgressBar, QAItem
from raqa.reading.attribution import MATTERS, attribute, can_attribute
from raqa.reading.engine import window_verdict
from raqa.reading.events import Attribution, Finding
from raqa.retrieval.index import BM25Index

WINDOW_KINDS = ("answer_bearing", "answer_free")
DEPENDS = ("cited", "other", "none")


def depends_on(a: Attribution) -> str:
    """ "cited", "other" or "none": which sentence, if any, the answer depends on (module docstring)."""
    drops = {(e.page_id, e.sentence): a.logprob - e.logprob for e in a.sentences}
    if drops.get((a.cited_page, a.cited_sentence), 0.0) >= MATTERS:
        return "cited"
    return "other" if any(d >= MATTERS for d in drops.values()) else "none"


def attribution_row(item: QAItem, kind: str, verdict, a: Attribution) -> dict:
    """One answered window as the record keeps it."""
    top = max((a.logprob - e.logprob for e in a.sentences), default=0.0)
    return {
        "id": item.id,
        "kind": kind,
        "badge": verdict.verdict,
        "right": answer_contained(a.answer, item.answers),
        "answer": a.answer,
        "p_answer": verdict.p_answer,
        "p_answer_tokens": round(math.exp(a.logprob), 4),
        "largest_drop": round(top, 4),
        "depends_on": depends_on(a),
        "finding": a.finding,
        "sentences": len(a.sentences),
        "seconds": round(a.seconds, 2),
    }


def collect_attributions(
    items,
    index: BM25Index,
    backend,
    settings: RunSettings,
    judge,
    positives: PositiveIndex,
    per_kind: int,
    progress: ProgressBar,
) -> tuple[list[dict], int]:
    """Rows for the answered windows among per_kind answer-free and per_kind answer-bearing windows, and how many
    windows were read."""
    negative, positive = sample_windows(items, index, positives, settings, per_kind)
    work = [("answer_free", w) for w in negative] + [("answer_bearing", w) for w in positive]
    rows = []
    for kind, (item, window) in progress(work):
        verdict = window_verdict(item.question, window, backend, settings, judge)
        if can_attribute(verdict) is None:
            rows.append(attribution_row(item, kind, verdict, attribute(item.question, verdict, backend, settings)))
    return rows, len(work)


def _shares(rows: Sequence[dict]) -> dict:
    return {
        "n": len(rows),
        **{f"depends_on_{d}": estimate([r["depends_on"] == d for r in rows]) for d in DEPENDS},
        **{f"finding_{f}": estimate([r["finding"] == f for r in rows]) for f in get_args(Finding)},
        "right": estimate([r["right"] for r in rows]),
    }


def summarise_attribution(rows: Sequence[dict]) -> dict:
    """The record's figures from its rows: shares by kind of window and by badge, the cost, and how well "depends
    on no sentence" (and the largest drop) tell a wrong answer from a right one, beside P(answer)."""
    badges = sorted({r["badge"] for r in rows})
    right = [r for r in rows if r["right"]]
    wrong = [r for r in rows if not r["right"]]

    def separation(score: Callable[[dict], float]) -> dict:
        return auc_interval([score(r) for r in wrong], [score(r) for r in right])

    return {
        "answered_windows": len(rows),
        "all": _shares(rows),
        "by_kind": {k: _shares([r for r in rows if r["kind"] == k]) for k in WINDOW_KINDS},
        "by_badge": {b: _shares([r for r in rows if r["badge"] == b]) for b in badges},
        "right_vs_wrong_auc": {
            "depends_on_a_sentence": separation(lambda r: float(r["depends_on"] != "none")),
            "largest_drop": separation(lambda r: r["largest_drop"]),
            "p_answer": separation(lambda r: r["p_answer"] or 0.0),
        },
        "seconds_per_window": estimate([r["seconds"] for r in rows], "mean"),
        "seconds_per_window_max": max((r["seconds"] for r in rows), default=None),
        "threshold": {"matters_drop_nats": round(MATTERS, 4), "meaning": "leaving it out at least halves P(answer)"},
    }


def attribution_experiment(items, index, backend, settings, judge, positives, per_kind: int, progress) -> dict:
    """The experiment's results: its summary, the rows it was made from, and how many windows were read."""
    rows, read = collect_attributions(
        items, index, backend, settings=settings, judge=judge, positives=positives, per_kind=per_kind, progress=progress
    )
    return {
        "window": settings.window,
        "k": settings.k,
        "windows_read": read,
        **summarise_attribution(rows),
        "rows": rows,
    }


def _pct(e: dict) -> str:
    if not e.get("n"):
        return "– (n = 0)"
    return f"{e['value']:.0%} [{e['low']:.0%}, {e['high']:.0%}]"


def attribution_markdown(results: dict) -> str:
    """docs/reading.md's table, rendered from the record's results (a test holds the page to it)."""
    groups = [("all answered windows", results["all"])]
    groups += [(k.replace("_", "-") + " windows", v) for k, v in results["by_kind"].items()]
    groups += [(f"badge {b}", v) for b, v in results["by_badge"].items()]
    lines = [
        "| answered windows | n | depends on the cited sentence | on another sentence | on no sentence | "
        "from memory | answer right |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, g in groups:
        cells = [_pct(g[f"depends_on_{d}"]) for d in DEPENDS] + [_pct(g["finding_memory"]), _pct(g["right"])]
        lines.append(f"| {name} | {g['n']} | " + " | ".join(cells) + " |")
    lines += ["", "| telling a right answer from a wrong one, by | AUC [95%] |", "|---|---|"]
    for key, label in (
        ("depends_on_a_sentence", "depends on a sentence (yes / no)"),
        ("largest_drop", "the largest drop when one sentence is left out"),
        ("p_answer", "the model's P(answer)"),
    ):
        a = results["right_vs_wrong_auc"][key]
        lines.append(f"| {label} | {a['value']:.2f} [{a['low']:.2f}, {a['high']:.2f}] |")
    return "\n".join(lines)
