"""The live benchmark: rows per question with exact match and whether the pages could answer, the summary, the CSV,
and the tab's generator refusing bad input before anything runs."""

from __future__ import annotations

import csv
import io

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm
from raqa.evaluation.live_benchmark import benchmark_questions, run_benchmark, summarise_benchmark, to_csv
from raqa.evaluation.questions import QAItem
from raqa.loading import Lazy
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.web.benchmark_tab import benchmark

FORM = RunForm("iterative", "forward", 2, 5)


@pytest.fixture
def service(tmp_path, tiny_pages):
    backend = ScriptedBackend(lambda m: "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1")
    return Service(AppConfig(cache_dir=tmp_path), tiny_pages, BM25Index.build(tiny_pages), backend, "tiny", {})


def test_rows_say_exact_match_and_whether_any_page_could_answer(service) -> None:
    items = [
        QAItem("a", "Who painted the Mona Lisa?", ("Leonardo da Vinci",)),
        QAItem("b", "Who painted the Sistine ceiling of Zanzibar?", ("Nobody Atall",)),
    ]
    rows = list(run_benchmark(service, items, FORM))
    assert [(r.exact_match, r.answerable, bool(r.answer)) for r in rows] == [(True, True, True), (False, False, True)]
    s = summarise_benchmark(rows)
    assert (s["questions"], s["exact_match"], s["unanswerable"], s["false_answers_unanswerable"]) == (2, 0.5, 1, 1)
    parsed = list(csv.reader(io.StringIO(to_csv(rows))))
    assert parsed[0][:3] == ["question", "gold", "answer"] and len(parsed) == 3


@pytest.mark.parametrize(
    ("dataset", "n", "message"),
    [
        ("imdb", 5, "Invalid dataset"),
        ("nq", 51, "from 1 to 50"),
        ("nq", 0, "from 1 to 50"),
        ("nq", "ten", "whole number"),
    ],
)
def test_bad_choices_are_refused_with_the_allowed_ones(dataset, n, message) -> None:
    with pytest.raises(ValueError, match=message):
        benchmark_questions(dataset, n)


def test_the_tab_refuses_bad_settings_before_asking_the_model(service) -> None:
    outputs = list(benchmark(service, "NQ-open", 3, FORM.replace(order="sideways")))
    assert len(outputs) == 1 and "Invalid order" in outputs[0][0]
    outputs = list(benchmark(service, "NQ-open", 3, FORM.replace(strategy="both")))
    assert len(outputs) == 1 and "one strategy" in outputs[0][0]
    assert service.backend.requests == []


def test_the_tab_streams_progress_rows_and_a_csv(service) -> None:
    outputs = list(benchmark(service, "NQ-open", 3, FORM))
    assert 'data-done="0" data-total="3"' in outputs[0][0]
    assert 'data-done="3" data-total="3"' in outputs[-2][0] and len(outputs[-2][1]) == 3
    download = outputs[-1][3]
    path = download.value if isinstance(download.value, str) else download.value["path"]
    assert path.endswith(".csv") and open(path, encoding="utf-8").read().count("\n") == 4  # header and 3 rows


def test_a_server_reads_as_many_questions_at_once_as_its_entry_allows(tmp_path, tiny_pages) -> None:
    import threading
    import time

    from raqa.models.endpoint import EndpointConfig
    from raqa.reading.readers import Reader

    class Server(ScriptedBackend):
        name, now, most = "Srv", 0, 0
        requests_at_once = runs_at_once = EndpointConfig("Srv", "http://127.0.0.1:9/v1", "m", concurrency=3).concurrency
        lock = threading.Lock()

        def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
            with self.lock:
                Server.now += 1
                Server.most = max(Server.most, Server.now)
            time.sleep(0.03)
            with self.lock:
                Server.now -= 1
            yield from super().reply(messages, plan, threshold, max_new_tokens)

    server = Server(lambda m: "NOT FOUND\nREASON: no.")
    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, BM25Index.build(tiny_pages), None, "tiny", {})
    service.readers = {"endpoint:Srv": Reader("endpoint:Srv", "Srv", None)}
    service.backends["endpoint:Srv"] = Lazy(value=server)
    items = [QAItem(str(n), f"Who founded the town number {n} of Zzyzx?", ("Curtis Springer",)) for n in range(7)]
    form = FORM.replace(reader="endpoint:Srv")
    rows = list(run_benchmark(service, items, form))
    assert [r.question for r in rows] == [i.question for i in items]  # in order, whichever finished first
    assert Server.most == 3
    whole = len(server.requests)  # every question reads all its windows: they all decline
    stopped = run_benchmark(service, items, form)
    next(stopped)
    stopped.close()  # the visitor's Stop: the calls in flight end, the questions not yet started are never sent
    asked = len(server.requests) - whole
    time.sleep(0.2)
    assert len(server.requests) - whole == asked < whole  # nothing sent after the stop; not every question was read
