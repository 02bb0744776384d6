"""The one resumable rows file (lab/evaluation/rows_file.py) as the evaluations use it, with a settings key and
rows of other settings beside; test_batch.py holds the kill, lock and garbled-line cases through run_batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.evaluation.rows_file import RowsFile, RowsFileError, resumed


def by_id(row: dict) -> str:
    return row["id"]


def test_a_row_appended_after_a_cut_line_lands_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a", "settings_key": "s"}\n{"id": "b", "sett')
    with RowsFile(path, "s", by_id) as rows:
        assert list(rows.rows) == ["a"]
        rows.add({"id": "b"})
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "b"]
    assert list(RowsFile(path, "s", by_id).rows) == ["a", "b"]


def test_rows_of_other_settings_may_have_other_fields_and_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    other = {"group": 3, "settings_key": "other"}  # no "id": read only by the other settings' runs
    path.write_text(json.dumps(other) + "\n")
    with RowsFile(path, "s", by_id) as rows:
        made = resumed(["x", "y"], rows, lambda w: w, lambda w: {"id": w, "value": w * 2})
    assert [r["value"] for r in made] == ["xx", "yy"]
    assert json.loads(path.read_text().splitlines()[0]) == other
    assert set(RowsFile(path, "s", by_id).rows) == {"x", "y"}


def test_a_row_of_this_run_without_its_key_fields_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    text = '{"settings_key": "s"}\n{"id": "a", "settings_key": "s"}\n'
    path.write_text(text)
    with pytest.raises(RowsFileError, match="rows.jsonl, line 1"):
        RowsFile(path, "s", by_id)
    assert path.read_text() == text


def test_reading_takes_no_lock_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    with RowsFile(path, None, by_id) as first:
        first.add({"id": "a"})
        assert list(RowsFile(path, None, by_id).rows) == ["a"]  # a reader while the first writes
        with pytest.raises(RowsFileError, match="another run is writing"):
            RowsFile(path, None, by_id).add({"id": "b"})
    with RowsFile(path, None, by_id) as second:  # released when the first closed
        second.add({"id": "b"})
    assert list(RowsFile(path, None, by_id).rows) == ["a", "b"]
