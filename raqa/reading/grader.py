"""The badge from a grader that reads: after the reader answers, the same model is asked in a fresh chat whether the
page it cites (as the reader was shown it) states that answer to that question, and P(yes) from the first token's
log-probabilities is the answer's support.

A fresh chat, not a follow-up turn of the reader's: asked as a follow-up ("does page 6056 state your answer?") the
1.5B said yes with P about 0.5 to right and wrong answers alike; asked fresh, with the passage and "judge only by
what the passage says", it gave 0.78 to 0.84 to answers the page states and 0.16 to 0.28 to answers from memory on
pages that do not say them (8 hand-made cases; "Neptune" as the largest planet, on a page saying fourth-largest,
still got 0.57, so a page that gives the answer a lower rank than the question asks for is red without asking:
contrast.py). The lexical grounding check (grounding.py) still finds the sentence to highlight.

An answer the page does not mention at all (not its words, nor most of them) is Unsupported without asking: it
came from memory. That is most of the reader's invented answers, and it saves the grader's 2 to 3 seconds of
reading the page again on each of them.

Three states, as before: **Answered** (green) at or above `answered`, chosen on dev questions so that green answers
are right at least 90% of the time, or never when no threshold got there (None); **Weak support** (amber) at or
above `weak` (WEAK unless the calibration says otherwise); **Unsupported** (red) below, or when the reply cites no
page of its window (in a window of one page, any page id it names is taken as that page). The thresholds and how
they were chosen are in assets/grader/grader.json (`python -m lab.evaluation.reading_eval --calibrate`).

Left out: running the reader (engine.py) and the answer judge (judge.py, agreement.py), which this replaces for the
readers that have a grader.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from raqa.config import ASSETS_DIR
from raqa.models.base import ModelError
from raqa.reading import grounding
from raqa.reading.contrast import contrast
from raqa.reading.grounding import Grounding, mentions
from raqa.reading.prompts import ParsedReply, shown_sentences
from raqa.retrieval.index import Hit
from raqa.text import restates_question

GRADER_FILE = ASSETS_DIR / "grader" / "grader.json"
# P(yes) from which an answer is at least Weak support when no calibration says otherwise: the grader leaning yes.
# The calibration chooses it on dev runs (reading_eval.choose_weak)
WEAK = 0.5
YES_NO = ["Yes", "No", "yes", "no", " Yes", " No"]


GRADER_SYSTEM = (
    "You check answers against a passage. Judge only by what the passage says, not by what you know. Reply Yes or No."
)


def grading_messages(question: str, answer: str, title: str, text: str) -> list[dict[str, str]]:
    """The grader's chat: the page as the reader was shown it, the question, the answer, and the yes-or-no check.

    Example:
        >>> grading_messages("Who?", "Ann", "Page", "Ann did.")[1]["content"].startswith("Passage (Page): Ann did.")
        True
    """
    check = (
        f"Passage ({title}): {text}\n\nQuestion: {question}\nProposed answer: {answer}\n\n"
        f"Does the passage state that {answer} is the answer to this exact question? Reply No if the passage does "
        "not say it, or says something different (for example a different rank: fourth-largest is not largest). "
        "Reply Yes or No."
    )
    return [{"role": "system", "content": GRADER_SYSTEM}, {"role": "user", "content": check}]


@dataclass(frozen=True)
class Grader:
    """Grades answers with a backend that reports first-token probabilities (llamacpp.LlamaCppBackend)."""

    backend: object
    weak: float = WEAK  # P(yes) at or above this is at least Weak support
    answered: float | None = None  # P(yes) at or above this is Answered; None: never green

    def grade(self, reply: ParsedReply, hits: tuple[Hit, ...], question: str, page_tokens: int) -> Grounding:
        """The badge of an answer reply: a Grounding whose support is P(yes), supported at `weak`, weak below
        `answered`. A reply that cites no page of the window, or only repeats the question, is not asked about."""
        if reply.kind != "answer" or reply.answer is None:
            return Grounding(False, "No answer to check.")
        if restates_question(reply.answer, question):
            return Grounding(False, f"The answer {reply.answer!r} only repeats words of the question.", reply.page_id)
        page = next((h.page for h in hits if h.page.id == reply.page_id), None)
        if page is None and len(hits) == 1 and reply.page_id:  # one page shown: a wrong id can only mean that page
            page = hits[0].page  # (the worked example's "PAGE: 901" is copied when asked about its own topic)
        if page is None:
            cited = f"cites page {reply.page_id}, which is not in this window" if reply.page_id else "names no page"
            return Grounding(False, f"The reply {cited}, so no page vouches for it.", reply.page_id)
        hit = next(h for h in hits if h.page is page)
        text = " ".join(shown_sentences(hit, page_tokens, self.backend.count_tokens))
        if not mentions(f"{page.title} {text}", reply.answer):
            note = f"Page {page.id} does not mention {reply.answer!r}: the answer came from memory, not from the page."
            return Grounding(False, note, page.id)
        if contrasted := contrast(question, text, reply.answer):
            return Grounding(False, contrasted.note(page.id, reply.answer), page.id)
        asked = grading_messages(question, reply.answer, page.title, text)
        try:
            p_yes = yes_probability(self.backend.first_token_probabilities(asked, YES_NO))
        except ModelError as e:
            return Grounding(False, f"The grader could not be asked: {e}", page.id)
        lexical = grounding.check(reply, hits, question)
        sentence, passage = (lexical.sentence, lexical.passage) if lexical.page_id == page.id else (None, None)
        if p_yes < self.weak:
            note = f"Asked whether page {page.id} states {reply.answer!r}, the grader says no (P(yes) = {p_yes:.2f})."
            return Grounding(
                False, note, page.id, sentence=sentence, passage=passage if lexical.supported else None, support=p_yes
            )
        weak = self.answered is None or p_yes < self.answered
        note = f"Asked whether page {page.id} states {reply.answer!r}, the grader says yes (P(yes) = {p_yes:.2f})."
        if weak:
            note += " Not sure enough to vouch for it: check it yourself."
        return Grounding(True, note, page.id, sentence=sentence, passage=passage, support=p_yes, weak=weak)


def yes_probability(probabilities: dict[str, float] | None) -> float:
    """P(yes) from first-token probabilities over Yes/No spellings; 0.5 when the model wrote neither.

    Example:
        >>> round(yes_probability({"Yes": 0.6, " yes": 0.2, "No": 0.2}), 2)
        0.8
    """
    if not probabilities:
        return 0.5
    yes = sum(p for w, p in probabilities.items() if w.strip().lower() == "yes")
    no = sum(p for w, p in probabilities.items() if w.strip().lower() == "no")
    return yes / (yes + no) if yes + no > 0 and math.isfinite(yes + no) else 0.5


def grader_calibration(path: Path = GRADER_FILE) -> dict | None:
    """The calibration record (thresholds, the command and data that chose them, dev figures), or None."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load_thresholds(path: Path = GRADER_FILE) -> tuple[float, float | None]:
    """(weak, answered) from the grader's calibration file; (WEAK, None) when there is none. ValueError on a file
    that is not a JSON object with numbers from 0 to 1 (answered may be null)."""
    if not Path(path).is_file():
        return WEAK, None
    try:
        record = json.loads(Path(path).read_text())
        weak, answered = record["weak"], record["answered"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a grader calibration ({e}).") from None
    for name, value in (("weak", weak), ("answered", answered)):
        if value is None and name == "answered":
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not (0 <= value <= 1) or math.isnan(value):
            raise ValueError(f"{path}: {name!r} must be a number from 0 to 1, got {value!r}.")
    return float(weak), None if answered is None else float(answered)


@functools.cache
def shipped_thresholds() -> tuple[float, float | None]:
    """The shipped calibration's cuts (assets/grader/grader.json), read once per process, not once per run."""
    return load_thresholds()
