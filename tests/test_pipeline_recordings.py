"""Recorded pipeline runs: made from the pipeline's own events, written and read back, matched to the tab's choices,
and replayed through the live view's renderer without a model call."""

from __future__ import annotations

import json

import pytest
from test_pipeline import service  # noqa: F401 - the scripted service, shared

from raqa.__main__ import main
from raqa.reading.events import from_json, to_json
from raqa.retrieval.corpus import page_lookup
from raqa.web.pipeline_recordings import (
    PolicyChoice,
    find_pipeline,
    read_pipeline_recording,
    record_pipeline,
    write_pipeline_recording,
)
from raqa.web.recordings import read_recording
from raqa.web.render_when_to_retrieve import PipelineView
from raqa.web.when_to_retrieve_tab import NO_RECORDING, replay_pipeline
from raqa.when_to_retrieve.pipeline import PIPELINE_EVENT_CLASSES
from raqa.when_to_retrieve.planning import pipeline

EVEREST = "Who first climbed Mount Everest with Tenzing Norgay?"


def test_a_recording_reads_back_as_the_events_the_pipeline_yielded(service, tmp_path):  # noqa: F811
    live = [to_json(e) for e in pipeline(service, EVEREST, "adapt", 0.5)]
    recording = record_pipeline(service, EVEREST, PolicyChoice("adapt", 0.5), "python -m raqa record-pipeline (test)")
    recorded = [e for _, e in recording.timed_events]
    assert [e["type"] for e in recorded] == [e["type"] for e in live]  # the same steps (their timings differ)
    assert recorded[-1]["answer"] == live[-1]["answer"] == "Edmund Hillary"
    header = recording.header
    assert header["kind"] == "pipeline" and header["choice"] == {"policy": "adapt", "threshold": 0.5, "reader": "base"}
    assert header["model"] == "fake adapt model" and header["corpus"] == "tiny (8 pages)" and header["code_version"]
    path = write_pipeline_recording(recording, tmp_path)
    assert path.name == "who-first-climbed-mount-everest-with-tenzing-norgay--adapt-0.500-base.jsonl"
    again = read_pipeline_recording(path)
    page_of = page_lookup(service.pages)
    events = [from_json(e, page_of, PIPELINE_EVENT_CLASSES) for _, e in again.timed_events]
    assert [to_json(e) for e in events] == [e for _, e in recording.timed_events]
    assert events[-1].answer == "Edmund Hillary" and events[-1].source == "pages"
    with pytest.raises(ValueError, match="not a raqa recording"):
        read_recording(path)  # an Ask-tab reader does not take a pipeline recording for one of its own


@pytest.mark.parametrize(
    ("choice", "found"),
    [
        (PolicyChoice("adapt", 0.5, "base"), True),
        (PolicyChoice("adapt", 0.504, None), True),  # the slider's rounding, and the default reader
        (PolicyChoice("adapt", 0.52, None), False),
        (PolicyChoice("p_true", 0.5, None), False),
        (PolicyChoice("adapt", 0.5, "base+judge"), False),
    ],
)
def test_a_recording_is_found_only_for_its_question_and_choices(service, choice, found):  # noqa: F811
    recording = record_pipeline(service, EVEREST, PolicyChoice("adapt", 0.5), "test")
    assert (find_pipeline([recording], f"  {EVEREST.upper()} ", choice) is recording) is found
    assert find_pipeline([recording], "Another question?", PolicyChoice("adapt", 0.5)) is None


def test_the_replay_streams_the_recorded_steps_marked_as_recorded(service):  # noqa: F811
    recording = record_pipeline(service, EVEREST, PolicyChoice("adapt", 0.5), "python -m raqa record-pipeline (test)")
    pauses: list[float] = []
    frames = list(
        replay_pipeline(
            service, [recording], page_lookup(service.pages), EVEREST, "adapt", 0.5, None, pause=pauses.append
        )
    )
    assert len(frames) == len(recording.timed_events) and all(p <= 0.25 for p in pauses)
    last = frames[-1]
    assert 'data-recorded="true"' in last and "record-pipeline (test)" in last and 'data-done="true"' in last
    assert "Edmund Hillary" in last and 'data-retrieve="true"' in last
    live = PipelineView(EVEREST)
    for event in pipeline(service, EVEREST, "adapt", 0.5):
        live.add(event)
    # the same renderer draws the same steps (timings aside)
    assert last.count("raqa-pipe-step") == live.html().count("raqa-pipe-step")


@pytest.mark.parametrize(
    ("question", "policy", "threshold"),
    [(EVEREST, "adapt", 0.9), ("Unrecorded?", "adapt", 0.5), (EVEREST, "adapt", "not a number"), (None, "adapt", 0.5)],
)
def test_no_matching_recording_says_so_and_runs_nothing(service, question, policy, threshold):  # noqa: F811
    recording = record_pipeline(service, EVEREST, PolicyChoice("adapt", 0.5), "test")
    calls = len(service.adapt.get().calls)
    frames = list(replay_pipeline(service, [recording], page_lookup(service.pages), question, policy, threshold))
    assert frames == [NO_RECORDING] and len(service.adapt.get().calls) == calls


def test_record_pipeline_refuses_a_bad_threshold_before_loading_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("raqa.service.Service.load", lambda *a, **k: pytest.fail("nothing should load"))
    assert main(["record-pipeline", "Q?", "--policy", "adapt", "--threshold", "1.5", "--out", str(tmp_path)]) == 2
    assert "from 0 to 1" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_record_pipeline_writes_one_recording_per_question(service, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr("raqa.service.Service.load", lambda *a, **k: service)
    out = tmp_path / "pipeline"
    assert (
        main(["record-pipeline", EVEREST, "What is the capital of France?", "--threshold", "0.5", "--out", str(out)])
        == 0
    )
    files = sorted(out.glob("*.jsonl"))
    assert len(files) == 2
    headers = [json.loads(f.read_text().splitlines()[0]) for f in files]
    assert {h["choice"]["threshold"] for h in headers} == {0.5}
    assert all(h["command"].startswith('python -m raqa record-pipeline "') for h in headers)
    assert "'Paris' from memory" in capsys.readouterr().err


def test_every_example_of_the_tab_replays_with_the_tabs_own_choices():
    """The committed recordings match what a click sends: each example, policy adapt, the tab's tuned threshold."""
    from raqa.config import ASSETS_DIR
    from raqa.web.examples import load_examples
    from raqa.web.pipeline_recordings import PIPELINE_RECORDINGS_DIR
    from raqa.web.recordings import load_recordings
    from raqa.when_to_retrieve.tuned import MEMORY_QUESTIONS, tuned_thresholds

    record = json.loads((ASSETS_DIR / "results" / "pipeline-nq+triviaqa.json").read_text(encoding="utf-8"))
    choice = PolicyChoice("adapt", tuned_thresholds(record)["adapt"])
    recordings, problems = load_recordings(PIPELINE_RECORDINGS_DIR, read_pipeline_recording)
    assert problems == []
    for question in [*MEMORY_QUESTIONS[:1], *load_examples()]:
        found = find_pipeline(recordings, question, choice)
        assert found is not None, question
        assert found.timed_events[-1][1]["type"] == "pipeline_ended" and found.header["command"].startswith(
            "python -m raqa record-pipeline"
        )


def test_a_recorded_step_missing_a_field_is_refused_in_one_line():
    with pytest.raises(ValueError, match="A retrieval_decided event with missing or unexpected fields: 'reason'"):
        from_json(
            {
                "type": "retrieval_decided",
                "policy": "never",
                "retrieve": True,
                "signal": None,
                "confidence": None,
                "threshold": None,
            },
            lambda page_id: None,
            PIPELINE_EVENT_CLASSES,
        )
