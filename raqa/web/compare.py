"""Two runs side by side: the visitor's settings (A) and the same question read with other settings (B), with
what differs called out: windows read, verdicts, answer, tokens, time.

`variant` turns A's form and a choice of COMPARISONS into B's form and a label for each column: one thing changed
(order, window size, reader), or B's own order, window, grounded-only and reader (CHOSEN), labelled by what differs
from A. `differences_html` compares the two finished runs from their Final and WindowVerdict events.
Left out: comparing across questions or strategies (a column is one iterative or Top-K run of one question).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from raqa.config import RunForm
from raqa.reading.events import Final, WindowVerdict
from raqa.reading.readers import BASE_READER, MODEL_JUDGE_READER
from raqa.web.render import badge, esc

NOTHING = "nothing"
CHOOSE = "settings of my choice"
COMPARISONS = (
    NOTHING,
    "the other window order",
    "another window size",
    "the other retrieval",
    "another reader",
    CHOOSE,
)
# what "settings of my choice" takes from Run B's own controls; the rest of B's form is A's
CHOSEN = ("order", "window", "grounded_only", "reader")


class Variant(NamedTuple):
    form: RunForm  # B's
    label_a: str
    label_b: str


def chosen(a: RunForm, b: RunForm) -> Variant:
    """A's form with B's order, window, grounded-only and reader, both columns labelled by what B changes;
    ValueError when B changes nothing.

    Example:
        >>> chosen(RunForm(order="forward", window=1), RunForm(order="backward", window=3))[1:]
        ('A: forward, w=1', 'B: backward, w=3')
    """
    names = {"order": "{}", "window": "w={}", "grounded_only": "grounded only: {}", "reader": "{}"}
    changed = [field for field in CHOSEN if getattr(a, field) != getattr(b, field)]
    if not changed:
        raise ValueError("Run B has the same settings as A: change B's order, window, grounded-only or reader.")

    def label(side: RunForm, letter: str) -> str:
        return f"{letter}: " + ", ".join(names[f].format(_yes_no(getattr(side, f))) for f in changed)

    return Variant(a.replace(**{f: getattr(b, f) for f in CHOSEN}), label(a, "A"), label(b, "B"))


def _yes_no(value) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)


def variant(choice: str, a: RunForm, readers: Sequence[str], b: RunForm | None = None) -> Variant | None:
    """B's form for a comparison with A's (None for "nothing"); ValueError for a comparison this page cannot make.
    A's reader None is the page's default reader (the first of readers); b is B's own form, for CHOOSE.

    Example:
        >>> variant("the other window order", RunForm(order="forward"), ["base"]).form.order
        'backward'
        >>> variant("another window size", RunForm(window=1), ["base"]).form.window
        3
        >>> variant("the other retrieval", RunForm(), ["base"]).label_b
        'B: bm25'
    """
    if choice == NOTHING or choice is None:
        return None
    if choice == "the other window order":
        other = "backward" if a.order == "forward" else "forward"
        return Variant(a.replace(order=other), f"A: {a.order}", f"B: {other}")
    if choice == "another window size":
        other = 3 if a.window == 1 else 1
        return Variant(a.replace(window=other), f"A: w={a.window}", f"B: w={other}")
    if choice == "the other retrieval":
        other = "bm25" if a.retrieval == "hybrid" else "hybrid"
        return Variant(a.replace(retrieval=other), f"A: {a.retrieval}", f"B: {other}")
    current = a.reader or (readers[0] if readers else BASE_READER.name)
    if choice == "another reader":
        preferred = (MODEL_JUDGE_READER.name, BASE_READER.name, *readers)
        others = [r for r in preferred if r in readers and r != current]
        if not others:
            raise ValueError("This page has one reader only, so there is no other reader to compare with.")
        return Variant(a.replace(reader=others[0]), f"A: {current}", f"B: {others[0]}")
    if choice == CHOOSE:
        if b is None:
            raise ValueError("Choose Run B's order, window, grounded-only and reader to compare with.")
        return chosen(a.replace(reader=current), b)
    raise ValueError(f"Invalid comparison: {choice!r}. Choose from: {', '.join(COMPARISONS)}.")


def _verdicts(verdicts: Sequence[WindowVerdict]) -> str:
    counts = Counter(v.verdict for v in verdicts)
    return " ".join(f"{badge(kind)}&nbsp;{n}" for kind, n in counts.items()) or "none"


def differences_html(
    labels: Sequence[str], finals: Sequence[Final | None], verdicts: Sequence[Sequence[WindowVerdict]]
) -> str:
    """A table of the two runs, a row per measure, the rows that differ marked."""
    if any(f is None for f in finals):
        return ""
    a, b = finals

    def answer(f: Final) -> str:
        return esc(f.answer) if f.answer is not None else "<i>answer not found</i>"

    rows = [
        ("answer", answer(a), answer(b), a.answer != b.answer),
        ("final verdict", badge(a.verdict), badge(b.verdict), a.verdict != b.verdict),
        ("windows read", str(a.windows_read), str(b.windows_read), a.windows_read != b.windows_read),
        (
            "verdicts",
            _verdicts(verdicts[0]),
            _verdicts(verdicts[1]),
            Counter(v.verdict for v in verdicts[0]) != Counter(v.verdict for v in verdicts[1]),
        ),
        (
            "prompt + reply tokens",
            f"{a.prompt_tokens:,} + {a.completion_tokens:,}",
            f"{b.prompt_tokens:,} + {b.completion_tokens:,}",
            (a.prompt_tokens, a.completion_tokens) != (b.prompt_tokens, b.completion_tokens),
        ),
        ("time", f"{a.seconds:.1f} s", f"{b.seconds:.1f} s", False),
    ]
    body = "".join(
        f'<tr class="{"raqa-differs" if differs else ""}"><th>{esc(name)}</th><td>{x}</td><td>{y}</td></tr>'
        for name, x, y, differs in rows
    )
    changed = sum(1 for *_, differs in rows if differs)
    head = f"<tr><th></th><th>{esc(labels[0])}</th><th>{esc(labels[1])}</th></tr>"
    return (
        f'<div class="raqa-answer raqa-compare" data-differences="{changed}"><b>Side by side</b>: '
        f"{changed} of {len(rows) - 1} outcomes differ (marked).<table>{head}{body}</table></div>"
    )
