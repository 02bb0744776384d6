"""Tests of the QA question loaders: the real sets in the pyserini wheel, tolerant parsing, user files."""

from __future__ import annotations

import importlib.util

import pytest

from raqa.evaluation import questions
from raqa.evaluation.questions import QAItem, QuestionsError, load_questions, parse_tsv_line

needs_pyserini = pytest.mark.skipif(
    importlib.util.find_spec("pyserini") is None, reason="pyserini==0.17.0 is not installed"
)


@needs_pyserini
@pytest.mark.parametrize(
    ("dataset", "split", "count"),
    [("nq", "test", 3610), ("triviaqa", "test", 11313), ("nq", "dev", 8757), ("squad", "test", 10570)],
)
def test_real_sets_have_their_published_sizes(dataset, split, count):
    items = load_questions(dataset, split)
    assert len(items) == count
    assert len({item.id for item in items}) == count
    assert all(item.question and item.answers for item in items)


@needs_pyserini
def test_first_nq_question_and_squad_answers_kept_once():
    assert load_questions("nq", limit=1) == [
        QAItem("nq-test-1", "who got the first nobel prize in physics", ("Wilhelm Conrad Röntgen",))
    ]
    # SQuAD lists the same span once per annotator
    assert load_questions("squad", limit=1)[0].answers == ("Denver Broncos",)


@needs_pyserini
def test_csv_quoted_triviaqa_lines_are_read_as_plain_text():
    items = {item.id: item for item in load_questions("triviaqa")}
    samaranch = items["triviaqa-test-4144"]
    assert samaranch.question.endswith('"Well done Atlanta" and called the games "most exceptional"?')
    assert samaranch.answers == ('He had previously always said that each had been "The best Olympics ever"',)
    assert "Hitler's medical health" in items["triviaqa-test-24"].answers
    # a cp1252 ellipsis read as U+0085 is mapped back
    assert items["triviaqa-test-1070"].question.count("\x85") == 0


def test_parse_tsv_line_plain_and_doubled_quotes():
    assert parse_tsv_line("who wrote hamlet\t['William Shakespeare', 'Shakespeare']") == (
        "who wrote hamlet",
        ("William Shakespeare", "Shakespeare"),
    )
    line = '"""What is """"Son et Lumiere""""?"""\t"[\'""""""SOUND AND LIGHT""""""\', ""Lumiere\'s""]"\r\n'
    assert parse_tsv_line(line) == ('What is "Son et Lumiere"?', ("SOUND AND LIGHT", "Lumiere's"))


def test_parse_tsv_line_keeps_quotes_that_are_part_of_an_answer():
    assert parse_tsv_line("""which bowie song\t['"Heroes"', 'Heroes (song)']""")[1] == ('"Heroes"', "Heroes (song)")


@pytest.mark.parametrize("line", ["no tab here", "question\tnot a list", "question\t\"['a', 'b'\""])
def test_parse_tsv_line_rejects_malformed_lines(line):
    with pytest.raises(ValueError):
        parse_tsv_line(line)


@needs_pyserini
def test_seeded_sample_is_deterministic_and_differs_from_the_first_n():
    first = load_questions("nq", limit=20, seed=7)
    assert first == load_questions("nq", limit=20, seed=7)
    assert first != load_questions("nq", limit=20, seed=8)
    assert first != load_questions("nq", limit=20)
    assert load_questions("nq", limit=20) == load_questions("nq")[:20]


def test_bad_dataset_and_split_names_list_the_choices():
    with pytest.raises(ValueError, match="Invalid dataset: 'hotpot'. Choose from: nq, triviaqa, squad."):
        load_questions("hotpot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Invalid split: 'train'. Choose from: test, dev."):
        load_questions("nq", "train")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no squad dev split"):
        load_questions("squad", "dev")


def test_missing_pyserini_says_how_to_install(monkeypatch):
    monkeypatch.setattr(questions.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(QuestionsError, match="pip install --no-deps pyserini==0.17.0"):
        questions.jar_path()
