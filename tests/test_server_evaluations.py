"""Every experiment and evaluation read through a real OpenAI-compatible server: llama.cpp's (embedded in
xllamacpp's prebuilt wheel) serving the small model's GGUF on loopback, two calls in flight, on the
tiny corpus with small limits. negative_windows is driven in test_endpoint_server.py; attribution is refused through a
server (it needs the local model's log-probabilities, test_experiments_server.py); recall reads no model.

Marked slow: it runs the real model. What is checked is that each one reads through the server and records it; the
numbers themselves are the small model's and are measured at scale by `python -m lab.ops.server_experiment`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from conftest import TINY_PAGES
from test_badges_eval import CountingJudge

from lab.evaluation import registry
from lab.evaluation.badges import run_rows, score
from lab.evaluation.positives import PositiveIndex
from lab.evaluation.served import ServedBaselines
from lab.evaluation.when_to_retrieve import READERS, evaluate_policies, policy_row
from lab.ops.llama_server import llama_cpp_server
from raqa.config import AppConfig, RunForm, RunSettings
from raqa.evaluation.fan_out import calls_at_once
from raqa.evaluation.live_benchmark import run_benchmark
from raqa.evaluation.questions import QAItem
from raqa.loading import Lazy
from raqa.models.endpoint import EndpointBackend, EndpointConfig
from raqa.models.endpoints_file import READER_PREFIX
from raqa.models.local import embedded_model_path
from raqa.reading.readers import Reader
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.when_to_retrieve.uncertainty import closed_book

pytestmark = pytest.mark.slow
NAME = "SmolLM2 (llama.cpp)"
MONA_LISA = QAItem("mona", "Who painted the Mona Lisa, which was stolen in 1911?", ("Leonardo da Vinci", "Leonardo"))
ZZYZX = QAItem("zzyzx", "Who founded the desert town of Zzyzx in California?", ("Curtis Springer",))  # no page has it


@pytest.fixture(scope="module")
def server() -> EndpointBackend:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.fail("llama.cpp's server is not installed: pip install -r requirements.txt (xllamacpp)")
    with llama_cpp_server(embedded_model_path()) as url:
        yield EndpointBackend(EndpointConfig(NAME, url, "smollm2", context_tokens=4096, concurrency=2))


@pytest.fixture(scope="module")
def few_pages() -> tuple[list, BM25Index]:
    """Four of the tiny corpus's pages, the Mona Lisa's among them: every run reads at most four windows."""
    pages = TINY_PAGES[:4]
    assert any("Mona Lisa" in p.text for p in pages)
    return pages, BM25Index.build(pages)


@pytest.fixture
def served(server, few_pages, tmp_path: Path) -> Service:
    """A four-page corpus, no local model, and the server registered as a reader, as RAQA_ENDPOINTS registers it."""
    service = Service(AppConfig(cache_dir=tmp_path), *few_pages, None, "tiny", {})
    service.readers = {
        "base": Reader("base", "Base model", None),
        "endpoint:" + NAME: Reader("endpoint:" + NAME, NAME, None),
    }
    service.backends["endpoint:" + NAME] = Lazy(value=server)
    return registry.served_by(service, NAME)


@pytest.mark.parametrize(
    "name", ["topk_vs_iterative", "window_order", "unanswerable", "reading_defaults", "reader_comparison"]
)
def test_each_experiment_reads_through_the_real_server(name, served, tmp_path: Path) -> None:
    options = registry.Options(reader="base", questions=1, unanswerable=1, window=3, endpoint=NAME, concurrency=2)
    experiment = registry.EXPERIMENTS[name]
    rows = tmp_path / "rows.jsonl"
    # the runs' experiments read every question of the pool many ways: one question keeps them short
    pool = [MONA_LISA] if name in ("topk_vs_iterative", "window_order") else [MONA_LISA, ZZYZX]
    run = registry.run_entry(experiment, served, "tiny", pool, 1, options, list, rows)
    assert run.about["server"]["endpoint"] == NAME and run.about["server"]["concurrency"] == 2
    assert run.about["server"]["reported_model"]  # the model id the server's replies name
    assert run.about["weights"] is None and f"--endpoint '{NAME}' --concurrency 2" in run.about["command"]
    calls = run.about["rows"]["calls"]
    assert calls > 0 and len(rows.read_text().splitlines()) == calls  # every call the server answered is a row
    again = registry.run_entry(experiment, served, "tiny", pool, 1, options, list, rows)
    assert again.about["rows"] == {"file": "rows.jsonl", "calls": calls, "in_file_before": calls}  # none made again


def test_eval_adapt_asks_the_server_for_the_baselines(server, tiny_index) -> None:
    local = FakeAdaptModel(knows_paris)
    model = ServedBaselines(local, server)
    paris = QAItem("paris", "What is the capital of France?", ("Paris",))
    with calls_at_once(2):
        rows = evaluate_policies([paris, MONA_LISA], model, lambda q: tiny_index.search(q, 1))
    assert [r["id"] for r in rows] == ["paris", "mona"]
    assert all(r["never"]["answer"] and r["always"]["answer"] for r in rows)  # the served model's own words
    assert rows[0]["never"]["accuracy"]  # SmolLM2 knows the capital of France from memory
    assert {adapter for _, adapter, _ in local.calls} == {"adapt"}  # the adapters never left the local model


def test_eval_pipeline_reads_its_windows_through_the_server(served) -> None:
    def read(question: str):
        return served.events(served.plan(question, RunForm("iterative", "forward", 3, 8, reader="base")))

    local = FakeAdaptModel(knows_paris)  # the closed-book part stays local (experiment pipeline's memory)
    row = policy_row(MONA_LISA, "nq", lambda q: closed_book(local, q), {n: read for n in READERS}, lambda a: True)
    assert set(row["readers"]) == set(READERS)
    assert all(r["windows_read"] >= 1 and r["verdict"] != "failed" for r in row["readers"].values())


def test_eval_badges_reads_the_models_replies_from_the_server(server, tiny_index, tiny_pages, tmp_path) -> None:
    base = RunSettings(window=1, k=4, reader_mode="model_judge", grounded_only=True)
    with calls_at_once(2):
        rows = run_rows(
            [("nq", MONA_LISA), ("nq", ZZYZX)],
            tiny_index,
            server,
            CountingJudge(),
            base,
            PositiveIndex(tiny_pages),
            tmp_path / "rows.jsonl",
        )
    assert [r["id"] for r in rows] == ["mona", "zzyzx"] and all(r["model_calls"] >= 1 for r in rows)
    assert score(rows)["nq"]["per_question"]["after"]["questions"] == 2


def test_the_live_benchmark_reads_two_questions_at_once_through_the_server(served) -> None:
    form = RunForm(window=3, k=8, reader=READER_PREFIX + NAME)
    rows = list(run_benchmark(served, [MONA_LISA, ZZYZX], form))
    assert [r.question for r in rows] == [MONA_LISA.question, ZZYZX.question]
    assert all(r.windows_read >= 1 and r.tokens > 0 for r in rows)
