"""A run started from a page replaces that page's earlier run on the same outputs (raqa/web/page_runs.py)."""

import threading
from types import SimpleNamespace

import pytest

from raqa.web.page_runs import NewestRun, page_session


def page(session: str, **headers):
    return SimpleNamespace(session_hash=session, headers=headers)


def counting(log: list, name: str, n: int = 3):
    """A run yielding name-0 ... name-(n-1), saying in log when it starts and when it is closed."""

    def run():
        log.append(f"{name} starts")
        try:
            for i in range(n):
                yield f"{name}-{i}"
        finally:
            log.append(f"{name} closed")

    return run


def in_thread(gen) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.extend(gen), daemon=True)
    thread.start()
    return thread, got


def wait_until(condition, timeout: float = 5.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("timed out")


def test_a_new_run_from_the_page_stops_the_earlier_at_its_next_output_and_then_runs():
    newest, log = NewestRun(wait_s=5), []
    first = newest.only_newest(counting(log, "a"))(page("s"))
    assert next(first) == "a-0"
    second, got = in_thread(newest.only_newest(counting(log, "b"))(page("s")))
    wait_until(lambda: newest._newest.get("s") != 1)  # b has asked to run and waits for a
    assert "b starts" not in log  # b waits for a to stop
    assert list(first) == []  # a's next output is never sent: a stops
    second.join(5)
    assert got == ["b-0", "b-1", "b-2"]
    assert log == ["a starts", "a closed", "b starts", "b closed"]
    assert newest.running() == 0 and newest._newest == {}


def test_runs_of_other_pages_and_of_api_clients_are_left_alone():
    newest, log = NewestRun(wait_s=5), []
    mine = newest.only_newest(counting(log, "mine"))(page("s"))
    assert next(mine) == "mine-0"
    assert list(newest.only_newest(counting(log, "other"))(page("t"))) == ["other-0", "other-1", "other-2"]
    api = page("s", **{"x-gradio-user": "api"})  # gradio_client: one session for all of a Client's jobs
    assert list(newest.only_newest(counting(log, "job"))(api)) == ["job-0", "job-1", "job-2"]
    assert list(mine) == ["mine-1", "mine-2"]


def test_a_run_overtaken_while_it_waits_never_starts():
    newest, log = NewestRun(wait_s=5), []
    first = newest.only_newest(counting(log, "a"))(page("s"))
    next(first)
    waiting, got_b = in_thread(newest.only_newest(counting(log, "b"))(page("s")))
    wait_until(lambda: newest._newest.get("s") not in (None, 1))
    last, got_c = in_thread(newest.only_newest(counting(log, "c"))(page("s")))
    waiting.join(5)
    assert got_b == [] and "b starts" not in log
    assert list(first) == []
    last.join(5)
    assert got_c == ["c-0", "c-1", "c-2"]


def test_a_failing_run_still_lets_the_next_one_in():
    newest = NewestRun(wait_s=5)

    def broken():
        yield "x"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        list(newest.only_newest(broken)(page("s")))
    assert newest.running() == 0
    assert list(newest.only_newest(lambda: (x for x in ["ok"]))(page("s"))) == ["ok"]


def test_the_request_reaches_the_run_when_it_asks_for_it():
    newest = NewestRun()

    def run(request, question):
        yield (request.session_hash, question)

    assert list(newest.only_newest(run, pass_request=True)(page("s"), "q")) == [("s", "q")]


@pytest.mark.parametrize(
    "request_, session",
    [
        (None, None),
        (SimpleNamespace(session_hash=None, headers={}), None),
        (page("s", **{"x-gradio-user": "mcp"}), None),
        (page("s", **{"x-gradio-user": "app"}), "s"),
        (page("s"), "s"),
    ],
)
def test_page_session(request_, session):
    assert page_session(request_) == session
