"""Shareable links: a question and its settings as URL query parameters, and back.

`?q=Who+painted+the+Mona+Lisa%3F&strategy=iterative&order=backward&w=3&k=15&grounded=1&rationale=0&reader=base&retrieval=bm25`
opens the page with that question and those settings filled in (the visitor still clicks Run). The page's
"Copy link" button writes the same parameters (LINK_JS). A parameter that is missing keeps the page's default; one
that is out of range or unknown keeps the default too, and the page says which (no run starts from a bad link).
Left out: the run itself (a link does not carry results) and settings the form does not show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from raqa.config import MAX_QUESTION_CHARS, PublicLimits, RunForm, RunSettings, SettingsError, validate_settings
from raqa.web.ask_tab import STRATEGY_LABELS

DEFAULTS = RunSettings()


class LinkedForm(NamedTuple):
    question: str
    form: RunForm  # strategy iterative, topk or both; reader None: the page's default reader
    problems: tuple[str, ...]  # what in the link was not used, and why


# each link parameter and the form field it fills; the page's own validator (config.validate_settings) checks each
FIELDS = {"order": "order", "w": "window", "k": "k", "retrieval": "retrieval"}
LINK_SWITCHES = {"grounded": "grounded_only", "rationale": "rationale"}
FLAG_TEXT = {"1": True, "true": True, "0": False, "false": False}


def _validated(name: str, field: str, value: object, values: dict, limits: PublicLimits | None, problems: list):
    """value for field as the form's validator takes it beside the other values, or the field's value so far with a
    problem naming the link's parameter."""
    try:
        return getattr(validate_settings(RunForm(**(values | {field: value})), limits), field)
    except SettingsError as e:
        problems.append(f"{name}={value!r}: {str(e).rstrip('.')}")  # the page ends the list with its own stop
        return values[field]


def form_from_link(
    params: Mapping[str, str],
    readers: Sequence[str],
    defaults: RunSettings = DEFAULTS,
    limits: PublicLimits | None = None,
) -> LinkedForm:
    """The form's values from a link's query parameters; unusable ones fall back to the defaults, listed in problems.
    With limits (a public page), w and K beyond its caps are problems too.

    Example:
        >>> linked = form_from_link({"q": "Who?", "w": "3", "order": "sideways"}, ["base"])
        >>> (linked.question, linked.form.window, linked.form.order, linked.problems)
        ('Who?', 3, 'forward', ("order='sideways': Invalid order: 'sideways'. Choose from: forward, backward",))
    """
    problems: list[str] = []
    question = params.get("q", "")
    if len(question) > MAX_QUESTION_CHARS:
        problems.append(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        question = ""
    strategy = params.get("strategy", "iterative")
    if strategy not in STRATEGY_LABELS:  # "both" is the page's own: two runs side by side
        problems.append(f"strategy={strategy!r} is not one of {', '.join(STRATEGY_LABELS)}")
        strategy = "iterative"
    values = {field: getattr(defaults, field) for field in (*FIELDS.values(), *LINK_SWITCHES.values())}
    for name, field in FIELDS.items():
        if name in params:
            values[field] = _validated(name, field, params[name], values=values, limits=limits, problems=problems)
    for name, field in LINK_SWITCHES.items():
        if name in params:
            flag = FLAG_TEXT.get(params[name].lower(), params[name])
            values[field] = _validated(name, field, flag, values=values, limits=limits, problems=problems)
    reader = params.get("reader")
    if reader is not None and reader not in readers:
        problems.append(f"reader={reader!r} is not one of {', '.join(readers)}")
        reader = None
    form = RunForm(strategy=strategy, reader=reader, **values)
    return LinkedForm(question, form, tuple(problems))


# The "Copy link" button: the form's values as this page's URL with query parameters, copied to the clipboard
# where the browser allows it, and shown in the link box either way.
LINK_JS = """
(question, strategy, order, w, k, grounded, rationale, reader, retrieval) => {
  const strategies = STRATEGIES;
  const p = new URLSearchParams();
  p.set("q", question || "");
  p.set("strategy", strategies[strategy] || "iterative");
  p.set("order", order);
  p.set("w", String(w));
  p.set("k", String(k));
  p.set("grounded", grounded ? "1" : "0");
  p.set("rationale", rationale ? "1" : "0");
  if (reader) p.set("reader", reader);
  if (retrieval) p.set("retrieval", retrieval);
  const url = window.location.origin + window.location.pathname + "?" + p.toString();
  try { navigator.clipboard.writeText(url).catch(() => {}); } catch (e) {}
  return url;
}
""".replace("STRATEGIES", json.dumps({label: name for name, label in STRATEGY_LABELS.items()}))
