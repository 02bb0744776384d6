"""The pipeline's HTML: every step in order, the ending above the windows, and text from models and questions
escaped (no UI toolkit needed)."""

from __future__ import annotations

from raqa.web.render_pipeline import PipelineView, ret_examples_html
from raqa.when_to_retrieve.pipeline import ClosedBookAnswered, PipelineEnded, decide_retrieval

HOSTILE = '<img src=x onerror="alert(1)">'


def test_steps_render_in_order_and_escaped():
    view = PipelineView(f"Who? {HOSTILE}")
    assert "thinking" in view.html() and 'data-done="false"' in view.html()
    view.add(ClosedBookAnswered("q", f"Paris {HOSTILE}", (("p_true", 0.8),), 1.0))
    view.add(decide_retrieval("p_true", {"p_true": 0.8}, 0.5))
    view.add(PipelineEnded(f"Paris {HOSTILE}", "memory", "answered from memory", 1.2))
    html = view.html()
    assert "<img" not in html and "&lt;img" in html
    assert html.index("1. Answer closed-book") < html.index("2. Decide") < html.index("raqa-pipe-end")
    assert 'data-source="memory"' in html and 'data-done="true"' in html and "3. Read the windows" not in html
    # a memory answer is checked against no page: never the green badge of a supported answer
    assert "From memory, unchecked" in html and "raqa-unchecked" in html and "raqa-answered" not in html


def test_i_dont_know_is_said_in_words():
    view = PipelineView("q")
    view.add(ClosedBookAnswered("q", "", (), 0.1))
    view.add(decide_retrieval("always", {}, None))
    view.add(PipelineEnded(None, "none", "no window gave an answer the reader stands by", 3.0))
    html = view.html()
    assert "I don&#x27;t know" in html and "3. Read the windows" in html and "(empty reply)" in html


def test_the_ret_table_marks_each_question_against_the_threshold():
    examples = [{"question": HOSTILE, "p_ret": 0.7, "closed_book": HOSTILE}, {"question": "b", "p_ret": 0.2}]
    html = ret_examples_html(examples, 0.5)
    assert 'data-retrieving="1"' in html and "<img" not in html
    assert html.index("<td><bdi>b</bdi>") < html.index("&lt;img")  # lowest P(<RET>) first
    assert 'data-retrieving="2"' in ret_examples_html(examples, 0.1)
    assert "eval-pipeline" in ret_examples_html([], 0.5)
