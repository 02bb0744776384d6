"""Resumable batch runs: the bound on work in flight, resuming after SIGKILL without recomputing or writing an id
twice, cut-short and garbled lines, the file lock, failing work, and the `batch` command on a scripted backend
and on a loopback endpoint."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fault_server import FaultServer, Reply, streamed
from scripted import ScriptedBackend

from lab.cli import main
from lab.evaluation.batch import result_id, run_batch
from lab.evaluation.rows_file import RowsFile, RowsFileError
from raqa.config import AppConfig
from raqa.evaluation import questions
from raqa.evaluation.questions import QAItem
from raqa.service import Service

ROOT = Path(__file__).resolve().parent.parent
SENTINEL = "sk-BATCH-SENTINEL-987654321"


def items(count: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(id=f"q{i}") for i in range(count)]


def square(item) -> dict:
    return {"value": int(item.id[1:]) ** 2}


def lines_of(path: Path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def assert_each_once(path: Path, count: int) -> None:
    records = lines_of(path)
    assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(count))
    assert all(r["value"] == int(r["id"][1:]) ** 2 for r in records)


@pytest.mark.parametrize("concurrency, count", [(1, 6), (5, 30), (32, 96)])
def test_no_more_than_concurrency_items_run_at_once(tmp_path, concurrency, count):
    lock, running, most = threading.Lock(), [0], [0]

    def work(item):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.03)
        with lock:
            running[0] -= 1
        return square(item)

    summary = run_batch(items(count), work, tmp_path / "out.jsonl", concurrency)
    assert most[0] == concurrency  # reached, never passed
    assert (summary.total, summary.skipped, summary.written, summary.errors) == (count, 0, count, {})
    assert_each_once(tmp_path / "out.jsonl", count)


WORKER = """
import sys, time
from types import SimpleNamespace
from lab.evaluation.batch import run_batch

out, log = sys.argv[1], sys.argv[2]

def work(item):
    time.sleep(0.2)
    with open(log, "a") as f:
        f.write(item.id + "\\n")
    return {"value": int(item.id[1:]) ** 2}

run_batch([SimpleNamespace(id=f"q{i}") for i in range(40)], work, out, concurrency=4)
"""


def test_a_batch_killed_part_way_resumes_without_recomputing_or_repeating(tmp_path):
    out, log = tmp_path / "out.jsonl", tmp_path / "computed.log"
    (tmp_path / "worker.py").write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), str(out), str(log)], cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_bytes().count(b"\n") >= 12):
        assert process.poll() is None and time.monotonic() < deadline, "the batch ended or stalled before the kill"
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    survived = set(RowsFile(out, None, result_id).rows)
    assert 12 <= len(survived) < 40, "killed part-way"
    computed: list[str] = []
    summary = run_batch(items(40), lambda item: (computed.append(item.id), square(item))[1], out, concurrency=4)
    assert not set(computed) & survived, "finished ones were not recomputed"
    assert sorted(computed) == sorted(set(f"q{i}" for i in range(40)) - survived)
    assert (summary.skipped, summary.written) == (len(survived), 40 - len(survived))
    assert_each_once(out, 40)


def test_a_cut_short_last_line_is_dropped_and_its_item_run_again(tmp_path):
    out = tmp_path / "out.jsonl"
    whole = "".join(json.dumps({"id": f"q{i}", "value": i * i}) + "\n" for i in range(3))
    out.write_text(whole + '{"id": "q3", "val')
    computed: list[str] = []
    run_batch(items(5), lambda item: (computed.append(item.id), square(item))[1], out)
    assert sorted(computed) == ["q3", "q4"]
    assert_each_once(out, 5)


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "q0", "value": 0}) + "\n" + json.dumps({"id": "q1", "value": 1}))
    computed: list[str] = []
    run_batch(items(3), lambda item: (computed.append(item.id), square(item))[1], out)
    assert computed == ["q2"]
    assert_each_once(out, 3)


def test_a_garbled_line_before_the_last_stops_the_batch_and_leaves_the_file(tmp_path):
    out = tmp_path / "out.jsonl"
    text = '{"id": "q0", "value": 0}\nnot json\n{"id": "q2", "value": 4}\n'
    out.write_text(text)
    with pytest.raises(RowsFileError, match="out.jsonl, line 2: not a JSON object"):
        run_batch(items(3), square, out)
    assert out.read_text() == text


def test_a_file_another_batch_is_writing_is_refused(tmp_path):
    out = tmp_path / "out.jsonl"
    with open(out, "ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(RowsFileError, match="another run is writing"):
            run_batch(items(2), square, out)
    assert out.read_text() == ""


def test_work_that_raises_is_reported_not_written_and_retried_next_time(tmp_path):
    out = tmp_path / "out.jsonl"

    def flaky(item):
        if item.id == "q2":
            raise ConnectionError("server gone")
        return square(item)

    first = run_batch(items(4), flaky, out)
    assert first.errors == {"q2": "ConnectionError: server gone"} and first.written == 3
    computed: list[str] = []
    second = run_batch(items(4), lambda item: (computed.append(item.id), square(item))[1], out)
    assert computed == ["q2"] and (second.skipped, second.written) == (3, 1)
    assert_each_once(out, 4)


def test_a_result_that_is_not_json_is_an_error_not_a_line(tmp_path):
    out = tmp_path / "out.jsonl"
    summary = run_batch(items(2), lambda item: {"value": object()} if item.id == "q1" else square(item), out)
    assert list(summary.errors) == ["q1"] and [r["id"] for r in lines_of(out)] == ["q0"]


def test_progress_counts_finished_items_up_to_the_total(tmp_path):
    out = tmp_path / "out.jsonl"
    run_batch(items(3), square, out)
    seen: list[tuple[int, int]] = []
    run_batch(items(7), square, out, concurrency=2, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(3, 7), (4, 7), (5, 7), (6, 7), (7, 7)]


def test_duplicate_ids_and_a_zero_concurrency_are_refused(tmp_path):
    with pytest.raises(ValueError, match="'q1' occurs more than once"):
        run_batch([*items(2), SimpleNamespace(id="q1")], square, tmp_path / "out.jsonl")
    with pytest.raises(ValueError, match="concurrency must be 1 or more"):
        run_batch(items(2), square, tmp_path / "out.jsonl", concurrency=0)


# --- the command line ---

MONA = QAItem("t-1", "Who painted the Mona Lisa?", ("Leonardo da Vinci",))
EVEREST = QAItem("t-2", "Who first reached the summit of Everest?", ("Tenzing Norgay", "Edmund Hillary"))
NOWHERE = QAItem("t-3", "zzzz qqqq", ("nothing",))  # shares no word with any page: the run fails


@pytest.fixture
def scripted_service(monkeypatch, tiny_pages, tiny_index, tmp_path):
    """Service.load gives the tiny corpus and a scripted model; load_questions gives three known questions."""
    replies = {MONA.question: "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"}
    backend = ScriptedBackend(
        lambda messages: replies.get(messages[-1]["content"].split("Question: ")[-1], "NOT FOUND")
    )

    def load(cls, config: AppConfig, **kwargs) -> Service:
        return Service(config, tiny_pages, tiny_index, backend, "tiny", {})

    monkeypatch.setattr(Service, "load", classmethod(load))
    monkeypatch.setattr(questions, "load_questions", lambda *args: [MONA, EVEREST, NOWHERE])
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))
    return backend


def test_the_batch_command_writes_one_scored_line_per_question_and_resumes(tmp_path, scripted_service, capsys):
    out = tmp_path / "runs.jsonl"
    argv = ["batch", "--dataset", "nq", "--limit", "3", "--seed", "1", "--out", str(out), "--concurrency", "3"]
    assert main(argv) == 0
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(records) == {"t-1", "t-2", "t-3"}
    mona = records["t-1"]
    assert mona["question"] == MONA.question and mona["answers"] == ["Leonardo da Vinci"]
    assert mona["result"]["type"] == "final" and mona["result"]["answer"] == "Leonardo da Vinci"
    assert (mona["em"], mona["f1"], mona["model"]) == (True, 1.0, "scripted")
    assert records["t-2"]["result"]["abstained"] is True and records["t-2"]["em"] is False
    assert records["t-3"]["result"]["type"] == "run_failed" and records["t-3"]["f1"] == 0.0
    summary = capsys.readouterr().out
    assert "3/3 questions" in summary and "answered 1, abstained 1, run failed 1" in summary
    assert "EM 0.333, F1 0.333" in summary
    asked = len(scripted_service.requests)
    assert main(argv) == 0  # a second run finds everything done
    assert len(scripted_service.requests) == asked and len(out.read_text().splitlines()) == 3
    assert "(3 from before, 0 now, 0 failed)" in capsys.readouterr().out


def test_the_batch_command_says_in_one_line_that_another_run_holds_its_file(tmp_path, scripted_service, capsys):
    out = tmp_path / "runs.jsonl"
    with open(out, "ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert main(["batch", "--dataset", "nq", "--limit", "3", "--out", str(out)]) == 2
    assert "another run is writing to this file" in capsys.readouterr().err and out.read_text() == ""


@pytest.mark.parametrize(
    "options, message",
    [
        (["--concurrency", "0"], "--concurrency must be from 1 to 256"),
        (["--window", "0"], "window size must be a whole number from 1 to 20"),
        (["--endpoint", "Nope"], "Invalid endpoint: 'Nope'. Choose from: none (RAQA_ENDPOINTS is not set)."),
    ],
)
def test_bad_batch_options_exit_2(tmp_path, scripted_service, monkeypatch, capsys, options, message):
    monkeypatch.delenv("RAQA_ENDPOINTS", raising=False)
    assert main(["batch", "--out", str(tmp_path / "o.jsonl"), *options]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "o.jsonl").exists()


@pytest.mark.skipif(importlib.util.find_spec("pyserini") is None, reason="pyserini==0.17.0 is not installed")
def test_the_batch_command_drives_a_loopback_endpoint_and_keeps_its_key_out(tmp_path, tiny_pages, monkeypatch):
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in tiny_pages))
    out = tmp_path / "runs.jsonl"
    with FaultServer([Reply(events=streamed("NOT FOUND", usage=(77, 2)))]) as server:
        endpoints = tmp_path / "endpoints.json"
        endpoint = {"name": "Loopback", "base_url": server.url, "model": "m", "api_key_env": "BATCH_TEST_KEY"}
        endpoints.write_text(json.dumps([endpoint]))
        env = {**os.environ, "RAQA_ENDPOINTS": str(endpoints), "BATCH_TEST_KEY": SENTINEL}
        command = [sys.executable, "-m", "lab", "batch", "--dataset", "nq", "--limit", "6", "--seed", "3"]
        command += ["--corpus", str(corpus), "--cache", str(tmp_path / "cache"), "--endpoint", "Loopback"]
        command += ["--concurrency", "4", "--k", "5", "--out", str(out)]
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6 and len({r["id"] for r in records}) == 6
    assert all(r["model"] == "Loopback" and r["result"]["type"] in ("final", "run_failed") for r in records)
    finals = [r["result"] for r in records if r["result"]["type"] == "final"]
    assert finals and all(f["abstained"] and f["prompt_tokens"] % 77 == 0 for f in finals)  # the server's counts
    assert {s.headers["Authorization"] for s in server.seen} == {f"Bearer {SENTINEL}"}
    assert SENTINEL not in out.read_text() + result.stdout + result.stderr
    assert "6/6 questions" in result.stdout
