"""Share the model between runs in flight: each run's next forward pass waits a moment for the others', and they
go through the model together in one packed call (llama_runner.LlamaRunner.forward).

On this CPU a decode step costs what reading the weights costs, so eight runs decoding together take about twice
the time of one, not eight times. Each run keeps its own thread, its own reply logic and its own event stream;
only the arithmetic is shared. A run that stops (Stop in the page, a closed generator) closes its sequence and is
no longer waited for.

The gathering rule: after the first request arrives, wait until every open sequence has sent its next request, or
`gather_s` has passed, whichever is first; then run them all. A run busy elsewhere (retrieving, asking the judge)
holds the others back by at most gather_s. Left out: priorities, preemption of a long prefill (a window's prompt
is a second or two at most), and more than one model worker.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future

from raqa.models.llama_runner import LlamaRunner, Request

GATHER_S = 0.004  # how long a forward pass waits for the other runs' passes


class Batcher:
    def __init__(self, runner: LlamaRunner, gather_s: float = GATHER_S):
        self.runner = runner
        self.gather_s = gather_s
        self._requests: queue.SimpleQueue[tuple[Request, Future]] = queue.SimpleQueue()
        self._open = 0  # sequences whose runs may still send a request
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.calls = 0  # packed calls made (for the bench and tests)
        self.packed_requests = 0  # requests those calls held

    def open(self) -> None:
        """A run starts using a sequence: the gathering waits for its requests too."""
        with self._lock:
            self._open += 1
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="raqa-batcher", daemon=True)
                self._worker.start()

    def close(self) -> None:
        with self._lock:
            self._open = max(0, self._open - 1)

    def forward(self, request: Request):
        """The logits for request, computed together with whatever other runs send meanwhile."""
        done: Future = Future()
        self._requests.put((request, done))
        return done.result()

    def _gather(self) -> list[tuple[Request, Future]]:
        batch = [self._requests.get()]
        deadline = time.monotonic() + self.gather_s
        while True:
            with self._lock:
                waiting_for = self._open
            if len(batch) >= waiting_for:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                batch.append(self._requests.get(timeout=left))
            except queue.Empty:
                break
        seen: set[int] = set()
        first, later = [], []
        for item in batch:  # a sequence may be in a call once; a second request of it waits for the next call
            (later if id(item[0].sequence) in seen else first).append(item)
            seen.add(id(item[0].sequence))
        for item in later:
            self._requests.put(item)
        return first

    def _serve(self) -> None:
        while True:
            batch = self._gather()
            try:
                results = self.runner.forward([request for request, _ in batch])
            except Exception:  # noqa: BLE001 - one bad request must not fail the others: retry each alone
                for request, done in batch:
                    try:
                        done.set_result(self.runner.forward([request]))
                    except Exception as e:  # noqa: BLE001 - handed to the run that sent it
                        done.set_exception(e)
                continue
            self.calls += 1
            self.packed_requests += len(batch)
            for (_, done), logits in zip(batch, results, strict=True):
                done.set_result(logits)
