"""The line of runs for a model (reading/line.py): first come first served, each waiting run told its place and
when its turn should come, a long wait offering the other model, and a run that leaves freeing its place."""

from __future__ import annotations

import threading
import time

import pytest

from raqa.config import AppConfig, RunForm
from raqa.reading import line as line_module
from raqa.reading.events import Final, InLine, Retrieved, RunStarted, WindowStarted
from raqa.reading.line import Line
from raqa.reading.readers import BASE_READER
from raqa.service import Service


def _run(log: list[str], name: str, hold: threading.Event):
    """A run's events as the engine yields them: started, pages, then (once admitted) reading until hold is set."""
    yield RunStarted(name, None, "m")
    yield Retrieved((), 0.0)
    log.append(f"{name} reads")
    hold.wait(10)
    yield Final(name, "iterative", "forward", None, True, "not_found", None, None, None, None, 1, 1, 0, 0, 0, 0.0)


def _consume(stream, events: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    thread.start()
    return thread


def _wait_until(condition, timeout: float = 5.0) -> None:
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < timeout, "timed out"
        time.sleep(0.01)


def test_runs_read_one_at_a_time_in_the_order_they_came_and_hear_their_place():
    line, log = Line("the 1.5B", capacity=1, typical_run_s=30.0), []
    holds = [threading.Event() for _ in range(3)]
    events = [[] for _ in range(3)]
    threads = []
    for i in range(3):
        threads.append(_consume(line.through(_run(log, f"run{i}", holds[i])), events[i]))
        _wait_until(lambda i=i: line.waiting() + line.reading() == i + 1)
    _wait_until(lambda: any(isinstance(e, InLine) for e in events[2]))
    assert log == ["run0 reads"]
    assert not any(isinstance(e, InLine) for e in events[0])  # the first never waits
    first_told = [e for e in events[1] if isinstance(e, InLine)][0]
    last_told = [e for e in events[2] if isinstance(e, InLine)][0]
    assert (first_told.place, first_told.ahead, last_told.place, last_told.ahead) == (1, 1, 2, 2)
    assert last_told.eta_s > first_told.eta_s >= 1.0 and last_told.model == "the 1.5B"
    holds[0].set()
    # the last run hears its place move up as soon as the first leaves
    _wait_until(lambda: any(isinstance(e, InLine) and e.place == 1 for e in events[2]))
    assert log == ["run0 reads", "run1 reads"]
    for i in range(3):
        holds[i].set()
        threads[i].join(5)
    assert log == ["run0 reads", "run1 reads", "run2 reads"]
    # InLine came between its start and its pages: a run retrieves when its turn comes
    kinds = [type(e).__name__ for e in events[2]]
    assert kinds[0] == "RunStarted" and kinds[-2:] == ["Retrieved", "Final"] and set(kinds[1:-2]) == {"InLine"}


def test_a_run_that_leaves_the_line_frees_its_place_and_a_stopped_run_its_turn():
    line, log = Line("m", capacity=1, typical_run_s=30.0), []
    hold = threading.Event()
    first_events: list = []
    first = _consume(line.through(_run(log, "first", hold)), first_events)
    _wait_until(lambda: line.reading() == 1)
    leaver = line.through(_run(log, "leaver", threading.Event()))
    assert [type(next(leaver)).__name__ for _ in range(2)] == ["RunStarted", "InLine"]
    assert line.waiting() == 1
    leaver.close()  # a visitor who pressed Stop while waiting
    assert line.waiting() == 0
    hold.set()
    first.join(5)
    assert line.reading() == 0 and log == ["first reads"]

    # a run stopped while reading frees its turn, and its short time stays out of the estimate
    def reading_run():
        yield RunStarted("q", None, "m")
        yield Retrieved((), 0.0)
        yield WindowStarted(1, 15, (), 500)
        raise AssertionError("a stopped run reads no further")

    stopped = line.through(reading_run())
    assert [type(next(stopped)).__name__ for _ in range(3)] == ["RunStarted", "Retrieved", "WindowStarted"]
    assert line.reading() == 1
    stopped.close()
    assert line.reading() == 0 and line._recent == type(line._recent)([line._recent[0]], maxlen=line._recent.maxlen)


def test_the_estimate_follows_the_recent_runs_and_a_long_wait_offers_the_other_model(monkeypatch):
    line = Line("m", capacity=1, typical_run_s=30.0)
    assert line.run_seconds() == 30.0 and line.wait_s() == 0.0
    for seconds in (80.0, 100.0, 90.0):
        line.leave(0, seconds)
    assert line.run_seconds() == 90.0
    offers = []
    hold = threading.Event()
    holder = _consume(line.through(_run([], "holder", hold)), [])
    _wait_until(lambda: line.reading() == 1)
    waiting = line.through(_run([], "waiting", threading.Event()), offer=lambda: offers.append(1) or "the small model")
    told = [next(waiting) for _ in range(2)][-1]
    assert told.eta_s > line_module.OFFER_AFTER_S and told.offer == "the small model" and offers == [1]
    monkeypatch.setattr(line_module, "OFFER_AFTER_S", 1000.0)  # a short wait offers nothing
    waiting_short = line.through(_run([], "short", threading.Event()), offer=lambda: "the small model")
    assert [next(waiting_short) for _ in range(2)][-1].offer is None
    waiting.close(), waiting_short.close()
    hold.set()
    holder.join(5)


def test_a_line_of_eight_lets_eight_read_together_without_waiting():
    line = Line("small", capacity=8, typical_run_s=5.0)
    holds = [threading.Event() for _ in range(9)]
    events = [[] for _ in range(9)]
    threads = [_consume(line.through(_run([], f"r{i}", holds[i])), events[i]) for i in range(9)]
    _wait_until(lambda: line.reading() == 8 and line.waiting() == 1)
    assert sum(any(isinstance(e, InLine) for e in run) for run in events) == 1
    for hold in holds:
        hold.set()
    for thread in threads:
        thread.join(5)
    with pytest.raises(ValueError, match="at least one"):
        Line("m", capacity=0, typical_run_s=1.0)


def test_the_service_puts_each_run_in_its_models_line(tiny_pages, tiny_index, scripted, broad_question):
    gate = threading.Event()

    def slow_reply(messages):
        gate.wait(10)
        return "NOT FOUND"

    service = Service(AppConfig(), tiny_pages, tiny_index, scripted(slow_reply), "tiny", {})
    form = RunForm(window=5, k=5)
    first_events: list = []
    first = _consume(service.events(service.plan(broad_question, form)), first_events)
    _wait_until(lambda: service.line(service.backend).reading() == 1)
    second = service.events(service.plan(broad_question, form))
    assert [type(next(second)).__name__ for _ in range(2)] == ["RunStarted", "InLine"]
    gate.set()
    rest = list(second)
    first.join(10)
    assert isinstance(rest[-1], Final) and any(isinstance(e, WindowStarted) for e in rest)
    assert isinstance(first_events[-1], Final)
    # the base model's own runs are never offered itself; another model's long wait offers the small model
    assert service.small_model_offer() == BASE_READER.label
