"""Windows the answer judge decides: the judge alone as the reader, and the judge's gate before the model.

With `reader_mode="judge"` the judge's best span is the window's answer (an extractive reader, the baseline a
viewer compares the model with). With `reader_mode="model_judge"` (selective generation, as in Joren et al.,
*Sufficient Context*, ICLR 2025) the model is asked only when the judge finds an answer on one of the window's
pages; otherwise the window is declined without a model call, and the reason says what the judge found.
Left out here: the model's own reply (engine.py) and the badge of a model's answer (agreement.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from raqa.config import RunSettings
from raqa.reading.agreement import is_weak, score_text
from raqa.reading.grounding import Grounding
from raqa.reading.judge import JudgeReading, sentence_number
from raqa.reading.prompts import ParsedReply
from raqa.retrieval.index import Hit


def best(readings: Sequence[JudgeReading]) -> int:
    """The position of the page the judge finds most likely to state a right answer (its support, else P)."""
    return max(range(len(readings)), key=lambda i: readings[i].score)


def finds_answer(reading: JudgeReading, threshold: float) -> bool:
    return reading.answer is not None and reading.score >= threshold


def judge_decides(readings: Sequence[JudgeReading], settings: RunSettings) -> bool:
    """Whether the judge settles this window without the model: it reads alone, or it gates and finds nothing."""
    if settings.reader_mode == "judge":
        return True
    return settings.reader_mode == "model_judge" and not finds_answer(readings[best(readings)], settings.gate_threshold)


def judge_reply(
    hits: Sequence[Hit], readings: Sequence[JudgeReading], settings: RunSettings
) -> tuple[ParsedReply, Grounding | None]:
    """The window's reply when the judge decides it: its answer with page and sentence, or a decline with why."""
    i = best(readings)
    reading, page = readings[i], hits[i].page
    if settings.reader_mode == "judge" and finds_answer(reading, settings.gate_threshold):
        number = sentence_number(page.text, reading.sentence)
        raw = f"ANSWER: {reading.answer}\nPAGE: {page.id}" + (f"\nSENTENCE: {number}" if number else "")
        reply = ParsedReply("answer", raw, reading.answer, page.id, number)
        weak = is_weak(reading, settings)
        note = f"The judge's own answer, read from page {page.id} ({score_text(reading)})."
        return reply, Grounding(
            True, note, page.id, sentence=number, passage=reading.sentence, support=reading.support, weak=weak
        )
    unasked = "" if settings.reader_mode == "judge" else "; the model was not asked"
    reason = (
        f"The answer judge finds no answer on these pages: its best is {score_text(reading)} on page {page.id}, "
        f"below the gate {settings.gate_threshold:.2f}{unasked}."
    )
    return ParsedReply("not_found", "NOT FOUND", reason=reason), None
