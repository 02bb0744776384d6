"""The Ask tab's run outputs with their downloads (page_runs.with_downloads): every output of a run reaches the page
once, as soon as it is made, and the downloads come with the last, never in an update after it that repeats it."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest
from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.reading.events import to_json
from raqa.web import page_runs
from raqa.web.page_runs import with_downloads

QUESTION = "Who painted the Mona Lisa?"


def _events(tiny_index, question: str = QUESTION) -> list[dict]:
    backend = ScriptedBackend(lambda messages: "NOT FOUND")
    return [to_json(e) for e in run(question, tiny_index, backend, RunSettings(window=2, k=4))]


class Outputs:
    """A run's outputs as ask() makes them: each event's JSON goes into record, then one output is made (extra
    outputs follow no new event, as a comparison's last does); counts how many were made."""

    def __init__(self, events: list[dict], extra: int = 0):
        self.events, self.extra, self.made = events, extra, 0
        self.record: list[dict] = []

    def __iter__(self):
        for i, event in enumerate(self.events):
            self.record.append(event)
            self.made += 1
            yield (f"answers {i}", f"windows {i}", "pages", gr.skip(), gr.skip())
        for i in range(len(self.events), len(self.events) + self.extra):
            self.made += 1
            yield (f"answers {i}", f"windows {i}", "pages", gr.skip(), gr.skip())


@pytest.fixture
def written(monkeypatch) -> list[Path]:
    """The download files with_downloads writes, as it writes them (the buttons hold Gradio's copies)."""
    paths: list[Path] = []
    write = page_runs.write_exports

    def write_and_note(events, folder):
        made = write(events, folder)
        paths.extend(made)
        return made

    monkeypatch.setattr(page_runs, "write_exports", write_and_note)
    return paths


def _sent(outputs: Outputs, written: list[Path]) -> list[dict]:
    """What with_downloads sends, one dict an update, with how many outputs had been made when it was sent and
    whether the files written for the downloads were there then."""
    sent = []
    for *shown, json_button, md_button in with_downloads(iter(outputs), outputs.record):
        files = [b.value["path"] for b in (json_button, md_button) if isinstance(b, gr.DownloadButton) and b.value]
        sent.append(
            {
                "answers": shown[0],
                "made": outputs.made,
                "buttons": (json_button, md_button),
                "files": files,
                "written": all(p.is_file() for p in written),
            }
        )
    return sent


def _hidden(button) -> bool:
    return isinstance(button, gr.DownloadButton) and button.value is None and button.visible is False


def test_a_runs_last_output_carries_its_downloads_and_no_output_comes_twice(tiny_index, written) -> None:
    outputs = Outputs(_events(tiny_index))
    sent = _sent(outputs, written)
    assert [s["answers"] for s in sent] == [f"answers {i}" for i in range(len(outputs.events))]  # once each, in order
    assert all(_hidden(b) for b in sent[0]["buttons"])  # the last run's downloads go as this one starts
    assert all(b == gr.skip() for s in sent[1:-1] for b in s["buttons"])
    last = sent[-1]
    assert all(isinstance(b, gr.DownloadButton) and b.visible for b in last["buttons"])
    assert [Path(f).suffix for f in last["files"]] == [".json", ".md"]
    assert json.loads(Path(last["files"][0]).read_text(encoding="utf-8")) == outputs.events
    assert len(written) == 2 and last["written"]  # there while the page takes its copy...
    assert not any(p.exists() for p in written)  # ...and removed once the run is done


def test_only_an_output_that_may_be_a_runs_last_waits_for_the_next(tiny_index, written) -> None:
    """A comparison: two runs, then an output that says what differs. The outputs stream as they are made; only the
    one after a run's final event waits, for the next output (or the end), so that it can carry the downloads."""
    first, second = _events(tiny_index), _events(tiny_index, "Who painted the Water Lilies?")
    outputs = Outputs(first + second, extra=1)
    sent = _sent(outputs, written)
    assert [s["answers"] for s in sent] == [f"answers {i}" for i in range(len(outputs.events) + 1)]
    ends = {len(first) - 1, len(first) + len(second) - 1, len(first) + len(second)}  # after a final event
    made = [min(i + 2, len(sent)) if i in ends else i + 1 for i in range(len(sent))]
    assert [s["made"] for s in sent] == made
    assert [bool(s["files"]) for s in sent] == [False] * (len(sent) - 1) + [True]
    assert json.loads(Path(sent[-1]["files"][0]).read_text(encoding="utf-8")) == first + second


def test_a_failed_run_gets_no_downloads_and_its_message_comes_once(tiny_index, written) -> None:
    outputs = Outputs(_events(tiny_index, "zzzz qqqq"))  # no page shares a word with it
    assert outputs.events[-1]["type"] == "run_failed"
    sent = _sent(outputs, written)
    assert [s["answers"] for s in sent] == [f"answers {i}" for i in range(len(outputs.events))]
    assert not any(s["files"] for s in sent) and written == []


def test_a_message_before_any_event_empties_the_downloads_once(written) -> None:
    """A setting the page cannot use: one message, no event, and the last run's downloads go."""
    outputs = Outputs([], extra=1)
    sent = _sent(outputs, written)
    assert [s["answers"] for s in sent] == ["answers 0"] and all(_hidden(b) for b in sent[0]["buttons"])
