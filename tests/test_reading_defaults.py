"""The reading_defaults experiment on a scripted model that answers from the page it read last, and its figure."""

import re

from scripted import ScriptedBackend
from test_reader_comparison import ITEMS, PAGES, identity

from lab.evaluation.positives import PositiveIndex
from lab.evaluation.reading_defaults import CONFIGS, choose, reading_defaults
from lab.figures.experiments import FIGURES
from raqa.config import RunSettings
from raqa.reading.engine import in_reading_order
from raqa.retrieval.index import BM25Index


def answers_from_the_last_page(messages):
    """Like the 135M model: it answers from the page nearest the question, right only when that is Loch Ness."""
    last = re.findall(r"^Page (\d+): ", messages[-1]["content"], re.MULTILINE)[-1]
    answer = "Nessie" if last == "6" else f"Lake {last}"
    return f"ANSWER: {answer}\nPAGE: {last}\nSENTENCE: 1"


def test_the_page_order_reaches_the_prompt_and_the_measurement_picks_what_the_model_reads_best():
    index = BM25Index.build(PAGES)
    record = reading_defaults(
        ITEMS, index, ScriptedBackend(answers_from_the_last_page), RunSettings(k=6), PositiveIndex(PAGES), 5, identity
    )
    rows = {(r["window"], r["page_order"]): r for r in record["rows"]}
    assert list(rows) == list(CONFIGS)
    # Loch Ness is ranked 6th: in its window of 2 (ranks 5, 6) or 3 (4, 5, 6) it is listed last in score order
    for w in (2, 3):
        assert rows[(w, "best_first")]["exact_match_on_positive"]["value"] == 1.0
        assert rows[(w, "best_last")]["exact_match_on_positive"]["value"] == 0.0
    assert rows[(1, "best_first")]["exact_match_on_positive"]["value"] == 1.0
    assert all(r["false_answer_rate_on_negative"]["value"] == 1.0 for r in record["rows"])
    assert record["chosen"]["label"] == "w=1"  # ties on exact match: all false-answer rates equal, the first wins
    figure = FIGURES["reading_defaults"]({"dataset": "tiny", "sample": {"limit": 5, "seed": 0}, "results": record})
    assert [trace.x[0] for trace in figure.data][:1] == ["w=1"] and len(figure.data) == 3


def test_in_reading_order_reverses_only_when_asked():
    hits = (1, 2, 3)
    assert in_reading_order(hits, RunSettings(page_order="best_first")) == (1, 2, 3)
    assert in_reading_order(hits, RunSettings(page_order="best_last")) == (3, 2, 1)


def test_choose_prefers_fewer_false_answers_among_equal_exact_match():
    def row(name, em, far):
        return {
            "label": name,
            "exact_match_on_positive": {"value": em},
            "false_answer_rate_on_negative": {"value": far},
        }

    assert choose([row("a", 0.3, 0.9), row("b", 0.1, 0.1)])["label"] == "a"
    assert choose([row("a", 0.3, 0.9), row("b", 0.295, 0.4)])["label"] == "b"
