"""`python -m raqa pipeline` and `experiment pipeline`, and train adapt's new options, through the command line."""

from __future__ import annotations

import json

import pytest
from adapt_fakes import FakeAdaptModel, knows_paris
from scripted import ScriptedBackend

from lab.cli import main as lab_main
from raqa.cli import main
from raqa.config import AppConfig
from raqa.loading import Lazy
from raqa.service import Service


@pytest.fixture
def fake_service(monkeypatch, tiny_pages, tiny_index):
    def load(cls, config: AppConfig, **kwargs) -> Service:
        return Service(
            config,
            tiny_pages,
            tiny_index,
            ScriptedBackend(["NOT FOUND"] * 20),
            "tiny",
            {},
            adapt=Lazy(value=FakeAdaptModel(knows_paris)),
        )

    monkeypatch.setattr(Service, "load", classmethod(load))


def test_pipeline_prints_the_events_as_json_lines(fake_service, capsys):
    assert main(["pipeline", "Who first reached the summit of Everest?", "--json", "--k", "5"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["closed_book_answered", "retrieval_decided", "run_started"]
    assert kinds[-2:] == ["final", "pipeline_ended"]
    assert events[-1]["answer"] is None and events[-1]["source"] == "none"  # no window answered: I don't know


def test_pipeline_for_a_person_prints_the_answer_on_stdout(fake_service, capsys):
    assert main(["pipeline", "What is the capital of France?", "--policy", "p_true", "--threshold", "0.5"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "Paris" and "Decision (p_true)" in err and "answer from memory" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pipeline", ""], "empty"),
        (["pipeline", "x", "--policy", "sometimes"], "Invalid policy"),
        (["pipeline", "x", "--policy", "p_true", "--threshold", "2"], "from 0 to 1"),
        (["experiment", "pipeline", "--limit", "0"], "must be 1 or more"),
        (["train", "adapt", "--kinds", "adapt,maybe"], "Invalid --kinds"),
        (["train", "adapt", "--labels", "/nonexistent.jsonl"], "no such file"),
    ],
)
def test_bad_input_exits_2_before_loading(argv, message, capsys):
    assert (main if argv[0] == "pipeline" else lab_main)(argv) == 2
    assert message in capsys.readouterr().err


def test_pipeline_with_bad_reading_settings_exits_2(fake_service, capsys):
    assert main(["pipeline", "Everest?", "--window", "0"]) == 2
    assert "error:" in capsys.readouterr().err


def test_eval_pipeline_through_an_unknown_server_exits_2_naming_the_servers(fake_service, capsys):
    assert (
        lab_main(["experiment", "pipeline", "--limit", "1", "--dev", "1", "--endpoint", "Nope", "--concurrency", "4"])
        == 2
    )
    assert "Invalid endpoint: 'Nope'. Choose from: none (RAQA_ENDPOINTS)." in capsys.readouterr().err
