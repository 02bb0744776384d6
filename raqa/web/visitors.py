"""Per-visitor limits of a public page (a Space, or RAQA_PUBLIC=1): live runs a minute, and live runs at once.

`VisitorGate.admit(visitor)` says whether a visitor may start a live run now (None) or why not (the message the
page shows); an admitted run is counted until `release`. `limit_runs` wraps one of the page's run generators so
that every live run, from the page or the API, passes the gate first and is released when it ends, fails or is
stopped. A visitor is their address (`visitor_of`): on a Space, X-Forwarded-For's first address, since every
request reaches the app from Spaces' proxy.

Left out: limits on replays (a recorded run uses no model), the caps on K, w and benchmark size (config.py's
validate_settings and the benchmark tab apply those), and defence against forged addresses: the limits stop
accidents and casual hammering; Gradio's queue (max_size) bounds what everyone together can ask.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import gradio as gr

from raqa.config import PublicLimits

# Gradio's concurrency group of live runs (Ask, the benchmark, /run_events) and how many it lets in at once: each
# run then waits in its model's line (reading/line.py), told its place, instead of silently in Gradio's queue. Below
# Gradio's 40 worker threads, so the page's other events still find one.
RUNS, RUNS_ADMITTED = "runs", 32
WINDOW_S = 60.0  # runs_per_minute counts the runs started in the last WINDOW_S seconds
FORGET_ABOVE = 1024  # visitors remembered before the idle ones are forgotten
SETTLE_S = 2.0  # a new run waits this long for the visitor's stopped run to let go before it is refused


def visitor_of(headers: Mapping[str, str], client_host: str | None, forwarded_for: bool) -> str:
    """Who is asking: X-Forwarded-For's first address behind a proxy (forwarded_for), else the connection's address.

    Example:
        >>> visitor_of({"x-forwarded-for": "203.0.113.7, 10.0.0.2"}, "10.16.3.80", True)
        '203.0.113.7'
        >>> visitor_of({"x-forwarded-for": "203.0.113.7"}, "127.0.0.1", False)
        '127.0.0.1'
    """
    if forwarded_for:
        first = (headers.get("x-forwarded-for") or "").split(",")[0].strip()
        if first:
            return first
    return client_host or "unknown"


@dataclass
class VisitorGate:
    """Counts each visitor's live runs; thread-safe (Gradio runs generators in worker threads)."""

    limits: PublicLimits
    clock: Callable[[], float] = time.monotonic
    _started: dict[str, deque[float]] = field(default_factory=dict, repr=False)
    _live: Counter[str] = field(default_factory=Counter, repr=False)
    _released: threading.Condition = field(default_factory=threading.Condition, repr=False)  # the lock, and runs ending

    def admit(self, visitor: str, settle_s: float = 0.0) -> str | None:
        """None, and the run is counted, when the visitor may start a live run now; else the message saying why not.

        An attempt within the minute's allowance counts towards it, and waits up to settle_s (real seconds) for the
        visitor's previous run to end: a Run pressed just after Stop starts once the stopped run has let go."""
        with self._released:
            now = self.clock()
            if len(self._started) > FORGET_ABOVE:
                self._forget_idle(now)
            started = self._started.setdefault(visitor, deque())
            while started and now - started[0] >= WINDOW_S:
                started.popleft()
            if len(started) >= self.limits.runs_per_minute:
                wait = max(1, math.ceil(WINDOW_S - (now - started[0])))
                return (
                    f"You have started {len(started)} live runs in the last minute, the most this public page allows "
                    f"a visitor: the next can start in {wait} s. Recorded runs (the examples, Replay) are not limited."
                )
            started.append(now)
            end = time.monotonic() + settle_s
            while self._live[visitor] >= self.limits.live_runs and time.monotonic() < end:
                self._released.wait(end - time.monotonic())
            if self._live[visitor] >= self.limits.live_runs:
                return (
                    f"You already have a live run going ({self.limits.live_runs} at a time per visitor on this public "
                    "page): wait for it to end, or press Stop, then start this one. Recorded runs (the examples, "
                    "Replay) are not limited."
                )
            self._live[visitor] += 1
            return None

    def release(self, visitor: str) -> None:
        """The visitor's run has ended (finished, failed or stopped)."""
        with self._released:
            self._live[visitor] -= 1
            if self._live[visitor] <= 0:
                del self._live[visitor]
            self._released.notify_all()

    def _forget_idle(self, now: float) -> None:
        """Drop the visitors with no run started in the last minute (so a long-lived page's memory stays bounded)."""
        for visitor in [v for v, started in self._started.items() if not started or now - started[-1] >= WINDOW_S]:
            del self._started[visitor]

    def live(self, visitor: str) -> int:
        with self._released:
            return self._live[visitor]


def limit_runs(gate: VisitorGate | None, run: Callable[..., Iterator], refused: Callable[[str], object]):
    """run as a generator function Gradio calls with the visitor's request first: without a gate, run itself;
    with one, a refused visitor gets one output, refused(message), and an admitted run is released when it ends,
    fails, or is cancelled (Stop closes the generator, which runs the finally)."""

    def limited(request: gr.Request, *args):
        if gate is None:
            yield from run(*args)
            return
        visitor = visitor_of(request.headers if request else {}, _host(request), gate.limits.forwarded_for)
        message = gate.admit(visitor, SETTLE_S)
        if message is not None:
            yield refused(message)
            return
        try:
            yield from run(*args)
        finally:
            gate.release(visitor)

    return limited


def _host(request: gr.Request | None) -> str | None:
    client = getattr(request, "client", None)
    return getattr(client, "host", None)
