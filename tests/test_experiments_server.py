"""The paper's experiments read by a model server, several calls at a time (`experiment --endpoint NAME
--concurrency N`): fan_out's order and bound, the record naming the server, and what is refused before reading."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from lab.cli import main
from lab.evaluation import registry
from raqa.config import AppConfig
from raqa.evaluation import questions
from raqa.evaluation.fan_out import calls_at_once, fan_out
from raqa.evaluation.questions import QAItem
from raqa.loading import Lazy
from raqa.models.base import Choice
from raqa.reading.readers import Reader
from raqa.service import Service

DECLINE = "NOT FOUND\nREASON: These pages do not say."


class InFlight:
    """A call that takes a while and counts how many run at once."""

    def __init__(self, seconds: float = 0.05):
        self.seconds, self.now, self.most, self.calls = seconds, 0, 0, 0
        self._lock = threading.Lock()

    def __call__(self, value):
        with self._lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self._lock:
            self.now -= 1
        return value


def test_fan_out_keeps_the_items_order_and_at_most_n_calls_in_flight() -> None:
    call = InFlight()
    assert fan_out(call, range(12)) == list(range(12)) and call.most == 1  # the default: one at a time
    call = InFlight()
    with calls_at_once(4):
        assert fan_out(lambda n: call(n * n), range(12)) == [n * n for n in range(12)]
    assert call.most == 4
    assert fan_out(call, []) == []


def test_a_fan_out_inside_a_fanned_out_call_runs_its_calls_one_by_one() -> None:
    call = InFlight(0.02)
    with calls_at_once(3):
        nested = fan_out(lambda n: fan_out(call, [n, n + 100]), range(6))
    assert nested == [[n, n + 100] for n in range(6)]
    assert call.most <= 3 and call.calls == 12


def test_fan_out_raises_the_first_error_and_refuses_a_bad_width() -> None:
    def fails_on_three(n: int) -> int:
        if n == 3:
            raise ValueError("three")
        return n

    with calls_at_once(4), pytest.raises(ValueError, match="three"):
        fan_out(fails_on_three, range(8))
    for width in (0, 257, 2.5):
        with pytest.raises(ValueError, match="--concurrency must be a whole number from 1 to 256"):
            with calls_at_once(width):
                pass


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tiny_pages, tiny_index, tmp_path: Path):
    """Service.load gives the tiny corpus, a local model that must not be asked, and a server named Srv; the cache
    (the experiments' call journals) is the test's own."""
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))

    def local_model(messages):
        raise AssertionError("the local model was asked, not the server")

    in_flight = InFlight(0.05)
    server = ScriptedBackend(lambda messages: in_flight(DECLINE))
    server.name = "Srv model"

    def load(cls, config: AppConfig, **kwargs) -> Service:
        service = Service(config, tiny_pages, tiny_index, ScriptedBackend(local_model), "tiny", {})
        service.readers = {
            "base": Reader("base", "Base model", None),
            "endpoint:Srv": Reader("endpoint:Srv", "Srv", None),
        }
        service.backends["endpoint:Srv"] = Lazy(value=server)
        return service

    monkeypatch.setattr(Service, "load", classmethod(load))
    lost = [QAItem(f"q-{n}", f"Who founded the town of Zzyzx number {n}?", ("Curtis Springer",)) for n in range(4)]
    monkeypatch.setattr(questions, "load_questions", lambda *args: lost)
    monkeypatch.setattr(registry, "load_questions", lambda *args: lost)  # imported by name there
    return in_flight


def test_an_experiment_reads_through_the_named_server_n_calls_at_once(served, tmp_path: Path, capsys) -> None:
    argv = ["experiment", "unanswerable", "--limit", "4", "--endpoint", "Srv", "--concurrency", "3"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    path = tmp_path / "unanswerable-nq-srv.json"  # beside the local model's record, not over it
    record = json.loads(path.read_text())
    assert record["command"] == (
        f"python -m lab experiment unanswerable --dataset nq --limit 4 --seed 0 --endpoint Srv --concurrency 3 "
        f"--out {tmp_path}"
    )
    assert (record["model"], record["weights"], record["server"]) == (
        "Srv model",
        None,
        {"endpoint": "Srv", "concurrency": 3},
    )
    runs = record["results"]["runs"]
    assert record["results"]["questions"] == 4 and runs["default"]["ended_with_an_answer"]["value"] == 0.0
    assert served.most == 3  # three runs in flight, never more


def test_what_a_server_cannot_read_is_refused_before_anything_runs(served, tmp_path: Path, capsys) -> None:
    assert main(["experiment", "attribution", "--endpoint", "Srv", "--out", str(tmp_path)]) == 2
    assert "attribution needs the local model's own weights" in capsys.readouterr().err
    assert main(["experiment", "topk_vs_iterative", "--endpoint", "Nope", "--out", str(tmp_path)]) == 2
    assert "Invalid endpoint: 'Nope'. Choose from: Srv (RAQA_ENDPOINTS)." in capsys.readouterr().err
    assert main(["experiment", "unanswerable", "--endpoint", "Srv", "--concurrency", "0", "--out", str(tmp_path)]) == 2
    assert "--concurrency must be from 1 to 256, got 0." in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [] and served.calls == 0


def test_the_local_model_is_given_the_runs_it_can_serve_at_once(served, tmp_path: Path, capsys) -> None:
    with pytest.raises(AssertionError, match="the local model was asked"):  # no --endpoint: the local model reads
        main(["experiment", "unanswerable", "--limit", "1", "--concurrency", "4", "--out", str(tmp_path)])
    assert "Note: the local model reads 1 at a time; --concurrency is for --endpoint." in capsys.readouterr().err


class NoLogprobs(ScriptedBackend):
    """A server that reports no log-probabilities: its choice is read from how the reply starts."""

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
        for piece in super().reply(messages, plan, threshold, max_new_tokens):
            yield dataclasses.replace(piece, measured=False) if isinstance(piece, Choice) else piece


def test_scores_a_server_cannot_measure_are_missing_not_filled_in(tiny_index) -> None:
    from lab.evaluation.window_scores import score_windows
    from raqa.config import RunSettings

    item = QAItem("d", "Which river flows through Austria?", ("Danube",))
    window = tiny_index.search(item.question, 1)
    reply = "ANSWER: Danube\nPAGE: p5\nSENTENCE: The Danube is the second-longest river in Europe."
    unmeasured = score_windows([(item, window)], [(item, window)], NoLogprobs(lambda m: reply), RunSettings(window=1))
    assert unmeasured["p_answer_missing"] == 2 and unmeasured["requests"] == 2
    assert unmeasured["mean_p_answer_negative"] is None and unmeasured["auc_p_answer"] is None
    assert unmeasured["false_answer_rate_on_negative"]["value"] == 1.0  # the verdicts themselves are still read
    measured = score_windows(
        [(item, window)], [(item, window)], ScriptedBackend(lambda m: reply), RunSettings(window=1)
    )
    assert measured["p_answer_missing"] == 0 and measured["mean_p_answer_negative"]["value"] == 1.0
    assert measured["prompt_tokens"] > 0


def test_agreement_says_which_server_values_lie_in_the_local_intervals() -> None:
    from lab.ops.server_experiment import agreement

    local = {
        "rows": [
            {
                "shots": 0,
                "false_answer_rate_on_negative": {"value": 0.5, "low": 0.3, "high": 0.7},
                "mean_p_answer_negative": {"value": 0.9, "low": 0.85, "high": 0.95},
            }
        ]
    }
    served = {
        "rows": [
            {
                "shots": 0,
                "false_answer_rate_on_negative": {"value": 0.65, "low": 0.4, "high": 0.8},
                "mean_p_answer_negative": None,
            }
        ]
    }
    result = agreement(local, served)
    assert (result["within"], result["compared"]) == (1, 1)  # the missing P(answer) is not compared
    assert result["rows"]["0"]["false_answer_rate_on_negative"]["within"] is True
