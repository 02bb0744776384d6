"""The reading measurement's arithmetic: each target's figure from per-question rows, and the green threshold chosen
on dev answers (the lowest P(yes) whose answers are right 90% of the time, resting on enough of them)."""

from __future__ import annotations

import pytest

from lab.evaluation.reading_eval import MIN_GREEN, choose_weak, green_threshold, replay_cut, run_row, summarise_reading


def _row(kind="readable", answer="x", verdict="weak", right=False, support=0.6, seconds=10.0, windows=1, asked=1):
    return {
        "kind": kind,
        "answer": answer,
        "verdict": verdict,
        "right": right,
        "exact": right,
        "support": support if answer else None,
        "seconds": seconds,
        "first_verdict_s": 2.0,
        "windows": [{}] * windows,
        "model_asked": asked,
    }


def test_each_target_is_counted_over_its_own_questions() -> None:
    rows = [
        _row(verdict="answered", right=True),
        _row(verdict="answered", right=False),
        _row(verdict="weak", right=True),
        _row(answer=None, verdict="not_found"),
        _row(kind="no_answer", answer=None, verdict="not_found", windows=15, asked=14, seconds=40.0),
        _row(kind="no_answer", verdict="weak"),
    ]
    s = summarise_reading(rows)
    assert s["per_question"]["readable"]["right"]["value"] == 0.5 and s["per_question"]["readable"]["right"]["n"] == 4
    assert s["per_question"]["no_answer"]["answered"]["value"] == 0.5
    assert s["badge"]["green"]["precision"]["value"] == 0.5 and s["badge"]["green"]["precision"]["n"] == 2
    assert s["badge"]["green"]["coverage"]["value"] == 0.5  # 1 of the 2 right answers is green
    assert s["windows_without_model"] == 1 and s["seconds"]["p95"] == 40.0 and s["n"] == 6


def test_the_green_threshold_is_the_lowest_cut_right_nine_times_in_ten_on_enough_answers() -> None:
    rows = [_row(support=0.6 + i / 100, right=i >= 3) for i in range(20)]  # wrong below 0.63, right from there
    cut = green_threshold(rows)
    kept = [r for r in rows if r["support"] >= cut]
    assert sum(r["right"] for r in kept) / len(kept) >= 0.9 and len(kept) >= MIN_GREEN
    assert cut == pytest.approx(0.62)  # from 0.61 on, 17 of 19 are right (89.5%); from 0.62 on, 17 of 18
    assert green_threshold([_row(support=0.55, right=True) for _ in range(20)], weak=0.6) is None  # below Weak
    assert green_threshold(rows[: MIN_GREEN - 1]) is None  # too few answers to rest a green badge on
    assert green_threshold([_row(right=False, support=0.9) for _ in range(20)]) is None


def test_a_row_records_what_the_viewer_ends_with(tiny_index, scripted) -> None:
    from raqa.config import AppConfig
    from raqa.evaluation.questions import QAItem
    from raqa.service import Service

    service = Service(
        AppConfig(),
        [],
        tiny_index,
        scripted("NOT FOUND", "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"),
        "tiny",
        {},
    )
    item = QAItem("t-1", "Who painted the Mona Lisa?", ("Leonardo da Vinci",))
    row = run_row(service, item, "readable", "tiny", "base")
    assert row["answer"] == "Leonardo da Vinci" and row["right"] and row["exact"]
    # the first window declined; the second answered citing a page outside it: red, but the run ends on it
    assert [w["verdict"] for w in row["windows"]] == ["not_found", "unsupported"] and row["model_asked"] == 2
    assert row["verdict"] == "unsupported" and row["seconds"] > 0 and row["first_verdict_s"] is not None


def _window(support, answer="x"):
    return {"verdict": "unsupported", "answer": answer, "support": support, "right": False, "positive": False}


def test_runs_replay_at_a_lower_cut_and_the_weak_cut_trades_right_answers_against_invented_ones() -> None:
    readable = {**_row(answer=None, verdict="not_found"), "answers": ["Paris"]}
    readable["windows"] = [_window(0.52, "Lyon"), _window(0.57, "Paris"), _window(None, "Rome")]
    assert [r["answer"] for r in replay_cut([readable], 0.5)] == ["Lyon"]
    assert [r["answer"] for r in replay_cut([readable], 0.55)] == ["Paris"] and replay_cut([readable], 0.55)[0]["right"]
    assert replay_cut([readable], 0.6)[0]["answer"] is None
    assert choose_weak([readable]) == 0.55  # the one cut that ends it right
    invented = {**_row(kind="no_answer", answer=None, verdict="not_found"), "answers": ["x"]}
    invented["windows"] = [_window(0.58, "Made up")]
    assert choose_weak([readable, invented]) == 0.6  # 0.55 would end the no-answer question with an answer
