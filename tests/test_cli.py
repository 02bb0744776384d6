"""The command line: input errors exit 2 before anything loads; --json streams one event per line."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from lab.cli import build_parser as build_lab_parser
from lab.cli import main as lab_main
from lab.records import DEMO_VERBS
from raqa.cli import build_parser, main
from raqa.config import AppConfig, RunSettings
from raqa.loading import Lazy
from raqa.models.base import ModelError
from raqa.reading.readers import BASE_READER, Reader
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index
from raqa.service import Service

ROOT = Path(__file__).resolve().parent.parent
DECLINE = "NOT FOUND\nREASON: These pages do not say."
FINAL_FIELDS = {"answer", "abstained", "windows_read", "pages_read", "prompt_tokens", "completion_tokens", "seconds"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("RAQA_CORPUS", "RAQA_MODEL", "RAQA_ADAPTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def no_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the CLI tries to load the corpus or the model."""

    def refuse(cls, *args, **kwargs):
        raise AssertionError("Service.load must not run for bad input")

    monkeypatch.setattr(Service, "load", classmethod(refuse))


@pytest.fixture
def tiny_service(
    monkeypatch: pytest.MonkeyPatch, tiny_pages: list[Page], tiny_index: BM25Index, tmp_path: Path
) -> Callable[..., ScriptedBackend]:
    """Make Service.load return the tiny corpus with a scripted backend; returns a function to set the replies.
    The cache (an experiment's call journal) is the test's own."""
    loads: list[AppConfig] = []
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))

    def install(*replies: str) -> ScriptedBackend:
        backend = ScriptedBackend(list(replies))

        def load(cls, config: AppConfig, **kwargs) -> Service:
            loads.append(config)
            return Service(config, tiny_pages, tiny_index, backend, "tiny", {})

        monkeypatch.setattr(Service, "load", classmethod(load))
        return backend

    install.loads = loads  # type: ignore[attr-defined]
    return install


def test_python_m_raqa_rejects_an_empty_question() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "raqa", "ask", ""], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: Please type a question: it is empty."
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--window", "0"], "error: window size must be a whole number from 1 to 20, got '0'."),
        (["--window", "21"], "error: window size must be a whole number from 1 to 20, got '21'."),
        (["--window", "2.5"], "error: window size must be a whole number from 1 to 20, got '2.5'."),
        (["--k", "4"], "error: K must be a whole number from 5 to 100, got '4'."),
        (["--k", "abc"], "error: K must be a whole number from 5 to 100, got 'abc'."),
        (["--strategy", "best"], "error: Invalid strategy: 'best'. Choose from: iterative, topk."),
        (["--order", "reverse"], "error: Invalid order: 'reverse'. Choose from: forward, backward."),
    ],
)
def test_bad_settings_exit_2_before_loading(
    no_loading, capsys: pytest.CaptureFixture, options: list[str], message: str
) -> None:
    assert main(["ask", "Who painted the Mona Lisa?", *options]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == message
    assert captured.out == ""


@pytest.mark.parametrize("question", ["", "   ", "\x00\x01", "a" * 100_000])
def test_bad_questions_exit_2_before_loading(no_loading, capsys: pytest.CaptureFixture, question: str) -> None:
    assert main(["ask", question]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_missing_question_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["ask"])
    assert exit_.value.code == 2
    assert "question" in capsys.readouterr().err


def test_missing_corpus_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "no-such-pages.jsonl"
    assert main(["ask", "Who painted the Mona Lisa?", "--corpus", str(missing), "--cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {missing}: no such corpus file." in err


def test_malformed_corpus_file_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text('{"id": "1", "title": "A", "text": "x"}\n{"id": "2", "title": "B"}\n')
    assert main(["ask", "Who?", "--corpus", str(corpus), "--cache", str(tmp_path)]) == 2
    assert f"error: {corpus}, line 2: expected the page text in field 'text', found missing." in capsys.readouterr().err


def json_lines(out: str) -> list[dict]:
    lines = out.splitlines()
    assert lines, "no output"
    return [json.loads(line) for line in lines]


def test_json_stream(tiny_service, broad_question: str, capsys: pytest.CaptureFixture) -> None:
    tiny_service(DECLINE, "ANSWER: Danube\nPAGE: p5\nSENTENCE: 1")  # the second of BM25's windows holds p5
    assert main(["ask", broad_question, "--json", "--window", "3", "--k", "8", "--retrieval", "bm25"]) == 0
    events = json_lines(capsys.readouterr().out)
    types = [event["type"] for event in events]
    assert types[:3] == ["run_started", "retrieved", "window_started"]
    assert types[-1] == "final"
    assert types.count("window_started") == types.count("window_verdict") == 2
    assert set(types) == {"run_started", "retrieved", "window_started", "reply_delta", "window_verdict", "final"}
    assert events[0]["question"] == broad_question
    assert events[0]["settings"]["window"] == 3 and events[0]["settings"]["k"] == 8
    assert [hit["rank"] for hit in events[1]["hits"]] == list(range(1, 9))
    assert set(events[1]["hits"][0]) == {"rank", "score", "page_id", "title"}  # BM25's: no similarity
    final = events[-1]
    verdicts = [event for event in events if event["type"] == "window_verdict"]
    assert [v["verdict"] for v in verdicts] == ["not_found", "answered"]
    assert verdicts[1]["grounding"]["supported"] is True
    assert FINAL_FIELDS <= set(final)
    assert (final["answer"], final["abstained"], final["supported"], final["page_id"]) == ("Danube", False, True, "p5")
    assert final["windows_read"] == 2 and final["pages_read"] == 6
    assert final["prompt_tokens"] == sum(v["prompt_tokens"] for v in verdicts)
    assert final["completion_tokens"] == sum(v["completion_tokens"] for v in verdicts)
    assert isinstance(final["seconds"], float) and final["seconds"] >= 0


def test_json_stream_ends_in_abstention(tiny_service, broad_question: str, capsys: pytest.CaptureFixture) -> None:
    tiny_service(DECLINE, DECLINE, DECLINE)
    assert main(["ask", broad_question, "--json", "--order", "backward", "--window", "3"]) == 0
    final = json_lines(capsys.readouterr().out)[-1]
    assert (final["type"], final["answer"], final["abstained"], final["windows_read"]) == ("final", None, True, 3)


def test_json_stream_ends_in_run_failed(tiny_service, capsys: pytest.CaptureFixture) -> None:
    backend = tiny_service()
    assert main(["ask", "?!", "--json"]) == 0
    events = json_lines(capsys.readouterr().out)
    assert [event["type"] for event in events] == ["run_started", "retrieved", "run_failed"]
    assert events[-1]["message"].startswith("No page shares a word")
    assert backend.requests == []


def test_options_reach_the_service(tiny_service, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tiny_service(DECLINE)
    corpus = tmp_path / "pages.jsonl"
    args = ["ask", "bees", "--json", "--corpus", str(corpus), "--model", "m.gguf", "--cache", str(tmp_path / "c")]
    assert main(args) == 0
    (config,) = tiny_service.loads
    assert config == AppConfig(corpus=str(corpus), model="m.gguf", adapter=None, cache_dir=tmp_path / "c")


def test_human_output(tiny_service, broad_question: str, capsys: pytest.CaptureFixture) -> None:
    tiny_service("ANSWER: Atlantis\nPAGE: p4\nSENTENCE: 1")
    assert main(["ask", broad_question, "--strategy", "topk"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "\nAtlantis (unsupported by its page)\n"
    assert "Window 1/1: #1 " in captured.err
    assert "=> unsupported (P(answer)=1.00) - Page p4 does not state 'Atlantis'." in captured.err
    assert "windows 1, pages 8, prompt tokens " in captured.err


def test_human_output_when_not_found(tiny_service, broad_question: str, capsys: pytest.CaptureFixture) -> None:
    tiny_service(DECLINE)
    assert main(["ask", broad_question, "--window", "8"]) == 0
    assert capsys.readouterr().out == "\nanswer not found\n"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--model", "/no/such/model", "error: No model at /no/such/model"),
        ("--model", "missing.gguf", "error: No model at missing.gguf"),
        ("--adapter", "/no/such/adapter", "error: No peft adapter at /no/such/adapter"),
    ],
)
def test_missing_model_or_adapter_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, option: str, value: str, message: str
) -> None:
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text('{"id": "1", "title": "A", "text": "Apples are red."}\n')
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "keep.txt").write_text("an earlier cache file")
    before = _files(tmp_path)
    assert main(["ask", "apples?", "--corpus", str(corpus), "--cache", str(cache), option, value]) == 2
    assert message in capsys.readouterr().err
    assert _files(tmp_path) == before  # no index was built, nothing was changed or removed


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAQA_CORPUS": "/no/such/pages.jsonl"}, "error: /no/such/pages.jsonl: no such corpus file."),
        ({"RAQA_ADAPTER": "/no/such/adapter"}, "error: No peft adapter at /no/such/adapter"),
        ({"RAQA_MODEL": "/no/such/model.gguf"}, "error: No model at /no/such/model.gguf"),
    ],
)
def test_app_with_a_bad_configuration_says_why_and_exits(tmp_path: Path, env: dict, message: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "keep.txt").write_text("an earlier cache file")
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAQA_CACHE": str(cache), "GRADIO_ANALYTICS_ENABLED": "False", **env},
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert _files(cache) == {"keep.txt": b"an earlier cache file"}


def test_app_with_a_malformed_corpus_names_the_line(tmp_path: Path) -> None:
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text('{"id": "1", "title": "A", "text": "x"}\nnot json\n')
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAQA_CORPUS": str(corpus), "RAQA_CACHE": str(tmp_path / "cache")},
    )
    assert result.returncode == 2 and f"error: {corpus}, line 2" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["route", ""], "empty"),
        (["route", "Everest?", "--adapters", "/nonexistent"], "train adapt"),
        (["experiment", "when_to_retrieve", "--limit", "0"], "--limit must be 1 or more"),
        (["experiment", "when_to_retrieve", "--limit", "2", "--adapters", "/nonexistent"], "train adapt"),
        (["experiment", "when_to_retrieve", "--limit", "2", "--popqa", "/nonexistent.tsv"], "no such PopQA file"),
        (["train", "adapt", "--limit", "0"], "--limit must be 1 or more"),
        (["train", "adapt", "--batch", "0"], "batch must be 1 or more"),
    ],
)
def test_adapt_commands_refuse_bad_input_with_exit_2(argv, message, capsys: pytest.CaptureFixture) -> None:
    assert run_cli(argv) == 2
    assert message in capsys.readouterr().err


# --- the reader, route's policies, and the experiment registry ---

TUNED = Reader("tuned", "Tuned reader (test)", None, answer_threshold=0.8, shots=1, page_tokens=64)


@pytest.fixture
def two_readers(monkeypatch: pytest.MonkeyPatch, tiny_pages: list[Page], tiny_index: BM25Index, tmp_path: Path):
    """Service.load gives the tiny corpus with the base model and a registered "tuned" reader (its own backend)."""
    base = ScriptedBackend(lambda messages: DECLINE)
    tuned = ScriptedBackend(lambda messages: "ANSWER: Danube\nPAGE: p5\nSENTENCE: 1")
    tuned.name = "scripted-tuned"
    service = Service(
        AppConfig(cache_dir=tmp_path / "cache"),
        tiny_pages,
        tiny_index,
        base,
        "tiny",
        {},
        readers={BASE_READER.name: BASE_READER, TUNED.name: TUNED},
        backends={TUNED.name: Lazy(value=tuned)},
    )
    monkeypatch.setattr(Service, "load", classmethod(lambda cls, config, **kwargs: service))
    return service


def test_ask_reads_with_the_chosen_reader(two_readers, broad_question: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["ask", broad_question, "--json", "--reader", "tuned"]) == 0
    events = json_lines(capsys.readouterr().out)
    assert events[0]["model"] == "scripted-tuned"
    assert (events[0]["settings"]["answer_threshold"], events[0]["settings"]["shots"]) == (0.8, 1)
    assert events[-1]["answer"] == "Danube"
    assert main(["ask", broad_question, "--json"]) == 0  # the default: the service's first reader, the base model
    events = json_lines(capsys.readouterr().out)
    assert events[0]["model"] == "scripted" and events[-1]["abstained"] is True


def test_an_unknown_reader_exits_2_listing_the_readers(two_readers, capsys: pytest.CaptureFixture) -> None:
    assert main(["ask", "bees?", "--reader", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "error: Invalid reader: 'nope'. Choose from: base, tuned."
    assert captured.out == ""


def test_an_unknown_endpoint_reader_exits_2_before_loading(
    no_loading, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.delenv("RAQA_ENDPOINTS", raising=False)
    assert main(["ask", "bees?", "--reader", "endpoint:Nope"]) == 2
    assert "Invalid endpoint: 'Nope'. Choose from: none (RAQA_ENDPOINTS is not set)." in capsys.readouterr().err


def test_batch_reads_with_the_chosen_reader(two_readers, monkeypatch, tmp_path: Path, capsys) -> None:
    from raqa.evaluation import questions
    from raqa.evaluation.questions import QAItem

    item = QAItem("t-1", "Which river flows through Austria?", ("Danube",))
    monkeypatch.setattr(questions, "load_questions", lambda *args: [item])
    out = tmp_path / "runs.jsonl"
    assert lab_main(["batch", "--out", str(out), "--reader", "tuned", "--concurrency", "1"]) == 0
    (record,) = json_lines(out.read_text())
    assert (record["reader"], record["model"], record["settings"]["answer_threshold"]) == (
        "tuned",
        "scripted-tuned",
        0.8,
    )
    assert record["em"] is True
    assert lab_main(["batch", "--out", str(tmp_path / "o.jsonl"), "--reader", "base", "--endpoint", "X"]) == 2
    assert "--endpoint X means --reader endpoint:X" in capsys.readouterr().err


def _popqa(tmp_path: Path, question: str, popularity: int) -> Path:
    path = tmp_path / "popqa.tsv"
    path.write_text(f'question\tpossible_answers\ts_pop\n{question}\t["Danube"]\t{popularity}\n')
    return path


@pytest.mark.parametrize(("popularity", "retrieve"), [(10, True), (5000, False)])
def test_route_decides_the_popularity_policy_from_raqa_popqa(
    monkeypatch: pytest.MonkeyPatch, tiny_pages, tiny_index, tmp_path: Path, capsys, popularity, retrieve
) -> None:
    from adapt_fakes import FakeAdaptModel, knows_paris

    from raqa.when_to_retrieve.model import ADAPT_DIR

    question = "Which river flows through Austria?"
    monkeypatch.setenv("RAQA_POPQA", str(_popqa(tmp_path, question, popularity)))
    monkeypatch.setenv("RAQA_POP_THRESHOLD", "100")
    monkeypatch.setenv("RAQA_MODEL", "/some/other/model")
    loads: list[AppConfig] = []

    def load(cls, config: AppConfig, **kwargs) -> Service:
        from raqa.when_to_retrieve.popularity import load_popularity

        loads.append(config)
        service = Service(config, tiny_pages, tiny_index, ScriptedBackend([]), "tiny", {})
        service.adapt = Lazy(value=FakeAdaptModel(knows_paris))
        service.popularity = load_popularity(config.popqa)
        return service

    monkeypatch.setattr(Service, "load", classmethod(load))
    argv = ["route", question, "--policies", "popularity,never", "--adapters", str(ADAPT_DIR)]
    assert main(argv) == 0
    events = json_lines(capsys.readouterr().out)
    decisions = [e for e in events if e["type"] == "retrieval_decided"]  # one run of the stream per policy
    assert [d["policy"] for d in decisions] == ["popularity", "never"] and decisions[0]["retrieve"] is retrieve
    assert (decisions[0]["confidence"], decisions[0]["threshold"]) == (popularity, 100)
    assert [e["type"] for e in events].count("pipeline_ended") == 2 and events[0]["type"] == "closed_book_answered"
    assert [e["type"] for e in events][-3:] == ["closed_book_answered", "retrieval_decided", "pipeline_ended"]
    assert loads[0].model is None and loads[0].adapter is None  # the adapters' own model, whatever RAQA_MODEL says


def test_route_without_a_when_to_retrieve_model_exits_2(
    monkeypatch: pytest.MonkeyPatch, tiny_pages, tiny_index, tmp_path: Path, capsys
) -> None:
    """A service without adapters (here: not the embedded model) and adapters that cannot load: exit 2, a reason."""
    from raqa.when_to_retrieve import model as adapt_model

    def load(cls, config: AppConfig, **kwargs) -> Service:
        return Service(config, tiny_pages, tiny_index, ScriptedBackend([]), "tiny", {})

    def no_adapters(*args, **kwargs):
        raise ModelError("Adapt-LLM needs the embedded model (python -m lab train adapt).")

    monkeypatch.setattr(Service, "load", classmethod(load))
    monkeypatch.setattr(adapt_model, "load_adapt_model", no_adapters)
    assert main(["route", "Everest?", "--adapters", str(adapt_model.ADAPT_DIR)]) == 2
    assert "train adapt" in capsys.readouterr().err


def test_experiment_runs_through_the_registry_and_writes_its_record(
    tiny_service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    from raqa.evaluation import questions
    from raqa.evaluation.questions import QAItem

    tiny_service(*[DECLINE] * 20)
    items = [QAItem("t-1", "Which river flows through Austria?", ("Danube",))]
    from lab.evaluation import registry

    monkeypatch.setattr(questions, "load_questions", lambda *args: items)
    monkeypatch.setattr(registry, "load_questions", lambda *args: items)  # imported by name there
    argv = ["experiment", "topk_vs_iterative", "--limit", "1", "--seed", "3", "--out", str(tmp_path)]
    assert lab_main(argv) == 0
    record = json.loads((tmp_path / "topk_vs_iterative-nq.json").read_text())
    # a record written to its own folder names it, so that rerunning the command writes it there again
    assert (
        record["command"]
        == f"python -m lab experiment topk_vs_iterative --dataset nq --limit 1 --seed 3 --out {tmp_path}"
    )
    assert record["sample"] == {"split": "test", "limit": 1, "seed": 3, "pool": 1}
    assert (record["model"], record["corpus"]) == ("scripted", "tiny (8 pages)")
    assert {"code_version", "created", "machine"} <= record.keys()
    assert set(record["results"]["configs"]) == {
        "topk_k5",
        "topk_k10",
        "topk_k20",
        f"iterative_w{RunSettings.window}_k15",
    }
    assert "wrote " in capsys.readouterr().err


def test_reader_comparison_with_an_unknown_reader_exits_2(tiny_service, monkeypatch, tmp_path: Path, capsys) -> None:
    from raqa.evaluation import questions

    tiny_service()
    monkeypatch.setattr(questions, "load_questions", lambda *args: [])
    argv = ["experiment", "reader_comparison", "--reader", "nope", "--out", str(tmp_path)]
    assert lab_main(argv) == 2
    assert "Invalid reader: 'nope'. Choose from: base." in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def verbs(parser) -> list[str]:
    """The verbs a command line's parser offers, in its order."""
    return list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


def run_cli(argv: list[str]) -> int:
    """`python -m raqa` for the demo's verbs, `python -m lab` for the lab's."""
    return (main if argv[0] in verbs(build_parser()) else lab_main)(argv)


def test_the_demo_offers_its_five_verbs_and_the_lab_five_that_name_what_they_run() -> None:
    assert verbs(build_parser()) == list(DEMO_VERBS)  # what records name as `python -m raqa`
    assert verbs(build_lab_parser()) == ["train", "experiment", "bench", "batch", "deploy-space"]
    assert not set(verbs(build_parser())) & set(verbs(build_lab_parser()))


# the judge research retired in e4dfd55: their records name options (--mined, --init, --depth 50 with strict
# positives) that no command takes any more, and say which commit made them
RETIRED = ("assets/results/judge-mined/", "assets/results/judge-strict/", "assets/results/judges-")


def _lab_commands() -> list[tuple[str, str]]:
    found = []
    for path in sorted(ROOT.glob("assets/**/*.json")):
        name = str(path.relative_to(ROOT))
        if name.startswith(RETIRED) or path.stat().st_size > 5_000_000:
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        command = record.get("command") if isinstance(record, dict) else None
        if isinstance(command, str) and command.startswith("python -m lab "):
            found.append((name, command))
    return found


def test_every_committed_record_names_a_lab_command_that_parses(capsys) -> None:
    """A renamed verb or option leaves no record whose rerun command no longer runs."""
    commands = _lab_commands()
    assert len(commands) >= 20  # the results, the adapters' and the judge's cards
    for name, command in commands:
        try:
            build_lab_parser().parse_args(shlex.split(command)[3:])
        except SystemExit:
            pytest.fail(f"{name}: {command!r} does not parse: {capsys.readouterr().err}")


def test_every_verb_has_help_and_the_cli_never_imports_gradio_or_torch() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from raqa.cli import main, build_parser\n"
        "from lab.cli import main as lab_main, build_parser as build_lab_parser\n"
        "import argparse\n"
        "for run, parser in ((main, build_parser()), (lab_main, build_lab_parser())):\n"
        "    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))\n"
        "    for verb, verb_parser in sub.choices.items():\n"
        "        named = [a for a in verb_parser._actions if isinstance(a, argparse._SubParsersAction)]\n"
        "        for argv in ([[verb, name] for name in named[0].choices] if named else [[verb]]):\n"
        "            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "                run([*argv, '--help'])\n"
        "print(sorted(m for m in ('gradio', 'torch', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_train_reader_and_train_adapt_pass_their_options_to_the_one_trainers_configs(monkeypatch, tmp_path):
    from dataclasses import replace

    import lab.training.reader
    import lab.training.when_to_retrieve
    from lab.training.lora import ADAPT_LORA, READER_LORA

    seen = {}

    def reader(out, limit, settings, *args, **kwargs):
        seen["reader"] = settings
        return {"answer_threshold": 0.5, "calibration": {}, "wall_seconds": 1.0}

    def adapt(out, limit, settings, *args, **kwargs):
        seen["adapt"] = settings
        return {"wall_seconds": 1.0, "data": {}}

    monkeypatch.setattr(lab.training.reader, "train_reader", reader)
    monkeypatch.setattr(lab.training.when_to_retrieve, "train_adapt", adapt)
    assert lab_main(["train", "reader", "--accumulation", "8", "--rank", "4", "--out", str(tmp_path / "r")]) == 0
    assert lab_main(["train", "adapt", "--batch", "16", "--micro-batch", "4", "--out", str(tmp_path / "a")]) == 0
    assert seen["reader"] == replace(READER_LORA, batch=8, rank=4)
    assert seen["adapt"] == replace(ADAPT_LORA, batch=16, micro_batch=4)


def test_why_adds_an_attribution_after_each_answered_window(tiny_service, broad_question: str, capsys) -> None:
    backend = tiny_service(DECLINE, "ANSWER: Danube\nPAGE: p5\nSENTENCE: 1")
    backend._scorer = lambda messages, answer: math.log(0.8 if "second-longest" in messages[-1]["content"] else 0.01)
    backend.can_score = True
    # BM25's windows: the second holds p5 beside pages that do not state the answer
    assert main(["ask", broad_question, "--json", "--window", "3", "--k", "8", "--why", "--retrieval", "bm25"]) == 0
    events = json_lines(capsys.readouterr().out)
    types = [event["type"] for event in events]
    assert types.count("attribution") == 1 and types[types.index("attribution") - 1] == "window_verdict"
    why = events[types.index("attribution")]
    assert why["finding"] == "sentence" and why["window"] == 2 and "sentence 1 of page p5" in why["summary"]
    assert any(s["page_id"] == "p5" and s["sentence"] == 1 for s in why["sentences"])
    assert types[-1] == "final"
    # the human output says it in one line, with the sentences that matter most
    backend = tiny_service(DECLINE, "ANSWER: Danube\nPAGE: p5\nSENTENCE: 1")
    backend._scorer = lambda messages, answer: math.log(0.8 if "second-longest" in messages[-1]["content"] else 0.01)
    backend.can_score = True
    assert main(["ask", broad_question, "--window", "3", "--k", "8", "--why", "--retrieval", "bm25"]) == 0
    err = capsys.readouterr().err
    assert (
        "why: Removing sentence 1 of page p5" in err and "without sentence 1 of page p5: P(answer) 0.80 -> 0.01" in err
    )
