"""The real Gradio server under load, through its public API: many sessions at once, Stop, a client
that disconnects, and bad values sent straight to the endpoint.

The model is scripted (its replies depend only on the window it is shown), so what is tested is the
serving path: the queue, the sessions, cancellation and validation, not the model.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from pathlib import Path

import httpx
import pytest
from scripted import ScriptedBackend

from lab.ops.bench_timing import percentile
from lab.ops.reliability import drive_sessions, serve, summarise_sessions
from raqa.config import AppConfig
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service

ANIMALS = (
    "zebra giraffe penguin walrus koala otter badger beaver camel donkey eagle falcon "
    "gorilla hamster iguana jaguar lemur moose octopus panda rabbit salmon turtle vulture"
).split()
PLACES = (
    "Kenya Botswana Antarctica Greenland Queensland Scotland Poland Canada Egypt Spain Norway Chile "
    "Uganda Ukraine Mexico Brazil Madagascar Sweden Portugal Sichuan Wales Iceland Florida Peru"
).split()
SLOW_QUESTION = "slow orchard apple"
SLOW_REPLY_S = 0.4

# The page's form after the question, as its /ask endpoint takes it.
PAGE_FORM = ("Iterative", "forward", 3, 15, False, False)


def _pages() -> list[Page]:
    pages = [
        Page(f"a{i}", animal.title(), f"{animal.title()} dwell in {PLACES[i]}.") for i, animal in enumerate(ANIMALS)
    ]
    pages += [Page(f"o{n}", f"Orchard {n}", " ".join(["Apple orchard."] * n)) for n in range(1, 13)]
    return pages


def _question(i: int) -> str:
    return f"Where do {ANIMALS[i]} live?"


def _reply(messages) -> str:
    user = messages[-1]["content"]
    if "orchard" in user.lower():
        time.sleep(SLOW_REPLY_S)
        return "NOT FOUND"
    time.sleep(0.05)  # long enough that the sessions really overlap in the queue
    page = re.search(r"Page (a\d+):", user)
    if page is None:
        return "NOT FOUND"
    place = PLACES[int(page.group(1)[1:])]
    return f"ANSWER: {place}\nPAGE: {page.group(1)}\nSENTENCE: 1"


@pytest.fixture(scope="module")
def backend() -> ScriptedBackend:
    return ScriptedBackend(_reply)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("serving-cache")
    (folder / "marker.txt").write_text("a file the server must leave alone")
    return folder


@pytest.fixture(scope="module")
def server(backend, cache):
    pages = _pages()
    index = BM25Index.build(pages)
    for i in range(len(ANIMALS)):  # the corpus is built so that each question retrieves its own page only
        assert [h.page.id for h in index.search(_question(i), 15)] == [f"a{i}"]
    service = Service(AppConfig(cache_dir=cache), pages, index, backend, "serving test corpus", {})
    service.hybrid.get()  # the encoder loaded before the first session, as Service.load starts it on the page
    demo, url = serve(service)
    yield url
    demo.close()


def _requests_about(backend: ScriptedBackend, word: str) -> int:
    return sum(word in m[-1]["content"].lower() for m in list(backend.requests))


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_twenty_four_sessions_at_once_each_get_their_own_answer(server, capsys):
    questions = [_question(i) for i in range(len(ANIMALS))]
    results = drive_sessions(server, questions, timeout=120)
    summary = summarise_sessions(results)
    assert summary["errors"] == [] and summary["completed"] == len(ANIMALS)
    for i, result in enumerate(results):
        assert result.final["type"] == "final" and PLACES[i] in result.final["answer"], (result.question, result.final)
        others = [p for j, p in enumerate(PLACES) if j != i]
        text = json.dumps(result.events)
        assert not any(p in text for p in others), f"session {i} saw another session's run"
        retrieved = next(e for e in result.events if e["type"] == "retrieved")
        assert [h["page_id"] for h in retrieved["hits"]] == [f"a{i}"]
        assert result.updates >= 5  # it streamed: started, retrieved, the window, the reply, the verdict, final
    # queued one after another on one worker, so the slowest waited for the others, and nothing was lost
    assert summary["p95_s"] >= summary["p50_s"]
    with capsys.disabled():
        print(f"\n{len(ANIMALS)} sessions: p50 {summary['p50_s']:.2f} s, p95 {summary['p95_s']:.2f} s")
    # and the server still answers afterwards
    again = drive_sessions(server, [_question(0)], timeout=60)
    assert again[0].error is None and PLACES[0] in again[0].final["answer"]


def _first_output_after(url: str, question: str) -> float:
    from gradio_client import Client

    client = Client(url, verbose=False)
    began = time.perf_counter()
    job = client.submit(question, *PAGE_FORM, api_name="/ask")
    while not job.outputs():
        assert time.perf_counter() - began < 30, "the next run never started"
        time.sleep(0.02)
    return time.perf_counter() - began


def _wait_for_requests(backend: ScriptedBackend, word: str, at_least: int) -> None:
    began = time.perf_counter()
    while _requests_about(backend, word) < at_least:
        assert time.perf_counter() - began < 30, "the slow run never reached the model"
        time.sleep(0.02)


def test_stop_frees_the_worker_within_two_seconds(server, backend):
    from gradio_client import Client

    before = _requests_about(backend, "orchard")
    slow = Client(server, verbose=False).submit(
        SLOW_QUESTION, "Iterative", "forward", 1, 15, False, False, api_name="/ask"
    )
    _wait_for_requests(backend, "orchard", before + 2)
    slow.cancel()
    cancelled_at = _requests_about(backend, "orchard")
    assert _first_output_after(server, _question(1)) < 2.0
    time.sleep(3 * SLOW_REPLY_S)
    # the cancelled run asked the model at most once more (the reply already being computed), then stopped
    assert _requests_about(backend, "orchard") <= cancelled_at + 1
    assert before + 12 > _requests_about(backend, "orchard")


def test_a_client_that_disconnects_frees_the_worker(server, backend):
    before = _requests_about(backend, "orchard")
    api = server + "gradio_api"
    config = httpx.get(server + "config").json()
    fn_index = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "ask")
    joined = httpx.post(
        api + "/queue/join",
        json={
            "data": [SLOW_QUESTION, "Iterative", "forward", 1, 15, False, False],
            "fn_index": fn_index,
            "session_hash": "leaver",
            "event_data": None,
            "trigger_id": None,
        },
    )
    assert joined.status_code == 200
    with httpx.stream("GET", api + "/queue/data", params={"session_hash": "leaver"}, timeout=30) as stream:
        for _ in stream.iter_lines():
            if _requests_about(backend, "orchard") >= before + 2:
                break  # leave mid-run, as a closed browser tab does
    left_at = _requests_about(backend, "orchard")
    assert _first_output_after(server, _question(2)) < 2.0 + SLOW_REPLY_S
    time.sleep(3 * SLOW_REPLY_S)
    assert _requests_about(backend, "orchard") <= left_at + 2
    assert before + 12 > _requests_about(backend, "orchard")


BAD_API_VALUES = [
    (("", *PAGE_FORM), "empty"),
    (("   \t\n ", *PAGE_FORM), "empty"),
    (("x" * 100_000, *PAGE_FORM), "limit is 1,000"),
    ((None, *PAGE_FORM), "must be text"),
    ((42, *PAGE_FORM), "must be text"),
    (("zebras?", "Sideways", "forward", 3, 15, False, False), "Invalid strategy"),
    (("zebras?", "Iterative", "up", 3, 15, False, False), "Invalid order"),
    (("zebras?", "Iterative", "forward", 999, 15, False, False), "window size must be a whole number from 1 to 20"),
    (("zebras?", "Iterative", "forward", "abc", 15, False, False), "window size must be a whole number"),
    (("zebras?", "Iterative", "forward", 2.5, 15, False, False), "window size must be a whole number"),
    (("zebras?", "Iterative", "forward", 3, -1, False, False), "K must be a whole number from 5 to 100"),
    (("zebras?", "Iterative", "forward", 3, [15], False, False), "K must be a whole number"),
    (("zebras?", "Iterative", "forward", 3, 15, "yes", False), "grounded_only must be true or false"),
    (("zebras?", "Iterative", "forward", 3, 15, False, None), "rationale must be true or false"),
    (
        ("zebras?", "Iterative", "forward", 3, 15, False, False, "the best one"),
        "Invalid reader: &#x27;the best one&#x27;. Choose from: base.",
    ),
]


@pytest.mark.parametrize(("values", "message"), BAD_API_VALUES, ids=[m for _, m in BAD_API_VALUES])
def test_bad_values_sent_to_the_api_get_a_message_and_change_nothing(server, backend, cache, values, message):
    from gradio_client import Client

    on_disk = _snapshot(cache)
    asked = len(backend.requests)
    outputs = Client(server, verbose=False).predict(*values, api_name="/ask")
    assert message in outputs[0] and "raqa-failed" in outputs[0]
    assert len(backend.requests) == asked  # the model was never asked
    assert _snapshot(cache) == on_disk
    # the server keeps serving
    good = Client(server, verbose=False).predict(_question(3), *PAGE_FORM, api_name="/ask")
    assert PLACES[3] in good[0]


@pytest.mark.parametrize(
    "question",
    [
        "zebra\x00\x07\x1b[31m live?",
        "Où vivent les zèbres ? 斑马生活在哪里？ zebra",
        "\u202ezebra\u202c \u200b?",
        "zebra? " + "🦓" * 50,
    ],
    ids=["control characters", "non-English", "bidi and zero-width", "emoji"],
)
def test_odd_but_valid_questions_are_answered(server, question):
    from gradio_client import Client

    outputs = Client(server, verbose=False).predict(question, *PAGE_FORM, api_name="/ask")
    assert PLACES[0] in outputs[0] and "raqa-failed" not in outputs[0]


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 95) == pytest.approx(1.95)
    assert percentile([5.0], 95) == 5.0
    assert math.isnan(percentile([], 50))


def test_session_threads_do_not_leak(server):
    before = threading.active_count()
    drive_sessions(server, [_question(4), _question(5)], timeout=60)
    time.sleep(0.5)
    assert threading.active_count() <= before + 2


@pytest.fixture
def cli_on_the_serving_corpus(monkeypatch, backend, cache):
    """`python -m lab bench load/soak` on the serving corpus and scripted model, with animal questions."""
    from lab.cli import main, ops

    pages = _pages()
    service = Service(AppConfig(cache_dir=cache), pages, BM25Index.build(pages), backend, "serving test corpus", {})
    monkeypatch.setattr(Service, "load", classmethod(lambda cls, config, **kwargs: service))
    monkeypatch.setattr(ops, "sample_questions", lambda count, seed: [_question(i) for i in range(count)])
    return main


def test_load_test_command_writes_its_measurements(cli_on_the_serving_corpus, tmp_path):
    import json

    out = tmp_path / "load.json"
    assert cli_on_the_serving_corpus(["bench", "load", "--sessions", "6", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["command"].startswith("python -m lab bench load --sessions 6")
    for phase in ("off", "on"):  # a scripted model shares no passes: both phases run one at a time
        results = record["results"][phase]
        assert (results["sessions"], results["completed"], results["own_run_only"]) == (6, 6, 6)
        assert results["server_answered_afterwards"] and 0 < results["p50_s"] <= results["p95_s"]
        assert results["concurrency_limit"] == 1
    assert record["results"]["p95_ratio_on_off"] > 0
    assert record["model"] == "scripted" and record["corpus"] == "serving test corpus (36 pages)"


def test_soak_command_writes_memory_after_every_run(cli_on_the_serving_corpus, tmp_path):
    import json

    out = tmp_path / "soak.json"
    assert cli_on_the_serving_corpus(["bench", "soak", "--runs", "12", "--questions", "4", "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert results["runs"] == 12 and len(results["rss_mib"]) == 12 and len(results["seconds"]) == 12
    assert results["distinct_questions"] == 4


def test_every_session_sees_its_place_in_line_or_its_first_window_within_two_seconds(server):
    """Six slow runs at once on a model that reads one run at a time: each hears at once where it stands, the later
    ones their place in the line, which only moves up."""
    from raqa.config import RunForm

    results = drive_sessions(server, [SLOW_QUESTION] * 6, RunForm(window=3, k=15), timeout=120)
    summary = summarise_sessions(results)
    assert summary["errors"] == [] and summary["completed"] == 6
    assert summary["first_progress_max_s"] < 2.0, [r.first_progress_s for r in results]
    told = [[e for e in r.events if e["type"] == "in_line"] for r in results]
    assert sum(bool(t) for t in told) >= 4  # all but the first (or two, when one finished before the last came)
    for events in told:
        places = [e["place"] for e in events]
        assert places == sorted(places, reverse=True) and (not places or places[-1] == 1)
        assert all(e["eta_s"] >= 0 and e["ahead"] >= e["place"] for e in events)
    # a whole run of the slowest took about the six runs' time, not much more: the line wastes nothing
    assert summary["max_s"] < 6 * 4 * SLOW_REPLY_S + 6


def test_a_first_sign_measurement_stops_each_run_at_its_first_sign_and_the_line_moves_on(server):
    """lab.ops.first_sign's sessions: each ends at its place in line or its first window, and the stopped runs leave
    the line, so a whole run asked next is not kept waiting behind them."""
    from raqa.config import RunForm

    form = RunForm(window=3, k=15)
    stopped = drive_sessions(server, [SLOW_QUESTION] * 4, form, timeout=60, first_sign_only=True)
    assert all(r.error is None and r.updates == 1 and r.first_progress_s is not None for r in stopped)
    assert {r.events[0]["type"] for r in stopped} <= {"in_line", "window_started"}
    after = drive_sessions(server, [_question(6)], timeout=60)[0]
    assert after.error is None and after.final["type"] == "final"
    assert not [e for e in after.events if e["type"] == "in_line" and e["place"] > 1]


def test_a_driven_session_opens_the_page_as_a_browser_does_before_its_click(tiny_pages, tiny_index, tmp_path):
    """Opening the page runs its load event, which makes the session's state; the driver does the same, so a click
    is timed without that cost, as a visitor's click is (lab/ops/reliability.open_as_a_browser)."""
    from gradio_client import Client

    from lab.ops.reliability import open_as_a_browser

    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, ScriptedBackend([]), "tiny", {})
    demo, url = serve(service)
    try:
        client = Client(url, verbose=False)
        assert client.session_hash not in demo.state_holder.session_data
        open_as_a_browser(client)
        assert client.session_hash in demo.state_holder.session_data
        assert len(demo.state_holder.session_data) == 1
    finally:
        demo.close()
