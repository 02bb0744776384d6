"""render.py: what the page shows for each event, and that no text from outside reaches it unescaped."""

from html import escape

import pytest
from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index, Hit
from raqa.web.render import RunView, highlighted_page_text, page_details

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    '<a href="javascript:alert(1)">x</a>',
    "![x](javascript:alert(1))",
    '" onmouseover="alert(1)',
]


def _pages(payload: str) -> list[Page]:
    return [
        Page("p1", f"Zebra {payload}", f"Zebras live in Africa. {payload} They have stripes."),
        Page("p2", "Lion", "Lions live in Africa too. They hunt zebras."),
    ]


def _view(pages, replies, question="Where do zebras live?", **settings) -> RunView:
    view = RunView()
    for event in run(question, BM25Index.build(pages), ScriptedBackend(replies), RunSettings(**settings)):
        view.update(event)
    return view


def _all_html(view: RunView) -> str:
    return view.answer_html() + view.windows_html() + view.pages_html()


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_page_question_and_reply_are_escaped(payload):
    reply = f"ANSWER: Africa {payload}\nPAGE: p1\nSENTENCE: 1"
    view = _view(_pages(payload), [reply], question=f"Where do zebras live? {payload}", window=2, k=5)
    html = _all_html(view)
    assert "<script" not in html and "<img" not in html and "<a href" not in html
    assert 'onmouseover="' not in html
    assert escape(payload, quote=True) in html  # shown as text, character for character


def test_answer_card_shows_answer_page_and_highlighted_sentence():
    view = _view(_pages("Also."), ["ANSWER: Africa\nPAGE: p1\nSENTENCE: 1"], window=2, k=5)
    assert view.final.verdict == "answered"
    answer = view.answer_html()
    assert "Africa" in answer and "from page p1" in answer and "raqa-answered" in answer
    assert "1 window, 2 pages," in answer  # counted in the singular or plural as they are
    assert '<mark class="raqa-evidence">Zebras live in Africa.</mark>' in view.windows_html()


def test_one_page_read_is_counted_in_the_singular():
    view = _view(_pages("x"), ["ANSWER: Africa\nPAGE: p1\nSENTENCE: 1"], window=1, k=5)
    assert "1 window, 1 page," in view.answer_html()


def test_unsupported_answer_is_flagged_as_invented():
    view = _view(_pages("x"), ["ANSWER: Europe\nPAGE: p1\nSENTENCE: 1"], window=2, k=5)
    assert "raqa-unsupported" in view.answer_html()
    assert "treat it as invented" in view.answer_html()


def test_not_found_and_unparseable_windows():
    view = _view(_pages("x"), ["I cannot say", "NOT FOUND\nREASON: nothing here"], window=1, k=5)
    html = view.windows_html()
    assert "raqa-unparseable" in html and "did not follow the format" in html
    assert "raqa-not-found" in html and "Reason: nothing here" in html
    assert "Answer not found" in view.answer_html() and "2 windows, 2 pages," in view.answer_html()
    # the newest window is drawn first
    assert html.index('data-window="2"') < html.index('data-window="1"')


def test_failure_is_shown_escaped():
    view = RunView()
    from raqa.reading.events import RunFailed

    view.update(RunFailed("<b>boom</b>"))
    assert "&lt;b&gt;boom&lt;/b&gt;" in view.answer_html()


def test_highlight_marks_only_the_cited_sentence():
    html = highlighted_page_text("One <b>. Two is here. Three.", 2)
    assert html.count("<mark") == 1
    assert "&lt;b&gt;" in html
    assert '<mark class="raqa-evidence">Two is here.</mark>' in html


def test_page_details_lists_rank_score_title_id_and_full_text():
    page = Page("42", "Title & more", "A long text. " * 50)
    html = page_details(Hit(3, 7.25, page))
    assert "#3" in html and "7.25" in html and "Title &amp; more" in html and "id 42" in html
    assert html.count("A long text.") == 50
    assert "found by meaning" not in html
    nearest = page_details(Hit(1, 0.0, page, 0.61))  # joined by the nearest-page pass: no word shared
    assert "similarity 0.61 (found by meaning: no word shared with the question)" in nearest
    assert "found by meaning" not in page_details(Hit(1, 3.5, page, 0.61))


def test_a_window_shows_the_judges_reading_escaped(tiny_index):
    from raqa.reading.events import WindowVerdict
    from raqa.reading.grounding import Grounding
    from raqa.reading.judge import JudgeReading
    from raqa.reading.prompts import parse_reply
    from raqa.web.render import judge_html

    hits = tuple(tiny_index.search("Who painted the Mona Lisa?", 2))
    readings = (
        JudgeReading(0.91, "<b>Leonardo</b>", "It was painted by <b>Leonardo</b>."),
        JudgeReading(0.1, None, None),
    )
    reply = parse_reply("ANSWER: Salai\nPAGE: p3\nSENTENCE: 1")
    check = Grounding(False, "Page p3 says '<b>Leonardo</b>', not 'Salai'.", "p3")
    verdict = WindowVerdict(1, hits, "unsupported", reply, check, 0.8, 10, 2, 0.1, readings)
    html = judge_html(verdict)
    assert "P(this window states the answer) 0.91" in html and "&lt;b&gt;Leonardo&lt;/b&gt;" in html
    assert "<b>Leonardo" not in html


def test_a_waiting_run_shows_its_place_and_a_long_wait_offers_the_other_reader_escaped():
    from raqa.reading.events import InLine, RunStarted, WindowStarted

    view = RunView(title="Iterative")
    view.update(RunStarted("q", None, "m"))
    view.update(InLine(3, 4, 130.0, "Qwen <1.5B>", None))
    shown = view.answer_html()
    assert "In line" in shown and 'data-place="3"' in shown and "4 runs ahead" in shown
    assert "about 2 min 10 s" in shown and "Qwen &lt;1.5B&gt;" in shown and "raqa-offer" not in shown
    view.update(InLine(2, 3, 95.0, "m", '<img src=x onerror="alert(1)">'))
    shown = view.answer_html()
    assert "<img" not in shown and 'data-reader="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"' in shown
    assert "raqa-take-offer" in shown
    view.update(WindowStarted(1, 15, (), 500))  # its turn came: the place gives way to the reading
    assert "In line" not in view.answer_html() and "window 1" in view.answer_html()
