"""The badge's rule when an answer judge reads the pages: does the page the model cites say the same answer?

The lexical grounding check (grounding.py) asks whether the cited page states the model's answer in a sentence
about the question; it cannot tell a right answer from a wrong name copied from a related sentence ("Osaka"
from a sentence about Japan). Here the judge (judge.py) reads the cited page itself and extracts the answer
it finds there; the answer is **Answered** only when the cited page is in the window, the judge finds an answer
on it (its probability reaches its threshold), and the two answers agree: one normalised answer contains the
other, or their token F1 is at least MIN_F1. An answer made only of the question's own words is no answer. Otherwise it is **Unsupported**, and the note says what the page
does say. Left out here: running the judge (engine.py) and the lexical check (grounding.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from raqa.reading.grounding import Grounding
from raqa.reading.judge import JudgeReading, sentence_number
from raqa.reading.prompts import ParsedReply
from raqa.retrieval.index import Hit
from raqa.text import normalize_answer

MIN_F1 = 0.5  # token F1 between the model's and the judge's answers that counts as agreement


def token_f1(a: str, b: str) -> float:
    """Token F1 of two normalised answers.

    Example:
        >>> round(token_f1("Leonardo da Vinci", "da Vinci"), 2)
        0.8
    """
    left, right = normalize_answer(a).split(), normalize_answer(b).split()
    common = sum((Counter(left) & Counter(right)).values())
    if not common:
        return 0.0
    precision, recall = common / len(left), common / len(right)
    return 2 * precision * recall / (precision + recall)


def agrees(model_answer: str, judge_answer: str) -> bool:
    """Whether two answers name the same thing: normalised containment either way, or token F1 >= MIN_F1.

    Example:
        >>> agrees("Leonardo da Vinci", "Leonardo"), agrees("Osaka", "Tokyo")
        (True, False)
    """
    a, b = normalize_answer(model_answer), normalize_answer(judge_answer)
    if not a or not b:
        return False
    if f" {a} " in f" {b} " or f" {b} " in f" {a} ":
        return True
    return token_f1(a, b) >= MIN_F1


def restates_question(answer: str, question: str) -> bool:
    """Whether every word of the answer is already in the question ("gold" for "the chemical symbol for gold"):
    such a reply names what was asked about, not an answer.

    Example:
        >>> restates_question("gold", "What is the chemical symbol for gold?"), restates_question("Au", "... gold?")
        (True, False)
    """
    words = normalize_answer(answer).split()
    return bool(words) and set(words) <= set(normalize_answer(question).split())


def check_agreement(
    reply: ParsedReply, window: Sequence[Hit], readings: Sequence[JudgeReading], threshold: float, question: str = ""
) -> Grounding:
    """The badge for an answer reply: agreement between the model and the judge on the page the model cites."""
    if reply.kind != "answer" or reply.answer is None:
        return Grounding(False, "No answer to check.")
    if question and restates_question(reply.answer, question):
        return Grounding(False, f"The answer {reply.answer!r} only repeats words of the question.", reply.page_id)
    if reply.page_id is None:
        return Grounding(False, "The reply names no page.")
    position = next((i for i, hit in enumerate(window) if hit.page.id == reply.page_id), None)
    if position is None:
        return Grounding(False, f"The reply cites page {reply.page_id}, which is not in this window.")
    page_id, reading = reply.page_id, readings[position]
    if reading.answer is None or reading.p_answer < threshold or restates_question(reading.answer, question):
        return Grounding(
            False,
            f"The judge finds no answer to the question on page {page_id} (P = {reading.p_answer:.2f}).",
            page_id,
        )
    sentence = sentence_number(window[position].page.text, reading.sentence)
    if agrees(reply.answer, reading.answer):
        note = f"The judge reads page {page_id} and finds the same answer: {reading.answer!r}."
        return Grounding(True, note, page_id, sentence, reading.sentence)
    note = f"Page {page_id} says {reading.answer!r}, not {reply.answer!r} (the judge's reading)."
    return Grounding(False, note, page_id, sentence, reading.sentence)
