"""An experiment's model calls kept as rows, so an interrupted experiment resumes and a rerun recomputes its tables.

Every experiment's model work is a list of independent calls: a whole run (`run_to_final`) or one window read
(`window_verdict`). Inside `journaled(rows, page_of)`, `remembered` looks each call up by what determines it (the
question, the window's pages, every run setting, the backend's name and whether the answer judge reads along): a
call already in the rows file comes back from its row (the event as `events.to_json` wrote it), any other is made
and its row appended at once (rows_file.py: whole lines, flushed, under a lock). A run that failed is not kept: the
next run makes it again. The tables are always computed from the events, so an experiment rerun over complete rows
makes no model call and writes the same record.

Outside `journaled` a call is simply made. The journal is seen by the calls fan_out runs in threads (fan_out.py
copies the context into each).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple, TypeVar

from lab.evaluation.rows_file import RowsFile
from raqa.config import RunSettings
from raqa.reading.events import RunEvent, from_json, to_json
from raqa.retrieval.corpus import Page

RunEventT = TypeVar("RunEventT", bound=RunEvent)


class _Journal(NamedTuple):
    rows: RowsFile
    page_of: Callable[[str], Page | None]


_journal: ContextVar[_Journal | None] = ContextVar("raqa_call_journal", default=None)


def rows_file(path: Path, settings_key: str) -> RowsFile:
    """The journal's rows of these settings (model or server, corpus, judge), by call key."""
    return RowsFile(path, settings_key, lambda row: row["call"])


@contextmanager
def journaled(rows: RowsFile | None, page_of: Callable[[str], Page | None]) -> Iterator[RowsFile | None]:
    """Within the block, `remembered` calls read and add rows of this file (None: no journal, every call is made);
    page_of rebuilds the events' pages. The file is closed (its lock released) when the block ends."""
    token = _journal.set(_Journal(rows, page_of) if rows is not None else None)
    try:
        yield rows
    finally:
        _journal.reset(token)
        if rows is not None:
            rows.close()


def call_key(kind: str, question: str, pages: Sequence[str], settings: RunSettings, backend, judge) -> str:
    """What determines one call's result, as one string.

    Example:
        >>> call_key("run", "Who?", [], RunSettings(), type("B", (), {"name": "m"})(), None)[:30]
        '["run", "Who?", [], {"strategy"'
    """
    parts = [kind, question, list(pages), asdict(settings), getattr(backend, "name", str(backend)), judge is not None]
    return json.dumps(parts, ensure_ascii=False)


def remembered(key: str, make: Callable[[], RunEventT | None]) -> RunEventT | None:
    """make()'s event (or None), from the journal's row for key when there is one, else made and added to it."""
    journal = _journal.get()
    if journal is None:
        return make()
    row = journal.rows.get(key)
    if row is not None:
        return from_json(row["event"], journal.page_of)
    event = make()
    if event is not None:  # a run that failed (None) is made again by the next run, never remembered as failed
        journal.rows.add({"call": key, "event": to_json(event)})
    return event
