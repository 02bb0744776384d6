"""A first-come line for a model: a run reads when its turn comes, and while it waits it is told its place and when
its turn should come.

On two cores the 1.5B reads one window at full speed, and runs sent to it together only slow each other: 12 windows
at once took 40 s on 1 slot, 45 s on 2 and 52 s on 4, and the first reply came last on 4
(assets/results/slots.json). So the page lets one run at a time read with it, and every other run waits here in the
order it came. The small model's batcher packs the forward passes of several runs into one call, so its line lets
several read at once. A run joins when it starts, so its place is its arrival, and retrieves its pages when its
turn comes. A waiting run yields `InLine` events: at once, whenever its place changes, and every few seconds with a fresh
estimate (a visitor who left is then noticed at that yield, and its place is freed).

The estimate simulates the line: each run reading now ends when a recent run's median time has passed (at least a
second from now), and each run ahead then takes that median. When the wait is over OFFER_AFTER_S, the event names
another model that reads at once, if the service has one (the small model).

Left out: priorities, a cap on the line's length (the page's queue has one), and runs of one visitor overtaking
another's.
"""

from __future__ import annotations

import heapq
import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from raqa.reading.events import InLine, RunEvent, RunStarted

OFFER_AFTER_S = 60.0  # a wait longer than this offers the other model
REFRESH_S = 2.0  # a waiting run hears from the line at least this often (and a visitor who left is noticed)
RECENT_RUNS = 20  # the runs whose times make the estimate
# What a run takes before the line has timed one of its own (then its recent median), at the page's defaults on NQ
# questions (assets/results/load-readers.json): the 1.5B 1,935 s of compute for 30 runs, about a minute each; the
# small model 4.5 s a run alone
TYPICAL_RUN_S = {"shared": 5.0, "alone": 60.0}


def new_line(backend, shared_runs: int, shared: bool) -> Line:
    """A line for backend's runs: shared_runs read at once where it packs their forward passes together (shared: the
    small model), otherwise backend.runs_at_once (1 for the 1.5B in llama.cpp; a model server's concurrency)."""
    capacity = shared_runs if shared else backend.runs_at_once
    return Line(backend.name, capacity, TYPICAL_RUN_S["shared" if shared else "alone"])


class Line:
    """Runs waiting for one model, first come first served; `capacity` of them read at once. Thread-safe."""

    def __init__(self, model: str, capacity: int, typical_run_s: float):
        if capacity < 1:
            raise ValueError(f"A line lets at least one run read at once, got {capacity}.")
        self.model, self.capacity = model, capacity
        self.typical_run_s = typical_run_s  # the estimate before any run here has ended
        self._tickets = itertools.count(1)
        self._waiting: list[int] = []  # tickets, first come first
        self._reading: dict[int, float] = {}  # ticket -> when it began reading (time.monotonic)
        self._recent: deque[float] = deque(maxlen=RECENT_RUNS)
        self._changed = threading.Condition()

    # -- what a waiting run is told ----------------------------------------------------------------------
    def run_seconds(self) -> float:
        """The median time a run took to read here lately (typical_run_s before any has ended)."""
        with self._changed:
            return statistics.median(self._recent) if self._recent else self.typical_run_s

    def _eta(self, position: int, now: float) -> float:
        """Seconds until the waiting run at position (0 = first) starts reading; call with the lock held.

        Example (one reading 10 s into a 30 s median, one ahead: 20 s + 30 s):
            >>> line = Line("m", 1, 30.0); line._reading[1] = 0.0; line._waiting = [2, 3]
            >>> line._eta(1, now=10.0)
            50.0
        """
        per_run = statistics.median(self._recent) if self._recent else self.typical_run_s
        free_at = [max(1.0, per_run - (now - began)) for began in self._reading.values()]
        free_at += [0.0] * (self.capacity - len(free_at))
        heapq.heapify(free_at)
        for _ in range(position):
            heapq.heappush(free_at, heapq.heappop(free_at) + per_run)
        return free_at[0]

    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)

    def reading(self) -> int:
        with self._changed:
            return len(self._reading)

    def wait_s(self) -> float:
        """How long a run that joined now would wait."""
        with self._changed:
            return self._eta(len(self._waiting), time.monotonic()) if self._is_full() else 0.0

    def _is_full(self) -> bool:
        return len(self._reading) + len(self._waiting) >= self.capacity

    # -- joining, reading and leaving ----------------------------------------------------------------------
    def enter(self) -> int:
        """A run joins the end of the line; its ticket fixes its place (first come, first served)."""
        with self._changed:
            ticket = next(self._tickets)
            self._waiting.append(ticket)
            return ticket

    def place(self, ticket: int, offer: Callable[[], str | None] = lambda: None) -> InLine | None:
        """Where a waiting run stands, as the run is told it; None when its turn has come."""
        with self._changed:
            position = self._waiting.index(ticket)
            if position < self.capacity - len(self._reading):
                return None
            eta, ahead = self._eta(position, time.monotonic()), len(self._reading) + position
        return InLine(position + 1, ahead, round(eta, 1), self.model, offer() if eta > OFFER_AFTER_S else None)

    def wait_turn(self, ticket: int, offer: Callable[[], str | None] = lambda: None) -> Iterator[InLine]:
        """Wait until the run's turn comes, yielding its place whenever it moves up, and every REFRESH_S anyway."""
        told, told_at = None, 0.0
        while True:
            with self._changed:
                position = self._waiting.index(ticket)
                if position < self.capacity - len(self._reading):
                    self._waiting.remove(ticket)
                    self._reading[ticket] = time.monotonic()
                    self._changed.notify_all()
                    return
            if told != position or time.monotonic() - told_at >= REFRESH_S:
                standing = self.place(ticket, offer)
                told, told_at = position, time.monotonic()
                if standing is not None:
                    yield standing
            with self._changed:
                if self._waiting.index(ticket) == position:
                    self._changed.wait(timeout=max(0.05, REFRESH_S - (time.monotonic() - told_at)))

    def leave(self, ticket: int, seconds: float | None = None) -> None:
        """The run that held ticket left, waiting or reading; seconds (how long it read, None for a run cut short or
        one that never read) joins the estimate."""
        with self._changed:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            self._reading.pop(ticket, None)
            if seconds is not None:
                self._recent.append(seconds)
            self._changed.notify_all()

    def through(self, events: Iterator[RunEvent], offer: Callable[[], str | None] = lambda: None) -> Iterator[RunEvent]:
        """A run's events with its wait in line: it joins when it starts and hears its place at once, then waits for
        its turn (InLine events) before it retrieves its pages and reads. Retrieving at its turn, not while waiting,
        keeps the run whose turn it is from waiting behind the others' retrieval (the encoder reads one question at
        a time). Closing the stream (Stop, a visitor who left) ends the run and frees its place."""
        ticket, began, ended = None, None, False
        try:
            for event in events:
                yield event
                if isinstance(event, RunStarted) and ticket is None:
                    ticket = self.enter()
                    yield from self.wait_turn(ticket, offer)
                    began = time.monotonic()
            ended = True
        finally:
            events.close()
            if ticket is not None:  # a stopped run's time would make the estimate too short: it is left out
                self.leave(ticket, time.monotonic() - began if ended and began is not None else None)
