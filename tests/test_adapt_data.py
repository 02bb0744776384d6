"""Adapt-LLM's Algorithm 1 training data, and the NR-LLM and AR-LLM sets, from scripted zero-shot replies."""

from __future__ import annotations

import json

import pytest

from lab.training.when_to_retrieve_data import (
    Labelled,
    choose_context,
    data_summary,
    examples,
    label_questions,
    read_labelled,
)
from raqa.evaluation.questions import QAItem
from raqa.when_to_retrieve.prompts import RET

ITEMS = [
    ("nq", QAItem("nq-dev-1", "Who first reached the summit of Everest in 1953?", ("Edmund Hillary", "Hillary"))),
    ("nq", QAItem("nq-dev-2", "Where does the Danube river end?", ("Black Sea",))),
    ("triviaqa", QAItem("tq-dev-1", "Which museum holds the Mona Lisa?", ("Louvre",))),
]


def _words(text: str) -> int:
    return len(text.split())


def _labelled(tiny_index, replies: dict[str, str]) -> list[Labelled]:
    def generate(messages):
        question = messages[-1]["content"].split("Q: ", 1)[1]
        return replies[question]

    return list(label_questions(ITEMS, generate, tiny_index, _words))


def test_known_means_a_gold_answer_is_contained_in_the_reply(tiny_index):
    rows = _labelled(
        tiny_index,
        {
            ITEMS[0][1].question: "It was Sir Edmund Hillary, with Tenzing Norgay.",
            ITEMS[1][1].question: "The Danube ends in the North Sea.",
            ITEMS[2][1].question: "the LOUVRE!",
        },
    )
    assert [r.known for r in rows] == [True, False, True]
    assert rows[1].base_reply == "The Danube ends in the North Sea."


def test_the_context_is_the_best_page_showing_a_gold_answer_else_the_top_page(tiny_index):
    everest = choose_context(ITEMS[0][1], tiny_index, _words)
    assert everest[1] == "Mount Everest" and everest[3] is True and "Hillary" in everest[0]
    unanswerable = QAItem("x", "Which chess piece is the queen of the Danube?", ("Budapest",))
    text, title, rank, has_answer = choose_context(unanswerable, tiny_index, _words)
    assert rank == 1 and has_answer is False and title == tiny_index.search(unanswerable.question, 1)[0].page.title
    assert choose_context(QAItem("y", "zzzz qqqq", ("a",)), tiny_index, _words) == ("", "", None, False)


def test_algorithm_1_targets(tiny_index):
    rows = _labelled(
        tiny_index,
        {ITEMS[0][1].question: "Edmund Hillary", ITEMS[1][1].question: "no idea", ITEMS[2][1].question: "Prado"},
    )
    adapt = examples(rows, "adapt")
    # known: one parametric example with the answer; unknown: <RET> and a context example, each
    assert [(e.messages[0]["content"].split(" Q:")[0], e.target) for e in adapt] == [
        ("Answer the question Q. If you need help answer <RET> to get the context.", "Edmund Hillary"),
        ("Answer the question Q. If you need help answer <RET> to get the context.", RET),
        ("Answer the question Q given the context C.", "Black Sea"),
        ("Answer the question Q. If you need help answer <RET> to get the context.", RET),
        ("Answer the question Q given the context C.", "Louvre"),
    ]
    assert "C: Danube: The Danube is" in adapt[2].messages[0]["content"]
    never, always = examples(rows, "never"), examples(rows, "always")
    assert [e.target for e in never] == [e.target for e in always] == ["Edmund Hillary", "Black Sea", "Louvre"]
    assert all(RET not in e.messages[0]["content"] for e in never)
    assert all("given the context C" in e.messages[0]["content"] for e in always)
    with pytest.raises(ValueError, match="Choose from: adapt, never, always"):
        examples(rows, "sometimes")


def test_summary_reports_the_share_of_ret_targets_per_dataset(tiny_index):
    rows = _labelled(
        tiny_index,
        {ITEMS[0][1].question: "Hillary", ITEMS[1][1].question: "no idea", ITEMS[2][1].question: "Prado"},
    )
    summary = data_summary(rows)
    assert summary["by_dataset"]["nq"] == {
        "questions": 2,
        "known_zero_shot": 1,
        "ret_target_share": 0.5,
        "context_has_answer": 2,
    }
    assert summary["by_dataset"]["triviaqa"]["ret_target_share"] == 1.0
    assert summary["ret_target_share"] == round(2 / 3, 4)
    assert summary["examples"] == {"adapt": 5, "never": 3, "always": 3}


def test_class_balance_repeats_the_known_answers_so_ret_does_not_drown_them(tiny_index, tmp_path):
    rows = _labelled(
        tiny_index,
        {ITEMS[0][1].question: "Edmund Hillary", ITEMS[1][1].question: "no idea", ITEMS[2][1].question: "Prado"},
    )  # one known, two unknown: the known answer is taught twice, as often as <RET>
    balanced = examples(rows, "adapt", balance=True)
    parametric = [e.target for e in balanced if "If you need help" in e.messages[0]["content"]]
    assert parametric.count("Edmund Hillary") == parametric.count(RET) == 2
    assert examples(rows, "never", balance=True) == examples(rows, "never")  # only Adapt-LLM's data changes
    path = tmp_path / "training_data.jsonl"
    path.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in rows))
    assert read_labelled(path) == rows
    path.write_text('{"question": 1}\n')
    with pytest.raises(ValueError, match="line 1: not a labelled question"):
        read_labelled(path)
