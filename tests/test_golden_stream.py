"""One question, three ways in: the page's generator, `python -m raqa ask --json` and the batch runner give the
same events, because each builds its run with Service.plan and streams it with Service.events.

For fixed questions and settings on scripted backends, the three runs must agree on every event (timings
aside): the event types in order, the pages retrieved and read, each window's verdict, the answer, the model
and the settings, including the chosen reader's calibrated threshold, shots and page cut. A test of the
reader choice runs the same question on a second, registered reader ("tuned") whose backend and settings
differ from the base model's, so a way in that lost --reader / reader= would be seen.
"""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedBackend

from lab.cli import main as lab_main
from raqa.cli import main
from raqa.config import AppConfig
from raqa.evaluation import questions
from raqa.evaluation.questions import QAItem
from raqa.loading import Lazy
from raqa.reading.events import to_json
from raqa.reading.readers import BASE_READER, Reader
from raqa.service import RunPlan, Service
from raqa.web.ask_tab import ask as page_ask
from raqa.web.ask_tab import page_form

# question -> (the page that holds the answer, the answer); any other window is declined
ANSWERS = {
    "Which river flows through Austria and Hungary?": ("p5", "Danube"),
    "Who painted the Mona Lisa in the Louvre museum?": ("p3", "Leonardo da Vinci"),
    "Who first reached the summit of Everest in 1953?": ("p2", "George Mallory"),  # not on its page: unsupported
}
DECLINE = "NOT FOUND\nREASON: These pages do not say."
TUNED = Reader("tuned", "Tuned reader (test)", None, answer_threshold=0.73, shots=1, page_tokens=48)
PAGE_STRATEGY = {"iterative": "Iterative", "topk": "Top-K"}


def reply(messages) -> str:
    """Answer when the window holds the question's page, decline otherwise: deterministic for every caller."""
    window = messages[-1]["content"]
    question = window.rsplit("Question: ", 1)[-1]
    page, answer = ANSWERS.get(question, (None, None))
    if page is not None and f"Page {page}:" in window:
        return f"ANSWER: {answer}\nPAGE: {page}\nSENTENCE: 1"
    return DECLINE


@pytest.fixture
def service(monkeypatch, tiny_pages, tiny_index, tmp_path) -> Service:
    """The tiny corpus with two readers: the base model and a tuned reader on its own backend.

    Service.load returns it (so the CLI and batch get it); its events() records each plan it is given.
    """
    base, tuned = ScriptedBackend(reply), ScriptedBackend(reply)
    tuned.name = "scripted-tuned"
    loaded = Service(
        AppConfig(cache_dir=tmp_path / "cache"),
        tiny_pages,
        tiny_index,
        base,
        "tiny",
        {},
        readers={BASE_READER.name: BASE_READER, TUNED.name: TUNED},
        backends={TUNED.name: Lazy(value=tuned)},
    )
    loaded.plans = []  # type: ignore[attr-defined]
    events = loaded.events

    def recording(plan: RunPlan):
        loaded.plans.append(plan)  # type: ignore[attr-defined]
        return events(plan)

    monkeypatch.setattr(loaded, "events", recording)
    monkeypatch.setattr(Service, "load", classmethod(lambda cls, config, **kwargs: loaded))
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path / "cache"))
    for name in ("RAQA_CORPUS", "RAQA_MODEL", "RAQA_ADAPTER", "RAQA_READER", "RAQA_ENDPOINTS"):
        monkeypatch.delenv(name, raising=False)
    return loaded


def without_timings(value):
    """The event's JSON with every "seconds" left out (wall-clock times differ between runs)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def through_the_page(service, question, strategy, order, size, k, reader, retrieval) -> tuple[list[dict], RunPlan]:
    events = []
    original = service.events

    def capture(plan):
        for event in original(plan):
            events.append(json.loads(json.dumps(to_json(event))))  # as written to a JSON line
            yield event

    service.events = capture
    try:
        # as the page's form sends it
        form = page_form(PAGE_STRATEGY[strategy], order, size, k, False, False, reader, retrieval)
        outputs = list(page_ask(service, question, form))
    finally:
        service.events = original
    assert outputs, "the page yielded nothing"
    return events, service.plans[-1]


def options(strategy, order, size, k, reader, retrieval) -> list[str]:
    chosen = ["--reader", reader] if reader else []
    settings = ["--strategy", strategy, "--order", order, "--window", str(size), "--k", str(k)]
    return [*settings, "--retrieval", retrieval, *chosen]


def through_ask(service, capsys, question, *settings) -> tuple[list[dict], RunPlan]:
    capsys.readouterr()
    assert main(["ask", question, "--json", *options(*settings)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()], service.plans[-1]


def through_batch(service, monkeypatch, tmp_path, question, *settings) -> tuple[dict, RunPlan]:
    gold = ANSWERS.get(question, (None, "nothing"))[1]
    monkeypatch.setattr(questions, "load_questions", lambda *args: [QAItem("g-1", question, (gold,))])
    out = tmp_path / f"batch-{len(service.plans)}.jsonl"
    lab_main(["batch", "--dataset", "nq", "--out", str(out), "--concurrency", "1", *options(*settings)])
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    return record, service.plans[-1]


def shape(events: list[dict]) -> list[str]:
    """The event types in order, each run of reply_delta as one (their count depends on the reply's words)."""
    types = [e["type"] for e in events]
    return [t for i, t in enumerate(types) if t != "reply_delta" or types[i - 1] != "reply_delta"]


RUN = ["run_started", "retrieved"]
RIVER = "Which river flows through Austria and Hungary?"
EVEREST = "Who first reached the summit of Everest in 1953?"
# question, strategy, order, window, k, reader, retrieval; then the golden run: pages retrieved, (verdict, pages) per
# window, and the last event's answer, abstained, supported, page_id, windows_read, pages_read
CASES = [
    (
        (RIVER, "iterative", "forward", 1, 5, None, "bm25"),
        ["p5", "p8", "p7", "p2", "p3"],
        [("answered", ["p5"])],
        ("Danube", False, True, "p5", 1, 1),
    ),
    (
        (RIVER, "iterative", "backward", 2, 8, "tuned", "bm25"),
        ["p5", "p8", "p7", "p2", "p3", "p1"],
        [("not_found", ["p3", "p1"]), ("not_found", ["p7", "p2"]), ("answered", ["p5", "p8"])],
        ("Danube", False, True, "p5", 3, 6),
    ),
    (
        ("Who painted the Mona Lisa in the Louvre museum?", "topk", "forward", 3, 5, "base", "bm25"),
        ["p3", "p5", "p2", "p7", "p8"],
        [("answered", ["p3", "p5", "p2", "p7", "p8"])],
        ("Leonardo da Vinci", False, True, "p3", 1, 5),
    ),
    (
        (EVEREST, "iterative", "forward", 3, 15, "tuned", "hybrid"),  # BM25: p2 p8 p7 p4 p3 p5 p1 p6
        ["p2", "p7", "p4", "p3", "p8", "p1", "p6", "p5"],
        [("unsupported", ["p2", "p7", "p4"])],
        ("George Mallory", False, False, "p2", 1, 3),
    ),
    (
        ("What is the boiling point of honey in the Great Wall?", "iterative", "forward", 2, 6, None, "bm25"),
        ["p8", "p1", "p4", "p5", "p3", "p2"],
        [("not_found", ["p8", "p1"]), ("not_found", ["p4", "p5"]), ("not_found", ["p3", "p2"])],
        (None, True, None, None, 3, 6),
    ),
    (
        ("zzzz qqqq", "iterative", "forward", 3, 15, "tuned", "hybrid"),
        [],
        [],
        None,
    ),  # no page shares a word: run_failed
]


@pytest.mark.parametrize(("settings", "retrieved", "windows", "final"), CASES)
def test_the_page_ask_and_batch_stream_the_same_run(
    service, capsys, monkeypatch, tmp_path, settings, retrieved, windows, final
):
    question, strategy, order, size, k, reader, retrieval = settings
    page, page_plan = through_the_page(service, *settings)
    cli, cli_plan = through_ask(service, capsys, *settings)
    record, batch_plan = through_batch(service, monkeypatch, tmp_path, *settings)

    # one plan: the same question, reader, backend and settings, whichever way the question came in
    assert page_plan == cli_plan == batch_plan
    expected = TUNED if reader == "tuned" else BASE_READER
    assert page_plan.reader == expected and record["reader"] == expected.name
    assert page_plan.backend.name == ("scripted-tuned" if reader == "tuned" else "scripted")
    assert (page_plan.settings.shots, page_plan.settings.page_tokens) == (expected.shots, expected.page_tokens)

    # the same events, in the same order, with the same pages, verdicts and answer
    assert without_timings(page) == without_timings(cli)
    started = cli[0]
    assert started["model"] == page_plan.backend.name == record["model"]
    assert started["settings"] == record["settings"]
    assert started["settings"]["answer_threshold"] == expected.answer_threshold  # the reader's, in all three
    assert (started["settings"]["strategy"], started["settings"]["order"]) == (strategy, order)
    assert (started["settings"]["window"], started["settings"]["k"]) == (size, k)
    assert started["settings"]["retrieval"] == retrieval
    assert all((h.get("similarity") is not None) == (retrieval == "hybrid") for h in cli[1].get("hits", []))
    # the batch line holds the run's last event, the same as the stream's
    assert without_timings(record["result"]) == without_timings(cli[-1])

    # and that run is the golden one
    assert [h["page_id"] for h in cli[1]["hits"]] == retrieved
    verdicts = [e for e in cli if e["type"] == "window_verdict"]
    assert [(v["verdict"], [h["page_id"] for h in v["hits"]]) for v in verdicts] == windows
    if final is None:
        assert shape(cli) == [*RUN, "run_failed"] and record["f1"] == 0.0
        return
    assert shape(cli) == [*RUN, *["window_started", "reply_delta", "window_verdict"] * len(windows), "final"]
    last = cli[-1]
    fields = ("answer", "abstained", "supported", "page_id", "windows_read", "pages_read")
    assert tuple(last[f] for f in fields) == final
    assert record["em"] is (final[0] is not None and final[0] == ANSWERS[question][1])
