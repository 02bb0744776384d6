"""The reader_comparison experiment with scripted readers, and its figure."""

import pytest
from scripted import ScriptedBackend

from lab.evaluation import reader_comparison
from lab.evaluation.positives import PositiveIndex
from lab.figures.experiments import FIGURES, reader_comparison_figure
from raqa.config import RunSettings
from raqa.evaluation import records
from raqa.evaluation.questions import QAItem
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index

# The answer page shares only "monster" with the question, so BM25 ranks it last of six: with w=3 the first
# window is negative and the second positive.
PAGES = [
    Page(str(i), f"Lake {i}", f"Lake {i} is a deep cold lake. No monster lives in lake {i}.") for i in range(1, 6)
] + [Page("6", "Loch Ness", "Nessie is a monster said to live in a Scottish loch.")]
ITEMS = [QAItem("t1", "What is the name of the monster in the deep cold lake?", ("Nessie",))]
LOST = [QAItem("u1", "Who won the lake race of 1900?", ("Ada Quill",))]


def answers_always(messages):
    return "ANSWER: Nessie\nPAGE: 6\nSENTENCE: 1"


def declines_unless_nessie(messages):
    return answers_always(messages) if "Nessie" in messages[-1]["content"] else "NOT FOUND"


def identity(items):
    return items


@pytest.fixture(scope="module")
def record():
    index = BM25Index.build(PAGES)
    readers = {
        "base": (ScriptedBackend(answers_always), RunSettings(), {"label": "Base"}),
        "abstain": (ScriptedBackend(declines_unless_nessie), RunSettings(answer_threshold=0.7), {"label": "Tuned"}),
    }
    results = reader_comparison.reader_comparison(ITEMS, LOST, index, readers, PositiveIndex(PAGES), 5, 1, 5, identity)
    return {"experiment": "reader_comparison", "dataset": "tiny", "sample": {"limit": 5, "seed": 0}, "results": results}


def test_both_readers_see_the_same_windows_and_questions(record):
    results = record["results"]
    assert (results["negative_windows"], results["positive_windows"]) == (1, 1)
    assert (results["iterative_questions"], results["unanswerable_questions"]) == (1, 1)
    base, tuned = results["readers"]["base"], results["readers"]["abstain"]
    assert base["windows"]["false_answer_rate_on_negative"]["value"] == 1.0
    assert tuned["windows"]["false_answer_rate_on_negative"]["value"] == 0.0
    assert (
        base["windows"]["exact_match_on_positive"]["value"]
        == tuned["windows"]["exact_match_on_positive"]["value"]
        == 1.0
    )
    # the base reader answers "Nessie" from a page that does not say it: not grounded
    assert base["windows"]["grounded_share_of_answers"]["value"] == 0.5
    assert tuned["windows"]["grounded_share_of_answers"]["value"] == 1.0
    assert tuned["iterative"]["backward"]["exact_match"]["value"] == 1.0
    assert base["unanswerable"]["ended_with_an_answer"]["value"] == 1.0
    assert tuned["unanswerable"]["ended_with_an_answer"]["value"] == 0.0
    assert tuned["settings"]["answer_threshold"] == 0.7


def test_the_figure_draws_one_bar_series_per_reader_with_intervals(record):
    assert FIGURES["reader_comparison"] is reader_comparison_figure
    figure = reader_comparison_figure(record)
    assert [trace.name for trace in figure.data] == ["Base (threshold 0.50)", "Tuned (threshold 0.70)"]
    assert list(figure.data[0].y)[0] == 1.0 and list(figure.data[1].y)[0] == 0.0
    assert all(trace.error_y.array is not None for trace in figure.data)


def test_the_committed_comparison_renders():
    path = records.RESULTS_DIR / "reader_comparison-triviaqa.json"
    if not path.is_file():
        pytest.skip("no committed comparison")
    record = records.load_results()["reader_comparison-triviaqa"]
    figure = reader_comparison_figure(record)
    assert len(figure.data) == len(record["results"]["readers"]) == 2
    assert all(len(trace.y) == 6 for trace in figure.data)


class NessieJudge:
    """Reads page 6 as stating "Nessie" (P 0.9), every other page as stating nothing (P 0.05)."""

    threshold = 0.5
    support = None  # no support model

    def read_ranked(self, question, hits):
        return self.read(question, [h.page for h in hits])

    def read(self, question, pages):
        from raqa.reading.judge import JudgeReading

        return [
            JudgeReading(0.9, "Nessie", "Nessie is a monster said to live in a Scottish loch.")
            if p.id == "6"
            else JudgeReading(0.05, None, None)
            for p in pages
        ]


def test_with_a_judge_the_comparison_measures_the_judge_and_both_badges():
    index = BM25Index.build(PAGES)
    judge = NessieJudge()
    readers = {
        "base": (ScriptedBackend(answers_always), RunSettings(judge_threshold=0.5), {"label": "Base"}),
        "base+judge": (
            ScriptedBackend(answers_always),
            RunSettings(reader_mode="model_judge", gate_threshold=0.5),
            {"label": "Base + judge"},
        ),
        "judge": (ScriptedBackend([]), RunSettings(reader_mode="judge", gate_threshold=0.5), {"label": "Judge"}),
    }
    results = reader_comparison.reader_comparison(
        ITEMS, LOST, index, readers, PositiveIndex(PAGES), 5, 1, 5, identity, judge
    )
    base, gated, alone = (results["readers"][n]["windows"] for n in ("base", "base+judge", "judge"))
    assert base["auc_judge"] == 1.0  # the judge ranks the answer window above the answer-free one
    # the base model answers "Nessie" citing page 6 on both windows: only the one holding page 6 is Answered
    assert base["false_answer_rate_on_negative"]["value"] == 1.0
    assert base["badge"]["precision"]["value"] == 1.0 and base["badge"]["answers"] == 2
    assert gated["false_answer_rate_on_negative"]["value"] == 0.0  # the judge kept the model from answering
    assert alone["exact_match_on_positive"]["value"] == 1.0
    assert results["judge"]["threshold"] == 0.5
    assert results["readers"]["base+judge"]["settings"]["reader_mode"] == "model_judge"
