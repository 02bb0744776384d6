"""Both papers in one run: the closed-book answer, the decision and the windows, as one event stream, from
planning.pipeline (what the page and the CLI call) with a scripted reader and a scripted Adapt-LLM model."""

from __future__ import annotations

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm, SettingsError
from raqa.loading import Lazy
from raqa.reading.events import Final, RunStarted, WindowVerdict, to_json
from raqa.service import Service
from raqa.when_to_retrieve.pipeline import (
    ClosedBookAnswered,
    PipelineEnded,
    RetrievalDecided,
    decide_retrieval,
)
from raqa.when_to_retrieve.planning import pipeline
from raqa.when_to_retrieve.uncertainty import token_signals


def _reader(messages) -> str:
    """Answers only from the Everest page."""
    if "Mount Everest" in messages[-1]["content"] and "Tenzing" in messages[-1]["content"]:
        return "ANSWER: Edmund Hillary\nPAGE: p2\nSENTENCE: 3"
    return "NOT FOUND"


@pytest.fixture
def service(tmp_path, tiny_pages, tiny_index):
    return Service(
        AppConfig(cache_dir=tmp_path),
        tiny_pages,
        tiny_index,
        ScriptedBackend(_reader),
        "tiny",
        {},
        adapt=Lazy(value=FakeAdaptModel(knows_paris)),
    )


def _types(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_known_answer_stays_closed_book_and_reads_no_page(service):
    events = list(pipeline(service, "What is the capital of France?", "adapt", 0.5))
    assert _types(events) == ["ClosedBookAnswered", "RetrievalDecided", "PipelineEnded"]
    closed, decision, ended = events
    assert closed.answer == "Paris" and dict(closed.signals)["not_ret"] == pytest.approx(0.9)
    assert decision.retrieve is False and "P(<RET>) 0.100 is below 0.500" in decision.reason
    assert (ended.answer, ended.source) == ("Paris", "memory")
    assert service.backend.requests == []  # the reader never ran


def test_an_unknown_answer_retrieves_and_a_window_answers(service):
    events = list(pipeline(service, "Who first climbed Mount Everest with Tenzing Norgay?", "adapt", 0.5))
    kinds = _types(events)
    assert kinds[:3] == ["ClosedBookAnswered", "RetrievalDecided", "RunStarted"] and kinds[-1] == "PipelineEnded"
    assert events[1].retrieve is True
    final = next(e for e in events if isinstance(e, Final))
    assert final.answer == "Edmund Hillary" and events[-1].answer == "Edmund Hillary"
    assert events[-1].source == "pages" and isinstance(events[2], RunStarted) and events[2].settings.grounded_only
    assert all(to_json(e)["type"] for e in events)  # every step serialises like a run's events


def test_no_answering_window_ends_in_i_dont_know_not_the_memory_answer(service):
    events = list(pipeline(service, "Which insect makes honey in colonies?", "always", None))
    assert any(isinstance(e, WindowVerdict) for e in events)
    ended = events[-1]
    assert isinstance(ended, PipelineEnded) and ended.answer is None and ended.source == "none"
    assert events[0].answer == "I think it is Mont Blanc"  # the memory answer existed, and was not used


@pytest.mark.parametrize(
    ("policy", "threshold", "retrieves"),
    [
        ("p_true", 0.5, False),
        ("p_true", 0.9, True),
        ("token_probability", 0.5, False),
        ("never", None, False),
        ("mean_entropy", -1.0, False),
        ("mean_entropy", 0.0, True),
    ],
)
def test_uncertainty_policies_threshold_the_closed_book_answer(service, policy, threshold, retrieves):
    events = list(pipeline(service, "What is the capital of France?", policy, threshold))
    decision = next(e for e in events if isinstance(e, RetrievalDecided))
    assert decision.retrieve is retrieves and decision.policy == policy


@pytest.mark.parametrize(
    ("policy", "threshold", "message"),
    [
        ("magic", 0.5, "Invalid policy"),
        ("adapt", None, "needs a number"),
        ("p_true", 1.5, "from 0 to 1"),
        ("adapt", float("nan"), "needs a number"),
        ("adapt", True, "needs a number"),
    ],
)
def test_a_bad_policy_or_threshold_is_refused_before_any_model_call(service, policy, threshold, message):
    with pytest.raises(SettingsError, match=message):
        pipeline(service, "What is the capital of France?", policy, threshold)
    assert service.adapt.get().calls == [] and service.backend.requests == []


def test_bad_reading_settings_are_refused_too(service):
    with pytest.raises(SettingsError):
        pipeline(service, "Everest?", "always", None, RunForm(window=0))
    with pytest.raises(SettingsError):
        pipeline(service, "", "always", None)


def test_signals_read_the_same_way_higher_is_surer():
    sure, unsure = token_signals([0.9, 0.9], [0.3, 0.3]), token_signals([0.2, 0.9], [2.5, 0.3])
    assert all(sure[name] > unsure[name] for name in sure)
    assert token_signals([], [])["sequence_probability"] == 0.0
    assert decide_retrieval("mean_entropy", {"mean_entropy": -0.5}, -1.0).retrieve is False


def test_closed_book_answered_carries_every_signal(service):
    closed = next(iter(pipeline(service, "What is the capital of France?", "never", None)))
    assert isinstance(closed, ClosedBookAnswered)
    assert set(dict(closed.signals)) == {
        "sequence_probability",
        "token_probability",
        "mean_entropy",
        "max_entropy",
        "p_true",
        "not_ret",
    }
    assert dict(closed.signals)["p_true"] == pytest.approx(0.8)
