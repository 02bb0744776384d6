"""The page's run_events API: a client reads a run's events (the JSON of `ask --json`), not the page's HTML."""

from __future__ import annotations

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm
from raqa.reading.events import to_json
from raqa.service import Service

REPLY = "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_pages, tiny_index):
    from lab.ops.reliability import serve

    backend = ScriptedBackend(lambda messages: REPLY)
    service = Service(
        AppConfig(cache_dir=tmp_path_factory.mktemp("cache")), tiny_pages, tiny_index, backend, "tiny", {}
    )
    demo, url = serve(service)
    yield service, url
    demo.close()


def test_a_client_streams_the_same_events_as_the_engine(served):
    from gradio_client import Client

    service, url = served
    client = Client(url, verbose=False)
    job = client.submit(
        "Who painted the Mona Lisa?", "iterative", "forward", 3, 5, False, False, None, api_name="/run_events"
    )
    streamed = list(job)
    expected = [
        to_json(e)
        for e in service.events(service.plan("Who painted the Mona Lisa?", RunForm("iterative", "forward", 3, 5)))
    ]
    assert [e["type"] for e in streamed] == [e["type"] for e in expected]
    assert streamed[-1]["type"] == "final" and streamed[-1]["answer"] == "Leonardo da Vinci"
    verdicts = [e for e in streamed if e["type"] == "window_verdict"]
    assert verdicts and verdicts[0]["hits"][0]["page_id"] == expected[2]["hits"][0]["page_id"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "iterative", "forward", 3, 10, False, False, None), "empty"),
        (("Mona Lisa", "iterative", "sideways", 3, 10, False, False, None), "Invalid order"),
        (("Mona Lisa", "iterative", "forward", 99, 10, False, False, None), "window size"),
        (("Mona Lisa", "iterative", "forward", 3, 10, False, False, "nobody"), "Invalid reader"),
    ],
)
def test_bad_input_gets_one_run_failed_event(served, args, message):
    from gradio_client import Client

    _, url = served
    streamed = list(Client(url, verbose=False).submit(*args, api_name="/run_events"))
    assert len(streamed) == 1 and streamed[0]["type"] == "run_failed" and message in streamed[0]["message"]
