"""plots.py: figures carry the data they claim to, and a failing figure becomes a message."""

from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.reading.events import Final, Retrieved, WindowVerdict
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.web.figures_run import safe, score_by_rank, token_meter


def _events(order="forward"):
    pages = [Page(str(i), f"Page {i}", " ".join(["apple"] * i) + " filler text.") for i in range(1, 8)]
    events = list(
        run(
            "apple",
            BM25Index.build(pages),
            ScriptedBackend(["NOT FOUND"] * 10),
            RunSettings(window=3, k=7, order=order),
        )
    )
    hits = next(e for e in events if isinstance(e, Retrieved)).hits
    return hits, [e for e in events if isinstance(e, WindowVerdict)], next(e for e in events if isinstance(e, Final))


def test_score_by_rank_colours_every_read_page_by_its_verdict():
    hits, verdicts, _ = _events()
    figure = score_by_rank(hits, verdicts)
    bars = {trace.name: list(trace.x) for trace in figure.data}
    assert bars == {"not found": [1, 2, 3, 4, 5, 6, 7]}
    # boundaries between windows 1|2 and 2|3 only, not at the ends
    assert sorted(shape.x0 for shape in figure.layout.shapes) == [3.5, 6.5]
    assert [a.text for a in figure.layout.annotations] == ["w1", "w2", "w3"]


def test_unread_pages_are_grey():
    hits, verdicts, _ = _events()
    figure = score_by_rank(hits, verdicts[:1])
    bars = {trace.name: list(trace.x) for trace in figure.data}
    assert bars == {"not found": [1, 2, 3], "unread": [4, 5, 6, 7]}


def test_token_meter_compares_the_run_with_top_k():
    _, _, final = _events()
    figure = token_meter(final.prompt_tokens, final.completion_tokens, final.topk_prompt_tokens, 7)
    values = {trace.name: trace.x[0] for trace in figure.data}
    assert values == {
        "prompt": final.prompt_tokens,
        "completion": final.completion_tokens,
        "Top-K prompt": final.topk_prompt_tokens,
    }


def test_safe_turns_an_error_into_a_message_figure():
    figure = safe(score_by_rank, None, None)
    assert "could not be drawn" in figure.layout.annotations[0].text


def test_a_message_figure_breaks_its_text_into_lines_a_phone_can_show():
    import html

    from raqa.web.figures_run import message_figure

    text = message_figure("After a run: each retrieved page's BM25 score by rank, <b>coloured</b> by its verdict.")
    lines = text.layout.annotations[0].text.split("<br>")
    assert len(lines) >= 2 and all(len(html.unescape(line)) <= 38 for line in lines)
    assert "<b>" not in text.layout.annotations[0].text  # text, not markup
