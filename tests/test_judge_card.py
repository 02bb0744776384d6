"""The judge card's README: the shipped card renders as committed, and a card with per-question figures says so in
its metrics section."""

from __future__ import annotations

import json
from pathlib import Path

from lab.training.judge_card import readme

JUDGE = Path(__file__).resolve().parent.parent / "assets" / "judge"


def shipped_card() -> dict:
    return json.loads((JUDGE / "raqa_judge.json").read_text())


def test_the_shipped_card_renders_as_committed() -> None:
    assert (JUDGE / "README.md").read_text().startswith(readme(shipped_card()).rstrip("\n"))


def test_per_question_figures_are_written_into_the_card() -> None:
    card = shipped_card()
    estimate = {"value": 0.25, "low": 0.2, "high": 0.3, "n": 300}
    first_at = {"0.5": {"answered": estimate, "precision": {**estimate, "value": 0.125}}}
    per_question = {
        "questions": 300,
        "best_right": estimate,
        "auc": {"value": 0.81, "low": 0.75, "high": 0.86},
        "first_at": first_at,
    }
    card["test"]["nq"]["per_question"] = per_question
    text = readme(card)
    assert "| nq | 300 | 25.0% [20.0%, 30.0%] | 0.810 [0.750, 0.860] | 25% / 12% |" in text
    assert "| triviaqa | 300" not in text  # measured for one set only: one row
