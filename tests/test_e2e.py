"""Browser tests: headless Debian chromium, driven by playwright, clicking what a person clicks.

The fast tests serve the real page around a small corpus the test writes (hostile pages included)
and a scripted model, so they are deterministic; one slow test starts `python app.py` on the
embedded corpus and the real model, as a newcomer would.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from browser import ROOT, opened_tab, page_css
from scripted import ScriptedBackend

from lab.ops.page_start import started_app
from lab.ops.reliability import serve
from raqa.config import AppConfig, RunSettings, default_cache_dir
from raqa.loading import Lazy
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service

pytestmark = pytest.mark.e2e
XSS_TITLE = '<script>window.__raqa_xss = "title"</script>Zebra facts'
XSS_TEXT = "Zebras live in Africa. <img src=x onerror=\"window.__raqa_xss = 'page'\"> Zebras have stripes."
XSS_QUESTION = "Where do zebras live? <img src=x onerror=\"window.__raqa_xss = 'question'\">"


def _fruit_pages() -> list[Page]:
    # "apple" occurs a different number of times in each page, so BM25 gives them distinct ranks
    pages = [
        Page(f"f{n}", f"Orchard note {n}", " ".join(["apple orchard harvest."] * n) + " Other words here.")
        for n in range(1, 11)
    ]
    return pages + [Page("xss", XSS_TITLE, XSS_TEXT)]


def _script(messages) -> str:
    time.sleep(0.8)  # slow enough that a viewer (and this test) sees windows arrive one by one
    user = messages[-1]["content"]
    if "zebras live" in user.lower():
        return 'ANSWER: Africa <script>window.__raqa_xss = "reply"</script>\nPAGE: xss\nSENTENCE: 1'
    return "NOT FOUND"


def _scorer(messages, answer: str) -> float:
    """log P(answer) for "Why this answer?": the scripted answer rests on the sentence that says where zebras live."""
    return math.log(0.9 if "Zebras live in Africa" in messages[-1]["content"] else 0.02)


@pytest.fixture(scope="module")
def backend() -> ScriptedBackend:
    return ScriptedBackend(_script, scorer=_scorer)


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
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
    demo, url = serve(service, css=page_css())
    yield url.rstrip("/")
    demo.close()


@pytest.fixture
def page(browser, server):
    with opened_tab(browser, server) as tab:
        yield tab


def _ask(tab, question: str, order: str = "forward", window: int | None = None) -> None:
    if window is not None:  # the slider's number box, as a person types it
        box = tab.locator("#raqa-window input[type=number]")
        box.fill(str(window))
        box.press("Enter")
    tab.locator("#raqa-question textarea").fill(question)
    tab.locator("#raqa-order label", has_text=order).click()
    tab.locator("#raqa-run").click()


def _first_window_ranks(tab) -> list[str]:
    first = tab.locator('.raqa-window[data-window="1"] .raqa-rank')
    return first.all_inner_texts()


def test_windows_stream_in_then_the_run_ends_not_found(page):
    _ask(page, "apple orchard harvest", window=3)
    seen = []
    deadline = time.time() + 30
    while time.time() < deadline:
        seen.append(page.locator(".raqa-window").count())
        if page.locator(".raqa-final-text").count():
            break
        time.sleep(0.1)
    assert page.locator(".raqa-final-text").inner_text() == "Answer not found"
    distinct = sorted(set(seen) - {0})
    assert len(distinct) >= 2 and distinct[0] < 4, f"windows should appear before the run ends, saw counts {distinct}"
    assert page.locator(".raqa-window").count() == 4  # 10 pages match; w=3 -> 4 windows
    assert page.locator(".raqa-window .raqa-not-found").count() == 4


def test_backward_order_reads_lowest_ranked_pages_first(page):
    _ask(page, "apple orchard harvest", "forward", window=3)
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    forward = _first_window_ranks(page)
    _ask(page, "apple orchard harvest", "backward", window=3)
    page.wait_for_function("() => document.querySelector('.raqa-final-text') === null", timeout=10000)
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    backward = _first_window_ranks(page)
    assert forward == ["#1", "#2", "#3"]
    assert backward == ["#8", "#9", "#10"]  # 10 pages match; backward starts with the lowest three


def test_stop_ends_the_run_and_the_next_one_starts_within_two_seconds(page, backend):
    page.locator("#raqa-window input[type=number]").fill("1")
    page.locator("#raqa-window input[type=number]").press("Enter")
    _ask(page, "apple orchard harvest")  # ten one-page windows, 0.8 s each
    page.wait_for_selector('.raqa-window[data-window="2"]', timeout=30000)
    page.locator("#raqa-stop").click()
    stopped_at = len(backend.requests)
    page.wait_for_selector("#raqa-answers .raqa-stopped", timeout=5000)  # the viewer sees that it stopped
    assert page.locator("#raqa-windows .raqa-reading").count() == 0
    page.locator("#raqa-question textarea").fill(XSS_QUESTION)
    started = time.perf_counter()  # from the click on Run: typing the question is the viewer's time, not the app's
    page.locator("#raqa-run").click()
    # the new run's first window (the zebra page) is on screen: the worker was free
    first_window = '#raqa-windows .raqa-window[data-window="1"] .raqa-page[data-page-id="xss"]'
    page.wait_for_selector(first_window, state="attached", timeout=10000)
    assert time.perf_counter() - started < 2.0
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    orchard = [m for m in backend.requests[stopped_at:] if "apple orchard" in m[-1]["content"]]
    assert len(orchard) <= 1  # the stopped run asked the model at most once more (the reply in progress)
    assert page.locator(".raqa-window").count() == 1 and "Africa" in page.locator("#raqa-answers").inner_text()


def test_hostile_page_question_and_reply_are_shown_as_text(page):
    _ask(page, XSS_QUESTION)
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    # the reply's markup and the page's markup appear literally, and nothing ran
    assert "<script>" in page.locator(".raqa-reply").first.inner_text()
    assert "<img src=x onerror=" in page.locator('.raqa-page[data-page-id="xss"]').first.text_content()
    assert "<script>" in page.locator('.raqa-page[data-page-id="xss"] summary').first.inner_text()
    assert page.evaluate("() => window.__raqa_xss === undefined")
    assert page.dialogs == []
    assert page.locator("#raqa-windows img").count() == 0
    assert page.locator("#raqa-windows script").count() == 0


def test_why_this_answer_colours_the_sentence_the_answer_depends_on(page):
    _ask(page, XSS_QUESTION)
    page.wait_for_selector(".raqa-final-text", timeout=30000)
    button = page.locator('.raqa-window[data-window="1"] .raqa-why')
    assert button.inner_text() == "Why this answer?"
    button.click()
    page.wait_for_selector(".raqa-why-result:not(.raqa-why-pending)", timeout=30000)
    found = page.locator(".raqa-why-result").inner_text()
    assert "Removing sentence 1 of page xss" in found and "the sentence the model cited" in found
    assert "0.90 to 0.02" in found
    strong = page.locator('.raqa-page[data-page-id="xss"] .raqa-why-strong')
    assert strong.count() == 1 and "Zebras live in Africa" in strong.inner_text()
    assert page.locator(".raqa-why").count() == 0  # asked once, answered in place
    assert page.evaluate("() => window.__raqa_xss === undefined") and page.dialogs == []
    with page.expect_download() as got:
        page.locator("#raqa-download-json").click()
    events = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert events[-1]["type"] == "attribution" and events[-1]["finding"] == "sentence"


def test_bad_input_gets_a_message_and_the_page_keeps_working(page):
    _ask(page, "   ")
    page.wait_for_selector(".raqa-failed", timeout=10000)
    assert "empty" in page.locator(".raqa-failed").inner_text()
    _ask(page, "apple orchard harvest")
    page.wait_for_selector(".raqa-final-text", timeout=30000)


@pytest.mark.slow
def test_the_default_app_answers_on_the_real_model(browser, tmp_path):
    """`python app.py` on the embedded corpus and models (the 1.5B reader by default): a question streams windows to
    an answer."""
    # the cache the other real-model tests share (the fresh start, an empty cache, is the Space rehearsal's)
    with started_app(space=False, cache=default_cache_dir(), log=tmp_path / "app.log", timeout=240) as app:
        tab = browser.new_page(viewport={"width": 1300, "height": 1800})
        tab.goto(app.url, wait_until="networkidle")
        first = "Who developed the theory of relativity?"  # an example, so its outcome counts among theirs
        _ask(tab, first)
        tab.wait_for_selector(".raqa-window", timeout=60000)
        tab.wait_for_selector(".raqa-final-text", timeout=180000)
        assert tab.locator(".raqa-window .raqa-badge").count() >= 1
        assert tab.locator(".raqa-final-text").inner_text().strip()
        _the_examples_behave(tab, asked={first: _outcome(tab.locator(f'.raqa-answer[data-question="{first}"]'))})
        _every_example_replays_its_recording(tab)
        _a_lesson_step_loads_its_settings_and_replays(tab)
        # When to retrieve, on the real model and the committed adapters
        tab.get_by_role("tab", name="When to retrieve").click()
        tab.locator("#raqa-pipe-question textarea").fill("Who painted the Mona Lisa?")
        tab.locator("#raqa-pipe-run").click()
        tab.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=180000)
        steps = tab.locator("#raqa-pipe-out").inner_text()
        assert "P(<RET>) " in steps and ("retrieve" in steps or "answer from memory" in steps)
        _a_pipeline_example_replays_its_recording(tab)
        artifacts = os.environ.get("RAQA_SCREENSHOTS")
        if artifacts:
            tab.screenshot(path=str(Path(artifacts) / "default-app.png"), full_page=True)


def _every_example_replays_its_recording(tab) -> None:
    """A click on an example replays its committed recording at once, marked as recorded, ending as it ended."""
    from raqa.web.recordings import load_recordings

    recordings = {r.question: r for r in load_recordings()[0]}
    for question in ("What is the chemical symbol for gold?", "Who painted the Mona Lisa?"):
        recorded_final = recordings[question].timed_events[-1][1]
        start = time.time()
        tab.get_by_text(question, exact=True).first.click()
        answer = tab.locator(f'.raqa-answer[data-question="{question}"]')
        answer.wait_for(timeout=30000)
        assert time.time() - start < 20  # no model: the replay is quick
        assert tab.locator("#raqa-answers .raqa-recorded").count() == 1
        assert answer.get_attribute("data-verdict") == recorded_final["verdict"]


def _a_pipeline_example_replays_its_recording(tab) -> None:
    """In the When-to-retrieve tab, a click on an example replays its committed pipeline recording."""
    from raqa.web.pipeline_recordings import PIPELINE_RECORDINGS_DIR, read_pipeline_recording

    recordings = {r.question: r for r in map(read_pipeline_recording, PIPELINE_RECORDINGS_DIR.glob("*.jsonl"))}
    question = "What is the chemical symbol for gold?"
    ended = recordings[question].timed_events[-1][1]
    tab.locator("#raqa-pipe-examples").get_by_role("button", name=question).click()
    tab.wait_for_selector('#raqa-pipe-out .raqa-recorded[data-recorded="true"]', timeout=30000)
    tab.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=30000)
    end = tab.locator("#raqa-pipe-out .raqa-pipe-end")
    assert end.get_attribute("data-source") == ended["source"]


def _a_lesson_step_loads_its_settings_and_replays(tab) -> None:
    tab.locator("#raqa-lesson-steps label", has_text="2. Reading backward").click()
    # subtle: the example replayed just before was of the same question, so wait for this step's own outcome
    tab.wait_for_function(
        "() => document.querySelector('#raqa-order input:checked')?.value === 'backward'", timeout=30000
    )
    answer = tab.locator('.raqa-answer[data-question="Who painted the Mona Lisa?"][data-verdict="unsupported"]')
    answer.wait_for(timeout=30000)  # the invented answer, flagged
    assert tab.locator("#raqa-answers .raqa-recorded").count() == 1
    assert "lowest-ranked page" in tab.locator("#raqa-lesson-text").inner_text()
    # the attribution was recorded with the run: "Why this answer?" is there at once, traced to a sentence
    why = tab.locator('.raqa-why-result[data-finding="sentence"]')
    why.wait_for(timeout=10000)
    assert "Removing sentence" in why.inner_text() and tab.locator(".raqa-why-strong").count() >= 1


def _recorded_outcome(question: str) -> tuple[str, str]:
    """How the committed recording of a question with the page's defaults, made by the reader the page starts with
    and by this raqa version, ends: its verdict and answer, as _outcome reads them off the page."""
    from raqa.config import RunForm
    from raqa.loading import DEFAULT_READERS
    from raqa.web.recordings import find, load_recordings, stale

    recording = find(load_recordings()[0], question, RunForm(reader=DEFAULT_READERS[0]))
    assert recording is not None and stale(recording, None) == [], f"no current recording of {question!r}"
    ended = recording.timed_events[-1][1]
    return ended["verdict"], ended["answer"] or ""


def _recorded_on_the_default_reader_ending_not_found(questions: list[str]) -> None:
    """Each question has a committed recording with the page's default settings, made by the reader the page starts
    with and by this raqa version, that reads every window and ends Not found."""
    from raqa.config import RunForm
    from raqa.loading import DEFAULT_READERS
    from raqa.web.recordings import find, load_recordings, stale

    form, recordings = RunForm(reader=DEFAULT_READERS[0]), load_recordings()[0]
    for question in questions:
        recording = find(recordings, question, form)
        assert recording is not None and stale(recording, None) == [], f"no current recording of {question!r}"
        ended = recording.timed_events[-1][1]
        assert ended["verdict"] == "not_found" and ended["answer"] is None, ended
        assert ended["windows_read"] == form.k // form.window, ended


def _outcome(answer) -> tuple[str, str]:
    """A run's ending as the page shows it: its badge's verdict and its final answer's text."""
    return answer.get_attribute("data-verdict"), answer.locator(".raqa-final-text").inner_text()


LIVE_OUTSIDE_K = 5  # pages the live no-answer run reads (all 15 are checked on its recording)
RECORDED_IN_CORPUS = ("Who painted the Mona Lisa?", "What is the chemical symbol for gold?")


def _set_k(tab, k: int) -> None:
    box = tab.locator("#raqa-k input[type=number]")
    box.fill(str(k))
    box.press("Enter")


def _the_examples_behave(tab, asked: dict[str, tuple[str, str]]) -> None:
    """Every example under the question box, with the page's defaults (the 1.5B reader, graded), and one fresh
    question. Every answerable example ends right (green or amber), the questions the corpus cannot answer end with
    Not found (every one on its recording, one also asked live on its LIVE_OUTSIDE_K best pages), nothing ends green
    (Answered) on a wrong answer, and the fresh question whose page calls the Atlantic the *second* largest ocean never
    ends green, nor amber on the Atlantic. Questions in asked were run already, and RECORDED_IN_CORPUS end as their
    current recordings do: their outcomes are used."""
    import json

    from raqa.text import normalize_answer

    examples = json.loads((ROOT / "assets" / "examples.json").read_text())
    # one question the corpus cannot answer is asked live, the last (FC Lorient: football pages to invent an answer
    # from), on its LIVE_OUTSIDE_K best pages: a Not-found run reads every window, 15 took about 100 s here, so the
    # page's default K is checked on the committed recordings of every one of them (CI's 25-minute budget)
    live_outside = examples["outside"][-1]
    _recorded_on_the_default_reader_ending_not_found(examples["outside"])
    expected = [(e["question"], e["answer"]) for e in examples["in_corpus"]] + [(live_outside, None)]
    expected.append(("Which is the largest of Earth's oceans?", "Pacific"))
    # two answerable examples end as their current recordings end (CI's 25-minute budget): the page replays both
    outcomes = dict(asked) | {q: _recorded_outcome(q) for q in RECORDED_IN_CORPUS}
    for question in [q for q, _ in expected if q not in outcomes]:
        # the answer on the page is marked, so the wait is for this run's own (an earlier answer is on it)
        tab.evaluate("() => document.querySelectorAll('#raqa-answers .raqa-answer').forEach(a => a.dataset.old = 1)")
        _set_k(tab, LIVE_OUTSIDE_K if question == live_outside else RunSettings.k)
        tab.locator("#raqa-question textarea").fill(question)
        tab.locator("#raqa-run").click()
        final = tab.locator(f'.raqa-answer[data-question="{question}"]:not([data-old])')
        final.wait_for(timeout=180000)
        outcomes[question] = _outcome(final)
    _set_k(tab, RunSettings.k)

    def right(answer: str, got: str) -> bool:
        return normalize_answer(answer) in normalize_answer(got)

    lies = {
        q: got
        for q, answer in expected
        if (got := outcomes[q])[0] == "answered" and not (answer and right(answer, got[1]))
    }
    assert not lies, f"Answered on a wrong answer: {lies}"
    assert all(outcomes[q][0] == "not_found" for q, answer in expected if answer is None), outcomes
    ocean = outcomes["Which is the largest of Earth's oceans?"]
    assert ocean[0] != "answered", outcomes
    # the Atlantic page calls it the second-largest ocean: that answer is red (reading/contrast.py), never the end
    assert not (ocean[0] == "weak" and "atlantic" in ocean[1].lower()), outcomes
    in_corpus = [(e["question"], e["answer"]) for e in examples["in_corpus"]]
    solved = [q for q, a in in_corpus if outcomes[q][0] in ("answered", "weak") and right(a, outcomes[q][1])]
    assert len(solved) == len(in_corpus), outcomes
    amber = tab.locator('.raqa-answer[data-verdict="weak"]')
    assert amber.count() >= 1 and "unsure" in amber.first.inner_text()


def test_experiments_view_shows_every_committed_result_as_a_figure(page):
    import json

    records = [json.loads(p.read_text()) for p in sorted((ROOT / "assets" / "results").glob("*.json"))]
    expected = sum(1 for r in records if r.get("experiment"))
    page.get_by_role("tab", name="Experiments").click()
    if expected == 0:
        page.wait_for_selector(".raqa-empty", timeout=10000)
        return
    page.wait_for_function(
        f"() => document.querySelectorAll('.raqa-experiment .js-plotly-plot').length >= {expected}", timeout=30000
    )
    assert page.locator(".raqa-experiment").count() == expected
    captions = page.locator(".raqa-caption").all_inner_texts()
    assert len(captions) == expected
    commands = {" ".join(r["command"].split()[:4]) for r in records if r.get("experiment")}  # python -m lab VERB
    assert all(any(command in c for command in commands) for c in captions), (commands, captions)


def test_when_to_retrieve_leads_with_the_pipeline_and_folds_the_evaluation(page):
    import json

    page.get_by_role("tab", name="When to retrieve").click()
    page.locator("#raqa-pipe-question textarea").fill(XSS_QUESTION)
    page.locator("#raqa-pipe-run").click()
    page.wait_for_selector('#raqa-pipe-out .raqa-pipeline[data-done="true"]', timeout=30000)
    steps = page.locator("#raqa-pipe-out").inner_text()
    assert "1. Answer closed-book" in steps and "2. Decide" in steps and "P(<RET>) 0.900" in steps
    assert "Zebra facts" in steps  # the window's page: a hostile title, shown as text
    assert page.evaluate("() => window.__raqa_xss") is None and page.dialogs == []
    assert page.locator("#raqa-pipe-out img, #raqa-pipe-out script").count() == 0
    # the evaluations' figures wait, folded, under one accordion below the live pipeline
    accordion = page.locator("#raqa-w2r-evaluation")
    assert accordion.count() == 1
    assert page.locator("#raqa-pipe-run").bounding_box()["y"] < accordion.bounding_box()["y"]
    records = [json.loads(p.read_text()) for p in (ROOT / "assets" / "results").glob("*.json")]
    kinds = {"pipeline": 3, "ret_signal": 1, "when_to_retrieve": 4}
    figures = sum(kinds.get(r.get("experiment"), 0) for r in records if "error" not in r)
    if figures:
        accordion.get_by_text("The evaluations").first.click()
        page.wait_for_function(
            f"() => document.querySelectorAll('.raqa-w2r-figure .js-plotly-plot').length >= {figures}",
            timeout=30000,
        )
        captions = " ".join(page.locator(".raqa-w2r-caption").all_inner_texts())
        assert (
            "python -m lab experiment when_to_retrieve" in captions and "python -m lab experiment pipeline" in captions
        )
