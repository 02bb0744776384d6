"""Flagging a verdict appends the run and the flag as one JSON line, and refuses what it cannot keep."""

from __future__ import annotations

import json
import threading

import pytest

from raqa.config import AppConfig
from raqa.web.flags import append_flag

RUN = [
    {"type": "run_started", "question": "Who?"},
    {"type": "final", "question": "Who?", "answer": "Monet", "verdict": "answered"},
]


def test_a_flag_is_one_line_with_the_whole_run(tmp_path) -> None:
    path = tmp_path / "flags" / "class.jsonl"
    assert append_flag(path, "badge_wrong", RUN) == 1
    assert append_flag(path, "right_to_decline", RUN) == 2
    first, second = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    kept = (first["flag"], first["question"], first["answer"], first["verdict"])
    assert kept == ("badge_wrong", "Who?", "Monet", "answered")
    assert first["events"] == RUN and second["flag"] == "right_to_decline"


def test_visitors_flagging_at_once_append_whole_lines(tmp_path) -> None:
    path = tmp_path / "flags.jsonl"
    threads = [threading.Thread(target=append_flag, args=(path, "badge_wrong", RUN * 50)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [json.loads(line)["flag"] for line in path.read_text().splitlines()] == ["badge_wrong"] * 8


@pytest.mark.parametrize(
    ("flag", "events", "message"), [("great", RUN, "Invalid flag"), ("badge_wrong", RUN[:1], "finished")]
)
def test_what_cannot_be_flagged_is_refused_and_nothing_written(tmp_path, flag, events, message) -> None:
    path = tmp_path / "flags.jsonl"
    with pytest.raises(ValueError, match=message):
        append_flag(path, flag, events)
    assert not path.exists()


def test_flags_are_off_unless_the_operator_names_a_file(monkeypatch) -> None:
    monkeypatch.delenv("RAQA_FLAGS", raising=False)
    assert AppConfig.from_env().flags_file is None
    monkeypatch.setenv("RAQA_FLAGS", "/tmp/class-flags.jsonl")
    assert AppConfig.from_env().flags_file == "/tmp/class-flags.jsonl"
