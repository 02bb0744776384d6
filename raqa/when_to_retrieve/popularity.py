"""The popularity baseline (Mallen et al., 2023): retrieve only for questions about less popular entities.

It needs a popularity per question, which PopQA gives as `s_pop` (monthly Wikipedia page views of the
subject). PopQA's TSV is read here; the columns used are `question`, `possible_answers` (a JSON list of
strings) and `s_pop`; `id` is kept when present. The threshold is tuned on a development split: the one
that maximises accuracy when questions below it get the retrieval answer and the rest the closed-book one.
Left out here: running models (evaluation/when_to_retrieve.py) and any popularity for questions PopQA does not have.

Example:
    >>> tune_threshold([10, 1000], [False, True], [True, False]).threshold
    1000
"""

from __future__ import annotations

import ast
import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from raqa.models.base import ModelError
from raqa.text import normalize_answer

REQUIRED = ("question", "possible_answers", "s_pop")


class PopItem(NamedTuple):
    id: str
    question: str
    answers: tuple[str, ...]
    popularity: float


class PopularityError(ValueError):
    """A PopQA-format file cannot be used; the message names the file, the line and what was expected."""


def _answers(text: str, where: str) -> tuple[str, ...]:
    value = None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
            break
        except (ValueError, SyntaxError):
            continue
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a.strip() for a in value):
        raise PopularityError(f"{where}: possible_answers must be a non-empty JSON list of strings, got {text[:80]!r}.")
    return tuple(a.strip() for a in value)


def _popularity(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PopularityError(f"{where}: s_pop must be a number (page views), got {text[:40]!r}.") from None
    if not math.isfinite(value) or value < 0:
        raise PopularityError(f"{where}: s_pop must be a finite number of 0 or more, got {text[:40]!r}.")
    return value


def load_popqa(path: str | Path, limit: int | None = None) -> list[PopItem]:
    """The questions of a PopQA-format TSV; PopularityError says what is wrong and where."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f, delimiter="\t"))
    except FileNotFoundError:
        raise PopularityError(f"{path}: no such PopQA file.") from None
    except UnicodeDecodeError:
        raise PopularityError(f"{path}: not UTF-8 text.") from None
    except (OSError, csv.Error) as e:
        raise PopularityError(f"{path}: cannot be read ({e}).") from None
    if not rows:
        raise PopularityError(f"{path}: the file is empty; expected a header with {', '.join(REQUIRED)}.")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise PopularityError(f"{path}: the header lacks {', '.join(missing)} (PopQA columns: {', '.join(REQUIRED)}).")
    col = {name: header.index(name) for name in header}
    items = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        where = f"{path}:{number}"
        if len(row) != len(header):
            raise PopularityError(f"{where}: {len(row)} fields, the header has {len(header)}.")
        question = " ".join(row[col["question"]].split())
        if not question:
            raise PopularityError(f"{where}: the question is empty.")
        items.append(
            PopItem(
                row[col["id"]].strip() if "id" in col else f"{path.stem}-{number}",
                question,
                _answers(row[col["possible_answers"]], where),
                _popularity(row[col["s_pop"]], where),
            )
        )
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise PopularityError(f"{path}: the file has a header but no questions.")
    return items


def lookup(items: Sequence[PopItem]) -> dict[str, PopItem]:
    """Questions by their normalised text, so a typed question finds its popularity."""
    return {normalize_answer(item.question): item for item in items}


def load_popularity(path: str) -> dict[str, PopItem]:
    """RAQA_POPQA's questions by normalised text; a broken file stops the start with the loader's message."""

    try:
        return lookup(load_popqa(path))
    except PopularityError as e:
        raise ModelError(f"RAQA_POPQA: {e}") from None
