"""The When-to-retrieve cards: what each decision shows, and that model, page and question text is escaped."""

from __future__ import annotations

from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.web.render_when_to_retrieve import RouteView
from raqa.when_to_retrieve.policies import Answer, Decision, PageRead, PolicyFailed

XSS = '<img src=x onerror="alert(1)">'


def test_four_cards_in_policy_order_with_a_busy_one():
    view = RouteView("q?", busy="always")
    html = view.html()
    assert (
        html.index("Never retrieve")
        < html.index("Always retrieve")
        < html.index("Adapt-LLM")
        < html.index("Popularity")
    )
    assert html.count("raqa-route-card") == 4 and "Deciding…" in html and "thinking…" in html


def test_adapt_card_shows_ret_probability_first_reply_page_and_answer():
    view = RouteView("q?")
    hit = Hit(1, 3.5, Page("p", "Mount Everest", "Everest is high."))
    for event in (
        Decision("adapt", True, "asked for retrieval with <RET>", 0.734, "<RET>"),
        PageRead("adapt", hit, "Mount Everest: Everest is high."),
        Answer("adapt", "Everest", True, "adapt"),
    ):
        view.add(event)
    card = view.html().split('raqa-route-adapt">', 1)[1]
    assert "Retrieved" in card and "P(&lt;RET&gt;) = 0.734" in card and 'style="width:73.4%"' in card
    assert "page #1: <bdi>Mount Everest</bdi>" in card and "answer (with the page)" in card
    assert "first reply: <bdi>&lt;RET&gt;</bdi>" in card


def test_undecided_and_failed_cards():
    view = RouteView("q?")
    view.add(Decision("popularity", None, "cannot decide: no popularity is known"))
    view.add(Decision("always", True, "always retrieves"))
    view.add(PageRead("always", None, ""))
    view.add(PolicyFailed("always", "BM25 found no page"))
    html = view.html()
    assert "Cannot decide" in html and "no popularity is known" in html and "BM25 found no page" in html


def test_question_page_and_model_text_are_escaped():
    view = RouteView(XSS)
    hit = Hit(1, 1.0, Page("p", XSS, XSS))
    view.add(Decision("adapt", True, "asked", 0.5, XSS))
    view.add(PageRead("adapt", hit, XSS))
    view.add(Answer("adapt", XSS, True, "adapt"))
    view.add(Answer("never", XSS, False, "never"))
    html = view.html()
    assert "<img" not in html and html.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 6


def test_ret_probability_bar_stays_in_range():
    view = RouteView()
    view.add(Decision("adapt", False, "answered from memory", 1.7, "Paris"))
    assert 'style="width:100.0%"' in view.html()


def test_evaluation_summary_lists_each_dataset_and_escapes_names():
    from raqa.web.render_when_to_retrieve import evaluation_summary

    est = {"value": 0.25, "low": 0.1, "high": 0.4, "n": 8}
    record = {
        "results": {
            "datasets": {
                "<b>nq</b>": {
                    "n": 8,
                    "policies": {"never": {"accuracy": est}, "adapt": {"accuracy": est}},
                    "ret_rate": {**est, "value": 0.875},
                }
            }
        }
    }
    html = evaluation_summary(record)
    assert "<b>&lt;b&gt;nq&lt;/b&gt;</b> test (n=8)" in html and "never 25.0%" in html and "Adapt-LLM 25.0%" in html
    assert "&lt;RET&gt; on 87.5%" in html
