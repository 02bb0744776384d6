"""experiments.py on a tiny corpus with a scripted model: the numbers follow from the script."""

import json

import pytest
from scripted import ScriptedBackend

from lab.evaluation import experiments
from lab.evaluation.experiments import negative_windows_before_first_positive
from lab.evaluation.positives import PositiveIndex
from lab.records import write_record
from raqa.config import RunSettings
from raqa.evaluation import records
from raqa.evaluation.questions import QAItem
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index

PAGES = [
    Page("1", "Alpha river", "The alpha river flows north. Its source is Lake Zed."),
    Page("2", "Beta river", "The beta river flows south. It is long."),
    Page("3", "Gamma river", "The gamma river flows east. It is short."),
    Page("4", "Delta river", "The delta river flows west. It is wide."),
    Page("5", "Epsilon mountain", "Epsilon is a mountain. It is tall."),
]
ITEMS = [
    QAItem("q1", "Where is the source of the alpha river?", ("Lake Zed",)),
    QAItem("q2", "Which river flows west?", ("delta river",)),
    QAItem("q3", "Who climbed Epsilon first?", ("Sir Nobody",)),
]


def identity(items):
    return items


@pytest.fixture(scope="module")
def index():
    return BM25Index.build(PAGES)


@pytest.fixture(scope="module")
def positives():
    return PositiveIndex(PAGES)


def test_positive_index_matches_whole_normalised_answers(positives):
    assert positives.is_positive(PAGES[0], ["lake zed"])
    assert not positives.is_positive(PAGES[1], ["lake zed"])
    assert positives.anywhere(["Delta River"]) and not positives.anywhere(["Sir Nobody"])


def test_recall_counts_first_positive_ranks(index, positives):
    results = experiments.recall(ITEMS, {"wordpiece": index}, positives, identity)
    at1 = results["recall"]["wordpiece"]["1"]
    at1000 = results["recall"]["wordpiece"]["1000"]
    assert at1["n"] == 3 and at1000["value"] == pytest.approx(2 / 3)  # q3's answer is nowhere
    assert results["answer_anywhere_in_corpus"]["value"] == pytest.approx(2 / 3)


def test_negative_windows_before_the_first_positive(index, positives):
    hits = index.search("river flows", 5)
    item = QAItem("x", "?", ("Lake Zed",))
    rank = next(h.rank for h in hits if h.page.id == "1")
    assert negative_windows_before_first_positive(hits, item, positives, 1, "forward") == rank - 1
    assert negative_windows_before_first_positive(hits, item, positives, 1, "backward") == len(hits) - rank
    assert negative_windows_before_first_positive(hits, QAItem("y", "?", ("nothing",)), positives, 2, "forward") is None


def test_topk_vs_iterative_scores_the_scripted_answers(index):
    def script(messages):
        return (
            "ANSWER: Lake Zed\nPAGE: 1\nSENTENCE: 2"
            if "alpha" in messages[-1]["content"].split("Question:")[-1]
            else "NOT FOUND"
        )

    base = RunSettings(window=2, k=5)
    results = experiments.topk_vs_iterative(ITEMS[:2], index, ScriptedBackend(script), base, identity)
    for name, row in results["configs"].items():
        assert row["exact_match"]["value"] == 0.5, name  # q1 right, q2 declined
        assert row["abstained"]["value"] == 0.5
    assert (
        results["configs"]["iterative_w2_k5"]["pages_read"]["value"]
        < results["configs"]["topk_k20"]["pages_read"]["value"]
    )


def test_negative_windows_experiment_counts_false_answers_per_shot_count(index, positives):
    backend = ScriptedBackend(lambda m: "ANSWER: Lake Zed\nPAGE: 1\nSENTENCE: 2")  # always answers
    results = experiments.negative_windows(ITEMS, index, backend, RunSettings(window=1, k=5), positives, 5, identity)
    assert [row["shots"] for row in results["rows"]] == list(experiments.SHOT_COUNTS)
    if results["negative_windows"]:
        assert all(row["false_answer_rate_on_negative"]["value"] == 1.0 for row in results["rows"])
    assert all(row["declined_on_positive"]["value"] == 0.0 for row in results["rows"])
    # the demonstrations really are in the prompt: 8 shots = 16 more messages than 0 shots
    lengths = {len(r) for r in backend.requests}
    assert min(lengths) == 2 and max(lengths) == 18


def test_unanswerable_uses_only_questions_answered_nowhere(index, positives):
    backend = ScriptedBackend(lambda m: "NOT FOUND")
    results = experiments.unanswerable(ITEMS, index, backend, RunSettings(window=2, k=5), positives, 10, identity)
    assert results["questions"] == 1
    assert results["runs"]["default"]["ended_with_an_answer"]["value"] == 0.0


def test_write_records_provenance_and_load_reports_broken_files(tmp_path):
    path = write_record("recall", "nq", {"x": 1}, {"command": "python -m lab experiment recall"}, tmp_path)
    record = json.loads(path.read_text())
    assert record["command"].startswith("python -m lab experiment") and record["results"] == {"x": 1}
    assert record["code_version"].startswith("raqa ")
    (tmp_path / "broken.json").write_text("{not json")
    loaded = records.load_results(tmp_path)
    assert loaded["recall-nq"]["results"] == {"x": 1}
    assert "error" in loaded["broken"]
