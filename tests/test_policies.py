"""The Adapt-LLM paper's policies as the one When-to-retrieve stream, on the tiny corpus and a scripted model."""

from __future__ import annotations

import json

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris

from raqa.reading.events import Final, Retrieved, RunFailed, to_json
from raqa.when_to_retrieve.pipeline import ClosedBookAnswered, PipelineEnded, RetrievalDecided
from raqa.when_to_retrieve.policies import Popularity, decide
from raqa.when_to_retrieve.prompts import (
    RET,
    asks_retrieval,
    closed_book_messages,
    context_messages,
    context_text,
    parametric_messages,
)

READ = ["ClosedBookAnswered", "RetrievalDecided", "Retrieved", "Final", "PipelineEnded"]
MEMORY = ["ClosedBookAnswered", "RetrievalDecided", "PipelineEnded"]


def _search(index):
    return lambda q: index.search(q, 1)


def _kinds(events):
    return [type(e).__name__ for e in events]


def test_prompts_are_the_papers():
    assert parametric_messages("who?")[0]["content"] == (
        "Answer the question Q. If you need help answer <RET> to get the context. Q: who?"
    )
    assert context_messages("who?", "Bee: text")[0]["content"] == (
        "Answer the question Q given the context C. Q: who?, C: Bee: text"
    )
    assert closed_book_messages("who?")[0]["content"] == "Answer the question Q. Q: who?"


@pytest.mark.parametrize(
    ("reply", "asks"),
    [(RET, True), (" <RET>", True), ("I need <RET> please", True), ("Paris", False), ("<RE T>", False)],
)
def test_asks_retrieval_finds_ret_anywhere(reply, asks):
    assert asks_retrieval(reply) is asks


def test_adapt_answers_from_memory_when_it_knows(tiny_index):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("What is the capital of France?", "adapt", model, _search(tiny_index)))
    assert _kinds(events) == MEMORY
    closed, decision, ended = events
    assert closed.answer == "Paris" and dict(closed.signals)["not_ret"] == pytest.approx(0.9)
    assert decision == RetrievalDecided("adapt", False, "not_ret", pytest.approx(0.9), None, "answered from memory")
    assert (ended.answer, ended.source) == ("Paris", "memory")
    assert [c[1] for c in model.calls] == ["adapt"]


def test_adapt_retrieves_on_ret_and_answers_with_the_top_page(tiny_index):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("When was Everest first climbed by Hillary?", "adapt", model, _search(tiny_index)))
    assert _kinds(events) == READ
    closed, decision, retrieved, final, ended = events
    assert closed.answer == RET and decision.retrieve is True and 1 - decision.confidence == pytest.approx(0.9)
    assert retrieved.hits[0].page.title == "Mount Everest" and final.passage.startswith("Mount Everest: ")
    assert (ended.answer, ended.source) == ("Mount Everest", "pages") and final.page_id == "p2"
    assert "given the context C" in model.calls[-1][0] and model.calls[-1][1] == "adapt"


def test_never_and_always_use_their_own_adapters(tiny_index):
    model = FakeAdaptModel(knows_paris)
    never = list(decide("When was Everest first climbed?", "never", model, _search(tiny_index)))
    always = list(decide("When was Everest first climbed?", "always", model, _search(tiny_index)))
    assert _kinds(never) == MEMORY and never[-1].source == "memory"
    assert _kinds(always) == READ and always[-1].source == "pages" and always[1].retrieve is True
    # the closed-book answer comes first in every run, NR-LLM's; AR-LLM answers with the page
    assert [c[1] for c in model.calls] == ["never", "never", "always"]


def test_a_shared_memory_answer_is_asked_once(tiny_index):
    model = FakeAdaptModel(knows_paris)
    memory = lambda q: ("I think it is Mont Blanc", {})  # noqa: E731
    list(decide("When was Everest first climbed?", "always", model, _search(tiny_index), memory=memory))
    assert [c[1] for c in model.calls] == ["always"]


def test_popularity_below_the_threshold_retrieves_and_above_answers_from_memory(tiny_index):
    model = FakeAdaptModel(knows_paris)
    low = list(decide("Everest?", "popularity", model, _search(tiny_index), Popularity(10, 100)))
    high = list(decide("Everest?", "popularity", model, _search(tiny_index), Popularity(100, 100)))
    assert low[1].retrieve is True and "below" in low[1].reason and _kinds(low) == READ
    assert high[1].retrieve is False and "at or above" in high[1].reason and _kinds(high) == MEMORY
    assert (low[1].signal, low[1].confidence, low[1].threshold) == ("popularity", 10, 100)


@pytest.mark.parametrize(
    ("popularity", "says"),
    [
        (None, "no popularity is known"),
        (Popularity(None, 5), "no popularity is known"),
        (Popularity(3, None), "no threshold"),
    ],
)
def test_popularity_without_data_cannot_decide_and_reads_nothing(tiny_index, popularity, says):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("Everest?", "popularity", model, _search(tiny_index), popularity))
    assert _kinds(events) == MEMORY and events[1].retrieve is None and says in events[1].reason
    assert events[-1] == PipelineEnded(None, "none", events[1].reason, events[-1].seconds)
    assert [c[1] for c in model.calls] == ["never"]  # the closed-book answer only


def test_no_page_found_is_an_event_not_an_exception(tiny_index):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("zzzz qqqq", "always", model, _search(tiny_index)))
    assert _kinds(events) == ["ClosedBookAnswered", "RetrievalDecided", "RunFailed", "PipelineEnded"]
    assert "BM25 found no page" in events[2].message and events[-1].answer is None
    assert [c[1] for c in model.calls] == ["never"]


def test_an_unknown_policy_is_refused_with_the_choices(tiny_index):
    with pytest.raises(ValueError, match="Choose from: never, always, adapt, popularity"):
        list(decide("x", "sometimes", FakeAdaptModel(knows_paris), _search(tiny_index)))


def test_context_text_is_cut_at_a_word_to_the_token_budget(tiny_index):
    hit = tiny_index.search("honey bee colonies", 1)[0]
    words = lambda t: len(t.split())  # noqa: E731
    full = context_text(hit, words, 1000)
    cut = context_text(hit, words, 7)
    assert full == f"Honey bee: {hit.page.text}"
    assert words(cut) == 7 and full.startswith(cut)


def test_every_policy_yields_the_pipelines_events(tiny_index):
    model = FakeAdaptModel(knows_paris)
    for policy in ("never", "always", "adapt", "popularity"):
        for event in decide("Everest?", policy, model, _search(tiny_index), Popularity(1, 2)):
            assert isinstance(event, (ClosedBookAnswered, RetrievalDecided, Retrieved, Final, RunFailed, PipelineEnded))


def test_events_are_json_ready_in_the_same_convention_as_a_runs(tiny_index):
    model = FakeAdaptModel(knows_paris)
    lines = [json.loads(json.dumps(to_json(e))) for e in decide("Everest?", "adapt", model, _search(tiny_index))]
    assert [line["type"] for line in lines] == [
        "closed_book_answered",
        "retrieval_decided",
        "retrieved",
        "final",
        "pipeline_ended",
    ]
    # a page is reduced exactly as in a run's events (reading.events.hit_json)
    assert lines[2]["hits"] == [
        {"rank": 1, "score": lines[2]["hits"][0]["score"], "page_id": "p2", "title": "Mount Everest"}
    ]
    assert lines[1]["confidence"] == pytest.approx(0.1) and lines[-1]["answer"] == "Mount Everest"
