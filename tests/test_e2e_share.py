"""Browser tests of keeping and sharing a run: a link restores the question and settings, a bad link says what it
could not use, and a finished run downloads as JSON events and as a Markdown report."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from scripted import ScriptedBackend
from test_e2e import _ask, _fruit_pages, _script, backend, page, server  # noqa: F401 - the fixtures, shared

from lab.ops.reliability import serve
from raqa.config import AppConfig
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.web import page_runs

pytestmark = pytest.mark.e2e


def _form(tab) -> dict:
    return {
        "question": tab.locator("#raqa-question textarea").input_value(),
        "order": tab.locator("#raqa-order input:checked").get_attribute("value"),
        "w": tab.locator("#raqa-window input[type=number]").input_value(),
        "k": tab.locator("#raqa-k input[type=number]").input_value(),
        "grounded": tab.locator("#raqa-grounded input").is_checked(),
        "retrieval": tab.locator("#raqa-retrieval input:checked").get_attribute("value"),
    }


def test_a_shared_link_restores_the_question_and_settings(page, server):  # noqa: F811
    page.goto(server + "/?q=apple+pie%3F&order=backward&w=3&k=7&grounded=1&retrieval=bm25", wait_until="networkidle")
    page.wait_for_function("() => document.querySelector('#raqa-question textarea')?.value === 'apple pie?'")
    assert _form(page) == {
        "question": "apple pie?",
        "order": "backward",
        "w": "3",
        "k": "7",
        "grounded": True,
        "retrieval": "bm25",
    }
    page.locator("#raqa-question textarea").fill("Where do zebras live?")
    page.locator("#raqa-copy-link").click()
    page.wait_for_function("() => document.querySelector('#raqa-link textarea')?.value.includes('zebras')")
    link = page.locator("#raqa-link textarea").input_value()
    params = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert params | {} == {
        "q": "Where do zebras live?",
        "strategy": "iterative",
        "order": "backward",
        "w": "3",
        "k": "7",
        "grounded": "1",
        "rationale": "0",
        "retrieval": "bm25",
    } | ({"reader": params["reader"]} if "reader" in params else {})
    other = page.context.new_page()
    other.goto(link, wait_until="networkidle")
    other.wait_for_function("() => document.querySelector('#raqa-question textarea')?.value.includes('zebras')")
    assert _form(other) == {
        "question": "Where do zebras live?",
        "order": "backward",
        "w": "3",
        "k": "7",
        "grounded": True,
        "retrieval": "bm25",
    }


def test_a_link_with_bad_settings_says_so_and_keeps_the_defaults(page, server):  # noqa: F811
    page.goto(server + "/?q=apple&w=99&order=sideways", wait_until="networkidle")
    page.wait_for_selector("#raqa-answers .raqa-failed", timeout=10000)
    message = page.locator("#raqa-answers .raqa-failed").inner_text()
    assert "w='99'" in message and "order='sideways'" in message
    assert _form(page)["w"] == "1" and _form(page)["order"] == "forward"
    assert _form(page)["question"] == "apple"  # what was usable is used


def test_a_finished_run_downloads_as_json_events_and_a_markdown_report(page, tmp_path: Path):  # noqa: F811
    _ask(page, "Where do zebras live?")
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    page.wait_for_selector("#raqa-download-json", state="visible", timeout=10000)
    with page.expect_download() as got:
        page.locator("#raqa-download-json").click()
    events = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert events[0]["type"] == "run_started" and events[0]["question"] == "Where do zebras live?"
    assert events[-1]["type"] == "final" and events[-1]["answer"].startswith("Africa")
    with page.expect_download() as got:
        page.locator("#raqa-download-md").click()
    report = Path(got.value.path()).read_text(encoding="utf-8")
    assert report.startswith("# raqa run")
    assert "**Question:** Where do zebras live?" in report and "### Window 1" in report
    # the model's markup is text: verbatim only inside the indented code block of the reply, escaped elsewhere
    assert all(line.startswith("    ") for line in report.splitlines() if "<script>" in line)
    assert "**Answer:** Africa \\<script\\>" in report


# from now on, the question of each answer the page shows, in order ("" while a run is reading)
ANSWERS_SHOWN_JS = """() => {
  const shown = (window.__raqaAnswers = []);
  const note = () => {
    const answer = document.querySelector("#raqa-answers .raqa-answer");
    const question = (answer && answer.dataset.question) || "";
    if (shown[shown.length - 1] !== question) shown.push(question);
  };
  note();
  const options = { subtree: true, childList: true, characterData: true, attributes: true };
  new MutationObserver(note).observe(document.querySelector("#raqa-answers"), options);
}"""


def _batching_page(browser, tmp_path, pages):  # noqa: F811
    """(model, demo, tab): the page served on a scripted model that reads several runs at once, opened in a tab."""
    model = ScriptedBackend(_script)
    model.batcher = object()  # as a model that shares its forward passes: several runs at once (concurrent_runs)
    service = Service(AppConfig(cache_dir=tmp_path / "cache"), pages, BM25Index.build(pages), model, "test", {})
    assert service.concurrent_runs > 1
    demo, url = serve(service)
    tab = browser.new_page(viewport={"width": 1300, "height": 1600})
    tab.goto(url, wait_until="networkidle")
    return model, demo, tab


def test_run_clicked_as_an_answer_shows_keeps_its_own_answer_and_downloads(browser, monkeypatch, tmp_path):  # noqa: F811
    """On a page that reads several runs at once (a model that batches them), Run clicked the moment one run's
    answer shows, while its downloads are still being written: the new run's answer and downloads stay its own. The
    downloads once came in an update after the answer that repeated it, and that update landed on the new run."""
    first, second = "When do owls hunt?", "Where do zebras live?"  # one window each
    written = threading.Event()
    write = page_runs.write_exports

    def slow_write(events, folder):
        paths = write(events, folder)
        if events[0]["question"] == first:
            time.sleep(2.0)
            written.set()
        return paths

    monkeypatch.setattr(page_runs, "write_exports", slow_write)
    _, demo, tab = _batching_page(browser, tmp_path, [*_fruit_pages(), Page("owl", "Owls", "Owls hunt at night.")])
    try:
        _ask(tab, first)
        tab.locator(f'.raqa-answer[data-question="{first}"]').wait_for(timeout=30000)
        tab.evaluate(ANSWERS_SHOWN_JS)
        _ask(tab, second)
        tab.wait_for_function("q => window.__raqaAnswers.includes(q)", arg=second, timeout=30000)
        assert written.wait(timeout=10)  # the first run's downloads are written...
        tab.wait_for_timeout(1000)  # ...and whatever was sent after them has landed
        shown = tab.evaluate("() => window.__raqaAnswers")
        assert shown[shown.index(second) :] == [second], shown  # once the answer shows, it stays
        with tab.expect_download() as got:
            tab.locator("#raqa-download-json").click()
        assert json.loads(Path(got.value.path()).read_text(encoding="utf-8"))[0]["question"] == second
    finally:
        demo.close()


def test_a_new_run_replaces_the_run_still_reading(browser, tmp_path):  # noqa: F811
    """On a page that reads several runs at once, Run clicked on a new question while the last run is still reading:
    the earlier run stops (its model work too) and never writes over the new run's answer. Before, both streamed into
    the same answer box and whichever ended last stayed, so the page could end showing the older question's run."""
    slow, quick = "apple orchard harvest", "Where do zebras live?"  # ten windows of 0.8 s; one window
    model, demo, tab = _batching_page(browser, tmp_path, _fruit_pages())
    try:
        _ask(tab, slow)
        tab.wait_for_function("() => document.querySelectorAll('.raqa-window').length >= 2", timeout=30000)
        tab.evaluate(ANSWERS_SHOWN_JS)
        _ask(tab, quick)
        tab.wait_for_function("q => window.__raqaAnswers.includes(q)", arg=quick, timeout=30000)
        read = len([m for m in model.requests if slow in m[-1]["content"]])
        tab.wait_for_timeout(4000)  # the slow run had five windows and more to go
        shown = tab.evaluate("() => window.__raqaAnswers")
        assert shown[shown.index(quick) :] == [quick], shown  # once the new answer shows, it stays
        assert len([m for m in model.requests if slow in m[-1]["content"]]) <= read + 1  # the earlier run stopped
        assert tab.locator(".raqa-window").count() == 1  # only the new run's window
        assert tab.locator('.raqa-window .raqa-badge:has-text("Stopped")').count() == 0
    finally:
        demo.close()


@pytest.fixture(scope="module")
def recorded_server(tmp_path_factory, backend):  # noqa: F811
    """The test corpus page with one recording of its own: a scripted run of the zebra question."""
    from test_e2e import _fruit_pages

    from raqa.config import AppConfig, RunForm
    from raqa.retrieval.corpus import Page
    from raqa.retrieval.index import BM25Index
    from raqa.service import Service
    from raqa.web.recordings import record_run, write_recording

    # a page of common question words: every benchmark question retrieves it, so each takes a scripted reply (0.8 s)
    common = "what who when where which how is was the of in a to did does first name called"
    pages = [*_fruit_pages(), Page("common", "Common words", f"{common}.")]
    flags = tmp_path_factory.mktemp("flags") / "class.jsonl"
    config = AppConfig(cache_dir=tmp_path_factory.mktemp("cache"), flags_file=str(flags))
    service = Service(config, pages, BM25Index.build(pages), backend, "test corpus", {})
    folder = tmp_path_factory.mktemp("recordings")
    write_recording(record_run(service, "Where do zebras live?", RunForm(), "python -m raqa record (test)"), folder)
    demo, url = serve(service, page={"recordings_dir": folder})
    yield url.rstrip("/")
    demo.close()


@pytest.fixture
def recorded_tab(browser, recorded_server):  # noqa: F811
    """A fresh tab on the page that has the zebra recording."""
    tab = browser.new_page(viewport={"width": 1300, "height": 1600})
    tab.goto(recorded_server, wait_until="networkidle")
    yield tab


def _replay_the_zebra_question(tab) -> None:
    tab.locator("#raqa-question textarea").fill("Where do zebras live?")
    tab.locator("#raqa-replay").click()


def test_replay_shows_the_recorded_run_at_once_and_run_goes_live(recorded_tab):
    tab = recorded_tab
    _replay_the_zebra_question(tab)
    tab.wait_for_selector("#raqa-answers .raqa-recorded", timeout=10000)
    tab.wait_for_selector(".raqa-final-text", timeout=10000)
    banner = tab.locator("#raqa-answers .raqa-recorded").inner_text()
    assert "Recorded run" in banner and "python -m raqa record (test)" in banner and "Run" in banner
    assert tab.locator(".raqa-final-text").inner_text().startswith("Africa")
    recorded_windows = tab.locator(".raqa-window").count()
    # another setting has no recording: one message, and the model is not asked
    tab.locator("#raqa-order label", has_text="backward").click()
    tab.locator("#raqa-replay").click()
    tab.wait_for_selector("#raqa-answers .raqa-failed", timeout=10000)
    assert "No recorded run" in tab.locator("#raqa-answers").inner_text()
    # Run makes the live run: the same windows, no recorded mark
    tab.locator("#raqa-order label", has_text="forward").click()
    tab.locator("#raqa-run").click()
    tab.wait_for_selector(".raqa-final-text", timeout=30000)
    assert tab.locator("#raqa-answers .raqa-recorded").count() == 0
    assert tab.locator(".raqa-window").count() == recorded_windows


def test_a_lesson_step_loads_its_question_and_settings(recorded_tab):
    from raqa.web.lessons import load_lessons

    step = load_lessons()[2]  # backward, grounded only, the base reader
    tab = recorded_tab
    tab.locator("#raqa-lesson-steps label", has_text=step.title).click()
    tab.wait_for_function(
        "q => document.querySelector('#raqa-question textarea')?.value === q", arg=step.question, timeout=10000
    )
    assert tab.locator("#raqa-order input:checked").get_attribute("value") == step.form.order
    assert tab.locator("#raqa-grounded input").is_checked() is step.form.grounded_only
    assert step.watch.split(".")[0] in tab.locator("#raqa-lesson-text").inner_text()
    # this corpus has no recording of the step: the page says so instead of running the model
    tab.wait_for_selector("#raqa-answers .raqa-failed", timeout=10000)
    assert "No recorded run" in tab.locator("#raqa-answers").inner_text()


def test_a_flag_appends_the_run_to_the_operators_file(recorded_tab):
    tab = recorded_tab
    _replay_the_zebra_question(tab)
    tab.wait_for_selector("#raqa-download-json", state="visible", timeout=20000)
    tab.locator("#raqa-flag-badge-wrong").click()
    tab.wait_for_function("() => document.querySelector('#raqa-flag-status')?.innerText.includes('Saved')")
    status = tab.locator("#raqa-flag-status").inner_text()
    path = Path(status.split(" of ")[-1].rstrip(")."))
    [line] = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    assert line["flag"] == "badge_wrong" and line["question"] == "Where do zebras live?"
    assert line["events"][-1]["type"] == "final"


def test_two_runs_side_by_side_show_both_streams_and_what_differs(page):  # noqa: F811
    page.locator("#raqa-compare input").click()
    page.get_by_role("option", name="the other window order").click()
    _ask(page, "Where do zebras live?")
    page.wait_for_selector("#raqa-answers .raqa-compare", timeout=60000)
    columns = page.locator(".raqa-columns .raqa-column")
    assert columns.count() == 2
    assert [columns.nth(i).locator("h3").inner_text() for i in range(2)] == ["A: forward", "B: backward"]
    assert all(columns.nth(i).locator(".raqa-window").count() >= 1 for i in range(2))
    table = page.locator("#raqa-answers .raqa-compare").inner_text()
    assert "windows read" in table and "answer" in table and "tokens" in table


def test_run_b_with_settings_of_my_choice_runs_beside_a(page):  # noqa: F811
    assert not page.locator("#raqa-run-b").is_visible()
    page.locator("#raqa-compare input").click()
    page.get_by_role("option", name="settings of my choice").click()
    page.wait_for_selector("#raqa-run-b", state="visible", timeout=10000)
    page.locator("#raqa-b-window input[type=number]").fill("2")
    page.locator("#raqa-b-window input[type=number]").press("Enter")
    _ask(page, "apple orchard")  # ten pages, none answering
    page.wait_for_selector("#raqa-answers .raqa-compare", timeout=60000)
    columns = page.locator(".raqa-columns .raqa-column")
    assert [columns.nth(i).locator("h3").inner_text() for i in range(2)] == ["A: forward, w=1", "B: backward, w=2"]
    b_windows = columns.nth(1).locator(".raqa-window")
    assert max(b_windows.nth(i).locator(".raqa-page").count() for i in range(b_windows.count())) == 2
    page.locator("#raqa-compare input").click()
    page.get_by_role("option", name="nothing").click()
    page.wait_for_selector("#raqa-run-b", state="hidden", timeout=10000)


def _start_benchmark(tab, questions: int) -> None:
    tab.get_by_role("tab", name="Try a benchmark").click()
    box = tab.locator("#raqa-bench-n input[type=number]")
    box.fill(str(questions))
    box.press("Enter")
    tab.locator("#raqa-bench-run").click()


def test_the_live_benchmark_fills_its_table_with_progress_and_a_csv(page):  # noqa: F811
    _start_benchmark(page, 2)
    page.wait_for_selector('.raqa-bench-progress[data-done="2"]', timeout=60000)
    page.wait_for_selector("#raqa-bench-csv", state="visible", timeout=20000)
    # the table's rows are drawn lazily (a virtual list), so its content is read from the CSV it offers
    with page.expect_download() as got:
        page.locator("#raqa-bench-csv").click()
    lines = Path(got.value.path()).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("question,gold,answer,exact_match,answerable") and len(lines) == 3
    assert "exact match" in page.locator("#raqa-bench-table").inner_text()
    assert page.locator(".raqa-bench-progress progress").count() == 1


def test_stop_ends_the_live_benchmark(recorded_tab):
    import time

    tab = recorded_tab
    _start_benchmark(tab, 40)
    tab.wait_for_selector('.raqa-bench-progress[data-total="40"][data-done="2"]', timeout=60000)
    tab.locator("#raqa-bench-stop").click()
    time.sleep(3.0)  # the question being read (two scripted windows at most) may still finish
    stopped_at = int(tab.locator(".raqa-bench-progress").get_attribute("data-done"))
    time.sleep(4.0)
    assert int(tab.locator(".raqa-bench-progress").get_attribute("data-done")) == stopped_at < 40


def test_a_shared_link_with_a_recording_opens_into_its_replay(recorded_tab, recorded_server):
    tab = recorded_tab
    tab.goto(recorded_server + "/?q=Where+do+zebras+live%3F&w=1&k=15", wait_until="networkidle")
    tab.wait_for_selector("#raqa-answers .raqa-recorded", timeout=15000)
    tab.wait_for_selector(".raqa-final-text", timeout=15000)
    assert tab.locator(".raqa-final-text").inner_text().startswith("Africa")
    tab.goto(recorded_server + "/?q=Where+do+zebras+live%3F&w=2", wait_until="networkidle")  # no recording at w=2
    tab.wait_for_function("() => document.querySelector('#raqa-window input[type=number]')?.value === '2'")
    tab.wait_for_timeout(1500)
    assert tab.locator("#raqa-answers .raqa-recorded").count() == 0
    assert tab.locator("#raqa-answers .raqa-failed").count() == 0  # and no complaint either
