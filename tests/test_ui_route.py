"""ui.route: the generator behind the When-to-retrieve tab, without a browser."""

from __future__ import annotations

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris

from raqa.config import AppConfig
from raqa.models.scripted import ScriptedBackend
from raqa.service import NO_ADAPT_MODEL, Service
from raqa.web.when_to_retrieve_tab import route
from raqa.when_to_retrieve.popularity import PopItem


@pytest.fixture
def service(tmp_path, tiny_pages, tiny_index):
    return Service(
        AppConfig(cache_dir=tmp_path, pop_threshold=100.0),
        tiny_pages,
        tiny_index,
        ScriptedBackend(["unused"]),
        "tiny",
        {},
        adapt=FakeAdaptModel(knows_paris),
    )


@pytest.mark.parametrize(
    ("question", "message"), [("", "empty"), ("   ", "empty"), ("x" * 100_000, "100,000 characters"), (None, "text")]
)
def test_bad_questions_get_one_message_and_no_model_call(service, question, message):
    outputs = list(route(service, question))
    assert len(outputs) == 1 and message in outputs[0] and "raqa-failed" in outputs[0]
    assert service.adapt.calls == []


def test_the_four_decisions_stream_in_side_by_side(service):
    outputs = list(route(service, "Who first climbed Mount Everest with Tenzing Norgay?"))
    assert len(outputs) > 4  # one redraw per event, not one at the end
    final = outputs[-1]
    assert final.count("raqa-route-card") == 4 and "Deciding…" not in final and 'data-done="true"' in final
    assert all('data-done="false"' in o for o in outputs[:-1])
    adapt = final.split('raqa-route-adapt">', 1)[1].split("raqa-route-card", 1)[0]
    assert "Retrieved" in adapt and "P(&lt;RET&gt;) = 0.900" in adapt and "Mount Everest" in adapt
    assert "no popularity is known" in final  # no PopQA data for this question
    assert [c[1] for c in service.adapt.calls] == ["never", "always", "adapt", "adapt"]


def test_a_known_popqa_question_uses_its_popularity(service):
    service.popularity = {"what is capital of france": PopItem("1", "What is the capital of France?", ("Paris",), 5000)}
    final = list(route(service, "What is the capital of France?"))[-1]
    popularity = final.split('raqa-route-popularity">', 1)[1]
    assert "popularity 5000 is at or above the threshold 100" in popularity and "From memory" in popularity


def test_without_the_adapters_the_tab_says_so(service):
    service.adapt = None
    assert list(route(service, "Everest?")) == [f'<div class="raqa-answer raqa-failed">{NO_ADAPT_MODEL}</div>']


def test_an_unexpected_error_ends_with_a_message(service):
    def broken(prompt, adapter, ban_ret):
        raise RuntimeError("boom")

    service.adapt = FakeAdaptModel(broken)
    outputs = list(route(service, "Everest?"))
    assert "internal error" in outputs[-1] and "boom" not in outputs[-1]
