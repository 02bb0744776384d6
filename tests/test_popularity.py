"""PopQA-format loading (on files the tests write) and the popularity threshold."""

from __future__ import annotations

import math

import pytest

from lab.evaluation.when_to_retrieve import tune_threshold
from raqa.when_to_retrieve.popularity import PopularityError, load_popqa, lookup

HEADER = "id\tsubj\tquestion\tpossible_answers\ts_pop\n"


def _write(tmp_path, text: str):
    path = tmp_path / "popqa.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_loads_questions_answers_and_popularity(tmp_path):
    path = _write(
        tmp_path,
        HEADER
        + '7\tParis\tWhat country is Paris the capital of?\t["France", "French Republic"]\t250000\n'
        + "8\tTiny town\tIn what country is Tiny town?\t['Wales']\t12\n"
        + "\n",
    )
    items = load_popqa(path)
    assert [(i.id, i.answers, i.popularity) for i in items] == [
        ("7", ("France", "French Republic"), 250000.0),
        ("8", ("Wales",), 12.0),
    ]
    assert lookup(items)["what country is paris capital of"].id == "7"
    assert len(load_popqa(path, limit=1)) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("question\tpossible_answers\n", "lacks s_pop"),
        (HEADER, "no questions"),
        (HEADER + '1\ts\tQ?\t["a"]\tmany\n', ":2: s_pop must be a number"),
        (HEADER + '1\ts\tQ?\t["a"]\t-3\n', "0 or more"),
        (HEADER + '1\ts\tQ?\t["a"]\tnan\n', "finite"),
        (HEADER + "1\ts\tQ?\tFrance\t3\n", "JSON list of strings"),
        (HEADER + "1\ts\tQ?\t[]\t3\n", "non-empty"),
        (HEADER + '1\ts\t  \t["a"]\t3\n', "question is empty"),
        (HEADER + '1\ts\tQ?\t["a"]\n', "4 fields, the header has 5"),
    ],
)
def test_a_malformed_file_says_what_and_where(tmp_path, text, message):
    with pytest.raises(PopularityError, match=message):
        load_popqa(_write(tmp_path, text))


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(PopularityError, match="no such PopQA file"):
        load_popqa(tmp_path / "nope.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"question\tpossible_answers\ts_pop\n\xff\xfe\t[]\t1\n")
    with pytest.raises(PopularityError, match="not UTF-8"):
        load_popqa(bad)


def test_threshold_retrieves_for_the_unpopular_questions_that_need_it():
    popularity = [5, 50, 500, 5000]
    closed = [False, False, True, True]  # the model knows the popular ones
    retrieved = [True, True, False, True]
    t = tune_threshold(popularity, closed, retrieved)
    assert t.threshold == 500 and t.dev_accuracy == 1.0 and t.dev_retrieval_rate == 0.5 and t.n == 4


def test_threshold_can_mean_always_or_never_retrieve():
    assert tune_threshold([1, 2], [False, False], [True, True]).threshold == math.inf
    never = tune_threshold([1, 2], [True, True], [False, False])
    assert never.threshold == 1 and never.dev_retrieval_rate == 0.0


def test_threshold_ties_go_to_less_retrieval():
    assert tune_threshold([1, 2], [True, True], [True, True]).dev_retrieval_rate == 0.0


def test_threshold_needs_matching_inputs():
    with pytest.raises(ValueError, match="same, non-zero number"):
        tune_threshold([1], [True, False], [True])
