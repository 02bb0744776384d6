"""The grounding check: is the model's answer stated where it says it is?

An answer is *supported* when the cited page is in the window and the answer occurs in the cited
sentence (or copied quote) of that page. Matching is tolerant, because a small model rephrases: the
answer's content words are compared after normalisation, and a copied quote is located exactly or,
failing that, fuzzily. If the cited sentence does not hold the answer but another sentence of the
same page does, the evidence is moved there and the note says so: the page claim still holds.
The evidence sentence must also be *about the question*: it (or its page title) shares at least one
content word with the question. Without this, a model that copies any name from an unrelated page
would pass as grounded. Anything else is *unsupported*: the model claims evidence that is not there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from raqa.reading.prompts import ParsedReply
from raqa.retrieval.index import Hit
from raqa.text import normalize_for_matching, split_sentences

MIN_QUOTE_SIMILARITY = 0.8
MIN_ANSWER_OVERLAP = 0.6
# Question words that say nothing about the topic; everything else counts as a content word.
STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been being do does did what which who whom "
    "whose when where why how that this these those it its as into than then there their they he she his her him "
    "name named called year years many much first one two".split()
)


@dataclass(frozen=True)
class Grounding:
    supported: bool
    note: str  # one sentence for the viewer: what was checked and what was found
    page_id: str | None = None  # the page holding the evidence (the cited one)
    sentence: int | None = None  # 1-based sentence of that page to highlight
    passage: str | None = None  # the text to highlight
    support: float | None = None  # the judge's support probability for the answer (support.py); None: not known
    weak: bool = False  # supported, but below the support that earns Answered: the badge says Weak support


def answer_in_text(answer: str, text: str) -> bool:
    """Whether the text states the answer: the whole normalised answer, or most of its words.

    Example:
        >>> answer_in_text("Leonardo", "The Mona Lisa is by Leonardo da Vinci.")
        True
        >>> answer_in_text("Michelangelo", "The Mona Lisa is by Leonardo da Vinci.")
        False
    """
    needle = normalize_for_matching(answer)
    haystack = normalize_for_matching(text)
    if not needle:
        return False
    if f" {needle} " in f" {haystack} ":
        return True
    words = needle.split()
    present = set(haystack.split())
    return len(words) > 1 and sum(w in present for w in words) / len(words) >= MIN_ANSWER_OVERLAP


def content_words(text: str) -> set[str]:
    return {w for w in normalize_for_matching(text).split() if w not in STOPWORDS and len(w) > 1}


def about_question(question: str, title: str, sentence: str) -> bool:
    """Whether the sentence, read with its page title, shares a content word with the question.

    Example:
        >>> about_question("Who painted the Mona Lisa?", "Mona Lisa", "It was painted by Leonardo.")
        True
        >>> about_question("Who won the 2019 baguette prize?", "Grapes of Wrath", "It is a novel by Steinbeck.")
        False
    """
    return bool(content_words(question) & content_words(f"{title} {sentence}"))


def locate_quote(quote: str, sentences: Sequence[str]) -> int | None:
    """Index of the sentence holding the quote: exactly if possible, else the most similar above 0.8."""
    target = normalize_for_matching(quote)
    if not target:
        return None
    normalized = [normalize_for_matching(s) for s in sentences]
    for i, sentence in enumerate(normalized):
        if target in sentence:
            return i
    best, best_ratio = None, MIN_QUOTE_SIMILARITY
    for i, sentence in enumerate(normalized):
        matcher = SequenceMatcher(None, target, sentence, autojunk=False)
        # compare against the best-matching stretch of the sentence, not the whole sentence
        ratio = matcher.find_longest_match(0, len(target), 0, len(sentence)).size / len(target)
        if ratio >= best_ratio:
            best, best_ratio = i, ratio
    return best


def check(reply: ParsedReply, window: Sequence[Hit], question: str) -> Grounding:
    """Check an answer reply against the pages of its window and the question it answers."""
    if reply.kind != "answer" or reply.answer is None:
        return Grounding(False, "No answer to check.")
    pages = {hit.page.id: hit.page for hit in window}
    if reply.page_id is None:
        return Grounding(False, "The reply names no page.")
    page = pages.get(reply.page_id)
    if page is None:
        return Grounding(False, f"The reply cites page {reply.page_id}, which is not in this window.")
    sentences = split_sentences(page.text)
    cited: int | None = None
    if reply.quote:
        cited = locate_quote(reply.quote, sentences)
        if cited is None:
            return Grounding(False, f"The quoted passage is not in page {page.id}.", page.id)
    elif reply.sentence is not None and 1 <= reply.sentence <= len(sentences):
        cited = reply.sentence - 1
    stating = [i for i, s in enumerate(sentences) if answer_in_text(reply.answer, s)]
    relevant = [i for i in stating if about_question(question, page.title, sentences[i])]
    if cited is not None and cited in relevant:
        note = f"Sentence {cited + 1} of page {page.id} states the answer."
        return Grounding(True, note, page.id, cited + 1, sentences[cited])
    if relevant:
        i = relevant[0]
        where = "no sentence" if cited is None else f"sentence {cited + 1}"
        note = f"The reply cites {where}; sentence {i + 1} of page {page.id} states the answer."
        return Grounding(True, note, page.id, i + 1, sentences[i])
    if stating:
        note = f"Page {page.id} mentions {reply.answer!r}, but not in a sentence about the question."
        return Grounding(False, note, page.id, stating[0] + 1)
    return Grounding(
        False,
        f"Page {page.id} does not state {reply.answer!r}.",
        page.id,
        cited + 1 if cited is not None else None,
    )


def mentions(text: str, answer: str) -> bool:
    """Whether the text mentions the answer at all: grounding's tolerant match, or most of the answer's words each
    beginning a word of the text ("Dandelion" in "dandelions", "East" in "eastward"), so that only answers the page
    never names are red without asking.

    Example:
        >>> mentions("Common dandelions grow in meadows.", "Dandelion"), mentions("A page about turtles.", "Leonardo")
        (True, False)
    """
    if answer_in_text(answer, text):
        return True
    words = normalize_for_matching(answer).split()
    present = normalize_for_matching(text).split()
    begun = [w for w in words if len(w) >= 4 and any(p.startswith(w) for p in present)]
    return bool(words) and len(begun) / len(words) >= MIN_ANSWER_OVERLAP
