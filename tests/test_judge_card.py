"""The judge card's README: the shipped card renders as committed, and a card with mined negatives, a starting
judge and per-question figures says so in its data and metrics sections."""

from __future__ import annotations

import json
from pathlib import Path

from raqa.training.judge_card import readme

JUDGE = Path(__file__).resolve().parent.parent / "assets" / "judge"


def shipped_card() -> dict:
    return json.loads((JUDGE / "raqa_judge.json").read_text())


def test_the_shipped_card_renders_as_committed() -> None:
    assert (JUDGE / "README.md").read_text().startswith(readme(shipped_card()).rstrip("\n"))


def test_mining_a_starting_judge_and_per_question_figures_are_written_into_the_card() -> None:
    card = shipped_card()
    card["initialised_from"] = {"folder": "assets/judge", "weights": "abc123"}
    card["data"]["train"]["mined"] = {
        "judge": "assets/judge",
        "questions": 2214,
        "k": 15,
        "passed": 9000,
        "threshold": 0.3436,
        "per_question": 2,
        "kept": 4300,
    }
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
    assert "went on from the judge in `assets/judge` (weights abc123)" in text
    assert "wrongly passed 9000 (p_answer >= 0.3436)" in text and "(4300)" in text
    assert "| nq | 300 | 25.0% [20.0%, 30.0%] | 0.810 [0.750, 0.860] | 25% / 12% |" in text
    assert "| triviaqa | 300" not in text  # measured for one set only: one row
