"""A real OpenAI-compatible server on loopback: llama.cpp's server (embedded in xllamacpp's prebuilt wheel) serving
the small model's GGUF file, driven end to end through the endpoint backend, the engine and the page's generator.
Marked slow: it runs the real model.
"""

from __future__ import annotations

import importlib.util

import pytest

from lab.ops.llama_server import llama_cpp_server
from raqa.config import AppConfig, RunForm, RunSettings
from raqa.loading import Lazy
from raqa.models.endpoint import EndpointBackend, EndpointConfig
from raqa.models.local import embedded_model_path
from raqa.reading.engine import run
from raqa.reading.events import Final, ReplyDelta, WindowVerdict
from raqa.reading.readers import Reader
from raqa.service import Service
from raqa.web.ask_tab import ask

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama_server():
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.fail("llama.cpp's server is not installed: pip install -r requirements.txt (xllamacpp)")
    with llama_cpp_server(embedded_model_path()) as url:
        yield url


@pytest.fixture(scope="module")
def backend(llama_server) -> EndpointBackend:
    return EndpointBackend(EndpointConfig("SmolLM2 (llama.cpp)", llama_server, "smollm2", context_tokens=4096))


def test_the_engine_reads_windows_through_a_real_server(backend, tiny_index) -> None:
    events = list(run("Who painted the Mona Lisa?", tiny_index, backend, RunSettings(window=3, k=8)))
    final = events[-1]
    assert isinstance(final, Final), final
    verdicts = [e for e in events if isinstance(e, WindowVerdict)]
    assert verdicts and final.windows_read == len(verdicts)
    assert all(v.verdict in ("answered", "unsupported", "not_found", "unparseable") for v in verdicts)
    # token counts are the server's own usage reports
    assert all(v.prompt_tokens > 300 for v in verdicts)  # system prompt, two worked examples and three pages
    assert final.prompt_tokens == sum(v.prompt_tokens for v in verdicts)
    assert any(isinstance(e, ReplyDelta) for e in events) or all(v.verdict == "not_found" for v in verdicts)
    assert all(v.p_answer is not None for v in verdicts)  # llama.cpp reports log-probabilities


def test_the_page_streams_a_run_from_the_server(backend, tiny_pages, tiny_index, tmp_path) -> None:
    reader = Reader("endpoint:SmolLM2 (llama.cpp)", "SmolLM2 (llama.cpp)", None)
    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, None, "tiny", {})
    service.readers = {reader.name: reader}
    service.backends[reader.name] = Lazy(value=backend)
    outputs = list(ask(service, "Where does the Danube end?", RunForm(window=2, k=8, reader=reader.name)))
    answers, windows = outputs[-1][0], outputs[-1][1]
    assert "raqa-failed" not in answers and "raqa-window" in windows
    assert len(outputs) > 3  # it streamed


def test_an_experiment_reads_its_windows_through_the_server_two_at_a_time(backend, tiny_pages, tiny_index, tmp_path):
    from lab.evaluation import registry
    from raqa.evaluation.questions import QAItem

    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, backend, "tiny", {})
    # at one page a window, the honey bee page comes before the Mona Lisa page: one answer-free, one answer-bearing
    items = [QAItem("bee", "Honey bee colony queen: in which year was the painting stolen?", ("1911",))]
    options = registry.Options(window=1, endpoint="SmolLM2 (llama.cpp)", concurrency=2)
    run = registry.run_entry(registry.EXPERIMENTS["negative_windows"], service, "tiny", items, 1, options, list)
    assert (run.results["negative_windows"], run.results["positive_windows"]) == (1, 1)
    assert [row["shots"] for row in run.results["rows"]] == [0, 2, 4, 6, 8]
    for row in run.results["rows"]:  # llama.cpp reports log-probabilities: P(answer) is measured, never filled in
        assert row["requests"] == 2 and row["prompt_tokens"] > 0
        if row["mean_p_answer_negative"] is None:  # no reply began with ANSWER or NOT FOUND (0 shots, a 135M model)
            assert row["p_answer_missing"] == 2
        else:
            assert 0.0 <= row["mean_p_answer_negative"]["value"] <= 1.0
    assert any(row["p_answer_missing"] == 0 for row in run.results["rows"])  # with worked examples it follows the form
    server = run.about["server"]
    assert (server["endpoint"], server["concurrency"], server["sampling"]["temperature"]) == (backend.name, 2, 0)
    assert server["reported_model"]  # the model id the server's replies name
    assert run.about["weights"] is None and "--endpoint 'SmolLM2 (llama.cpp)' --concurrency 2" in run.about["command"]
