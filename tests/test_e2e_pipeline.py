"""Browser tests of the When-to-retrieve tab's pipeline: a question runs closed-book, decides and reads windows
step by step; the P(<RET>) slider switches example questions between retrieving and answering."""

from __future__ import annotations

import json
import time

import pytest
from browser import page_css
from test_e2e import _fruit_pages, backend  # noqa: F401 - the fixture, shared
from test_pipeline_eval import _rows

from lab.evaluation.when_to_retrieve_scores import summarise_scores
from lab.figures import committed
from lab.ops.reliability import serve
from lab.records import write_record
from raqa.loading import Lazy
from raqa.web.pipeline_recordings import PolicyChoice, record_pipeline, write_pipeline_recording
from raqa.when_to_retrieve.tuned import tuned_thresholds

pytestmark = pytest.mark.e2e
EXAMPLES = [
    {"question": "What is the capital of France?", "closed_book": "Paris", "p_ret": 0.12, "signals": {}},
    {"question": "Who kept goal for <b>Lorient</b>?", "closed_book": "Someone", "p_ret": 0.64, "signals": {}},
    {"question": "Who painted the Mona Lisa?", "closed_book": "Leonardo", "p_ret": 0.91, "signals": {}},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):  # noqa: F811
    from adapt_fakes import FakeAdaptModel, knows_paris

    from raqa.config import AppConfig
    from raqa.retrieval.index import BM25Index
    from raqa.service import Service

    results = tmp_path_factory.mktemp("results")
    rows = _rows()
    record = {**summarise_scores([dict(r, split="dev") for r in rows], rows), "examples": EXAMPLES}
    write_record("pipeline", "nq", record, {"command": "python -m lab experiment pipeline (synthetic rows)"}, results)
    committed.write(results)  # the record's figures, as the lab draws committed ones
    pages = _fruit_pages()
    service = Service(
        AppConfig(cache_dir=tmp_path_factory.mktemp("cache")),
        pages,
        BM25Index.build(pages),
        backend,
        "test corpus",
        {},
        adapt=Lazy(value=FakeAdaptModel(knows_paris)),
    )
    recordings = tmp_path_factory.mktemp("recordings")
    threshold = tuned_thresholds(json.loads(next(results.glob("pipeline-*.json")).read_text()))["adapt"]
    # the tab's first example, recorded with the tab's default choices (the fake knows Paris from memory)
    made = record_pipeline(
        service, "What is the capital of France?", PolicyChoice("adapt", threshold), "(test recording)"
    )
    write_pipeline_recording(made, recordings / "pipeline")
    demo, url = serve(service, page={"recordings_dir": recordings, "results_dir": results}, css=page_css())
    yield url.rstrip("/")
    demo.close()


@pytest.fixture
def tab(browser, server):  # noqa: F811
    context = browser.new_context(viewport={"width": 1300, "height": 1600})
    page = context.new_page()
    page.goto(server, wait_until="networkidle")
    page.get_by_role("tab", name="When to retrieve").click()
    yield page
    context.close()


def _set_slider(page, elem_id: str, value: float) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def _decisions(page) -> dict[str, str]:
    rows = page.locator("#raqa-ret-examples tr[data-retrieve]")
    return {
        rows.nth(i).locator("td").first.inner_text(): rows.nth(i).get_attribute("data-retrieve")
        for i in range(rows.count())
    }


def test_the_ret_threshold_slider_switches_questions_between_retrieving_and_answering(tab):
    _set_slider(tab, "raqa-ret-threshold", 0.5)
    tab.wait_for_selector('#raqa-ret-examples .raqa-ret-examples[data-retrieving="2"]', timeout=20000)
    assert _decisions(tab) == {
        "What is the capital of France?": "false",
        "Who kept goal for <b>Lorient</b>?": "true",
        "Who painted the Mona Lisa?": "true",
    }
    _set_slider(tab, "raqa-ret-threshold", 0.8)
    tab.wait_for_selector('#raqa-ret-examples .raqa-ret-examples[data-retrieving="1"]', timeout=10000)
    assert _decisions(tab)["Who kept goal for <b>Lorient</b>?"] == "false"  # switched to answering from memory
    _set_slider(tab, "raqa-ret-threshold", 0.05)
    tab.wait_for_selector('#raqa-ret-examples .raqa-ret-examples[data-retrieving="3"]', timeout=10000)
    assert set(_decisions(tab).values()) == {"true"}
    assert tab.locator("#raqa-ret-examples b b").count() == 0  # a question's markup is text


def test_the_pipeline_answers_a_known_question_from_memory(tab):
    tab.locator("#raqa-pipe-question textarea").fill("What is the capital of France?")
    tab.locator("#raqa-pipe-run").click()
    tab.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=30000)
    end = tab.locator("#raqa-pipe-out .raqa-pipe-end")
    assert end.get_attribute("data-source") == "memory" and "Paris" in end.inner_text()
    assert tab.locator('#raqa-pipe-out [data-retrieve="false"]').count() == 1
    assert tab.locator("#raqa-pipe-out .raqa-window").count() == 0


def test_a_click_on_an_example_replays_its_recording_without_the_model(tab):
    start = time.time()
    tab.locator("#raqa-pipe-out").scroll_into_view_if_needed()
    tab.locator("#raqa-pipe-examples").get_by_role("button", name="What is the capital of France?").click()
    tab.wait_for_selector('#raqa-pipe-out .raqa-recorded[data-recorded="true"]', timeout=20000)
    tab.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=20000)
    assert time.time() - start < 15
    assert "(test recording)" in tab.locator("#raqa-pipe-out .raqa-recorded").inner_text()
    end = tab.locator("#raqa-pipe-out .raqa-pipe-end")
    assert end.get_attribute("data-source") == "memory" and "Paris" in end.inner_text()
    # an example with no recording for these choices says so and changes nothing else
    tab.locator("#raqa-pipe-examples").get_by_role("button", name="Who painted the Mona Lisa?").click()
    tab.wait_for_function(
        "() => document.querySelector('#raqa-pipe-out')?.innerText.includes('No recorded run')", timeout=20000
    )
    assert tab.locator("#raqa-pipe-question textarea").input_value() == "Who painted the Mona Lisa?"


def test_the_pipeline_retrieves_reads_windows_and_admits_ignorance(tab):
    tab.locator("#raqa-pipe-question textarea").fill("apple orchard harvest")
    tab.locator("#raqa-pipe-run").click()
    tab.wait_for_selector("#raqa-pipe-out .raqa-window", timeout=30000)  # windows stream in before the end
    assert tab.locator('#raqa-pipe-out .raqa-pipeline[data-done="false"]').count() == 1
    tab.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=60000)
    end = tab.locator("#raqa-pipe-out .raqa-pipe-end")
    assert end.get_attribute("data-source") == "none" and "I don't know" in end.inner_text()
    assert tab.locator('#raqa-pipe-out [data-retrieve="true"]').count() == 1


def test_the_committed_evaluation_draws_its_figures_under_the_accordion(tab):
    tab.locator("#raqa-w2r-evaluation").get_by_text("The evaluations").first.click()
    tab.wait_for_function(
        "() => document.querySelectorAll('.raqa-w2r-figure .js-plotly-plot').length >= 3", timeout=30000
    )
    assert "experiment pipeline" in tab.locator(".raqa-w2r-caption").first.inner_text()
    assert "nq test, n=40" in tab.locator(".raqa-pipe-summary summary").first.inner_text()
