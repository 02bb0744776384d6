"""Two runs side by side: the visitor's settings (A) and the same question read with other settings (B), with
what differs called out: windows read, verdicts, answer, tokens, time.

`variant` turns the form and a choice of COMPARISONS into B's settings and a label for each column: one thing
changed (order, window size, reader), or B's own order, window, grounded-only and reader (`Choice`), labelled by
what differs from A. `differences_html` compares the two finished runs from their Final and WindowVerdict events.
Left out: comparing across questions or strategies (a column is one iterative or Top-K run of one question).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from raqa.reading.events import Final, WindowVerdict
from raqa.web.render import badge, esc

NOTHING = "nothing"
CHOOSE = "settings of my choice"
COMPARISONS = (NOTHING, "the other window order", "another window size", "another reader", CHOOSE)
JUDGE_READER, BASE_READER_NAME = "base+judge", "base"


class Variant(NamedTuple):
    order: str
    window: int
    reader: str | None
    label_a: str
    label_b: str
    grounded_only: bool | None = None  # None: as A


class Choice(NamedTuple):
    """B's own settings, for CHOOSE (the page's "Run B" controls)."""

    order: str
    window: int
    grounded_only: bool
    reader: str | None


def chosen(a: Choice, b: Choice) -> Variant:
    """Both columns labelled by what B changes; ValueError when B changes nothing.

    Example:
        >>> chosen(Choice("forward", 1, False, "base"), Choice("backward", 3, False, "base"))[3:5]
        ('A: forward, w=1', 'B: backward, w=3')
    """
    names = {"order": "{}", "window": "w={}", "grounded_only": "grounded only: {}", "reader": "{}"}
    changed = [field for field in names if getattr(a, field) != getattr(b, field)]
    if not changed:
        raise ValueError("Run B has the same settings as A: change B's order, window, grounded-only or reader.")

    def label(side: Choice, letter: str) -> str:
        return f"{letter}: " + ", ".join(names[f].format(_yes_no(getattr(side, f))) for f in changed)

    return Variant(b.order, b.window, b.reader, label(a, "A"), label(b, "B"), b.grounded_only)


def _yes_no(value) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)


def variant(
    choice: str, order: str, window: int, reader: str | None, readers: Sequence[str], b: Choice | None = None,
    grounded_only: bool = False,
) -> Variant | None:  # fmt: skip
    """B's settings for a comparison (None for "nothing"); ValueError for a comparison this page cannot make.

    Example:
        >>> variant("the other window order", "forward", 1, None, ["base"]).order
        'backward'
        >>> variant("another window size", "forward", 1, None, ["base"])[1:3]
        (3, None)
    """
    if choice == NOTHING or choice is None:
        return None
    if choice == "the other window order":
        other = "backward" if order == "forward" else "forward"
        return Variant(other, window, reader, f"A: {order}", f"B: {other}")
    if choice == "another window size":
        other = 3 if window == 1 else 1
        return Variant(order, other, reader, f"A: w={window}", f"B: w={other}")
    if choice == "another reader":
        current = reader or (readers[0] if readers else BASE_READER_NAME)
        others = [r for r in (JUDGE_READER, BASE_READER_NAME, *readers) if r in readers and r != current]
        if not others:
            raise ValueError("This page has one reader only, so there is no other reader to compare with.")
        return Variant(order, window, others[0], f"A: {current}", f"B: {others[0]}")
    if choice == CHOOSE:
        if b is None:
            raise ValueError("Choose Run B's settings to compare with.")
        current = reader or (readers[0] if readers else BASE_READER_NAME)
        return chosen(Choice(order, window, bool(grounded_only), current), b)
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
        ),  # fmt: skip
        (
            "prompt + reply tokens",
            f"{a.prompt_tokens:,} + {a.completion_tokens:,}",
            f"{b.prompt_tokens:,} + {b.completion_tokens:,}",
            (a.prompt_tokens, a.completion_tokens) != (b.prompt_tokens, b.completion_tokens),
        ),  # fmt: skip
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
