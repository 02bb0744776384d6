"""The gate measured with the model: a run ends at the first page, in rank order, that reaches the gate and whose
window ended with an answer; each candidate gate is scored per question; the command checks its numbers first."""

from __future__ import annotations

from raqa.cli import main
from raqa.training.gate_with_model import end_of, lowest_gate, sweep


def page(rank: int, support: float, answer: str | None = None, right: bool = False) -> dict:
    return {
        "rank": rank,
        "support": support,
        "verdict": "weak" if answer else "not_found",
        "answer": answer,
        "right": right,
    }


ROWS = [
    {"id": "a", "anywhere": True, "pages": [page(1, 0.02, "Tolstoy", True), page(2, 0.05, "Fleming")]},
    {"id": "b", "anywhere": False, "pages": [page(1, 0.03), page(3, 0.012, "Paris")]},
    {"id": "c", "anywhere": False, "pages": [page(2, 0.09, "Rome")]},
]


def test_a_run_ends_at_the_first_page_over_the_gate_whose_window_ended() -> None:
    assert end_of(ROWS[0], 0.01)["answer"] == "Tolstoy"
    assert end_of(ROWS[0], 0.03)["answer"] == "Fleming"  # Tolstoy's page is under the gate: the model is not asked
    assert end_of(ROWS[1], 0.02) is None  # the page over the gate did not end its window
    assert end_of(ROWS[2], 0.1) is None


def test_each_gate_is_scored_per_question_and_the_lowest_within_the_limit_is_named() -> None:
    swept = {s["gate"]: s for s in sweep(ROWS, gates=(0.005, 0.01, 0.03, 0.1), floor=0.01)}
    assert set(swept) == {0.01, 0.03, 0.1}  # under the floor nothing was read, so nothing is scored
    assert swept[0.01]["ended_with_answer"]["value"] == 1.0 and swept[0.01]["answers_right"]["value"] == 1 / 3
    assert swept[0.01]["unanswerable_with_answer"]["value"] == 1.0
    assert swept[0.03]["unanswerable_with_answer"]["value"] == 0.5 and swept[0.03]["right_of_all"]["value"] == 0
    assert swept[0.1]["ended_with_answer"]["value"] == 0.0
    assert lowest_gate(list(swept.values()), 0.5) == 0.03 and lowest_gate(list(swept.values()), 0.2) == 0.1
    assert lowest_gate([], 0.2) is None


def test_the_command_checks_its_numbers_before_loading_anything(capsys) -> None:
    assert main(["gate-with-model", "--questions", "0"]) == 2
    assert main(["gate-with-model", "--floor", "1.5"]) == 2
    assert "--questions from 1 to 500" in capsys.readouterr().err
