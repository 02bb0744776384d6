"""Contrastive pages the grader model misses: the page names the answer, but for something other than what the
question asks. Each rule reads only the sentences about the answer (those naming it, and "It is ..." right after
one that does) and makes the answer red without asking the model:

- **rank**: the question asks for the top ("longest river") and the page gives the answer a lower rank ("the
  Zambezi is the fourth-longest river in Africa"); the 1.5B grader said yes to the Zambezi.
- **scope**: the question asks for the top in the world ("tallest mountain in the world") and the page gives it
  only within a place ("Mount Kilimanjaro ... is the highest mountain in Africa"); the page said Kilimanjaro and
  the run ended amber on it.
- **capital**: the question asks for the capital of one place ("capital of Australia") and the page makes the
  answer the capital of another ("Melbourne is the capital ... of the Australian state of Victoria").

A sentence about the answer that also says what the question asks (the plain superlative, the world, the same
place) makes it no contrast. How often each rule turns a gold answer red on dev pages that mention it:
`python -m lab.evaluation.grader_probe --contrast-scan` (assets/results/contrast-rules.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raqa.reading.grounding import mentions
from raqa.text import split_sentences

SUPERLATIVE = re.compile(
    r"\b(largest|biggest|longest|highest|tallest|smallest|shortest|deepest|oldest|youngest|busiest|richest|"
    r"heaviest|fastest|most\s+populous)\s+(\w+)",
    re.IGNORECASE,
)
_SAME_TOP = {"tallest": "(?:tallest|highest)", "highest": "(?:tallest|highest)", "largest": "(?:largest|biggest)"}
_SAME_TOP["biggest"] = _SAME_TOP["largest"]
_GAP = r"(?:\s+of\s+(?:[\w']+\s+){0,3}|\s+)"  # "largest ocean", or "largest of the world's five oceans"
_PRONOUN = re.compile(r"(?:it|he|she|they|this)\b|.*,\s+(?:it|he|she)\s+(?:is|was)\b", re.IGNORECASE)
_ORDINAL = r"(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
_PLACE = r"((?:[A-Z][\w'-]*)(?:\s+(?:of\s+)?[A-Z][\w'-]*)*)"  # "Africa", "New South Wales", "Republic of Peru"
_WORLD_WORDS = r"(?:world|earth|planet|globe)"
WORLDWIDE = re.compile(rf"\b(?:in|on|of)\s+(?:the\s+)?{_WORLD_WORDS}\b|\b{_WORLD_WORDS}'s\b", re.IGNORECASE)
CAPITAL_OF = re.compile(rf"\bcapital(?:\s+city)?\s+of\s+(?:the\s+)?{_PLACE}")
_REGION = r"(?:state|province|region|territory|county|department|prefecture|oblast|canton|emirate|governorate)"


@dataclass(frozen=True)
class Contrast:
    rule: str  # "rank", "scope" or "capital"
    says: str  # the page's words: "fourth-longest river", "highest mountain in Africa", "state of Victoria"

    def note(self, page_id: str, answer: str) -> str:
        """One sentence for the viewer: what the page says instead of what the question asks."""
        instead = {
            "rank": "not the top rank the question asks for",
            "scope": "only within a place, where the question asks about the world",
            "capital": "the capital of another place than the question's",
        }[self.rule]
        return f"Page {page_id} says {self.says!r}, {instead}: it does not state that {answer!r} is the answer."


def contrast(question: str, text: str, answer: str) -> Contrast | None:
    """The first contrast the page's sentences about the answer show against the question, or None.

    Example:
        >>> contrast("What is the tallest mountain in the world?", "Mount Kilimanjaro is a volcano. It is the "
        ...          "highest mountain in Africa.", "Mount Kilimanjaro")
        Contrast(rule='scope', says='highest mountain in Africa')
    """
    naming = sentences_about(text, answer)
    for rule, find in (("rank", _rank), ("scope", _scope), ("capital", _capital)):
        if says := find(question, naming, answer):
            return Contrast(rule, says)
    return None


def sentences_about(text: str, answer: str) -> list[str]:
    """The sentences naming the answer, and "It is ..." right after one that opens with it ("Neptune is ... It is
    the fourth-largest"; not "... before Nairobi became the capital. It now serves as ...", which is about Mombasa)."""
    sentences = split_sentences(text)
    return [
        sentence
        for i, sentence in enumerate(sentences)
        if mentions(sentence, answer) or (i > 0 and _PRONOUN.match(sentence) and _is_subject(answer, sentences[i - 1]))
    ]


def _is_subject(answer: str, sentence: str) -> bool:
    """Whether the sentence opens with the answer ("The Zambezi is ..."), so that "It is ..." next is about it."""
    return mentions(sentence[: len(answer) + 12], answer)


def rank_contrast(question: str, text: str, answer: str) -> str | None:
    """The ranked phrase ("fourth-longest river") a sentence naming the answer uses where the question asks for the
    superlative ("longest river"), or None. A sentence naming the answer that also says the plain superlative of the
    same noun ("the longest river in Africa and the second-longest river in the world") makes it no contrast, and so
    does a question that asks for a rank itself ("the second longest river").

    Example:
        >>> rank_contrast("What is the longest river in Africa?", "The Zambezi is the fourth-longest river in "
        ...               "Africa, the longest east-flowing river in Africa.", "The Zambezi")
        'fourth-longest river'
        >>> rank_contrast("What is the longest river in Africa?", "The Nile is the longest river in Africa and the "
        ...               "second-longest river in the world.", "Nile") is None
        True
    """
    return _rank(question, sentences_about(text, answer), answer)


def _rank(question: str, naming: list[str], answer: str) -> str | None:
    for match in SUPERLATIVE.finditer(question):
        if _asks_for_rank(question, match):
            continue
        superlative, noun = re.sub(r"\s+", r"\\s+", match.group(1)), re.escape(match.group(2))
        ranked = re.compile(rf"\b{_ORDINAL}[\s-]+{superlative}{_GAP}{noun}\w*", re.IGNORECASE)
        plain = re.compile(rf"(?<![\w-]){superlative}{_GAP}{noun}\w*", re.IGNORECASE)
        found, plain_said = None, False
        for sentence in naming:
            ranked_here = ranked.search(sentence)
            found = found or ranked_here
            plain_said = plain_said or any(
                ranked_here is None or not (ranked_here.start() <= m.start() < ranked_here.end())
                for m in plain.finditer(sentence)
            )
        if found and not plain_said:
            return found.group(0)
    return None


def _asks_for_rank(question: str, superlative: re.Match) -> bool:
    """Whether the question itself asks for a rank ("the second longest river"), not the top."""
    return bool(re.search(rf"\b{_ORDINAL}[\s-]+$", question[: superlative.start()], re.IGNORECASE))


def _scope(question: str, naming: list[str], answer: str) -> str | None:
    """A superlative asked "in the world" that the page says only within a place ("highest mountain in Africa",
    "Africa's highest mountain"); a superlative the page also says of the world, or with no place, is no contrast."""
    if not WORLDWIDE.search(question):
        return None
    for match in SUPERLATIVE.finditer(question):
        if _asks_for_rank(question, match):
            continue
        word = match.group(1).lower()
        top = _SAME_TOP.get(word, re.sub(r"\s+", r"\\s+", word))
        phrase = rf"(?i:(?<![\w-]){top}{_GAP}{re.escape(match.group(2))}\w*)"
        after = re.compile(rf"{phrase}(?:\s+(?!in\b|on\b|of\b)[\w-]+){{0,3}}?\s+(?:in|on|of)\s+(?:the\s+)?{_PLACE}")
        before = re.compile(rf"{_PLACE}'s?\s+(?:[\w-]+\s+){{0,2}}?{phrase}")
        scoped, elsewhere = None, False
        for sentence in naming:
            for m in re.finditer(phrase, sentence):
                following = after.match(sentence, m.start())
                preceding = next((b for b in before.finditer(sentence) if b.end() == m.end()), None)
                place = following or preceding
                if place and not re.fullmatch(_WORLD_WORDS, place.group(1), re.IGNORECASE):
                    scoped = scoped or (following.group(0) if following else preceding.group(0))
                else:
                    elsewhere = True  # said of the world, or with no place at all
        if scoped and not elsewhere:
            return scoped
    return None


def _capital(question: str, naming: list[str], answer: str) -> str | None:
    """The capital of another place than the question's ("capital of Australia" answered by a city the page calls
    the capital "of the Australian state of Victoria"); a sentence calling it the capital of the question's place
    ("capital city of Australia", "Commonwealth of Australia") makes it no contrast."""
    asked = CAPITAL_OF.search(question)
    if not asked:
        return None
    place = asked.group(1)
    other, same = None, False
    for sentence in naming:
        named_at = re.search(re.escape(answer.split()[0]), sentence, re.IGNORECASE) if answer.split() else None
        start = named_at.end() if named_at else 0  # "capital" said of the answer: after its name, or "It is ..."
        for capital in re.finditer(r"\bcapital\b", sentence[start:], re.IGNORECASE):
            rest = sentence[start + capital.end() : start + capital.end() + 120]
            region = re.search(rf"\b{_REGION}\s+of\s+(?:the\s+)?{_PLACE}", rest)
            named = region or re.match(rf"(?:\s+[\w-]+){{0,5}}?\s+of\s+(?:the\s+)?{_PLACE}", rest)
            if not named:
                continue
            said = named.group(1)
            if said == place or said.endswith(f" of {place}") or mentions(said, answer):  # "the capital of Suva"
                same = True
            else:
                other = other or sentence[start + capital.start() : start + capital.end() + named.end()]
    return other if other and not same else None
