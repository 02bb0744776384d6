"""The attribution experiment: rows for answered windows only, what each depends on, the summary from rows, and the
committed record recomputed from its own rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from lab.evaluation.attribution_eval import (
    attribution_markdown,
    collect_attributions,
    depends_on,
    summarise_attribution,
)
from lab.evaluation.positives import PositiveIndex
from lab.figures.judge import attribution_figure
from raqa.config import RunSettings
from raqa.evaluation.questions import QAItem
from raqa.reading.events import Attribution, SentenceEffect

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "assets" / "results" / "attribution-triviaqa.json"


def attribution(cited: tuple[str, int], drops: dict[int, float]) -> Attribution:
    full = math.log(0.5)
    effects = tuple(SentenceEffect("p", n, full - d) for n, d in drops.items())
    return Attribution(1, "x", full, effects, None, full - 3, *cited, "sentence", "", 1.0)


@pytest.mark.parametrize(
    ("drops", "expected"),
    [({1: 0.1, 2: 1.0}, "cited"), ({1: 1.0, 2: 0.1}, "other"), ({1: 0.5, 2: 0.6}, "none"), ({}, "none")],
)
def test_what_an_answer_depends_on(drops, expected) -> None:
    assert depends_on(attribution(("p", 2), drops)) == expected


def test_only_answered_windows_become_rows_and_the_summary_counts_them(tiny_pages, tiny_index) -> None:
    def reply(messages) -> str:
        return (
            "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"
            if "Mona Lisa" in messages[-1]["content"]
            else "NOT FOUND"
        )

    backend = ScriptedBackend(reply, scorer=lambda m, a: math.log(0.9 if "Leonardo" in m[-1]["content"] else 0.01))
    items = [QAItem("q1", "Who painted the mona lisa portrait in the louvre chess?", ["Leonardo da Vinci"])]
    rows, read = collect_attributions(
        items, tiny_index, backend, RunSettings(k=3), None, PositiveIndex(tiny_pages), 5, iter
    )
    assert read == 1 and len(rows) == 1  # the answer-bearing window (the Mona Lisa page comes first): no free one
    row = rows[0]
    assert row["kind"] == "answer_bearing" and row["right"] and row["depends_on"] == "cited"
    summary = summarise_attribution(rows)
    assert summary["answered_windows"] == 1 and summary["all"]["depends_on_cited"]["value"] == 1.0
    assert summary["by_kind"]["answer_free"]["n"] == 0


def test_the_committed_record_is_recomputed_from_its_rows_and_the_docs_show_it() -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    results = record["results"]
    again = summarise_attribution(results["rows"])
    assert json.dumps(again, sort_keys=True) == json.dumps({k: results[k] for k in again}, sort_keys=True)
    assert results["answered_windows"] >= 200  # the n
    assert record["command"].startswith("python -m lab experiment attribution")
    reading = (ROOT / "docs" / "reading.md").read_text(encoding="utf-8")
    assert attribution_markdown(results) in reading


def test_the_figure_draws_every_group_and_the_three_aucs() -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    figure = attribution_figure(record)
    bars = [trace for trace in figure.data if trace.name != "AUC"]
    assert [trace.name for trace in bars] == ["the cited sentence", "another sentence", "no sentence"]
    groups = 1 + len(record["results"]["by_kind"]) + len(record["results"]["by_badge"])
    assert all(len(trace.x) == groups for trace in bars)
    assert list(next(t for t in figure.data if t.name == "AUC").x) == [
        "depends on a sentence",
        "largest drop",
        "P(answer)",
    ]
