"""An experiment's model calls kept as rows (`experiment --rows`): an interrupted run resumes where it stopped, a
rerun over complete rows makes no call and writes the same results, and rows of other settings are left alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from lab.evaluation import registry
from lab.evaluation.call_journal import journaled, remembered, rows_file
from raqa.config import AppConfig
from raqa.evaluation.fan_out import calls_at_once, fan_out
from raqa.evaluation.questions import QAItem
from raqa.models.base import ModelError
from raqa.service import Service

ITEMS = [
    QAItem("bee", "Honey bee colony queen: in which year was the painting stolen?", ("1911",)),
    QAItem("danube", "Which river flows through Vienna and ends in the Black Sea?", ("Danube",)),
    QAItem("zzyzx", "Who founded the town of Zzyzx?", ("Curtis Springer",)),  # nowhere in the corpus
]


def reply(messages) -> str:
    """A deterministic reader: answers when the Danube page is in the window, else declines."""
    prompt = messages[-1]["content"]
    if "Danube" in prompt:
        return "ANSWER: Danube\nPAGE: p5\nSENTENCE: The Danube flows into the Black Sea."
    return "NOT FOUND\nREASON: These pages do not say."


class Counting(ScriptedBackend):
    """The scripted reader, counting calls; fails with a server error once `fail_after` calls were made."""

    name = "Counting server"

    def __init__(self, fail_after: int | None = None):
        super().__init__(reply)
        self.fail_after = fail_after

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
        if self.fail_after is not None and len(self.requests) >= self.fail_after:
            raise ModelError("Counting server: 503 Service Unavailable.")
        yield from super().reply(messages, plan, threshold, max_new_tokens)


def same(a: dict, b: dict, timed: bool = True) -> bool:
    """Equal results, NaN equal to NaN; timed=False leaves out the measured seconds (a fresh run times itself)."""

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if timed or k != "seconds"}
        return [plain(v) for v in value] if isinstance(value, list) else value

    return json.dumps(plain(a), sort_keys=True) == json.dumps(plain(b), sort_keys=True)


def experiment(name: str, backend, tiny_pages, tiny_index, tmp_path: Path, rows: Path, concurrency: int = 1):
    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, backend, "tiny", {})
    options = registry.Options(window=1, concurrency=concurrency)
    return registry.run_entry(registry.EXPERIMENTS[name], service, "tiny", ITEMS, 1, options, list, rows)


@pytest.mark.parametrize("name", ["negative_windows", "topk_vs_iterative", "unanswerable"])
def test_a_rerun_over_complete_rows_makes_no_call_and_gives_the_same_results(name, tiny_pages, tiny_index, tmp_path):
    rows = tmp_path / "rows.jsonl"
    first = experiment(name, Counting(), tiny_pages, tiny_index, tmp_path, rows)
    made = first.about["rows"]["calls"]
    assert made > 0 and first.about["rows"] == {"file": "rows.jsonl", "calls": made, "in_file_before": 0}
    again = experiment(name, Counting(fail_after=0), tiny_pages, tiny_index, tmp_path, rows)  # any call would fail
    assert same(again.results, first.results)
    assert again.about["rows"] == {"file": "rows.jsonl", "calls": made, "in_file_before": made}
    fresh = experiment(name, Counting(), tiny_pages, tiny_index, tmp_path, tmp_path / "other.jsonl", concurrency=3)
    assert same(fresh.results, first.results, timed=False)  # read back, the events score exactly as when they were made


def test_an_interrupted_experiment_resumes_where_it_stopped(tiny_pages, tiny_index, tmp_path: Path) -> None:
    whole = experiment("negative_windows", Counting(), tiny_pages, tiny_index, tmp_path, tmp_path / "whole.jsonl")
    rows = tmp_path / "rows.jsonl"
    with pytest.raises(ModelError, match="503"):
        experiment("negative_windows", Counting(fail_after=3), tiny_pages, tiny_index, tmp_path, rows)
    assert len(rows.read_text().splitlines()) == 3  # every call made before the failure is kept
    resumed = Counting()
    done = experiment("negative_windows", resumed, tiny_pages, tiny_index, tmp_path, rows)
    assert same(done.results, whole.results, timed=False)
    assert len(resumed.requests) == whole.about["rows"]["calls"] - 3  # only the missing calls were made


def test_rows_of_other_settings_are_left_alone(tiny_pages, tiny_index, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    experiment("negative_windows", Counting(), tiny_pages, tiny_index, tmp_path, rows)
    other = Counting()
    other.name = "Another server"
    again = experiment("negative_windows", other, tiny_pages, tiny_index, tmp_path, rows)
    assert len(other.requests) == again.about["rows"]["calls"] > 0  # none of the first server's rows were used
    keys = {json.loads(line)["settings_key"] for line in rows.read_text().splitlines()}
    assert len(keys) == 2 and all("Another server" in k or "Counting server" in k for k in keys)


def test_a_cut_last_line_is_skipped_and_a_failed_call_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(
        '{"call": "a", "event": {"type": "notice", "message": "kept"}, "settings_key": "s"}\n{"call": "b", '
    )
    journal = rows_file(path, "s")
    assert list(journal.rows) == ["a"]
    with journaled(journal, lambda page_id: None):
        assert remembered("a", lambda: pytest.fail("made again")).message == "kept"
        assert remembered("c", lambda: None) is None  # a failed run: not remembered, made again next time
        with calls_at_once(2):  # the journal is seen by the calls fan_out runs in threads
            got = fan_out(lambda key: remembered(key, lambda: pytest.fail("made again")).message, ["a", "a"])
    assert got == ["kept", "kept"] and "c" not in rows_file(path, "s").rows
