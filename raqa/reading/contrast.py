"""Contrastive pages the grader model misses: the page names the answer, but for something other than what the
question asks. Each rule reads only the sentences about the answer (those naming it, and "It is ..." continuing one
that opens with it), finds the contrast only in those whose subject is the answer, and makes the answer red without
asking the model:

- **rank**: the question asks for the top ("longest river") and the page gives the answer a lower rank ("the
  Zambezi is the fourth-longest river in Africa"); the 1.5B grader said yes to the Zambezi.
- **scope**: the question asks for the top in the world ("tallest mountain in the world") and the page gives it
  only within a place ("Mount Kilimanjaro ... is the highest mountain in Africa"); the page said Kilimanjaro and
  the run ended amber on it.
- **capital**: the question asks for the capital of one place ("capital of Australia") and the page makes the
  answer the capital of another ("Melbourne is the capital ... of the Australian state of Victoria").
- **narrowed**: the question asks for the first of something ("the first woman to win a Nobel Prize") and the page
  says the answer was the first only of a named kind ("the first woman to win the Nobel Prize in Literature"), or
  for the top ("the tallest mountain") that the page says only of one of a kind ("the highest mountain peak of an
  island"); the 1.5B answered Selma Lagerlöf and Puncak Jaya, amber.

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
# "the world", not "World War II" or "the World Cup" (a question about those is not asked of the world)
_WORLD_WORDS = (
    r"(?:world(?![\s-]+(?:war|cup|series|championships?|heritage|bank|health|trade|record|tour)\b)|earth|planet|globe)"
)
WORLDWIDE = re.compile(rf"\b(?:in|on|of)\s+(?:the\s+)?{_WORLD_WORDS}\b|\b{_WORLD_WORDS}'s\b", re.IGNORECASE)
CAPITAL_OF = re.compile(rf"\bcapital(?:\s+city)?\s+of\s+(?:the\s+)?{_PLACE}")
FIRST = re.compile(r"\bfirst\s+((?:[\w'-]+\s+){1,7}[\w'-]+)", re.IGNORECASE)  # "first woman to win a Nobel Prize"
_ARTICLE = r"(?:a|an|the)"
# "in Literature", "for Peace", "of the Royal Society": a kind named after the question's phrase (not "in 1909")
_NAMED_KIND = re.compile(rf"\s+(?:in|for|of)\s+(?:{_ARTICLE}\s+)?[A-Z][\w'-]*")
_ONE_OF_A_KIND = re.compile(r"(?:\s+[\w-]+)?\s+of\s+an?\s+[\w-]+")  # "highest mountain peak of an island"
_REGION = r"(?:state|province|region|territory|county|department|prefecture|oblast|canton|emirate|governorate)"


@dataclass(frozen=True)
class Contrast:
    rule: str  # "rank", "scope", "capital" or "narrowed"
    says: str  # the page's words: "fourth-longest river", "highest mountain in Africa", "state of Victoria"

    def note(self, page_id: str, answer: str) -> str:
        """One sentence for the viewer: what the page says instead of what the question asks."""
        instead = {
            "rank": "not the top rank the question asks for",
            "scope": "only within a place, where the question asks about the world",
            "capital": "the capital of another place than the question's",
            "narrowed": "the first only of a kind the question does not name",
        }[self.rule]
        return f"Page {page_id} says {self.says!r}, {instead}: it does not state that {answer!r} is the answer."


def contrast(question: str, text: str, answer: str) -> Contrast | None:
    """The first contrast the page's sentences about the answer show against the question, or None.

    Example:
        >>> contrast("What is the tallest mountain in the world?", "Mount Kilimanjaro is a volcano. It is the "
        ...          "highest mountain in Africa.", "Mount Kilimanjaro")
        Contrast(rule='scope', says='highest mountain in Africa')
        >>> contrast("What is the longest river in Africa?", "The Zambezi is the fourth-longest river in Africa, the "
        ...          "longest east-flowing river in Africa.", "The Zambezi")
        Contrast(rule='rank', says='fourth-longest river')
        >>> contrast("What is the longest river in Africa?", "The Nile is the longest river in Africa and the "
        ...          "second-longest river in the world.", "Nile") is None
        True
    """
    about = _about(text, answer)
    for rule, find in (("rank", _rank), ("scope", _scope), ("capital", _capital), ("narrowed", _narrowed)):
        if says := find(question, about):  # in turn: a later rule is not tried once one finds a contrast
            return Contrast(rule, says)
    return None


def _about(text: str, answer: str) -> list[tuple[str, bool]]:
    """The sentences naming the answer, and "It is ..." right after one that opens with it or after such a sentence
    ("Neptune is ... It is the fourth-largest"; not "... before Nairobi became the capital. It now serves as ...",
    which is about Mombasa), each with whether the answer is its subject (it opens with it, or continues "It ...")."""
    about, subject = [], False
    for sentence in split_sentences(text):
        continues = subject and bool(_PRONOUN.match(sentence))
        subject = continues or _is_subject(answer, sentence)
        if continues or mentions(sentence, answer):
            about.append((sentence, subject))
    return about


def _is_subject(answer: str, sentence: str) -> bool:
    """Whether the sentence opens with the answer ("The Zambezi is ..."), so that "It is ..." next is about it; a name
    with more names inside counts too, up to its verb ("Selma Ottilia Lovisa Lagerlöf was ..." for Selma Lagerlöf)."""
    head = re.match(r"(.{0,60}?)\s+(?:is|was|are|were)\b", sentence)
    return mentions(sentence[: len(answer) + 12], answer) or bool(head and mentions(head.group(1), answer))


def _rank(question: str, about: list[tuple[str, bool]]) -> str | None:
    """The ranked phrase ("fourth-longest river") a sentence whose subject is the answer uses where the question asks
    for the superlative ("longest river"; not K2's "second-highest mountain, after Mount Everest" for Everest); a
    sentence about the answer also saying the plain superlative of the same noun makes it no contrast, and so does a
    question asking for a rank itself ("the second longest river")."""
    for match in SUPERLATIVE.finditer(question):
        if _asks_for_rank(question, match):
            continue
        superlative, noun = re.sub(r"\s+", r"\\s+", match.group(1)), re.escape(match.group(2))
        ranked = re.compile(rf"\b{_ORDINAL}[\s-]+{superlative}{_GAP}{noun}\w*", re.IGNORECASE)
        plain = re.compile(rf"(?<![\w-]){superlative}{_GAP}{noun}\w*", re.IGNORECASE)
        found, plain_said = None, False
        for sentence, subject in about:
            ranked_here = ranked.search(sentence)
            found = found or (ranked_here if subject else None)
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


def _scope(question: str, about: list[tuple[str, bool]]) -> str | None:
    """A superlative asked "in the world" that a sentence whose subject is the answer says only within a place
    ("highest mountain in Africa", "Africa's highest mountain"); a superlative a sentence about the answer also says of
    the world, or with no place, is no contrast."""
    if not WORLDWIDE.search(question):
        return None
    for match in SUPERLATIVE.finditer(question):
        if _asks_for_rank(question, match):
            continue
        word = match.group(1).lower()
        top = _SAME_TOP.get(word, re.sub(r"\s+", r"\\s+", word))
        phrase = rf"(?i:(?<![\w-]){top}{_GAP}{re.escape(match.group(2))}\w*)"
        after = re.compile(rf"{phrase}(?:\s+(?!in\b|on\b|of\b)[\w-]+){{0,3}}?\s+(?:in|on|of)\s+(?:the\s+)?{_PLACE}")
        # "the tallest in the world", "... in Africa and the world": the page says it of the world too
        of_world = re.compile(
            rf"(?i:(?<![\w-]){top})(?:\s+[\w-]+){{0,3}}?\s+(?:in|on|of)\s+(?:the\s+)?{_WORLD_WORDS}\b"
            rf"|{phrase}[^,;.]{{0,40}}?\b(?:and|or)\s+(?:(?:in|of)\s+)?(?:the\s+)?{_WORLD_WORDS}\b"
        )
        scoped, elsewhere = None, False
        for sentence, subject in about:
            elsewhere = elsewhere or bool(of_world.search(sentence))
            for m in re.finditer(phrase, sentence) if subject else ():
                if _plural(m.group(0), match.group(2)):
                    continue  # "one of the Seven Summits, the highest mountains on each ...": not said of the answer
                following = after.match(sentence, m.start())
                near = sentence[max(0, m.start() - 80) : m.end()]  # subtle: the place just before, matched once
                preceding = re.search(rf"{_PLACE}'s?\s+(?:[\w-]+\s+){{0,2}}?{phrase}\Z", near)
                place = following or preceding
                if place and not re.search(_WORLD_WORDS, place.group(1), re.IGNORECASE):
                    scoped = scoped or place.group(0)
                else:
                    elsewhere = True  # said of the world, or with no place at all
        if scoped and not elsewhere:
            return scoped
    return None


def _plural(said: str, noun: str) -> bool:
    """Whether the page's phrase ends in the plural of the question's noun ("highest mountains" for "mountain")."""
    return said.lower().endswith((noun.lower() + "s", noun.lower() + "es")) and not noun.lower().endswith("s")


def _capital(question: str, about: list[tuple[str, bool]]) -> str | None:
    """A capital of a region of another place than the question's: "capital of Australia" answered by a city whose
    page says it "is the capital and most populous city of the Australian state of Victoria". Narrow on purpose: the
    answer must be the sentence's subject, only its main clause counts (before any comma), the other place must be a
    region ("state of", "province of" ...), and a question that itself names a region, or a sentence calling the
    answer the capital of the place asked, makes it no contrast. Everything else is left to the grader.

    Example:
        >>> _capital("What is the capital of Australia?", [("Canberra is the capital city of Australia.", True)]) is None
        True
    """
    asked = CAPITAL_OF.search(question)
    if not asked or re.search(rf"\b{_REGION}\b", question, re.IGNORECASE):
        return None
    asked_key = _place_key(asked.group(1))
    place = re.escape(asked_key)
    other, same = None, False
    for sentence, subject in about:
        clause = re.match(r"[^,;]*", sentence).group(0)  # the main clause ("..., the capital of" is said of another)
        if not subject or not re.search(r"\bcapital\b", clause, re.IGNORECASE):
            continue
        key = _place_key(clause)
        if re.search(rf"\b{place}'s\s+(?:[\w-]+\s+)?capital\b|\bcapital\b.*?\bof\s+{place}\b", key):
            same = True  # "capital city of Ecuador and the capital of the province of Pichincha", "Canada's capital"
            continue
        capital = re.search(r"\bcapital\b[^,;]*?\bof\s+(?:the\s+)?", clause, re.IGNORECASE)
        region = capital and re.search(rf"\b{_REGION}\s+of\s+(?:the\s+)?{_PLACE}", clause[capital.end() :])
        if region and _place_key(region.group(1)) != asked_key:
            other = other or clause[capital.start() : capital.end() + region.end()]
    return other if other and not same else None


def _narrowed(question: str, about: list[tuple[str, bool]]) -> str | None:
    """The first of something asked without a kind ("the first woman to win a Nobel Prize") that a sentence whose
    subject is the answer says only of a named kind ("the first woman to win the Nobel Prize in Literature"), or a
    superlative asked ("the tallest mountain") that it says only of one of a kind ("the highest mountain peak of an
    island"); a sentence about the answer saying it without the kind makes it no contrast.

    Example:
        >>> _narrowed("Who was the first woman to win a Nobel Prize?",
        ...           [("She was the first woman to win the Nobel Prize in Literature.", True)])
        'first woman to win the Nobel Prize in Literature'
        >>> _narrowed("What is the tallest mountain in the world?",
        ...           [("Puncak Jaya is the highest mountain peak of an island on Earth.", True)])
        'highest mountain peak of an island'
        >>> _narrowed("Who was the first President of the United States?",
        ...           [("He was the first president of the United States, from 1789 to 1797.", True)]) is None
        True
    """
    for phrase, kind in _asked_tops(question):
        narrowed, plain = None, False
        for sentence, subject in about:
            for m in phrase.finditer(sentence):
                named = kind.match(sentence, m.end())
                if named and subject:
                    narrowed = narrowed or sentence[m.start() : named.end()]
                elif not named:
                    plain = True  # "the first woman to win a Nobel Prize, and ...": said without a kind
        if narrowed and not plain:
            return narrowed
    return None


def _asked_tops(question: str) -> list[tuple[re.Pattern, re.Pattern]]:
    """The question's "first ..." and superlative phrases as the page may say them, each with what narrows it."""
    tops = []
    if asked := FIRST.search(question):
        words = [_ARTICLE if re.fullmatch(_ARTICLE, w, re.IGNORECASE) else re.escape(w) for w in asked.group(1).split()]
        tops.append((re.compile(r"\bfirst\s+" + r"\s+".join(words) + r"\b", re.IGNORECASE), _NAMED_KIND))
    for match in SUPERLATIVE.finditer(question):
        if not _asks_for_rank(question, match):
            word = match.group(1).lower()
            top = _SAME_TOP.get(word, re.sub(r"\s+", r"\\s+", word))
            phrase = re.compile(rf"(?i:(?<![\w-]){top}{_GAP}{re.escape(match.group(2))}\w*)")
            tops.append((phrase, _ONE_OF_A_KIND))
    return tops


def _place_key(place: str) -> str:
    """A place compared case-insensitively, without "the"."""
    return re.sub(r"\bthe\s+", "", place.lower()).strip()
