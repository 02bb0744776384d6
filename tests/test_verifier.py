"""The answer verifier's experiment (raqa/training/verifier.py): its rows, its out-of-fold combination, the
per-question finals, a few real training steps on the installed MiniLM, and the command's bad input."""

from __future__ import annotations

import math
import subprocess
import sys
from types import SimpleNamespace

import pytest

from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.questions import QAItem
from raqa.training.verifier import Row, combined, first_reaching, gold_rows, judge_rows, measure, train, verified

MONA = QAItem("t-1", "Who painted the Mona Lisa in the Louvre?", ("Leonardo da Vinci",))


def row(question: str, rank: int, right: bool, support: float = 0.5, p: float = 0.5) -> Row:
    return Row(question, f"{question}?", "an answer", "A title", "A sentence.", rank, p, support, right)


def test_gold_rows_take_the_answer_as_the_page_writes_it_with_its_sentence(tiny_pages, tiny_index):
    rows = gold_rows(tiny_index, PositiveIndex(tiny_pages), [MONA])
    assert rows and all(r.right and r.rank == 0 for r in rows)
    assert {r.answer for r in rows} == {"Leonardo da Vinci"}
    assert all("Leonardo da Vinci" in r.sentence and "Mona Lisa" in r.sentence + r.title for r in rows)


def test_judge_rows_keep_extractions_from_the_floor_up_labelled_by_the_gold_answers(tiny_index):
    def read_ranked(question, hits):  # the first page is read as right, the second as wrong, the rest below the floor
        spans = ["Leonardo da Vinci", "Raphael"] + [None] * (len(hits) - 2)
        ps = [0.9, 0.6] + [0.1] * (len(hits) - 2)
        return [
            SimpleNamespace(answer=a, p_answer=p, sentence="s", support=None) for a, p in zip(spans, ps, strict=True)
        ]

    rows = judge_rows(SimpleNamespace(read_ranked=read_ranked), tiny_index, [MONA], floor=0.2)
    assert [(r.answer, r.right, r.rank) for r in rows] == [("Leonardo da Vinci", True, 1), ("Raphael", False, 2)]
    assert all(r.support == 0.0 for r in rows)  # no support model: 0, the lowest


def test_a_question_ends_at_its_first_page_reaching_the_cut():
    rows = [row("q1", 1, False), row("q1", 2, True), row("q2", 1, True), row("q3", 3, False)]
    scores = [0.4, 0.9, 0.8, 0.2]
    got = first_reaching(rows, scores, 0.5, questions=4)
    assert (got["finals"], got["right"], got["share_with_final"]) == (2, 2, 0.5)
    assert got["precision"]["value"] == 1.0 and got["precision"]["n"] == 2
    assert first_reaching(rows, [0.9, 0.9, 0.1, 0.1], 0.5, 4)["right"] == 0  # q1's first page is wrong
    assert first_reaching(rows, [0.0] * 4, 0.5, 4)["precision"] is None


def test_the_combination_is_fitted_out_of_fold_and_ranks_what_both_scores_say():
    rows = [row(f"q{i}", 1, i % 2 == 0, support=0.8 if i % 2 == 0 else 0.3) for i in range(40)]
    verifier = [0.9 if r.right else 0.2 for r in rows]
    both = combined(rows, verifier)
    assert all(0 < p < 1 for p in both)
    assert min(p for p, r in zip(both, rows, strict=True) if r.right) > max(
        p for p, r in zip(both, rows, strict=True) if not r.right
    )
    measured = measure(rows, verifier, both, questions=40)
    assert measured["auc"]["support_and_verifier"] == 1.0 and measured["right"] == 20
    assert set(measured["per_question"]) == {"support", "verifier", "support_and_verifier"}


def test_a_few_training_steps_on_the_installed_minilm_give_probabilities():
    rows = [row("q1", 1, True), row("q2", 1, False), row("q3", 2, False), row("q4", 1, True)]
    model, tokenizer, losses = train(rows, epochs=1, lr=1e-4, batch=2, seed=0, say=lambda message: None)
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert all(0.0 < p < 1.0 for p in verified(model, tokenizer, rows))


@pytest.mark.parametrize(
    "options", [["--eval-questions", "5000"], ["--train-questions", "3"], ["--epochs", "0"], ["--lr", "2"]]
)
def test_the_command_refuses_bad_numbers_with_a_message(options, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "raqa", "train-verifier", *options, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Give --" in done.stderr
    assert not (tmp_path / "card.json").exists()


def test_the_held_out_scores_are_written_one_line_an_extraction(tmp_path):
    import json

    from raqa.training.verifier import _write_scores

    rows = [row("q1", 1, True), row("q2", 3, False)]
    _write_scores(tmp_path / "scores.jsonl", rows, [0.91234, 0.1], [0.8, 0.2])
    lines = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert lines[0] == {
        "question_id": "q1",
        "rank": 1,
        "right": True,
        "p": 0.5,
        "support": 0.5,
        "verifier": 0.9123,
        "support_and_verifier": 0.8,
    }
    assert [line["rank"] for line in lines] == [1, 3]
