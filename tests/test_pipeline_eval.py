"""experiment pipeline: rows made through the When-to-retrieve stream (resumable), and every policy scored from them
with abstention in the numbers: coverage, accuracy among answered, risk-coverage curves, AUCs, the targets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_pipeline import service  # noqa: F401 - the scripted service, shared

from lab.evaluation.when_to_retrieve import dev_row, interleave, make_rows, policy_row
from lab.evaluation.when_to_retrieve_scores import (
    closed_book_curve,
    outcome,
    pipeline_curve,
    signal_auc,
    summarise_scores,
    youden_threshold,
)
from raqa.config import RunForm
from raqa.evaluation.questions import QAItem
from raqa.when_to_retrieve.uncertainty import SIGNALS, closed_book


def test_a_test_row_holds_the_closed_book_part_and_each_readers_ending(service):  # noqa: F811
    model = service.adapt.get()
    readers = {name: (lambda q: service.events(service.plan(q, RunForm(k=5)))) for name in ("base", "base+judge")}
    item = QAItem("q1", "Who first climbed Mount Everest with Tenzing Norgay?", ("Edmund Hillary",))
    row = policy_row(item, "nq", lambda q: closed_book(model, q), readers, lambda answers: True)
    assert row["closed_book"]["answer"] == "I think it is Mont Blanc" and row["closed_book"]["correct"] is False
    assert set(row["closed_book"]["signals"]) == set(SIGNALS)
    assert row["readers"]["base"]["answer"] == "Edmund Hillary" and row["readers"]["base"]["correct"] is True
    assert row["answerable"] is True
    # the closed-book answer is asked once for both readers: one generation, one P(True), one P(<RET>)
    assert sum(1 for prompt, adapter, _ in model.calls if prompt.startswith("Answer the question Q. Q:")) == 1


def test_rows_are_appended_as_made_and_an_interrupted_run_resumes(service, tmp_path):  # noqa: F811
    path = tmp_path / "rows.jsonl"
    items = [QAItem(f"q{i}", q, ("Paris",)) for i, q in enumerate(["What is the capital of France?", "Hm?"])]
    work = interleave({"nq": items[:1], "triviaqa": items[1:]}, "dev")
    answer = lambda q: closed_book(service.adapt.get(), q)  # noqa: E731
    made = []
    rows = make_rows(work, path, "key", lambda d, s, item: made.append(item) or dev_row(item, d, answer))
    assert len(rows) == 2 == len(path.read_text().splitlines()) and len(made) == 2
    with path.open("a") as out:
        out.write('{"cut by an interrupt')
    again = make_rows(work, path, "key", lambda d, s, item: made.append(item) or dev_row(item, d, answer))
    assert len(made) == 2 and [r["id"] for r in again] == ["q0", "q1"]  # nothing was made again
    make_rows(work, path, "other settings", lambda d, s, item: made.append(item) or dev_row(item, d, answer))
    assert len(made) == 4  # rows of other settings are not reused


def test_rows_made_several_at_a_time_keep_the_work_order_and_each_line_whole(tmp_path):
    from test_experiments_server import InFlight

    from raqa.evaluation.fan_out import calls_at_once

    path, call = tmp_path / "rows.jsonl", InFlight(0.03)
    work = [("nq", "test", QAItem(f"q{i}", f"Question {i}?", ("x",))) for i in range(8)]
    make = lambda d, s, item: call({"id": item.id, "dataset": d, "split": s, "text": "y" * 5000})  # noqa: E731
    with calls_at_once(4):
        rows = make_rows(work, path, "key", make)
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(8)] and call.most == 4
    lines = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole, though written by 4
    assert sorted(r["id"] for r in lines) == [f"q{i}" for i in range(8)]
    assert make_rows(work, path, "key", make) == rows and call.calls == 8  # resumed: nothing made again


def _row(i: int, confident: float, knows: bool, reader_right: bool | None, answerable: bool = True) -> dict:
    """A synthetic row: every signal equal to `confident`; reader_right None = the reader says I don't know."""
    ending = {"answer": None if reader_right is None else "x", "correct": bool(reader_right), "exact": False}
    return {
        "id": str(i),
        "dataset": "nq",
        "split": "test",
        "answerable": answerable,
        "closed_book": {"answer": "y", "correct": knows, "exact": knows, "signals": {s: confident for s in SIGNALS}},
        "readers": {"base": {**ending, "answer": "x", "correct": bool(reader_right)}, "base+judge": ending},
    }


def _rows() -> list[dict]:
    # the model is sure (0.9) of the 10 it knows, unsure (0.1-0.3) of the 30 it does not; the judge reader is
    # right on 10 of those, declines on 15 (10 of them unanswerable), wrong on 5
    rows = [_row(i, 0.9, True, True) for i in range(10)]
    rows += [_row(10 + i, 0.1 + 0.01 * i, False, True) for i in range(10)]
    rows += [_row(20 + i, 0.2, False, None, answerable=i >= 10) for i in range(15)]
    rows += [_row(35 + i, 0.3, False, False) for i in range(5)]
    return rows


def test_a_signal_that_separates_gets_auc_1_and_a_threshold_between_the_groups():
    rows = _rows()
    assert signal_auc(rows, "p_true")["value"] == 1.0
    t = youden_threshold(rows, "p_true")
    assert 0.3 < t <= 0.9
    assert youden_threshold([r for r in rows if not r["closed_book"]["correct"]], "p_true") == math.inf


def test_the_pipeline_answers_known_from_memory_and_abstains_where_no_window_answers():
    rows = _rows()
    known, unknown = rows[0], rows[25]
    assert outcome(known, "p_true", 0.5, "base+judge") == {
        "answered": True,
        "correct": True,
        "exact": True,
        "retrieved": False,
    }
    assert outcome(unknown, "p_true", 0.5, "base+judge")["answered"] is False
    assert outcome(unknown, "adapt", 0.5, "base+judge")["retrieved"] is True  # P(<RET>) = 1 - 0.2
    assert outcome(unknown, "closed_book:p_true", 0.5, None)["answered"] is False


def test_risk_coverage_curves_span_coverage_and_rank_the_sure_answers_first():
    rows = _rows()
    curve = closed_book_curve(rows, "p_true")
    assert curve["coverage"][0] == 1 / 40 and curve["coverage"][-1] == 1.0
    assert curve["risk"][9] == 0.0 and curve["risk"][-1] == 0.75  # the 10 known first, then 30 wrong
    sweep = pipeline_curve(rows, "p_true", "base+judge")
    assert sweep["coverage"] == sorted(sweep["coverage"]) and 0 <= sweep["aurc"] <= 1


def test_summarise_scores_every_configuration_and_checks_the_targets():
    rows = _rows()
    dev = [dict(r, split="dev") for r in rows]
    out = summarise_scores(dev, rows)["datasets"]["nq"]
    assert out["n"] == 40 and out["answerable"] == 30
    table = out["table"]
    best = table["pipeline:p_true:base+judge"]
    assert best["coverage"]["value"] == pytest.approx(25 / 40) and best["selective_accuracy"]["value"] == 0.8
    assert best["idk_unanswerable"]["value"] == 1.0  # the ten unanswerable ones, all declined
    assert table["always:base"]["coverage"]["value"] == 1.0
    assert table["never"]["selective_accuracy"]["value"] == 0.25
    t = out["targets"]
    assert t["auc_target_met"] is True and t["best_signal_auc"] == 1.0
    # only pipelines answering as often as always-retrieve with the base reader qualify: the base reader's own, and
    # they answer the same 20 of 40 right as it does, so nothing separates them
    assert t["best_pipeline_has_coverage_of_always_base"] is True and t["best_pipeline"].endswith(":base")
    assert t["selective_accuracy_minus_always_base"]["value"] == 0.0 and t["selective_accuracy_separated"] is False
    # the best pipeline that can say "I don't know" (the judge's): 20 right of 25 answered against 20 of 40
    assert t["best_abstaining_pipeline"].endswith(":base+judge")
    assert t["best_abstaining_minus_always_base"]["value"] == pytest.approx(0.8 - 0.5)
    json.dumps(out)  # the record is JSON as it stands


COMMITTED = sorted((Path(__file__).parent.parent / "assets" / "results").glob("pipeline-*.json"))


def _figures_draw(record: dict) -> None:
    from lab.figures.when_to_retrieve import PIPELINE_FIGURES as FIGURES
    from raqa.web.render_when_to_retrieve import pipeline_summary

    for make in FIGURES.values():
        figure = make(record)
        assert figure.data and "could not be drawn" not in json.dumps(figure.layout.to_plotly_json())
    assert "<table>" in pipeline_summary(record)


def test_the_figures_draw_a_record():
    rows = _rows()
    _figures_draw({"results": summarise_scores([dict(r, split="dev") for r in rows], rows)})


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_the_committed_record_is_what_its_rows_give(path):
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"].startswith("python -m lab experiment pipeline") and record["code_version"]
    rows = record["results"]["rows"]
    again = summarise_scores(rows["dev"], rows["test"])
    for dataset, d in record["results"]["datasets"].items():
        redone = again["datasets"][dataset]

        def same(key: str, redone=redone, d=d) -> bool:  # as JSON: NaN (a share of nothing) equals itself there
            return json.dumps(redone[key], sort_keys=True) == json.dumps(d[key], sort_keys=True)

        assert d["n"] >= 300 and same("table") and same("auc") and same("targets")
    _figures_draw(record)
