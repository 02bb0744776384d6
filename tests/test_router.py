"""The When-to-retrieve policies as event streams, on the tiny corpus and a scripted model."""

from __future__ import annotations

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris

from raqa.when_to_retrieve.policies import (
    RET,
    Answer,
    Decision,
    PageRead,
    PolicyFailed,
    Popularity,
    asks_retrieval,
    closed_book_messages,
    context_messages,
    context_text,
    decide,
    final_answer,
    parametric_messages,
)


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
    assert _kinds(events) == ["Decision", "Answer"]
    assert events[0].retrieve is False and events[0].ret_probability == pytest.approx(0.1)
    assert events[1] == Answer("adapt", "Paris", False, "adapt")
    assert [c[1] for c in model.calls] == ["adapt"]


def test_adapt_retrieves_on_ret_and_answers_with_the_top_page(tiny_index):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("When was Everest first climbed by Hillary?", "adapt", model, _search(tiny_index)))
    assert _kinds(events) == ["Decision", "PageRead", "Answer"]
    decision, page, answer = events
    assert decision.retrieve is True and decision.first_reply == RET and decision.ret_probability == pytest.approx(0.9)
    assert page.hit.page.title == "Mount Everest" and page.context.startswith("Mount Everest: ")
    assert answer.with_context and answer.adapter == "adapt" and answer.text == "Mount Everest"
    assert "given the context C" in model.calls[-1][0]


def test_never_and_always_use_their_own_adapters(tiny_index):
    model = FakeAdaptModel(knows_paris)
    never = list(decide("When was Everest first climbed?", "never", model, _search(tiny_index)))
    always = list(decide("When was Everest first climbed?", "always", model, _search(tiny_index)))
    assert _kinds(never) == ["Decision", "Answer"] and never[1].adapter == "never" and not never[1].with_context
    assert _kinds(always) == ["Decision", "PageRead", "Answer"] and always[2].adapter == "always"
    assert [c[1] for c in model.calls] == ["never", "always"]


def test_popularity_below_the_threshold_retrieves_and_above_answers_from_memory(tiny_index):
    model = FakeAdaptModel(knows_paris)
    low = list(decide("Everest?", "popularity", model, _search(tiny_index), Popularity(10, 100)))
    high = list(decide("Everest?", "popularity", model, _search(tiny_index), Popularity(100, 100)))
    assert low[0].retrieve is True and "below" in low[0].reason and _kinds(low) == ["Decision", "PageRead", "Answer"]
    assert high[0].retrieve is False and "at or above" in high[0].reason and _kinds(high) == ["Decision", "Answer"]
    assert (low[0].popularity, low[0].threshold) == (10, 100)


@pytest.mark.parametrize(
    ("popularity", "says"),
    [
        (None, "no popularity is known"),
        (Popularity(None, 5), "no popularity is known"),
        (Popularity(3, None), "no threshold"),
    ],
)
def test_popularity_without_data_cannot_decide_and_calls_no_model(tiny_index, popularity, says):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("Everest?", "popularity", model, _search(tiny_index), popularity))
    assert _kinds(events) == ["Decision"] and events[0].retrieve is None and says in events[0].reason
    assert model.calls == [] and final_answer(events) is None


def test_no_page_found_is_an_event_not_an_exception(tiny_index):
    model = FakeAdaptModel(knows_paris)
    events = list(decide("zzzz qqqq", "always", model, _search(tiny_index)))
    assert _kinds(events) == ["Decision", "PageRead", "PolicyFailed"]
    assert events[1].hit is None and isinstance(events[2], PolicyFailed) and model.calls == []


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


def test_every_event_names_its_policy(tiny_index):
    model = FakeAdaptModel(knows_paris)
    for policy in ("never", "always", "adapt"):
        for event in decide("Everest?", policy, model, _search(tiny_index)):
            assert isinstance(event, (Decision, PageRead, Answer)) and event.policy == policy


def test_events_are_json_ready_in_the_same_convention_as_a_runs(tiny_index):
    import json

    from raqa.reading.events import to_json

    model = FakeAdaptModel(knows_paris)
    lines = [json.loads(json.dumps(to_json(e))) for e in decide("Everest?", "adapt", model, _search(tiny_index))]
    assert [line["type"] for line in lines] == ["decision", "page_read", "answer"]
    # a page is reduced exactly as in a run's events (reading.events.hit_json)
    assert lines[1]["hit"] == {"rank": 1, "score": lines[1]["hit"]["score"], "page_id": "p2", "title": "Mount Everest"}
    assert lines[0]["ret_probability"] == pytest.approx(0.9) and lines[2]["text"] == "Mount Everest"
