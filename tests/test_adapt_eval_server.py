"""`experiment when_to_retrieve --endpoint NAME --concurrency N`: the never- and always-retrieve answers come from the
model server, Adapt-LLM's decisions and answers from the local adapter; N questions in flight; the rows resume."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from scripted import ScriptedBackend

from lab.cli import main
from raqa.config import AppConfig
from raqa.evaluation import questions
from raqa.evaluation.questions import QAItem
from raqa.loading import Lazy
from raqa.reading.readers import Reader
from raqa.service import Service
from raqa.when_to_retrieve import model as adapt_model

ITEMS = [
    QAItem("q1", "What is the capital of France?", ("Paris",)),
    QAItem("q2", "Which mountain did Hillary climb in 1953?", ("Mount Everest", "Everest")),
    QAItem("q3", "Which river flows through Austria and Hungary to the Black Sea?", ("Danube",)),
    QAItem("q4", "Who painted the Mona Lisa?", ("Leonardo da Vinci",)),
]


class SlowServer(ScriptedBackend):
    """A served model that knows everything from memory (it answers with the gold) and counts calls in flight."""

    name = "Srv model"

    def __init__(self):
        super().__init__(self.answer)
        self.now = self.most = 0
        self.lock = threading.Lock()

    @staticmethod
    def answer(messages) -> str:
        prompt = messages[-1]["content"]
        item = next(i for i in ITEMS if i.question in prompt)
        return ("From the page: " if "given the context" in prompt else "From memory: ") + item.answers[0]

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        try:
            yield from super().reply(messages, plan, threshold, max_new_tokens)
        finally:
            with self.lock:
                self.now -= 1


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tiny_pages, tiny_index, tmp_path: Path):
    server, local = SlowServer(), FakeAdaptModel(knows_paris)
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))

    def load(cls, config: AppConfig, **kwargs) -> Service:
        service = Service(config, tiny_pages, tiny_index, None, "tiny", {})
        service.readers = {"endpoint:Srv": Reader("endpoint:Srv", "Srv", None)}
        service.backends["endpoint:Srv"] = Lazy(value=server)
        return service

    monkeypatch.setattr(Service, "load", classmethod(load))
    monkeypatch.setattr(adapt_model, "load_adapt_model", lambda *args: local)
    monkeypatch.setattr(questions, "load_questions", lambda *args: ITEMS)
    return server, local


def test_the_baselines_are_answered_by_the_server_and_adapt_llm_by_the_local_adapter(served, tmp_path, capsys):
    server, local = served
    argv = [
        "experiment",
        "when_to_retrieve",
        "--datasets",
        "nq",
        "--limit",
        "4",
        "--endpoint",
        "Srv",
        "--concurrency",
        "3",
    ]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "when_to_retrieve-nq-srv.json").read_text())  # beside the local record
    assert record["command"].endswith("--endpoint Srv --concurrency 3")
    assert record["server"]["concurrency"] == 3 and "Adapt-LLM: the local adapter" in record["server"]["reads"]
    rows = record["results"]["rows"]["nq"]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]  # in the questions' order, whatever finished first
    assert all(r["never"]["answer"] == "From memory: " + i.answers[0] for r, i in zip(rows, ITEMS, strict=True))
    assert all(r["always"]["answer"].startswith("From the page: ") for r in rows)
    assert {adapter for _, adapter, _ in local.calls} == {"adapt"}  # the local model only ever read as Adapt-LLM
    summary = record["results"]["datasets"]["nq"]
    assert summary["policies"]["never"]["accuracy"]["value"] == 1.0  # the served model knows every answer
    assert 1 < server.most <= 3
    served_calls = len(server.requests)
    assert main([*argv, "--out", str(tmp_path)]) == 0  # rerun: every row resumed, no question asked again
    assert len(server.requests) == served_calls
    assert (
        json.loads((tmp_path / "when_to_retrieve-nq-srv.json").read_text())["results"]["datasets"]
        == (record["results"]["datasets"])
    )


def test_an_unknown_server_is_refused_before_anything_runs(served, tmp_path: Path, capsys) -> None:
    assert main(["experiment", "when_to_retrieve", "--limit", "2", "--endpoint", "Nope", "--out", str(tmp_path)]) == 2
    assert "Invalid endpoint: 'Nope'. Choose from: Srv (RAQA_ENDPOINTS)." in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [] or [p.name for p in tmp_path.iterdir()] == ["cache"]
