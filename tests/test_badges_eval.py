"""experiment badges: both badge rules on the same question share the model's replies and the judge's readings, rows
resume, and the per-question figures count what a viewer sees (green precision, amber, answers on unanswerable
questions)."""

from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.evaluation.badges import RuleJudge, SharedReplies, rule_settings, run_rows, score, score_rule
from lab.evaluation.positives import PositiveIndex
from raqa.config import RunSettings
from raqa.evaluation.questions import QAItem
from raqa.reading.judge import JudgeReading
from raqa.reading.support import FEATURES, SupportModel


def support_model(answered: float | None) -> SupportModel:
    weights = (1.0,) + (0.0,) * (len(FEATURES) - 1)
    return SupportModel(weights, 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), 0.3, answered, {})


class CountingJudge:
    """Reads p3 (the Mona Lisa page) as "Leonardo da Vinci" at P 0.6, the rest as nothing; counts its calls."""

    threshold = 0.5
    card = {"gate": {"thresholds": {"1": 0.55}}}

    def __init__(self, answered: float | None = None):
        self.support, self.calls = support_model(answered), 0

    def read(self, question, pages):
        self.calls += 1
        pages = [getattr(p, "page", p) for p in pages]
        return [
            JudgeReading(0.6, "Leonardo da Vinci", "Leonardo da Vinci painted it.")
            if p.id == "p3"
            else JudgeReading(0.05, None, None)
            for p in pages
        ]


def test_shared_replies_stream_each_prompt_once(scripted):
    inner = scripted("ANSWER: a", "ANSWER: b")
    shared = SharedReplies(inner)
    messages = [{"role": "user", "content": "q"}]
    first, again = list(shared.reply(messages)), list(shared.reply(messages))
    assert first == again and shared.calls == 1 and len(inner.requests) == 1
    list(shared.reply([{"role": "user", "content": "other"}]))
    assert shared.calls == 2


def test_the_two_rules_share_readings_and_differ_only_in_thresholds(tiny_index):
    judge, readings = CountingJudge(answered=0.9), {}
    before, after = RuleJudge(judge, None, readings), RuleJudge(judge, judge.support, readings)
    hits = tiny_index.search("Who painted the Mona Lisa?", 8)
    plain, scored = before.read_ranked("q", hits), after.read_ranked("q", hits)
    assert judge.calls == 1 and all(r.support is None for r in plain)
    assert any(r.support is not None for r in scored)
    base = RunSettings(reader_mode="model_judge", grounded_only=True)
    assert rule_settings(base, before).gate_threshold == 0.55 and rule_settings(base, before).judge_threshold == 0.5
    assert rule_settings(base, after).gate_threshold == 0.3 and rule_settings(base, after).answered_threshold == 0.9


def test_rows_resume_and_score_both_rules(tiny_index, tiny_pages, scripted, tmp_path):
    item = QAItem("t-1", "Who painted the Mona Lisa?", ("Leonardo da Vinci",))
    backend = scripted(lambda messages: "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1")
    base = RunSettings(window=1, k=8, reader_mode="model_judge", grounded_only=True)
    rows_path = tmp_path / "rows.jsonl"
    rows = run_rows([("nq", item)], tiny_index, backend, CountingJudge(), base, PositiveIndex(tiny_pages), rows_path)
    (row,) = rows
    assert row["before"]["verdict"] == "answered" and row["after"]["verdict"] == "weak"  # P 0.6: no green after
    assert row["before"]["right"] and row["after"]["support"] == pytest.approx(0.6, abs=1e-3)
    assert row["model_calls"] == 1  # the same window, asked once for both rules
    calls = len(backend.requests)
    again = run_rows([("nq", item)], tiny_index, backend, CountingJudge(), base, PositiveIndex(tiny_pages), rows_path)
    assert again == rows and len(backend.requests) == calls and len(rows_path.read_text().splitlines()) == 1
    figures = score(rows)["nq"]
    assert figures["per_question"]["before"]["answered_precision"]["value"] == 1.0
    assert figures["per_question"]["after"]["answered_precision"]["n"] == 0
    assert figures["per_question"]["after"]["weak_precision"]["value"] == 1.0
    assert figures["pages"]["answer_bearing"] >= 1


def row(verdict: str, right: bool, anywhere: bool = True) -> dict:
    answer = None if verdict == "not_found" else "x"
    outcome = {"answer": answer, "verdict": verdict, "right": right}
    return {"anywhere": anywhere, "before": outcome, "after": outcome, "pages": [{"positive": anywhere}]}


def test_score_counts_green_amber_and_answers_on_unanswerable_questions():
    rows = [
        row("answered", True),
        row("answered", False),
        row("weak", False),
        row("not_found", False),
        row("weak", False, anywhere=False),
        row("not_found", False, anywhere=False),
    ]
    figures = score_rule(rows, "after")
    assert figures["answered_precision"]["value"] == 0.5 and figures["answered_precision"]["n"] == 2
    assert figures["weak_precision"]["n"] == 2 and figures["ended_with_answer"]["value"] == pytest.approx(4 / 6)
    assert figures["right_and_answered"]["value"] == pytest.approx(1 / 6)
    assert figures["right_and_answered_of_retrievable"]["value"] == pytest.approx(1 / 4)
    assert figures["unanswerable_with_answer"]["value"] == 0.5 and figures["unanswerable_answered_green"]["value"] == 0


def test_eval_badges_refuses_a_bad_limit_before_loading(capsys):
    assert main(["experiment", "badges", "--limit", "0"]) == 2
    assert "--limit must be 1 or more" in capsys.readouterr().err


def test_the_committed_record_recomputes_from_its_committed_rows():
    """The committed record's results are exactly what its committed rows score to, and say what they measured."""
    from raqa.evaluation.records import RESULTS_DIR

    record = json.loads((RESULTS_DIR / "badges-nq+triviaqa.json").read_text())
    rows = [json.loads(line) for line in (RESULTS_DIR / record["rows"]).read_text().splitlines() if line.strip()]
    assert json.dumps(score(rows), sort_keys=True) == json.dumps(record["results"], sort_keys=True)  # NaN-safe
    assert len(rows) == record["sample"]["questions"] and record["command"].startswith(
        "python -m lab experiment badges"
    )
    for dataset in ("nq", "triviaqa"):
        after = record["results"][dataset]["per_question"]["after"]
        answers = after["answered_precision"]["n"] + after["weak_precision"]["n"]
        assert answers == pytest.approx(after["ended_with_answer"]["value"] * after["questions"])
