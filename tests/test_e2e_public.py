"""The public page's limits, in headless chromium and through the API: a visitor over a limit gets the message, and
another visitor is unaffected. Visitors are told apart as on a Space, by X-Forwarded-For, which each browser
context and API client sends as a different address."""

from __future__ import annotations

import time

import pytest
from browser import page_css
from scripted import ScriptedBackend

from lab.ops.reliability import serve
from raqa.config import AppConfig, PublicLimits
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service

pytestmark = pytest.mark.e2e
LIMITS = PublicLimits(runs_per_minute=3, live_runs=1, max_k=8, max_window=2, max_benchmark=4, forwarded_for=True)
SLOW = "slow apple question"  # every window declines after a pause: a run of about 7 s
QUICK = "quick apple question"  # the first window answers at once


class SharingBackend(ScriptedBackend):
    """The scripted model, serving several runs at once as the real model's shared forward passes do."""

    batcher = object()  # Service.concurrent_runs: eight runs at once, so one visitor could start a second


def _script(messages) -> str:
    user = messages[-1]["content"]
    if SLOW in user:
        time.sleep(1.5)  # under visitors.SETTLE_S: a Run just after Stop waits out the reply in progress
        return "NOT FOUND"
    return "ANSWER: apples\nPAGE: a1\nSENTENCE: 1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pages = [Page(f"a{n}", f"Apple note {n}", " ".join(["apple question orchard."] * n)) for n in range(1, 9)]
    service = Service(
        AppConfig(cache_dir=tmp_path_factory.mktemp("cache"), public=LIMITS),
        pages,
        BM25Index.build(pages),
        SharingBackend(_script),
        "apple corpus",
        {},
    )
    assert service.concurrent_runs > 1
    demo, url = serve(service, css=page_css())
    yield url
    demo.close()


@pytest.fixture
def visitor(browser, server):
    """visitor(address) -> a new tab of a browser whose requests come from that address."""
    contexts = []

    def open_tab(address: str):
        context = browser.new_context(
            viewport={"width": 1300, "height": 1400}, extra_http_headers={"X-Forwarded-For": address}
        )
        contexts.append(context)
        tab = context.new_page()
        tab.goto(server, wait_until="networkidle")
        return tab

    yield open_tab
    for context in contexts:
        context.close()


def _run(tab, question: str) -> None:
    tab.locator("#raqa-question textarea").fill(question)
    tab.locator("#raqa-run").click()


def _refusal(tab) -> str:
    tab.wait_for_selector("#raqa-answers .raqa-failed", timeout=15000)
    return tab.locator("#raqa-answers .raqa-failed").inner_text()


def test_a_visitors_second_live_run_gets_the_message_and_another_visitor_runs(visitor):
    first, second = visitor("198.51.100.1"), visitor("198.51.100.1")  # one visitor, two tabs
    other = visitor("198.51.100.2")
    _run(first, SLOW)
    first.wait_for_selector('.raqa-window[data-window="1"]', timeout=15000)
    _run(second, QUICK)
    assert "already have a live run going" in _refusal(second)
    assert second.locator(".raqa-window").count() == 0  # nothing ran
    _run(other, QUICK)
    other.wait_for_selector(".raqa-final-text", timeout=15000)  # unaffected, while the first run goes on
    assert "apples" in other.locator(".raqa-final-text").inner_text()
    assert first.locator(".raqa-final-text").count() == 0  # the first visitor's run was still going
    first.locator("#raqa-stop").click()  # Stop ends the run, and a Run pressed at once starts (visitors.SETTLE_S)
    first.wait_for_selector("#raqa-answers .raqa-stopped, #raqa-windows .raqa-stopped", timeout=10000)
    _run(second, QUICK)
    second.wait_for_selector(".raqa-final-text", timeout=15000)
    assert second.locator("#raqa-answers .raqa-failed").count() == 0


def test_a_visitor_over_the_runs_a_minute_gets_the_message_and_another_visitor_runs(visitor):
    tab, other = visitor("198.51.100.3"), visitor("198.51.100.4")
    for n in range(LIMITS.runs_per_minute):
        _run(tab, f"{QUICK} {n}")
        tab.wait_for_selector(f'.raqa-answer[data-question="{QUICK} {n}"] .raqa-final-text', timeout=15000)
    _run(tab, QUICK)
    message = _refusal(tab)
    assert (
        f"started {LIMITS.runs_per_minute} live runs in the last minute" in message and "next can start in" in message
    )
    _run(other, QUICK)
    other.wait_for_selector(".raqa-final-text", timeout=15000)
    assert other.locator("#raqa-answers .raqa-failed").count() == 0


def test_the_caps_are_the_sliders_ends_and_a_link_beyond_them_says_so(visitor, server):
    tab = visitor("198.51.100.5")
    assert tab.locator("#raqa-k input[type=number]").get_attribute("max") == str(LIMITS.max_k)
    assert tab.locator("#raqa-window input[type=number]").get_attribute("max") == str(LIMITS.max_window)
    tab.goto(server + "?q=apple&k=50&w=2", wait_until="networkidle")
    tab.wait_for_selector("#raqa-answers .raqa-failed", timeout=10000)
    note = tab.locator("#raqa-answers").inner_text()
    assert "k='50'" in note and "from 5 to 8" in note and "w='2'" not in note
    tab.get_by_role("tab", name="Try a benchmark").click()
    assert tab.locator("#raqa-bench-n input[type=number]").get_attribute("max") == str(LIMITS.max_benchmark)


def _client(server: str, address: str):
    from gradio_client import Client

    return Client(server, verbose=False, headers={"X-Forwarded-For": address})


def _events(client, question: str, k: int = 5) -> list[dict]:
    return list(client.submit(question, "iterative", "forward", 1, k, False, False, None, api_name="/run_events"))


def test_an_api_caller_over_the_limit_gets_one_run_failed_and_another_caller_runs(server):
    caller, other = _client(server, "198.51.100.6"), _client(server, "198.51.100.7")
    for _ in range(LIMITS.runs_per_minute):
        assert _events(caller, QUICK)[-1]["type"] == "final"
    refused = _events(caller, QUICK)
    assert len(refused) == 1 and refused[0]["type"] == "run_failed"
    assert "live runs in the last minute" in refused[0]["message"]
    assert _events(other, QUICK)[-1]["type"] == "final"


def test_an_api_caller_gets_one_live_run_at_a_time(server):
    caller, other = _client(server, "198.51.100.8"), _client(server, "198.51.100.9")
    slow = caller.submit(SLOW, "iterative", "forward", 1, 5, False, False, None, api_name="/run_events")
    deadline = time.time() + 15
    while not slow.status().code.name == "ITERATING" and time.time() < deadline:
        time.sleep(0.1)
    second = _events(caller, QUICK)
    assert len(second) == 1 and "already have a live run going" in second[0]["message"]
    assert _events(other, QUICK)[-1]["type"] == "final"
    assert list(slow)[-1]["type"] == "final"  # the first run went on to its end


def test_the_api_refuses_settings_beyond_the_caps(server):
    events = _events(_client(server, "198.51.100.10"), QUICK, k=LIMITS.max_k + 1)
    assert len(events) == 1 and "K on this public page must be a whole number from 5 to 8" in events[0]["message"]
