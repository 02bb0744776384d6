"""The answer judge's gate for the "model + judge" reader, calibrated on held-out dev windows.

Selective generation (Joren et al., *Sufficient Context*, ICLR 2025): the model's answer to a window stands only
when the judge's best page in it reaches a threshold. A window of w pages is judged by its best page, so the
more pages, the higher an answer-free window's best score: the threshold is chosen per window size. For each
w, the held-out dev questions of train judge (never trained on, never test) give answer-free windows (the one
just before the first answer-bearing window, positives.sample_windows) and answer-bearing ones; the threshold
is the lowest at which the judge passes at most `max_false` of the answer-free windows (the model answers
nearly every window it is asked about, so this bounds its false answers). `python -m lab train judge-gate`
writes the result into the judge's card ("gate"); AnswerJudge.gate(w) reads it back.
Left out here: training the judge (judge.py) and the runtime gate (reading/judged.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lab.evaluation.positives import sample_windows
from lab.stats import auc, lowest_under
from lab.training.judge_card import write_card
from lab.training.judge_data import dev_setup
from raqa.config import RunSettings
from raqa.reading.judge import JUDGE_CARD, AnswerJudge

WINDOWS = (1, 2, 3)
MAX_FALSE = 0.2  # at most this share of answer-free dev windows passes the gate
PER_KIND = 150  # dev windows per kind and dataset, at most


def judge_window_scores(judge, windows) -> list[float]:
    """The judge's best P(answer) over each (item, window) pair's pages."""
    return [max(r.p_answer for r in judge.read(item.question, list(w))) for item, w in windows]


def calibrate_gate(
    judge,
    index,
    positives,
    held: dict,
    max_false: float = MAX_FALSE,
    per_kind: int = PER_KIND,
    say: Callable[[str], None] = print,
) -> dict:
    """The gate per window size from the held-out dev questions (dataset -> items): thresholds and rates."""

    out: dict = {"max_false": max_false, "thresholds": {}, "windows": {}}
    for w in WINDOWS:
        negative, positive = [], []
        for items in held.values():
            n, p = sample_windows(items, index, positives, RunSettings(window=w), per_kind)
            negative += judge_window_scores(judge, n)
            positive += judge_window_scores(judge, p)
        t = lowest_under(negative, positive, max_false)
        out["thresholds"][str(w)] = t
        out["windows"][str(w)] = {
            "negative": len(negative),
            "positive": len(positive),
            "pass_negative": round(sum(s >= t for s in negative) / max(1, len(negative)), 4),
            "pass_positive": round(sum(s >= t for s in positive) / max(1, len(positive)), 4),
            "auc": round(auc(negative, positive), 4),
        }
        say(
            f"w={w}: gate {t:.3f} passes {out['windows'][str(w)]['pass_negative']:.0%} of {len(negative)} "
            f"answer-free and {out['windows'][str(w)]['pass_positive']:.0%} of {len(positive)} answer-bearing windows"
        )
    return out


def calibrate_folder(
    folder: Path, cache_dir: Path, command: str, max_false: float = MAX_FALSE, say: Callable[[str], None] = print
) -> dict:
    """Calibrate the judge in folder on its own held-out dev questions and write the gate into its card."""

    judge = AnswerJudge.load(folder)
    card = judge.card
    index, positives, held, _ = dev_setup(cache_dir, card["settings"]["seed"], card["holdout_questions"], say)
    gate = calibrate_gate(judge, index, positives, held=held, max_false=max_false, say=say)
    card = json.loads((folder / JUDGE_CARD).read_text())
    card["gate"] = {**gate, "command": command, "data": f"held-out dev questions ({card['holdout_questions']} a set)"}
    write_card(folder, card)
    return card["gate"]
