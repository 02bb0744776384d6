"""The When-to-retrieve tab's generator (run_pipeline) and the service's When-to-retrieve runs (planning.py), without
a browser."""

from __future__ import annotations

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from scripted import ScriptedBackend

from raqa.config import AppConfig
from raqa.loading import Lazy
from raqa.models.base import ModelError
from raqa.service import Service
from raqa.web.when_to_retrieve_tab import run_pipeline
from raqa.when_to_retrieve.planning import NO_ADAPT_MODEL, route
from raqa.when_to_retrieve.popularity import PopItem

EVEREST = "Who first climbed Mount Everest with Tenzing Norgay?"


@pytest.fixture
def service(tmp_path, tiny_pages, tiny_index):
    return Service(
        AppConfig(cache_dir=tmp_path, pop_threshold=100.0),
        tiny_pages,
        tiny_index,
        ScriptedBackend(["NOT FOUND"] * 20),
        "tiny",
        {},
        adapt=Lazy(value=FakeAdaptModel(knows_paris)),
    )


@pytest.mark.parametrize(
    ("question", "message"), [("", "empty"), ("   ", "empty"), ("x" * 100_000, "100,000 characters"), (None, "text")]
)
def test_bad_questions_get_one_message_and_no_model_call(service, question, message):
    outputs = list(run_pipeline(service, question, "adapt", 0.5))
    assert len(outputs) == 1 and message in outputs[0] and "raqa-failed" in outputs[0]
    assert service.adapt.get().calls == []


def test_the_steps_stream_in_one_redraw_per_event(service):
    outputs = list(run_pipeline(service, EVEREST, "adapt", 0.5))
    assert len(outputs) > 4 and 'data-done="true"' in outputs[-1]
    assert all('data-done="false"' in o for o in outputs[:-1])
    final = outputs[-1]
    assert "1. Answer closed-book" in final and "P(&lt;RET&gt;) 0.900 is at or above 0.500" in final
    assert "3. Read the windows" in final and "I don&#x27;t know" in final  # no window of the scripted reader answers


def test_without_the_adapters_the_tab_says_so(service):
    service.adapt = Lazy()
    assert list(run_pipeline(service, "Everest?", "adapt", 0.5)) == [
        f'<div class="raqa-answer raqa-failed">{NO_ADAPT_MODEL}</div>'
    ]
    with pytest.raises(ModelError, match="train adapt"):
        route(service, "Everest?", "never")


def test_an_unexpected_error_ends_with_a_message(service):
    def broken(prompt, adapter, ban_ret):
        raise RuntimeError("boom")

    service.adapt = Lazy(value=FakeAdaptModel(broken))
    outputs = list(run_pipeline(service, "Everest?", "never", None))
    assert "internal error" in outputs[-1] and "boom" not in outputs[-1]


def test_a_known_popqa_question_uses_its_popularity(service):
    service.popularity = {"what is capital of france": PopItem("1", "What is the capital of France?", ("Paris",), 5000)}
    decision = list(route(service, "What is the capital of France?", "popularity"))[1]
    assert decision.retrieve is False and "popularity 5000 is at or above the threshold 100" in decision.reason
    unknown = list(route(service, EVEREST, "popularity"))[1]
    assert unknown.retrieve is None and "no popularity is known" in unknown.reason
