"""A resumable JSONL of rows: what an evaluation has already made survives an interruption, and a rerun resumes it.

Every row carries a `settings_key` naming what made it (model or server, corpus, settings); a file may hold rows of
several settings, and a run only sees its own. Rows are appended whole, one line at a time under a lock, and flushed
as soon as they are made, so a run stopped at any point keeps every finished row; a line cut by the stop is skipped
when the file is read again. `resumed` makes the rows of a work list that are missing (fan_out.calls_at_once at a
time) and returns all of them in the work list's order. Used by experiment pipeline, experiment when_to_retrieve,
experiment badges and, through call_journal.py, by every experiment.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TypeVar

from raqa.evaluation.fan_out import fan_out

Work = TypeVar("Work")


class RowsFile:
    """The rows of one settings_key in a JSONL file, by key; add() appends a row (thread-safe). With no path the
    rows are kept in memory only (a run that was not asked to be resumable); with settings_key None every row of
    the file is this run's (a file named after its settings) and rows carry no key."""

    def __init__(self, path: Path | None, settings_key: str | None, key_of: Callable[[dict], Hashable]):
        self.path, self.settings_key, self.key_of = path and Path(path), settings_key, key_of
        self.rows: dict[Hashable, dict] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption
                if isinstance(row, dict) and (settings_key is None or row.get("settings_key") == settings_key):
                    self.rows[key_of(row)] = row

    def get(self, key: Hashable) -> dict | None:
        return self.rows.get(key)

    def add(self, row: dict) -> dict:
        """The row with this file's settings_key, appended and flushed whole, and kept by its key."""
        row = row if self.settings_key is None else {**row, "settings_key": self.settings_key}
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line)
            self.rows[self.key_of(row)] = row
        return row


def resumed(
    work: Iterable[Work],
    rows: RowsFile,
    key_of_work: Callable[[Work], Hashable],
    make: Callable[[Work], dict],
    progress: Callable[[], None] = lambda: None,
) -> list[dict]:
    """Every row of the work list: from the file where it is there, else made (up to fan_out.calls_at_once at a
    time) and appended as soon as it is made; the rows in the work list's order. progress() is called once per row."""
    work = list(work)
    todo = [w for w in work if rows.get(key_of_work(w)) is None]
    for _ in range(len(work) - len(todo)):
        progress()

    def made(w: Work) -> dict:
        row = rows.add(make(w))
        progress()
        return row

    fan_out(made, todo)
    return [rows.get(key_of_work(w)) for w in work]
