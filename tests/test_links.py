"""Shareable links: query parameters -> the form's values, with every unusable parameter named."""

from __future__ import annotations

import pytest

from raqa.config import RunForm, RunSettings
from raqa.web.links import form_from_link

READERS = ["base+judge", "base", "judge"]


def test_a_full_link_sets_every_value() -> None:
    params = {
        "q": "Who painted it?",
        "strategy": "both",
        "order": "backward",
        "w": "4",
        "k": "20",
        "grounded": "1",
        "rationale": "true",
        "reader": "judge",
        "retrieval": "bm25",
    }
    linked = form_from_link(params, READERS)
    assert linked == ("Who painted it?", RunForm("both", "backward", 4, 20, True, True, "judge", "bm25"), ())


def test_an_empty_link_is_the_page_defaults() -> None:
    defaults = RunSettings()
    assert form_from_link({}, READERS) == ("", RunForm("iterative", defaults.order, defaults.window, defaults.k), ())


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"w": "0"}, "w='0'"),
        ({"w": "2.5"}, "w='2.5'"),
        ({"k": "1000"}, "k='1000'"),
        ({"order": "up"}, "order='up'"),
        ({"strategy": "magic"}, "strategy='magic'"),
        ({"grounded": "yes"}, "grounded='yes'"),
        ({"reader": "oracle"}, "reader='oracle'"),
        ({"retrieval": "dense"}, "retrieval='dense'"),
        ({"q": "x" * 1001}, "longer than 1000"),
    ],
)
def test_each_unusable_parameter_keeps_its_default_and_is_named(params: dict, named: str) -> None:
    linked = form_from_link(params, READERS)
    assert len(linked.problems) == 1 and named in linked.problems[0]
    assert linked[:-1] == form_from_link({}, READERS)[:-1]


def test_on_a_public_page_each_parameter_is_checked_beside_the_capped_defaults() -> None:
    """w=2 is within the caps even though RunForm's own K (15) is not: only k=50 is named."""
    from raqa.config import PublicLimits

    limits = PublicLimits(max_k=8, max_window=3)
    linked = form_from_link({"q": "apple", "k": "50", "w": "2"}, READERS, RunSettings(k=8), limits)
    assert (linked.form.window, linked.form.k) == (2, 8)
    assert len(linked.problems) == 1 and "k='50'" in linked.problems[0] and "from 5 to 8" in linked.problems[0]
