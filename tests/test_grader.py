"""The grader's badge: an answer the cited page does not mention is red without asking; otherwise the model's P(yes)
that the page states it decides red, amber or green; the run moves on past red answers and stops at a supported one.
A fake grading model stands in for the 1.5B (its real grading is in test_llamacpp.py)."""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.models.base import ModelError
from raqa.reading.engine import run
from raqa.reading.events import Final, WindowVerdict
from raqa.reading.grader import WEAK, Grader, grading_messages, load_thresholds, yes_probability
from raqa.reading.prompts import parse_reply
from raqa.retrieval.index import Hit


class FakeGrading:
    """Says yes with a fixed probability per answer, and records what it was asked."""

    def __init__(self, p_yes: dict[str, float] | None = None, fail: bool = False):
        self.p_yes, self.fail, self.asked = p_yes or {}, fail, []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def first_token_probabilities(self, messages, words):
        self.asked.append(messages)
        if self.fail:
            raise ModelError("the server went away")
        answer = messages[-1]["content"].split("Proposed answer: ")[1].split("\n")[0]
        p = self.p_yes.get(answer, 0.5)
        return {"Yes": p, "No": 1 - p}


def _hits(tiny_pages, *ids):
    pages = {p.id: p for p in tiny_pages}
    return tuple(Hit(rank, 1.0, pages[i]) for rank, i in enumerate(ids, start=1))


def _reply(answer: str, page: str):
    return parse_reply(f"ANSWER: {answer}\nPAGE: {page}\nSENTENCE: 1")


@pytest.mark.parametrize(
    ("p_yes", "supported", "weak"),
    [(0.95, True, False), (0.7, True, True), (0.3, False, False)],
)
def test_p_yes_decides_green_amber_or_red(tiny_pages, p_yes, supported, weak) -> None:
    grading = FakeGrading({"Leonardo da Vinci": p_yes})
    check = Grader(grading, weak=0.5, answered=0.9).grade(
        _reply("Leonardo da Vinci", "p3"), _hits(tiny_pages, "p3"), "Who painted the Mona Lisa?", 320
    )
    assert (check.supported, check.weak, check.support) == (supported, weak, p_yes)
    assert (
        len(grading.asked) == 1 and "The Mona Lisa is a portrait painted by Leonardo" in grading.asked[0][1]["content"]
    )
    if supported:
        assert check.passage and "Leonardo" in check.passage  # the lexical check still finds the sentence


def test_without_an_answered_threshold_nothing_is_green(tiny_pages) -> None:
    check = Grader(FakeGrading({"Leonardo da Vinci": 0.99})).grade(
        _reply("Leonardo da Vinci", "p3"), _hits(tiny_pages, "p3"), "Who painted the Mona Lisa?", 320
    )
    assert check.supported and check.weak


@pytest.mark.parametrize(
    ("answer", "page", "note"),
    [
        ("Leonardo da Vinci", "p2", "does not mention 'Leonardo da Vinci': the answer came from memory"),
        ("Leonardo da Vinci", "p9", "cites page p9, which is not in this window"),
        ("Mona Lisa", "p3", "only repeats words of the question"),
    ],
)
def test_answers_no_page_can_state_are_red_without_asking(tiny_pages, answer, page, note) -> None:
    grading = FakeGrading({answer: 0.99})
    check = Grader(grading, answered=0.9).grade(
        _reply(answer, page), _hits(tiny_pages, "p2", "p3"), "Who painted the Mona Lisa?", 320
    )
    assert not check.supported and note in check.note and grading.asked == []


def test_in_a_window_of_one_page_a_wrong_page_id_is_graded_against_that_page(tiny_pages) -> None:
    """Asked about the worked example's own topic, the reader copies its page id; with one page shown, the answer is
    graded against that page (and still goes red where the page does not state it)."""
    grading = FakeGrading({"Leonardo da Vinci": 0.8, "Claude Monet": 0.1})
    grader = Grader(grading, answered=0.9)
    right = grader.grade(_reply("Leonardo da Vinci", "901"), _hits(tiny_pages, "p3"), "Who painted the Mona Lisa?", 320)
    assert right.supported and right.page_id == "p3" and len(grading.asked) == 1
    wrong = grader.grade(_reply("Claude Monet", "901"), _hits(tiny_pages, "p3"), "Who painted the Mona Lisa?", 320)
    assert not wrong.supported and wrong.page_id == "p3"
    nowhere = grader.grade(_reply("Leonardo da Vinci", "p9"), _hits(tiny_pages, "p2", "p3"), "Who?", 320)
    assert not nowhere.supported and "not in this window" in nowhere.note  # two pages: which one is unknowable


def test_a_grader_that_fails_leaves_the_answer_red_with_the_reason(tiny_pages) -> None:
    check = Grader(FakeGrading(fail=True)).grade(
        _reply("Leonardo da Vinci", "p3"), _hits(tiny_pages, "p3"), "Who painted the Mona Lisa?", 320
    )
    assert not check.supported and "the server went away" in check.note


def test_a_run_moves_past_red_answers_and_ends_on_the_graded_one(tiny_index) -> None:
    """Forward, one page a window, grounded only (what the graded reader runs): an invented answer on a page that
    does not mention it is red and the run goes on; the page that states it ends the run amber."""
    hits = tiny_index.search("Who painted the Mona Lisa?", 3)
    ids = [h.page.id for h in hits]
    assert ids[0] == "p3"
    replies = [f"ANSWER: Leonardo da Vinci\nPAGE: {i}\nSENTENCE: 1" for i in reversed(ids)]
    grading = FakeGrading({"Leonardo da Vinci": 0.8})
    settings = RunSettings(window=1, k=3, order="backward", grounded_only=True)
    events = list(
        run(
            "Who painted the Mona Lisa?",
            tiny_index,
            ScriptedBackend(replies),
            settings,
            grader=Grader(grading, answered=0.9),
        )
    )
    verdicts = [e.verdict for e in events if isinstance(e, WindowVerdict)]
    final = events[-1]
    assert verdicts == ["unsupported", "unsupported", "weak"]
    assert isinstance(final, Final) and final.answer == "Leonardo da Vinci" and final.verdict == "weak"
    assert len(grading.asked) == 1  # only the page that mentions the answer was graded


def test_the_grading_prompt_holds_the_page_the_question_and_the_answer() -> None:
    system, user = grading_messages("Who wrote Emma?", "Jane Austen", "Emma (novel)", "Emma is a novel by Jane Austen.")
    assert "not by what you know" in system["content"]
    assert user["content"].startswith("Passage (Emma (novel)): Emma is a novel by Jane Austen.")
    assert "Proposed answer: Jane Austen" in user["content"] and user["content"].endswith("Reply Yes or No.")


def test_yes_probability_reads_either_spelling_and_defaults_to_unsure() -> None:
    assert yes_probability({"Yes": 0.3, "yes": 0.3, "No": 0.4}) == pytest.approx(0.6)
    assert yes_probability(None) == 0.5 and yes_probability({"Yes": 0.0, "No": 0.0}) == 0.5


def test_thresholds_are_read_from_the_calibration_file_and_a_bad_one_is_refused(tmp_path) -> None:
    assert load_thresholds(tmp_path / "none.json") == (WEAK, None)
    good = tmp_path / "grader.json"
    good.write_text(json.dumps({"weak": 0.5, "answered": 0.92, "command": "x"}))
    assert load_thresholds(good) == (0.5, 0.92)
    good.write_text(json.dumps({"weak": 0.5, "answered": None}))
    assert load_thresholds(good) == (0.5, None)
    for bad in ('{"weak": 2, "answered": null}', '{"weak": 0.5}', "[1]", "not json"):
        good.write_text(bad)
        with pytest.raises(ValueError, match="grader"):
            load_thresholds(good)


def _page_hit(title: str, text: str) -> tuple[Hit, ...]:
    from raqa.retrieval.corpus import Page

    return (Hit(1, 1.0, Page("z1", title, text)),)


@pytest.mark.parametrize(
    ("question", "text", "answer", "red"),
    [
        # the page ranks the answer where the question asks for the top: red, and the model is not asked
        ("What is the longest river in Africa?", "The Zambezi is the fourth-longest river in Africa.", "Zambezi", True),
        (
            "What is the largest planet?",
            "Neptune is far out. It is the fourth largest planet by diameter.",
            "Neptune",
            True,
        ),
        ("Which is the largest ocean?", "The Atlantic is the second-largest of the world's oceans.", "Atlantic", True),
        # the page also says the plain superlative, or the question asks for the rank: graded as usual
        (
            "What is the longest river?",
            "The Nile is the longest river, the second-longest river by flow.",
            "Nile",
            False,
        ),
        ("Which is the second longest river?", "The Congo is the second-longest river in Africa.", "Congo", False),
        (
            "What is the largest planet?",
            "Jupiter is the largest planet. Saturn is the second-largest planet.",
            "Jupiter",
            False,
        ),
    ],
)
def test_a_page_giving_a_rank_where_the_question_asks_for_the_top_is_red(question, text, answer, red) -> None:
    grading = FakeGrading({answer: 0.8})
    check = Grader(grading, weak=0.5, answered=0.9).grade(_reply(answer, "z1"), _page_hit("Page", text), question, 320)
    assert check.supported is not red
    assert len(grading.asked) == (0 if red else 1)
    if red:
        assert "not the top rank the question asks for" in check.note and check.support is None
