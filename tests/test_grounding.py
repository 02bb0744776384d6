"""The grounding check: is the answer stated in the page and sentence the reply cites?"""

from __future__ import annotations

import pytest

from raqa.reading.grounding import Grounding, about_question, answer_in_text, check, content_words, locate_quote
from raqa.reading.prompts import ParsedReply, parse_reply
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.text import split_sentences

MONA = Page(
    "p3",
    "Mona Lisa",
    "The Mona Lisa is a portrait painted by Leonardo da Vinci. It hangs in the Louvre museum in Paris. "
    "The painting was stolen in 1911 and recovered two years later.",
)
DANUBE = Page("p5", "Danube", "The Danube is the second-longest river in Europe. The river ends in the Black Sea.")
WINDOW = (Hit(1, 3.0, MONA), Hit(2, 1.0, DANUBE))
MONA_SENTENCES = split_sentences(MONA.text)
# shares a content word with both pages (through their titles), so every sentence is "about" it
QUESTION = "Who painted the Mona Lisa, where does it hang, and where does the Danube end?"


def grounding_of(reply: str, question: str = QUESTION) -> Grounding:
    return check(parse_reply(reply), WINDOW, question)


@pytest.mark.parametrize(
    ("reply", "sentence"),
    [
        ("ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1", 1),
        ("ANSWER: leonardo DA VINCI!\nPAGE: p3\nSENTENCE: 1", 1),
        ("ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1", 1),
        ("ANSWER: the Louvre\nPAGE: p3\nSENTENCE: 2", 2),
        ("ANSWER: 1911\nPAGE: p3\nSENTENCE: 3", 3),
        ("ANSWER: the Black Sea\nPAGE: p5\nSENTENCE: 2", 2),
    ],
)
def test_answer_in_the_cited_sentence_is_supported(reply: str, sentence: int) -> None:
    result = grounding_of(reply)
    page = MONA if "p3" in reply else DANUBE
    assert result == Grounding(
        True,
        f"Sentence {sentence} of page {page.id} states the answer.",
        page.id,
        sentence,
        split_sentences(page.text)[sentence - 1],
    )


@pytest.mark.parametrize(
    ("answer", "supported"),
    [
        ("Leonardo da Vinci painter", True),  # 3 of 4 words present
        ("Leonardo di ser Piero da Vinci", False),  # 3 of 6 words present, under the 0.6 share
        ("Vinci Leonardo", True),  # all words, another order
        ("Leo", False),  # part of a word is not the word
    ],
)
def test_most_content_words_are_enough(answer: str, supported: bool) -> None:
    assert grounding_of(f"ANSWER: {answer}\nPAGE: p3\nSENTENCE: 1").supported is supported


def test_wrong_sentence_but_answer_elsewhere_in_the_page_is_supported_with_a_note() -> None:
    result = grounding_of("ANSWER: Louvre\nPAGE: p3\nSENTENCE: 1")
    assert result == Grounding(
        True,
        "The reply cites sentence 1; sentence 2 of page p3 states the answer.",
        "p3",
        2,
        MONA_SENTENCES[1],
    )


@pytest.mark.parametrize("reply", ["ANSWER: Louvre\nPAGE: p3\nSENTENCE: 9", "ANSWER: Louvre\nPAGE: p3"])
def test_missing_or_impossible_sentence_falls_back_to_the_page(reply: str) -> None:
    result = grounding_of(reply)
    assert result.supported
    assert result.note == "The reply cites no sentence; sentence 2 of page p3 states the answer."
    assert (result.page_id, result.sentence, result.passage) == ("p3", 2, MONA_SENTENCES[1])


def test_page_not_in_the_window_is_unsupported() -> None:
    result = grounding_of("ANSWER: Leonardo da Vinci\nPAGE: p7\nSENTENCE: 1")
    assert result == Grounding(False, "The reply cites page p7, which is not in this window.")


def test_answer_without_a_page_is_unsupported() -> None:
    assert grounding_of("ANSWER: Leonardo da Vinci\nSENTENCE: 1") == Grounding(False, "The reply names no page.")


def test_answer_absent_from_the_page_is_unsupported() -> None:
    result = grounding_of("ANSWER: Michelangelo\nPAGE: p3\nSENTENCE: 1")
    assert result == Grounding(False, "Page p3 does not state 'Michelangelo'.", "p3", 1)


def test_answer_only_on_another_page_of_the_window_is_unsupported() -> None:
    result = grounding_of("ANSWER: Black Sea\nPAGE: p3\nSENTENCE: 2")
    assert not result.supported
    assert result.page_id == "p3"


@pytest.mark.parametrize(
    "quote",
    [
        "It hangs in the Louvre museum in Paris",  # exact
        "it hangs in the LOUVRE museum, in Paris.",  # exact after normalisation
    ],
)
def test_quote_located_exactly(quote: str) -> None:
    result = grounding_of(f'ANSWER: Louvre\nPAGE: p3\nQUOTE: "{quote}"')
    assert result == Grounding(True, "Sentence 2 of page p3 states the answer.", "p3", 2, MONA_SENTENCES[1])


def test_quote_located_fuzzily() -> None:
    quote = "the painting was stolen in 1911 and recovered two years afterwards"
    assert quote not in MONA.text.lower()
    result = grounding_of(f"ANSWER: 1911\nPAGE: p3\nQUOTE: {quote}")
    assert (result.supported, result.sentence, result.passage) == (True, 3, MONA_SENTENCES[2])


def test_quote_takes_precedence_over_the_sentence_number() -> None:
    result = grounding_of("ANSWER: Louvre\nPAGE: p3\nSENTENCE: 3\nQUOTE: It hangs in the Louvre museum in Paris")
    assert (result.supported, result.sentence) == (True, 2)
    assert result.note == "Sentence 2 of page p3 states the answer."


def test_quote_located_but_answer_in_another_sentence() -> None:
    result = grounding_of("ANSWER: Leonardo da Vinci\nPAGE: p3\nQUOTE: It hangs in the Louvre museum in Paris")
    assert result.supported
    assert result.note == "The reply cites sentence 2; sentence 1 of page p3 states the answer."


@pytest.mark.parametrize(
    "quote",
    ["It hangs in the Prado museum in Madrid", "The Danube is the second-longest river in Europe"],
)
def test_quote_not_in_the_page_is_unsupported(quote: str) -> None:
    result = grounding_of(f"ANSWER: Louvre\nPAGE: p3\nQUOTE: {quote}")
    assert result == Grounding(False, "The quoted passage is not in page p3.", "p3")


@pytest.mark.parametrize(
    "reply",
    [
        ParsedReply("not_found", "NOT FOUND"),
        ParsedReply("unparseable", "hmm"),
        ParsedReply("answer", "ANSWER:", answer=None, page_id="p3"),
    ],
)
def test_nothing_to_check(reply: ParsedReply) -> None:
    assert check(reply, WINDOW, QUESTION) == Grounding(False, "No answer to check.")


def test_empty_window_is_unsupported() -> None:
    reply = parse_reply("ANSWER: Leonardo\nPAGE: p3\nSENTENCE: 1")
    assert not check(reply, (), QUESTION).supported


@pytest.mark.parametrize(
    ("answer", "text", "expected"),
    [
        ("Leonardo", "The Mona Lisa is by Leonardo da Vinci.", True),
        ("Michelangelo", "The Mona Lisa is by Leonardo da Vinci.", False),
        ("the", "The Mona Lisa is by Leonardo da Vinci.", False),
        ("", "anything", False),
        ("Dvorak", "Antonín Dvořák composed it.", True),
        ("New York City", "He moved to New York in 1990.", True),
        ("New Amsterdam City", "He moved to New York in 1990.", False),
    ],
)
def test_answer_in_text(answer: str, text: str, expected: bool) -> None:
    assert answer_in_text(answer, text) is expected


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        ("painted by Leonardo da Vinci", 0),
        ("Louvre", 1),
        ("the painting was stolen in 1911 and recovered two years afterwards", 2),
        ("stolen in 1911, then recovered", None),
        ("", None),
        ("...", None),
    ],
)
def test_locate_quote(quote: str, expected: int | None) -> None:
    assert locate_quote(quote, MONA_SENTENCES) == expected


def test_evidence_must_be_about_the_question() -> None:
    result = grounding_of("ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1", "Who won the 2019 baguette prize?")
    assert not result.supported


@pytest.mark.parametrize(
    ("question", "title", "sentence", "expected"),
    [
        ("Who painted the Mona Lisa?", "Mona Lisa", "It was painted by Leonardo.", True),
        ("Who won the 2019 baguette prize?", "Grapes of Wrath", "It is a novel by Steinbeck.", False),
        ("Where is the Louvre?", "Mona Lisa", "It hangs in the Louvre museum in Paris.", True),
        ("Who was the first one to do it?", "Chess", "The first player is white.", False),
        ("Which river ends in the Black Sea?", "Danube", "The river ends in the Black Sea.", True),
        ("Qui a peint la Joconde ?", "Mona Lisa", "The Mona Lisa is by Leonardo.", False),
    ],
)
def test_about_question(question: str, title: str, sentence: str, expected: bool) -> None:
    assert about_question(question, title, sentence) is expected


def test_content_words_drop_question_words_articles_and_single_letters() -> None:
    assert content_words("What is the name of the river in Europe, a.k.a. Danube?") == {"river", "europe", "danube"}
