"""Two runs side by side: B is A with one setting changed, both stream into their own column, and the last output
says what differs."""

from __future__ import annotations

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service
from raqa.web.ask_tab import ask
from raqa.web.compare import chosen, variant

A = RunForm("iterative", "forward", 1, 6, retrieval="bm25")


@pytest.fixture
def service(tmp_path):
    pages = [Page(str(i), f"Apple note {i}", " ".join(["apple"] * i) + " Pie.") for i in range(1, 7)]

    def reply(messages) -> str:  # answers only from the best page, apple note 6
        return "ANSWER: Pie\nPAGE: 6\nSENTENCE: 1" if "Apple note 6" in messages[-1]["content"] else "NOT FOUND"

    return Service(AppConfig(cache_dir=tmp_path), pages, BM25Index.build(pages), ScriptedBackend(reply), "t", {})


def test_forward_against_backward_streams_both_and_calls_out_the_differences(service) -> None:
    outputs = list(ask(service, "apple", A, compare="the other window order"))
    answers, windows = outputs[-1][0], outputs[-1][1]
    assert 'class="raqa-columns"' in windows and "A: forward" in windows and "B: backward" in windows
    assert windows.count('data-window="') == 1 + 6  # A answers in its first window, B in its last
    assert "raqa-compare" in answers and "Side by side" in answers
    # forward answers in window 1; backward reads all six pages to reach the answer last
    assert 'data-differences="' in answers and "<td>1</td><td>6</td>" in answers
    assert any("B: backward" in o[1] and "A: forward" in o[1] for o in outputs[:-1])  # B streamed as it ran


def test_bm25_against_hybrid_reads_each_retrievals_pages(service) -> None:
    outputs = list(ask(service, "apple", A, compare="the other retrieval"))
    windows = outputs[-1][1]
    assert "A: bm25" in windows and "B: hybrid" in windows
    assert "similarity" in windows.split("B: hybrid", 1)[1]  # B's pages carry the encoder's similarity, A's do not
    assert "similarity" not in windows.split("B: hybrid", 1)[0]


def test_a_comparison_the_page_cannot_make_is_one_message(service) -> None:
    outputs = list(ask(service, "apple", A.replace(strategy="both"), compare="another window size"))
    assert len(outputs) == 1 and "one strategy at a time" in outputs[0][0]
    outputs = list(ask(service, "apple", A, compare="another reader"))
    assert len(outputs) == 1 and "one reader only" in outputs[0][0]
    outputs = list(ask(service, "apple", A, compare="magic"))
    assert len(outputs) == 1 and "Invalid comparison" in outputs[0][0]
    assert service.backend.requests == []


def test_variants_change_one_setting() -> None:
    readers = ["base+judge", "base", "abstain"]
    a = RunForm(order="backward", window=3, reader="base")
    assert variant("another window size", a, readers).form == a.replace(window=1)
    assert variant("another reader", a.replace(reader=None), readers).form.reader == "base"
    assert variant("another reader", a, readers).form == a.replace(reader="base+judge")
    assert variant("nothing", a, readers) is None


def test_settings_of_my_choice_run_b_with_its_own_order_and_window(service) -> None:
    b = A.replace(order="backward", window=3)
    outputs = list(ask(service, "apple", A, compare="settings of my choice", run_b=b))
    answers, windows = outputs[-1][0], outputs[-1][1]
    assert "A: forward, w=1" in windows and "B: backward, w=3" in windows
    assert windows.count('data-window="') == 1 + 2  # B reads pages 1-3 (worst), then 4-6 holding note 6
    assert "<td>1</td><td>2</td>" in answers  # windows read


@pytest.mark.parametrize(
    ("run_b", "message"),
    [
        (A, "same settings as A"),
        (A.replace(order="sideways"), "order"),
        (A.replace(order="backward", window=99), "window"),
        (None, "Run B&#x27;s order"),
        (A.replace(order="backward", reader="nobody"), "reader"),
    ],
)
def test_a_run_b_the_page_cannot_make_is_one_message_and_no_model_call(service, run_b, message) -> None:
    outputs = list(ask(service, "apple", A, compare="settings of my choice", run_b=run_b))
    assert len(outputs) == 1 and message in outputs[0][0] and "raqa-failed" in outputs[0][0]
    assert service.backend.requests == []


def test_chosen_labels_name_only_what_b_changes() -> None:
    a = RunForm(order="forward", window=1, grounded_only=False, reader="base")
    b = RunForm(order="forward", window=1, grounded_only=True, reader="base", k=30)  # B's K is not B's to choose
    assert chosen(a, b) == (a.replace(grounded_only=True), "A: grounded only: no", "B: grounded only: yes")
    assert chosen(a, a.replace(reader="base+judge"))[1:] == ("A: base", "B: base+judge")
    with pytest.raises(ValueError, match="same settings"):
        chosen(a, a)
