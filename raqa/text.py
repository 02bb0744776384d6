"""Small text utilities shared by prompts, grounding, the judge and metrics: sentences, answer normalisation and
answer comparison (token F1, agreement, an answer that only restates the question), and a wait as a person says it."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

# A sentence ends at . ! or ? followed by space and a capital, digit or quote; good enough for
# Wikipedia lead sections, and deterministic, which matters more here than linguistic finesse.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—", "«", "»"}


def split_sentences(text: str) -> list[str]:
    """Split page text into sentences (paragraph breaks always split).

    Example:
        >>> split_sentences("Paris is in France. It has 2.1 million people.")
        ['Paris is in France.', 'It has 2.1 million people.']
    """
    sentences: list[str] = []
    for paragraph in text.splitlines():
        sentences.extend(s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip())
    return sentences


def _fold(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()


def normalize_answer(text: str) -> str:
    """The standard open-domain QA normalisation: lower case, punctuation and articles removed, single spaces.

    Accents are folded too (so "Dvořák" matches "Dvorak").

    Example:
        >>> normalize_answer("The  Beatles!"), normalize_answer("U.S.A.")
        ('beatles', 'usa')
    """
    folded = "".join(ch for ch in _fold(text) if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", folded).split())


def normalize_for_matching(text: str) -> str:
    """Like normalize_answer, but punctuation becomes a space, so words stay apart in running text
    ("1885–1945" keeps "1885"); used to find an answer inside a page or sentence."""
    folded = "".join(" " if ch in _PUNCTUATION else ch for ch in _fold(text))
    return " ".join(_ARTICLES.sub(" ", folded).split())


def contains_answer(text: str, answer: str) -> bool:
    """Whether the answer occurs in the text as whole words (both normalised for matching).

    Example:
        >>> contains_answer("Titanic sank in 1912.", "1912"), contains_answer("In 19120.", "1912")
        (True, False)
    """
    needle = normalize_for_matching(answer)
    if not needle:
        return False
    return f" {needle} " in f" {normalize_for_matching(text)} "


def slug(question: str) -> str:
    """A file name for a question (or a server's name).

    Example:
        >>> slug("Who painted the Mona Lisa?")
        'who-painted-the-mona-lisa'
    """
    return re.sub(r"[^a-z0-9]+", "-", question.casefold()).strip("-")[:80] or "question"


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


def wait_text(seconds: float) -> str:
    """A wait as a person says it.

    Example:
        >>> wait_text(4), wait_text(75), wait_text(600)
        ('a few seconds', 'about 1 min 15 s', 'about 10 min')
    """
    if seconds < 10:
        return "a few seconds"
    if seconds < 60:
        return f"about {round(seconds / 5) * 5:.0f} s"
    minutes, rest = divmod(round(seconds / 5) * 5, 60)
    return f"about {minutes:.0f} min" + (f" {rest:.0f} s" if rest and minutes < 5 else "")
