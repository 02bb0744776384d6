"""The badge's rule when an answer judge reads the pages: does the page the model cites say the same answer?

The lexical grounding check (grounding.py) asks whether the cited page states the model's answer in a sentence
about the question; it cannot tell a right answer from a wrong name copied from a related sentence ("Osaka"
from a sentence about Japan). Here the judge (judge.py) reads the cited page itself and extracts the answer
it finds there; the answer is **Answered** only when the cited page is in the window, the judge finds an answer
on it (its score reaches its threshold), and the two answers agree: one normalised answer contains the
other, or their token F1 is at least MIN_F1; with a support model (support.py) Answered needs the page's support
to reach the Answered threshold, and an agreeing answer below it is Weak support. An answer made only of the
question's own words is no answer. Otherwise it is **Unsupported**, and the note says what the page does say. Left out here: running the judge (engine.py) and the lexical check (grounding.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from raqa.config import RunSettings
from raqa.reading.grounding import Grounding
from raqa.reading.judge import JudgeReading, sentence_number
from raqa.reading.prompts import ParsedReply
from raqa.retrieval.index import Hit
from raqa.text import agrees, restates_question


def check_agreement(
    reply: ParsedReply,
    window: Sequence[Hit],
    readings: Sequence[JudgeReading],
    settings: RunSettings,
    question: str = "",
) -> Grounding:
    """The badge for an answer reply: agreement between the model and the judge on the page the model cites.

    The judge finds an answer on the page when its score (support, or P(answer) without a support model) reaches
    settings.judge_threshold. An agreeing answer is Answered; with a support model, only at or above
    settings.answered_threshold, and Weak support below it (`weak`).
    """
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
    if (
        reading.answer is None
        or reading.score < settings.judge_threshold
        or restates_question(reading.answer, question)
    ):
        return Grounding(
            False,
            f"The judge finds no answer to the question on page {page_id} ({score_text(reading)}).",
            page_id,
            support=reading.support,
        )
    sentence = sentence_number(window[position].page.text, reading.sentence)
    if agrees(reply.answer, reading.answer):
        weak = is_weak(reading, settings)
        note = f"The judge reads page {page_id} and finds the same answer: {reading.answer!r} ({score_text(reading)})."
        if weak:
            note += " Answers with this little support are often wrong: treat it as unsure."
        return Grounding(
            True, note, page_id, sentence=sentence, passage=reading.sentence, support=reading.support, weak=weak
        )
    note = f"Page {page_id} says {reading.answer!r}, not {reply.answer!r} (the judge's reading)."
    return Grounding(False, note, page_id, sentence=sentence, passage=reading.sentence, support=reading.support)


def is_weak(reading: JudgeReading, settings: RunSettings) -> bool:
    """Whether a page's support earns only Weak support: below the Answered threshold, or none is set."""
    return reading.support is not None and (
        settings.answered_threshold is None or reading.support < settings.answered_threshold
    )


def score_text(reading: JudgeReading) -> str:
    """The judge's numbers for one page, as the notes quote them."""
    if reading.support is None:
        return f"P = {reading.p_answer:.2f}"
    return f"support {reading.support:.2f}, P = {reading.p_answer:.2f}"
