"""A run's downloads: JSON events and a Markdown report, from the events alone."""

from __future__ import annotations

import json

from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.reading.events import to_json
from raqa.web.export import markdown_report, md, write_exports


def _events(tiny_index, reply: str) -> list[dict]:
    backend = ScriptedBackend(lambda messages: reply)
    return [to_json(e) for e in run("Who painted the Mona Lisa?", tiny_index, backend, RunSettings(window=2, k=4))]


def test_the_report_has_question_settings_windows_and_totals(tiny_index, tiny_pages, tmp_path) -> None:
    page = next(p for p in tiny_pages if "Mona Lisa" in p.title)
    events = _events(tiny_index, f"ANSWER: Leonardo da Vinci\nPAGE: {page.id}\nSENTENCE: 1")
    report = markdown_report(events)
    assert report.startswith("# raqa run\n")
    assert "**Question:** Who painted the Mona Lisa?" in report.replace("\\?", "?")
    assert "window 2" in report and "k 4" in report  # the settings
    assert "### Window 1:" in report and "    ANSWER: Leonardo da Vinci" in report
    assert "## Result" in report and "**Answer:** Leonardo da Vinci" in report
    assert "1 window and 2 pages read;" in report  # counted in the singular or plural as they are
    as_json, as_md = write_exports(events, tmp_path / "out")
    assert json.loads(as_json.read_text(encoding="utf-8")) == events
    assert as_md.read_text(encoding="utf-8") == report
    assert write_exports(events, tmp_path / "out") == (as_json, as_md)  # same run, same names


def test_a_declined_run_reports_answer_not_found(tiny_index) -> None:
    report = markdown_report(_events(tiny_index, "NOT FOUND"))
    assert "**Answer:** answer not found (Not found)" in report
    assert report.count("### Window") == 2  # 4 pages, w=2
    assert "2 windows and 4 pages read;" in report


def test_markup_from_pages_and_models_is_escaped() -> None:
    assert md("<img src=x onerror=alert(1)> *x*\n# y") == "\\<img src=x onerror=alert\\(1\\)\\> \\*x\\* \\# y"
    report = markdown_report([{"type": "run_failed", "message": "<b>bad</b>"}])
    assert "\\<b\\>bad\\</b\\>" in report and "<b>" not in report


def test_the_report_says_why_an_answer_was_given_when_it_was_asked(tiny_index, tiny_pages) -> None:
    import math

    from raqa.reading.attribution import with_attributions

    page = next(p for p in tiny_pages if "Mona Lisa" in p.title)
    reply = f"ANSWER: Leonardo da Vinci\nPAGE: {page.id}\nSENTENCE: 1"
    backend = ScriptedBackend(
        lambda messages: reply, scorer=lambda m, a: math.log(0.9 if "Leonardo" in m[-1]["content"] else 0.1)
    )
    settings = RunSettings(window=2, k=4)
    question = "Who painted the Mona Lisa?"
    events = [
        to_json(e) for e in with_attributions(run(question, tiny_index, backend, settings), question, backend, settings)
    ]
    report = markdown_report(events)
    assert "Why this answer (window 1): Removing sentence 1 of page p3" in report
