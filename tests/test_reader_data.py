"""reader_data.py: training windows parse back to the right verdict, page and answer, are balanced, and come
from dev questions only."""

import pytest

from lab.evaluation.positives import PositiveIndex
from lab.training.reader_data import (
    TRAIN_DATASETS,
    answer_span,
    build_examples,
    dev_split,
    example_messages,
    mix,
    visible_sentences,
)
from raqa.evaluation.questions import QAItem, load_questions
from raqa.reading import grounding
from raqa.reading.prompts import DEMONSTRATIONS, SYSTEM_PROMPT, parse_reply
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.text import normalize_answer

PAGES = [
    Page(str(i), f"River {name}", text)
    for i, (name, text) in enumerate(
        [
            ("Alba", "River Alba flows north. The source of River Alba is Lake Zed, high in the hills."),
            ("Bora", "River Bora flows south. River Bora was named by Captain Ivo Marr in 1820."),
            ("Cora", "River Cora flows east. It is short and shallow."),
            ("Dora", "River Dora flows west. It is wide and slow."),
            ("Elba", "River Elba is a river of hills. It floods in spring."),
            ("Fara", "River Fara is a river of plains. Its water is clear."),
        ],
        start=1,
    )
]
ITEMS = {
    "nq": [
        QAItem("nq-dev-1", "What is the source of River Alba?", ("Lake Zed",)),
        QAItem("nq-dev-2", "Who named River Bora?", ("Ivo Marr",)),
    ],
    "triviaqa": [QAItem("triviaqa-dev-1", "In which year was River Bora named?", ("1820",))],
}


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture(scope="module")
def examples():
    index = BM25Index.build(PAGES)
    return build_examples(ITEMS, index, PositiveIndex(PAGES), words, per_kind=5, page_tokens=200, seed=1)


def test_positive_targets_parse_back_to_a_grounded_answer_in_the_window(examples):
    positives = [e for e in examples if e.kind == "positive"]
    assert positives
    for example in positives:
        reply = parse_reply(example.target)
        assert reply.kind == "answer"
        assert normalize_answer(reply.answer) in {normalize_answer(a) for a in example.answers}
        assert reply.page_id == example.hits[example.position - 1].page.id
        assert reply.quote and reply.reason
        assert grounding.check(reply, example.hits, example.question).supported


def test_negative_targets_decline_with_a_reason_and_hold_no_answer(examples):
    negatives = [e for e in examples if e.kind == "negative"]
    assert negatives
    for example in negatives:
        reply = parse_reply(example.target)
        assert reply.kind == "not_found" and reply.reason
        assert not any(
            normalize_answer(a) in normalize_answer(h.page.title + " " + h.page.text)
            for h in example.hits
            for a in example.answers
        )


def test_windows_are_paired_by_question_so_the_kinds_balance(examples):
    counts = mix(examples)
    assert counts["by_kind"]["positive"] == counts["by_kind"]["negative"] == counts["questions"] == 3
    assert counts["by_dataset_and_kind"] == {
        "nq/negative": 2,
        "nq/positive": 2,
        "triviaqa/negative": 1,
        "triviaqa/positive": 1,
    }
    assert all(1 <= e.size <= 3 for e in examples)
    assert sum(counts["answer_page_position"].values()) == 3


def test_the_prompt_is_the_demos(examples):
    messages = example_messages(examples[0], 200, words, shots=2)
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert [m["content"] for m in messages[1:5]] == [text for shot in DEMONSTRATIONS[:2] for text in shot]
    assert messages[-1]["content"].endswith(f"Question: {examples[0].question}")


def test_visible_sentences_stop_at_the_cut():
    hit = BM25Index.build(PAGES).search("source Alba", 1)[0]
    assert visible_sentences(hit, 200, words) == ["River Alba flows north.", hit.page.text.split(". ")[1]]
    assert visible_sentences(hit, 8, words) == ["River Alba flows north."]


@pytest.mark.parametrize(
    ("sentence", "answer", "span"),
    [
        ("It was painted by Leonardo da Vinci, in Florence.", "leonardo da vinci", "Leonardo da Vinci"),
        ("He was born in São Paulo.", "Sao Paulo", "São Paulo"),
        ("Nothing here.", "Paris", None),
    ],
)
def test_answer_span_is_the_pages_own_wording(sentence, answer, span):
    assert answer_span(sentence, answer) == span


def test_dev_split_reads_dev_questions_only_and_holds_half_out():
    split = dev_split(seed=0)
    assert set(split) == set(TRAIN_DATASETS)
    for dataset, (train, held) in split.items():
        assert all("-dev-" in item.id for item in train + held)
        assert not {i.id for i in train} & {i.id for i in held}
        test_questions = {i.question for i in load_questions(dataset, "test")}
        assert not [i.question for i in train + held if i.question in test_questions]
