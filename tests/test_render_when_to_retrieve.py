"""The When-to-retrieve HTML: every step of the stream in order, the ending above the windows, the committed
evaluations in words, and text from models, pages and questions escaped (no UI toolkit needed)."""

from __future__ import annotations

from raqa.web.render_when_to_retrieve import DECISION_BADGES, PipelineView, evaluation_summary, ret_examples_html
from raqa.when_to_retrieve.pipeline import ClosedBookAnswered, PipelineEnded, RetrievalDecided, decide_retrieval

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
    assert "experiment pipeline" in ret_examples_html([], 0.5)


def test_no_decision_badge_wears_the_green_of_a_supported_answer():
    """Answering from memory is a decision, checked against no page: its badge must never look like Answered,
    whatever the closed-book answer says ("The Titanic sank in 2014.")."""
    import re

    from raqa.config import ASSETS_DIR

    css = (ASSETS_DIR / "style.css").read_text()
    colour = {name: value for name, value in re.findall(r"^\.raqa-(\w+) \{ background: (#[0-9a-f]{6}); \}", css, re.M)}
    html = ret_examples_html(
        [{"question": "In which year did the Titanic sink?", "p_ret": 0.1, "closed_book": "The Titanic sank in 2014."}],
        0.5,
    )
    used = re.findall(r'class="raqa-badge raqa-(\w+)"', html)
    assert used == ["memory"] and colour["memory"] != colour["answered"]
    assert all(colour[css_name] != colour["answered"] for css_name, _ in DECISION_BADGES.values())


def test_a_page_answer_with_weak_support_is_amber_not_green():
    from raqa.config import RunSettings
    from raqa.reading.events import Final, RunStarted

    view = PipelineView("Who painted the Mona Lisa?")
    view.add(ClosedBookAnswered("q", "Raphael", (), 0.2))
    view.add(decide_retrieval("always", {}, None))
    view.add(RunStarted("Who painted the Mona Lisa?", RunSettings(), "scripted"))
    view.add(
        Final(
            "Who painted the Mona Lisa?",
            "iterative",
            "forward",
            "Leonardo da Vinci",
            False,
            "weak",
            True,
            1,
            "p3",
            None,
            1,
            1,
            10,
            5,
            40,
            0.5,
        )
    )
    view.add(PipelineEnded("Leonardo da Vinci", "pages", "window 1 answered (weak)", 1.0))
    end = view.html()[view.html().index("raqa-pipe-end") :]
    assert "raqa-weak" in end and "weak support" in end and "raqa-answered" not in end


def test_a_policy_that_cannot_decide_says_so():
    view = PipelineView("q")
    view.add(ClosedBookAnswered("q", "Paris", (), 0.1))
    view.add(RetrievalDecided("popularity", None, "popularity", None, None, f"cannot decide {HOSTILE}"))
    view.add(PipelineEnded(None, "none", "cannot decide", 0.2))
    html = view.html()
    assert "Cannot decide" in html and "raqa-undecided" in html and "<img" not in html and "I don&#x27;t know" in html


def test_evaluation_summary_lists_each_dataset_and_escapes_names():
    est = {"value": 0.25, "low": 0.1, "high": 0.4, "n": 8}
    dataset = {
        "n": 8,
        "policies": {"never": {"accuracy": est}, "adapt": {"accuracy": est}},
        "ret_rate": {**est, "value": 0.875},
    }
    html = evaluation_summary({"results": {"datasets": {"<b>nq</b>": dataset}}})
    assert "<b>&lt;b&gt;nq&lt;/b&gt;</b> test (n=8)" in html and "never 25.0%" in html and "Adapt-LLM 25.0%" in html
    assert "&lt;RET&gt; on 87.5%" in html
