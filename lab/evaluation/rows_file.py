"""The one resumable JSONL of rows: what a run has already made survives an interruption, and a rerun resumes it.

Every evaluation, experiment and `python -m lab batch` keeps its rows here. A row is appended whole, one line, and
flushed and fsynced as soon as it is made, so a run stopped or killed at any point keeps every finished row. The
first write locks the file (flock) for as long as the RowsFile is open, so two runs cannot append to one file at
once; reading a file takes no lock. A stop can cut the last line short (or, on power loss, fill it with garbage):
that line is dropped when the file is read, and cut off before the next row is appended, so its row is made again.
An unreadable line anywhere else is not a stop's doing: RowsFileError names it, and the file is left as it is.

A file may hold rows of several settings: with a `settings_key` each row carries it and a run only sees its own;
with None every row is this run's (a file named after its settings). `resumed` makes the rows of a work list that
are missing (fan_out.calls_at_once at a time) and returns all of them in the work list's order.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import IO, TypeVar

from raqa.evaluation.fan_out import fan_out

Work = TypeVar("Work")


class RowsFileError(RuntimeError):
    """The rows file cannot be resumed or written; the message names the file and what is wrong."""


class RowsFile:
    """The rows of one settings_key in a JSONL file, by key_of(row); add() appends a row (thread-safe). With no path
    the rows are kept in memory only (a run that was not asked to be resumable)."""

    def __init__(self, path: Path | str | None, settings_key: str | None, key_of: Callable[[dict], Hashable]):
        self.path, self.settings_key, self.key_of = path and Path(path), settings_key, key_of
        self.rows: dict[Hashable, dict] = {}
        self._lock = threading.Lock()
        self._out: IO[bytes] | None = None
        self._keep = self._read()

    def get(self, key: Hashable) -> dict | None:
        return self.rows.get(key)

    def claim(self) -> None:
        """Lock the file for this run, read it again under the lock, and cut off a last line a stop left unreadable;
        RowsFileError if another run holds it or a line before the last is unreadable. add() claims on first use."""
        if self.path is None or self._out is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.path, "a+b")  # noqa: SIM115 - kept open (and locked) until close()
        try:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            out.close()
            raise RowsFileError(
                f"{self.path}: another run is writing to this file (a run of other settings too); wait for it to end, "
                "or give this run a file of its own."
            ) from None
        try:
            self._keep = self._read()
        except RowsFileError:
            out.close()
            raise
        if self._keep < self.path.stat().st_size:
            os.truncate(self.path, self._keep)
        if self._keep and os.pread(out.fileno(), 1, self._keep - 1) != b"\n":
            out.write(b"\n")  # a whole last row that lacked only its newline
        out.flush()
        os.fsync(out.fileno())
        self._out = out

    def add(self, row: dict) -> dict:
        """The row with this file's settings_key, appended, flushed and fsynced whole, and kept by its key. A row that
        is not JSON raises TypeError or ValueError and writes nothing."""
        row = row if self.settings_key is None else {**row, "settings_key": self.settings_key}
        line = json.dumps(row, ensure_ascii=False).encode() + b"\n"
        with self._lock:
            if self.path is not None:
                self.claim()
                self._out.write(line)
                self._out.flush()
                os.fsync(self._out.fileno())
            self.rows[self.key_of(row)] = row
        return row

    def close(self) -> None:
        """Release the file (and its lock); the rows stay readable."""
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> RowsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mine(self, row: dict) -> bool:
        return self.settings_key is None or row.get("settings_key") == self.settings_key

    def _row(self, line: bytes) -> dict | None:
        """One line's row, or None if it is not a JSON object (with the fields key_of reads, where it is this run's)."""
        try:
            row = json.loads(line)
        except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            return None
        if not isinstance(row, dict):
            return None
        if self._mine(row):
            try:
                self.key_of(row)
            except (KeyError, TypeError):
                return None
        return row

    def _read(self) -> int:
        """This run's rows from the file into self.rows; how many of its bytes to keep (all but an unreadable last
        line). Blank lines are skipped."""
        if self.path is None or not self.path.is_file():
            return 0
        data = self.path.read_bytes()
        *whole, tail = data.split(b"\n")  # tail: what follows the last newline (empty when the file ends with one)
        rows, keep = [], 0
        for number, line in enumerate(whole, start=1):
            row = self._row(line)
            if row is None and line.strip():
                if number == len(whole) and not tail:
                    break
                raise RowsFileError(
                    f"{self.path}, line {number}: not a JSON object with the fields of a row; only the last line may "
                    "be cut short by a stop. Remove that line (its row is made again) to resume."
                )
            if row is not None:
                rows.append(row)
            keep += len(line) + 1
        if tail and (row := self._row(tail)) is not None:  # a whole row that lacks only its newline
            rows.append(row)
            keep = len(data)
        self.rows = {self.key_of(r): r for r in rows if self._mine(r)}
        return keep


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
