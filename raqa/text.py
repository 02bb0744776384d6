"""Small text utilities shared by prompts, grounding and metrics: sentences and answer normalisation."""

from __future__ import annotations

import re
import string
import unicodedata

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


def normalize_answer(text: str) -> str:
    """The standard open-domain QA normalisation: lower case, no punctuation or articles, single spaces.

    Accents are folded too (so "Dvořák" matches "Dvorak").

    Example:
        >>> normalize_answer("The  Beatles!")
        'beatles'
    """
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()
    folded = "".join(" " if ch in _PUNCTUATION else ch for ch in folded)
    return " ".join(_ARTICLES.sub(" ", folded).split())


def contains_answer(text: str, answer: str) -> bool:
    """Whether the normalised answer occurs in the normalised text as whole words."""
    needle = normalize_answer(answer)
    if not needle:
        return False
    return f" {needle} " in f" {normalize_answer(text)} "
