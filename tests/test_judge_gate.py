"""The model + judge reader's gate: chosen per window size on answer-free and answer-bearing windows."""

import pytest
from test_reader_comparison import ITEMS, PAGES

from lab.evaluation.positives import PositiveIndex
from lab.stats import lowest_under
from lab.training.judge_gate import calibrate_gate
from raqa.reading.judge import AnswerJudge, JudgeReading
from raqa.retrieval.index import BM25Index


class LochJudge:
    """P 0.9 on the Loch Ness page, 0.4 + 0.01 x the lake number elsewhere."""

    def read(self, question, hits):
        ids = [h.page.id for h in hits]
        return [JudgeReading(0.9 if i == "6" else 0.4 + int(i) / 100, "x", None) for i in ids]


@pytest.mark.parametrize(
    ("negative", "positive", "max_false", "gate"),
    [
        ([0.1, 0.2, 0.3, 0.9], [0.5, 0.8], 0.25, 0.4),  # one negative of four may pass: the 0.9 does
        ([0.1, 0.2], [0.5, 0.8], 0.0, 0.35),  # none may: just above the highest negative
        ([0.95], [0.5], 0.0, 0.975),  # a negative above every positive: the gate sits above it
    ],
)
def test_choose_gate_lets_through_at_most_the_allowed_share_of_answer_free_windows(negative, positive, max_false, gate):
    assert lowest_under(negative, positive, max_false) == gate
    assert sum(p >= gate for p in negative) <= max_false * len(negative)


def test_calibrate_gives_a_threshold_and_rates_per_window_size():
    gate = calibrate_gate(LochJudge(), BM25Index.build(PAGES), PositiveIndex(PAGES), {"tiny": ITEMS}, 0.0, say=print)
    assert set(gate["thresholds"]) == {"1", "2", "3"}
    for w, rates in gate["windows"].items():
        assert rates["negative"] == 1 and rates["positive"] == 1
        assert rates["pass_negative"] == 0.0 and rates["pass_positive"] == 1.0 and rates["auc"] == 1.0
        assert 0.45 < gate["thresholds"][w] < 0.9


class _Model:
    def eval(self):
        return self


def test_the_judge_reads_its_gate_per_window_size_from_its_card():
    judge = AnswerJudge(_Model(), None, 0.34, card={"gate": {"thresholds": {"1": 0.64, "3": 0.73}}})
    assert judge.gate(1) == 0.64 and judge.gate(3) == 0.73
    assert judge.gate(2) == 0.34  # no gate for that size: the page threshold
