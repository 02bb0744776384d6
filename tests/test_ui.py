"""ui.ask: the generator behind the Run button, without a browser (the browser tests drive the page)."""

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm
from raqa.loading import Lazy
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.web.ask_tab import ask, page_form


@pytest.fixture
def service(tmp_path):
    pages = [Page(str(i), f"Apple note {i}", " ".join(["apple"] * i) + " Pie.") for i in range(1, 7)]
    return Service(
        AppConfig(cache_dir=tmp_path), pages, BM25Index.build(pages), ScriptedBackend(lambda m: "NOT FOUND"), "t", {}
    )


@pytest.mark.parametrize(
    ("question", "strategy", "order", "window", "k", "message"),
    [
        ("", "iterative", "forward", 3, 10, "empty"),
        ("x" * 100_000, "iterative", "forward", 3, 10, "100,000 characters"),
        ("apple", "Sideways", "forward", 3, 10, "Invalid strategy"),
        ("apple", ["iterative"], "forward", 3, 10, "Invalid strategy"),
        ("apple", "iterative", "upward", 3, 10, "Invalid order"),
        ("apple", "iterative", "forward", 0, 10, "window size must be a whole number from 1 to 20"),
        ("apple", "iterative", "forward", 3, 1000, "K must be a whole number from 5 to 100"),
        ("apple", "iterative", "forward", "three", 10, "window size"),
        (None, "iterative", "forward", 3, 10, "must be text"),
    ],
)
def test_bad_input_yields_one_message_and_nothing_else(service, question, strategy, order, window, k, message):
    outputs = list(ask(service, question, RunForm(strategy, order, window, k)))
    assert len(outputs) == 1
    assert message in outputs[0][0] and "raqa-failed" in outputs[0][0]
    assert service.backend.requests == []  # the model was never asked


def test_the_page_form_names_the_strategy_its_radio_labels():
    assert page_form("Both side by side", "backward", 2, 6, False, False) == RunForm("both", "backward", 2, 6)
    assert page_form("Top-K", "forward", 3, 10, True, False, "base") == RunForm(
        "topk", "forward", 3, 10, True, False, "base"
    )
    assert page_form(["Top-K"], "forward", 3, 10, False, False).strategy == ["Top-K"]  # for ask to refuse


def test_both_strategies_render_side_by_side(service):
    outputs = list(ask(service, "apple", RunForm("both", "backward", 2, 6)))
    answers, windows, pages, scores, meter = outputs[-1]
    assert answers.count("Answer not found") == 2
    assert "<h3>Iterative</h3>" in windows and "<h3>Top-K</h3>" in windows
    assert pages.count('class="raqa-page"') == 6
    # 3 iterative windows of 2 pages, then one Top-K prompt
    assert len(service.backend.requests) == 4


def test_streamed_tokens_do_not_redraw_the_charts(service):
    service.backend = ScriptedBackend(lambda m: "ANSWER: Pie is here\nPAGE: 6\nSENTENCE: 2")
    outputs = list(ask(service, "apple pie", RunForm("iterative", "forward", 3, 6)))
    skipped = [o for o in outputs if not hasattr(o[3], "to_dict")]
    drawn = [o for o in outputs if hasattr(o[3], "to_dict")]
    assert skipped and drawn
    assert "Pie is here" in outputs[-1][0]


def test_the_chosen_reader_reads_and_is_named_in_the_answer(service, tmp_path):
    from raqa.reading.readers import BASE_READER, Reader

    tuned_backend = ScriptedBackend(lambda m: "ANSWER: Apple note 6\nPAGE: 6\nSENTENCE: 1")
    tuned = Reader("tuned", "Tuned reader", tmp_path, answer_threshold=0.7, shots=0, page_tokens=100)
    loads = []
    service.readers = {"base": BASE_READER, "tuned": tuned}
    service.backends["tuned"] = Lazy(lambda: loads.append("tuned") or tuned_backend)
    outputs = list(ask(service, "apple", RunForm("iterative", "forward", 3, 10, reader="tuned")))
    answers = outputs[-1][0]
    assert "Iterative · Tuned reader" in answers and "Apple note 6" in answers
    assert len(tuned_backend.requests) == 1 and service.backend.requests == []
    assert loads == ["tuned"]  # the adapter was loaded when first chosen, not before
    # the reader's calibrated settings were used: no worked examples in the prompt
    assert [m["role"] for m in tuned_backend.requests[0]] == ["system", "user"]
    base = list(ask(service, "apple", RunForm("iterative", "forward", 3, 10, reader="base")))
    assert "Iterative · Small model: SmolLM2-135M" in base[-1][0] and service.backend.requests
    list(ask(service, "apple", RunForm("iterative", "forward", 3, 10, reader="tuned")))
    assert loads == ["tuned"]  # and only once


@pytest.mark.parametrize("reader", ["nonexistent", 3, ["base"]])
def test_an_unknown_reader_gets_a_message(service, reader):
    outputs = list(ask(service, "apple", RunForm("iterative", "forward", 3, 10, reader=reader)))
    assert len(outputs) == 1 and "reader" in outputs[0][0] and "raqa-failed" in outputs[0][0]


def test_an_unexpected_error_ends_the_run_with_a_message(service, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(service.backend, "reply", broken)
    outputs = list(ask(service, "apple", RunForm("iterative", "forward", 3, 10)))
    assert "internal error" in outputs[-1][0] and "a bug" not in outputs[-1][0]


def test_configured_endpoints_are_offered_as_readers(tmp_path, tiny_pages):
    import json

    from raqa.models.base import ModelError

    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(
        json.dumps([{"name": "Big model (vLLM)", "base_url": "http://127.0.0.1:9/v1", "model": "m", "retries": 0}])
    )
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps(p._asdict()) + "\n" for p in tiny_pages))
    config = AppConfig(corpus=str(corpus), cache_dir=tmp_path / "cache", endpoints=str(endpoints))
    service = Service.load(config, progress=lambda m: None, backend=ScriptedBackend(["NOT FOUND"] * 9))
    assert list(service.readers) == ["base", "endpoint:Big model (vLLM)"]
    reader, backend = service.reader("endpoint:Big model (vLLM)")
    assert reader.label == "Big model (vLLM)" and backend.name == "Big model (vLLM)"
    # nothing listening on port 9: the run ends in a clear failure, the page keeps working
    outputs = list(
        ask(service, "Who painted the Mona Lisa?", RunForm(window=3, k=5, reader="endpoint:Big model (vLLM)"))
    )
    assert "raqa-failed" in outputs[-1][0] and "The model failed on window 1" in outputs[-1][0]
    endpoints.write_text("[{}]")
    with pytest.raises(ModelError, match="endpoints.json"):
        Service.load(config, progress=lambda m: None, backend=ScriptedBackend([]))
