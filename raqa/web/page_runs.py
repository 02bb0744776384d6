"""One run at a time on a page's outputs: a run started from a page replaces that page's earlier run.

A person who asks a new question while an answer is still coming expects the new run to take over the answer box. In
Gradio each click is its own event writing to the same components, and two runs are read at once (a batching model):
without this, the earlier run's updates kept landing and could end on top of the newer run's answer. So every
event that writes a tab's run outputs (Run, Enter, a replay, a lesson step, "Why this answer?") goes through one
`NewestRun` for that tab: a new run first waits, at most WAIT_S, for the page's earlier run to stop, which it does at
its next output, without sending it; a run overtaken while it waits never starts. `with_downloads` sets the run's
downloads on its last output.

A page is its Gradio session (`request.session_hash`). API clients are left alone: `gradio_client` marks its calls
with the header x-gradio-user (one Client shares one session across its jobs, and each job returns its own result).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterator

import gradio as gr

from raqa.web.export import temporary_folder, write_exports

WAIT_S = 60.0  # the longest a new run waits for the page's earlier run to stop (one window read, at most)
API_CLIENTS = ("api", "mcp")  # x-gradio-user of gradio_client and of Gradio's MCP server


def page_session(request: gr.Request | None) -> str | None:
    """The page a request comes from (its Gradio session), or None for an API client or a request without one."""
    if request is None or not getattr(request, "session_hash", None):
        return None
    headers = getattr(request, "headers", None) or {}
    if headers.get("x-gradio-user") in API_CLIENTS:
        return None
    return request.session_hash


class NewestRun:
    """Which run each page started last on one set of outputs; thread-safe (Gradio runs generators in threads)."""

    def __init__(self, wait_s: float = WAIT_S):
        self.wait_s = wait_s
        self._tickets = itertools.count(1)
        self._newest: dict[str, int] = {}
        self._running: Counter[str] = Counter()
        self._changed = threading.Condition()

    def begin(self, session: str) -> int | None:
        """Make a new run the session's newest, wait for its earlier runs to stop, and return the run's ticket; None
        when a newer run of the session came while it waited."""
        with self._changed:
            ticket = next(self._tickets)
            self._newest[session] = ticket
            self._changed.notify_all()
            self._changed.wait_for(
                lambda: self._running[session] == 0 or self._newest.get(session) != ticket, timeout=self.wait_s
            )
            if self._newest.get(session) != ticket:
                return None
            self._running[session] += 1
            return ticket

    def is_newest(self, session: str, ticket: int) -> bool:
        with self._changed:
            return self._newest.get(session) == ticket

    def finish(self, session: str, ticket: int) -> None:
        with self._changed:
            self._running[session] -= 1
            if self._running[session] <= 0:
                del self._running[session]
            if self._newest.get(session) == ticket:
                del self._newest[session]
            self._changed.notify_all()

    def running(self) -> int:
        """Runs under way, all pages together."""
        with self._changed:
            return sum(self._running.values())

    def only_newest(self, run: Callable[..., Generator], *, pass_request: bool = False):
        """run (a generator function of the event's inputs, after the request when pass_request) as a Gradio handler
        whose run stops, without sending its next output, once the same page starts another through this NewestRun."""

        def newest(request: gr.Request, *args):
            session = page_session(request)
            outputs = run(request, *args) if pass_request else run(*args)
            if session is None:
                yield from outputs
                return
            ticket = self.begin(session)
            if ticket is None:
                outputs.close()
                return
            try:
                for output in outputs:
                    if not self.is_newest(session, ticket):
                        return
                    yield output
            finally:
                outputs.close()  # a stopped run's model work ends here, as on Stop
                self.finish(session, ticket)

        return newest


def with_downloads(runs: Iterator[tuple], record: list[dict]):
    """A run's outputs, its downloads hidden (and emptied) while it runs and set on its last output.

    subtle: the downloads come with the last output, not in an update of their own after it, which had to repeat the
    answer (an API client's result is the last update) and, runs being read at once (a batching model), could land on
    the answer of a run clicked the moment this one's answer showed. So an output that follows the end of a run (a
    final or failed event) is held until the next comes (a comparison's second run) or the stream stops, at once.
    """
    hidden = (gr.DownloadButton(value=None, visible=False), gr.DownloadButton(value=None, visible=False))
    buttons = hidden  # the run's first output empties the last run's downloads; later outputs leave them
    last, held = None, False
    for outputs in runs:
        if held:
            yield (*last, *buttons)
            buttons = (gr.skip(), gr.skip())
        last, held = outputs, bool(record) and record[-1]["type"] in ("final", "run_failed")
        if not held:
            yield (*last, *buttons)
            buttons = (gr.skip(), gr.skip())
    if last is None:
        return
    if any(event["type"] == "final" for event in record):
        # held is False only after an internal error's message, which then comes twice, the second with the downloads
        with temporary_folder("raqa-run-") as folder:
            yield (*last, *(gr.DownloadButton(value=str(path), visible=True) for path in write_exports(record, folder)))
    elif held:
        yield (*last, *buttons)
