"""Sentence splitting and answer normalisation."""

from __future__ import annotations

import pytest

from raqa.text import contains_answer, normalize_answer, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Beatles!", "beatles"),
        ("A Tale of Two Cities", "tale of two cities"),
        ("an apple", "apple"),
        ("Theatre of the Absurd", "theatre of absurd"),
        ("Anne and Thea", "anne and thea"),
        ("Dvořák", "dvorak"),
        ("Ångström", "angstrom"),
        ("naïve café", "naive cafe"),
        ("Beyoncé Knowles-Carter", "beyonce knowlescarter"),
        ("“Hello,” she said — twice.", "hello she said twice"),
        ("«Les Misérables»", "les miserables"),
        ("l’Étoile", "letoile"),
        ("  1,000 \t km\n", "1000 km"),
        ("ﬁne", "fine"),
        ("", ""),
        ("!!!", ""),
        ("The", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_initialisms_keep_their_letters() -> None:
    assert normalize_answer("U.S.A.") != normalize_answer("U.S.")


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("The Mona Lisa is by Leonardo da Vinci.", "da Vinci", True),
        ("The Mona Lisa is by Leonardo da Vinci.", "LEONARDO DA VINCI!", True),
        ("The Mona Lisa is by Leonardo da Vinci.", "Vinc", False),
        ("Antonín Dvořák wrote nine symphonies.", "Dvorak", True),
        ("He played the Beatles' songs.", "The Beatles", True),
        ("It was finished in 1889.", "1889", True),
        ("It was finished in 18890.", "1889", False),
        ("Anything at all.", "", False),
        ("Anything at all.", "the", False),
    ],
)
def test_contains_answer_matches_whole_words(text: str, answer: str, expected: bool) -> None:
    assert contains_answer(text, answer) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris is in France. It has 2.1 million people.", ["Paris is in France.", "It has 2.1 million people."]),
        ("It ended in 1953. 1954 was quiet.", ["It ended in 1953.", "1954 was quiet."]),
        ("Really? Yes! It works.", ["Really?", "Yes!", "It works."]),
        (
            'He said so. "Quoted" here. (Aside) too. [Note] end.',
            ["He said so.", '"Quoted" here.', "(Aside) too.", "[Note] end."],
        ),
        ("He likes fruit, e.g. apples and pears.", ["He likes fruit, e.g. apples and pears."]),
        ("The value is 3.14. Pi is irrational.", ["The value is 3.14.", "Pi is irrational."]),
        ("Version 1.2.3 shipped.It was late.", ["Version 1.2.3 shipped.It was late."]),
        ("First paragraph\n\nSecond paragraph. Next", ["First paragraph", "Second paragraph.", "Next"]),
        ("  padded.   Words.  \n   \n", ["padded.", "Words."]),
        ("", []),
        ("\n \n", []),
        ("No final stop", ["No final stop"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_split_sentences_loses_no_words(tiny_pages) -> None:
    for page in tiny_pages:
        assert " ".join(split_sentences(page.text)).split() == page.text.split()
