"""experiment when_to_retrieve's scoring, Table 3 split and popularity baseline, on the tiny corpus with a scripted
model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris

from lab.evaluation.policy_scores import summarise_policies as summarise
from lab.evaluation.when_to_retrieve import evaluate_policies, evaluate_question, popularity_rows
from raqa.evaluation.questions import QAItem
from raqa.when_to_retrieve.prompts import RET

PARIS = QAItem("q1", "What is the capital of France?", ("Paris",))
EVEREST = QAItem("q2", "Which mountain did Hillary climb in 1953?", ("Mount Everest", "Everest"))
DANUBE = QAItem("q3", "Which river flows through Austria and Hungary to the Black Sea?", ("Danube",))


def _search(index):
    return lambda q: index.search(q, 1)


def test_one_question_through_every_policy(tiny_index):
    model = FakeAdaptModel(knows_paris)
    row = evaluate_question(EVEREST, model, _search(tiny_index))
    assert row["never"] == {
        "answer": "I think it is Mont Blanc",
        "with_context": False,
        "page": None,
        "failed": None,
        "exact_match": False,
        "accuracy": False,
    }
    assert (
        row["always"]["answer"] == "Mount Everest" and row["always"]["exact_match"] and row["always"]["page_has_answer"]
    )
    assert row["adapt"]["asked_ret"] and row["adapt"]["first_reply"] == RET and row["adapt"]["accuracy"]
    # Table 3's other half: the same adapter without context, asked closed-book with <RET> forbidden
    assert row["adapt_other"]["with_context"] is False and row["adapt_other"]["answer"] == "I think it is Mont Blanc"
    prompt, adapter, banned = model.calls[-1]
    assert (adapter, banned) == ("adapt", True) and RET not in prompt and "given the context" not in prompt


def test_a_direct_answer_is_also_tried_with_the_page_for_table_3(tiny_index):
    row = evaluate_question(PARIS, FakeAdaptModel(knows_paris), _search(tiny_index))
    assert not row["adapt"]["asked_ret"] and row["adapt"]["answer"] == "Paris" and row["adapt"]["exact_match"]
    assert row["adapt_other"]["with_context"] is True


def test_summary_accuracies_ret_rate_and_table_3(tiny_index):
    rows = evaluate_policies([PARIS, EVEREST, DANUBE], FakeAdaptModel(knows_paris), _search(tiny_index))
    s = summarise(rows)
    assert s["n"] == 3
    assert s["policies"]["never"]["accuracy"]["value"] == pytest.approx(1 / 3)
    assert s["policies"]["always"]["exact_match"]["value"] == pytest.approx(2 / 3)  # Everest and Danube pages
    assert s["policies"]["adapt"]["accuracy"]["value"] == pytest.approx(1.0)
    assert s["ret_rate"]["value"] == pytest.approx(2 / 3) and s["ret_rate"]["n"] == 3
    t3 = s["table3"]
    assert t3["asked_ret"]["n"] == 2 and t3["answered_directly"]["n"] == 1
    assert t3["asked_ret"]["with_context"]["accuracy"]["value"] == 1.0
    assert t3["asked_ret"]["without_context"]["accuracy"]["value"] == 0.0
    assert t3["answered_directly"]["without_context"]["accuracy"]["value"] == 1.0
    assert s["differences"]["adapt_minus_never"]["accuracy"]["value"] == pytest.approx(2 / 3)
    assert s["ret_probability_auc"] == 1.0  # the fake asks for <RET> exactly where NR-LLM is wrong
    assert s["mean_ret_probability"] == {"asked_ret": pytest.approx(0.9), "answered_directly": pytest.approx(0.1)}
    curve = s["threshold_curve"]
    assert (curve[0]["threshold"], curve[0]["retrieval_rate"]) == (1.01, 0.0)  # retrieve for none
    assert (curve[-1]["threshold"], curve[-1]["retrieval_rate"]) == (0.0, 1.0)  # retrieve for all
    at_09 = next(p for p in curve if p["threshold"] == pytest.approx(0.9))
    assert at_09["retrieval_rate"] == pytest.approx(2 / 3) and at_09["accuracy"] == 1.0
    fitted = s["adapt_threshold"]
    assert len(fitted["thresholds"]) == 2 and fitted["accuracy"]["n"] == 3
    assert s["policies"]["adapt_threshold"]["accuracy"] == fitted["accuracy"]
    with pytest.raises(ValueError, match="No evaluated questions"):
        summarise([])


def test_popularity_baseline_is_tuned_on_one_half_and_scored_on_the_other(tiny_index):
    from raqa.when_to_retrieve.popularity import PopItem

    # popular questions are about France (known from memory); unpopular ones need the page
    items = [PopItem(f"p{i}", PARIS.question, PARIS.answers, 10_000 + i) for i in range(4)]
    items += [PopItem(f"e{i}", EVEREST.question, EVEREST.answers, 5 + i) for i in range(4)]
    result = popularity_rows(items, FakeAdaptModel(knows_paris), _search(tiny_index), seed=1)
    assert result["dev_n"] == 4 and len(result["rows"]) == 4
    summary = summarise(result["rows"])
    assert summary["policies"]["popularity"]["accuracy"]["value"] == 1.0
    for row in result["rows"]:
        assert row["popularity"]["retrieved"] == row["id"].startswith("e")
    assert summary["popularity_retrieval_rate"]["value"] == pytest.approx(
        sum(r["id"][0] == "e" for r in result["rows"]) / 4
    )
    with pytest.raises(ValueError, match="at least 4"):
        popularity_rows(items[:3], FakeAdaptModel(knows_paris), _search(tiny_index))


def test_figures_show_each_policy_ret_rate_and_table_3(tiny_index):
    from lab.figures.when_to_retrieve import ADAPT_FIGURES as FIGURES

    rows = evaluate_policies([PARIS, EVEREST, DANUBE], FakeAdaptModel(knows_paris), _search(tiny_index))
    record = {"results": {"datasets": {"nq": summarise(rows), "triviaqa": summarise(rows[:2])}}}
    accuracy = FIGURES["accuracy"](record)
    names = {t.name for t in accuracy.data}
    assert names == {"NR-LLM (never)", "AR-LLM (always)", "Adapt-LLM", "Adapt-LLM, P(<RET>) threshold"}
    assert len(accuracy.data) == 8
    # one subplot per metric: the exact-match bars must not land on the accuracy axes
    assert sorted(t.xaxis for t in accuracy.data) == ["x"] * 4 + ["x2"] * 4
    assert {t.xaxis for t in accuracy.data if t.showlegend} == {"x"}
    adapt_bar = next(t for t in accuracy.data if t.name == "Adapt-LLM")
    assert list(adapt_bar.x) == ["nq (n=3)", "triviaqa (n=2)"] and list(adapt_bar.y) == [1.0, 1.0]
    ret = FIGURES["ret_rate"](record)
    assert ret.data[0].name == "Adapt-LLM asked for <RET>" and list(ret.data[0].y)[0] == pytest.approx(2 / 3)
    curve = FIGURES["threshold"](record)
    assert len(curve.data) == 8 and list(curve.data[0].x)[0] == 0.0 and list(curve.data[0].x)[-1] == 1.0
    table = FIGURES["table3"](record)
    assert {t.name for t in table.data} == {"with context", "without context"} and len(table.data) == 4


def test_the_committed_evaluation_draws_without_errors():
    from lab.figures.when_to_retrieve import ADAPT_FIGURES as FIGURES

    paths = sorted((Path(__file__).parent.parent / "assets" / "results").glob("when_to_retrieve-*.json"))
    for path in paths:
        record = json.loads(path.read_text())
        assert record["command"].startswith("python -m lab experiment when_to_retrieve")
        for make in FIGURES.values():
            figure = make(record)
            assert figure.data and "could not be drawn" not in json.dumps(figure.layout.to_plotly_json())


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).parent.parent / "assets" / "results").glob("when_to_retrieve-*.json")),
    ids=lambda p: p.stem,
)
def test_the_committed_record_is_what_its_rows_give(path):
    """experiment when_to_retrieve's record is reproducible: every summary is recomputed from the record's own rows."""
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"].startswith("python -m lab experiment when_to_retrieve") and record["code_version"]
    for dataset, rows in record["results"]["rows"].items():
        summary = {k: v for k, v in record["results"]["datasets"][dataset].items() if k not in ("threshold", "dev_n")}
        assert json.dumps(summarise(rows), sort_keys=True) == json.dumps(summary, sort_keys=True), dataset
