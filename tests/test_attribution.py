"""Attribution by leaving one sentence out: the teacher-forced scores against a plain forward pass, the prompts it
builds (one sentence gone, numbers and cut kept), the finding for answers that come from a sentence, a page, memory
or nowhere, the event's JSON round trip, and `ask --why` in the stream."""

from __future__ import annotations

import math

import pytest
import torch
from scripted import ScriptedBackend
from test_speed import tiny_llama

from raqa.config import RunSettings
from raqa.models.base import ModelError
from raqa.models.llama_runner import LlamaRunner, Request
from raqa.models.scoring import lean_logprobs, plain_logprobs
from raqa.reading.attribution import MATTERS, attribute, can_attribute, with_attributions
from raqa.reading.engine import run
from raqa.reading.events import Attribution, Notice, WindowVerdict, from_json, to_json
from raqa.reading.prompts import build_messages, page_block, parse_reply, shown_sentences
from raqa.retrieval.index import Hit

SETTINGS = RunSettings(window=1, k=3)


def reference_logprob(model, prompt: list[int], target: list[int]) -> float:
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + target])).logits[0]
    rows = torch.log_softmax(logits.float(), dim=-1)
    return float(sum(rows[len(prompt) - 1 + j, t] for j, t in enumerate(target)))


@pytest.mark.parametrize("target", [[7], [7, 3, 9]])
def test_both_scorers_give_the_log_probability_a_whole_forward_pass_gives(target) -> None:
    model = tiny_llama()
    g = torch.Generator().manual_seed(2)
    full = torch.randint(0, 50, (30,), generator=g).tolist()
    # prompts that leave the first one at different points, one that shares nothing, one equal to it: 7 > CHUNK
    prompts = [full, full[:10] + full[12:], full[:20] + full[21:], [5, *full[1:]], full[:25], [1, 2, 3], full[:]]
    expected = [reference_logprob(model, p, target) for p in prompts]
    assert lean_logprobs(LlamaRunner(model), prompts, target) == pytest.approx(expected, abs=1e-4)
    assert plain_logprobs(model, prompts, target) == pytest.approx(expected, abs=1e-4)
    # a cached prefix every prompt shares is used, one that some prompt does not share is not
    runner = LlamaRunner(model)
    shared = [p for p in prompts if p[:10] == full[:10] and len(p) > 10]
    start = runner.new_sequence()
    runner.forward([Request(start, full[:10])])
    assert lean_logprobs(runner, shared, target, start) == pytest.approx(
        [reference_logprob(model, p, target) for p in shared], abs=1e-4
    )
    assert lean_logprobs(runner, prompts, target, start) == pytest.approx(expected, abs=1e-4)


def words(text: str) -> int:
    return len(text.split())


def test_leaving_a_sentence_out_keeps_the_other_numbers_and_the_same_cut(tiny_pages) -> None:
    hit = Hit(1, 3.0, tiny_pages[2])  # Mona Lisa: three sentences
    whole, cut = page_block(hit, 30, words)
    assert cut and whole.count("\n") == 2  # the budget shows two sentences
    without, _ = page_block(hit, 30, words, leave_out=1)
    assert "[1]" not in without and "[2] It hangs in the Louvre" in without and "[3]" not in without
    assert shown_sentences(hit, 30, words) == [
        "The Mona Lisa is a portrait painted by Leonardo da Vinci.",
        "It hangs in the Louvre museum in Paris.",
    ]
    messages = build_messages("Where is it?", [hit], 30, words, (), leave_out=("other", 1))
    assert "[1] The Mona Lisa" in messages[-1]["content"]  # another page's sentence: nothing left out here
    assert build_messages("Where is it?", [], 25, words, ())[-1]["content"] == "Question: Where is it?"


def answered(tiny_pages, reply: str, pages=(2,)) -> WindowVerdict:
    hits = tuple(Hit(i + 1, 5.0 - i, tiny_pages[p]) for i, p in enumerate(pages))
    return WindowVerdict(1, hits, "answered", parse_reply(reply), None, 0.9, 100, 10, 1.0)


def scorer_from(rule):
    """A scripted model whose log P(answer) is a rule of the last message (the window as the model reads it)."""
    return ScriptedBackend([], scorer=lambda messages, answer: math.log(rule(messages[-1]["content"])))


def test_an_answer_that_needs_one_sentence_is_traced_to_it(tiny_pages) -> None:
    backend = scorer_from(lambda text: 0.8 if "Louvre" in text else 0.01)
    verdict = answered(tiny_pages, "ANSWER: the Louvre\nPAGE: p3\nSENTENCE: 2")
    a = attribute("Where does the Mona Lisa hang?", verdict, backend, SETTINGS)
    assert a.finding == "sentence" and a.cited_page == "p3" and a.cited_sentence == 2
    assert [(e.page_id, e.sentence) for e in a.sentences] == [("p3", 1), ("p3", 2), ("p3", 3)]
    assert math.exp(a.logprob) == pytest.approx(0.8)
    assert [round(math.exp(e.logprob), 2) for e in a.sentences] == [0.8, 0.01, 0.8]
    assert "Removing sentence 2 of page p3" in a.summary and "the sentence the model cited" in a.summary


def test_citing_one_sentence_and_answering_from_another_is_said(tiny_pages) -> None:
    backend = scorer_from(lambda text: 0.8 if "Louvre" in text else 0.01)
    a = attribute("Where?", answered(tiny_pages, "ANSWER: the Louvre\nPAGE: p3\nSENTENCE: 1"), backend, SETTINGS)
    assert a.finding == "sentence" and "not the sentence the model cited" in a.summary


def test_an_answer_as_likely_without_any_page_comes_from_memory(tiny_pages) -> None:
    backend = scorer_from(lambda text: 0.6 if "Page" in text else 0.5)
    a = attribute("Who painted it?", answered(tiny_pages, "ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1"), backend, SETTINGS)
    assert a.finding == "memory" and "from memory" in a.summary
    assert a.logprob - a.without_pages < MATTERS


def test_an_answer_spread_over_a_page_rests_on_the_page(tiny_pages) -> None:
    # any two of the page's sentences are enough: no single one matters, the page does
    backend = scorer_from(lambda text: 0.8 if sum(s in text for s in ("Leonardo", "Louvre", "stolen")) >= 2 else 0.01)
    verdict = answered(tiny_pages, "ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1", pages=(2, 5))
    a = attribute("Who?", verdict, backend, SETTINGS.replace(window=2))
    assert a.finding == "page" and math.exp(a.without_page) == pytest.approx(0.01)
    assert {e.page_id for e in a.sentences} == {"p3"}  # two pages: the cited one sentence by sentence, the other whole


def test_when_nothing_matters_the_finding_says_so(tiny_pages) -> None:
    backend = scorer_from(lambda text: 0.3 if "Page" in text else 0.01)
    verdict = answered(tiny_pages, "ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1", pages=(2, 5))
    a = attribute("Who?", verdict, backend, SETTINGS.replace(window=2))
    assert a.finding == "spread" and "no single piece" in a.summary


def test_windows_without_a_model_answer_cannot_be_attributed(tiny_pages) -> None:
    declined = WindowVerdict(1, (), "not_found", parse_reply("NOT FOUND"), None, 0.1, 100, 3, 1.0)
    assert "no answer" in can_attribute(declined)
    judged = answered(tiny_pages, "ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1")
    judged = WindowVerdict(1, judged.hits, "answered", judged.reply, None, 0.9, 0, 0, 0.1)
    assert "without asking the model" in can_attribute(judged)
    with pytest.raises(ModelError, match="attribution needs a model on this machine"):
        attribute(
            "Who?", answered(tiny_pages, "ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1"), ScriptedBackend([]), SETTINGS
        )


def test_the_attribution_event_comes_back_from_its_json(tiny_pages) -> None:
    backend = scorer_from(lambda text: 0.8 if "Louvre" in text else 0.01)
    a = attribute("Where?", answered(tiny_pages, "ANSWER: the Louvre\nPAGE: p3\nSENTENCE: 2"), backend, SETTINGS)
    data = to_json(a)
    assert data["type"] == "attribution" and data["sentences"][1] == {
        "page_id": "p3",
        "sentence": 2,
        "logprob": pytest.approx(math.log(0.01)),
    }
    assert from_json(data, lambda page_id: None) == a


def test_why_follows_each_answered_window_with_its_attribution(tiny_index) -> None:
    replies = iter(["ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"])  # the Mona Lisa page comes first
    backend = ScriptedBackend(
        lambda messages: next(replies),
        scorer=lambda messages, answer: math.log(0.9 if "Leonardo" in messages[-1]["content"] else 0.05),
    )
    question = "mona lisa painted chess"
    events = list(with_attributions(run(question, tiny_index, backend, SETTINGS), question, backend, SETTINGS))
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("Attribution") == 1
    after = kinds.index("Attribution")
    assert kinds[after - 1] == "WindowVerdict" and events[after - 1].reply.kind == "answer"
    assert events[after].finding == "sentence" and events[after].window == events[after - 1].window
    # a model that cannot score: the run goes on, and a notice says why there is no attribution
    replies = iter(["ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"])
    plain = ScriptedBackend(lambda messages: next(replies))
    events = list(with_attributions(run(question, tiny_index, plain, SETTINGS), question, plain, SETTINGS))
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "Why this answer?" in notices[0].message
    assert not any(isinstance(e, Attribution) for e in events) and type(events[-1]).__name__ == "Final"


def test_a_window_of_many_uncited_sentences_is_refused_with_a_reason(tiny_pages, monkeypatch) -> None:
    backend = scorer_from(lambda text: 0.5)
    verdict = answered(tiny_pages, "ANSWER: Leonardo\nPAGE: elsewhere\nSENTENCE: 1", pages=tuple(range(8)))
    monkeypatch.setattr("raqa.reading.attribution.MAX_SENTENCES", 20)  # eight pages of three sentences: 24
    with pytest.raises(ModelError, match="shows 24 sentences and cites no page of it"):
        attribute("Who?", verdict, backend, SETTINGS.replace(window=8))
