"""Shareable links: query parameters -> the form's values, with every unusable parameter named."""

from __future__ import annotations

import pytest

from raqa.config import RunSettings
from raqa.web.links import form_from_link

READERS = ["base+judge", "base", "judge"]


def test_a_full_link_sets_every_value() -> None:
    params = {"q": "Who painted it?", "strategy": "both", "order": "backward", "w": "4", "k": "20", "grounded": "1",
              "rationale": "true", "reader": "judge"}  # fmt: skip
    form = form_from_link(params, READERS)
    assert form[:-1] == ("Who painted it?", "Both side by side", "backward", 4, 20, True, True, "judge")
    assert form.problems == ()


def test_an_empty_link_is_the_page_defaults() -> None:
    form = form_from_link({}, READERS)
    defaults = RunSettings()
    assert form[:-1] == ("", "Iterative", defaults.order, defaults.window, defaults.k, False, False, None)


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
        ({"q": "x" * 1001}, "longer than 1000"),
    ],
)
def test_each_unusable_parameter_keeps_its_default_and_is_named(params: dict, named: str) -> None:
    form = form_from_link(params, READERS)
    assert len(form.problems) == 1 and named in form.problems[0]
    defaults = form_from_link({}, READERS)
    assert form[:-1] == defaults[:-1]
