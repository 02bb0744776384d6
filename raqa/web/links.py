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
from typing import NamedTuple, get_args

from raqa.config import MAX_QUESTION_CHARS, Order, PublicLimits, Retrieval, RunForm, RunSettings, run_ranges
from raqa.web.ask_tab import STRATEGY_LABELS

ORDERS = get_args(Order)
RETRIEVALS = get_args(Retrieval)
DEFAULTS = RunSettings()
FLAGS = {"1": True, "true": True, "0": False, "false": False}


class LinkedForm(NamedTuple):
    question: str
    form: RunForm  # strategy iterative, topk or both; reader None: the page's default reader
    problems: tuple[str, ...]  # what in the link was not used, and why


def _int(params: Mapping[str, str], name: str, bounds: tuple[int, int], default: int, problems: list[str]) -> int:
    text = params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = bounds[0] - 1
    if not bounds[0] <= value <= bounds[1]:
        problems.append(f"{name}={text!r} is not a whole number from {bounds[0]} to {bounds[1]}")
        return default
    return value


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
        ('Who?', 3, 'forward', ("order='sideways' is not one of forward, backward",))
    """
    problems: list[str] = []
    question = params.get("q", "")
    if len(question) > MAX_QUESTION_CHARS:
        problems.append(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        question = ""
    strategy = params.get("strategy", "iterative")
    if strategy not in STRATEGY_LABELS:
        problems.append(f"strategy={strategy!r} is not one of {', '.join(STRATEGY_LABELS)}")
        strategy = "iterative"
    order = defaults.order
    if "order" in params:
        if params["order"] in ORDERS:
            order = params["order"]
        else:
            problems.append(f"order={params['order']!r} is not one of {', '.join(ORDERS)}")
    flags = {}
    for name in ("grounded", "rationale"):
        text = params.get(name, "0").lower()
        if text not in FLAGS:
            problems.append(f"{name}={params[name]!r} is not 1 or 0")
        flags[name] = FLAGS.get(text, False)
    reader = params.get("reader")
    if reader is not None and reader not in readers:
        problems.append(f"reader={reader!r} is not one of {', '.join(readers)}")
        reader = None
    retrieval = params.get("retrieval", defaults.retrieval)
    if retrieval not in RETRIEVALS:
        problems.append(f"retrieval={retrieval!r} is not one of {', '.join(RETRIEVALS)}")
        retrieval = defaults.retrieval
    window_range, k_range = run_ranges(limits)
    window = _int(params, "w", window_range, defaults.window, problems)
    k = _int(params, "k", k_range, defaults.k, problems)
    form = RunForm(strategy, order, window, k, flags["grounded"], flags["rationale"], reader, retrieval)
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
