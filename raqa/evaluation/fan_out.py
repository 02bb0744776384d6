"""An experiment's model calls, several at a time, for a model server that serves several (`--concurrency N`).

`calls_at_once(n)` sets how many calls the code inside it may have in flight; `fan_out(fn, items)` is
`[fn(item) for item in items]`, run up to that many at a time in threads, results in the items' order. Every call
is independent of the others (a run or a window read from scratch), so a result never depends on n; only the wall
time does. Each call runs in a copy of the caller's context (so a call journal set around the experiment is seen
by every call) with calls_at_once(1): a fan-out inside a call already fanned out runs its calls one by one, so n
bounds the calls in flight.

The default, 1, is what a local model gets: it reads one prompt at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
MAX_CALLS = 256

_calls: ContextVar[int] = ContextVar("raqa_calls_at_once", default=1)


@contextmanager
def calls_at_once(n: int) -> Iterator[None]:
    """Within the block, fan_out keeps up to n calls in flight; ValueError outside 1..MAX_CALLS."""
    if not isinstance(n, int) or not 1 <= n <= MAX_CALLS:
        raise ValueError(f"--concurrency must be a whole number from 1 to {MAX_CALLS}, got {n!r}.")
    token = _calls.set(n)
    try:
        yield
    finally:
        _calls.reset(token)


class _InOrder(Generic[Item, Result]):
    """fn over items as a sized iterable (so a progress bar knows its length), up to width (default:
    calls_at_once) at a time, in the items' order. Closed early (a visitor's Stop) or failed, it waits only for the
    calls in flight; the ones not started are dropped."""

    def __init__(self, fn: Callable[[Item], Result], items: Sequence[Item], width: int | None = None):
        self.fn, self.items, self.width = fn, items, width

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Result]:
        n = min(self.width or _calls.get(), len(self.items))
        if n <= 1:
            yield from map(self.fn, self.items)
            return
        context = copy_context()

        def call(item: Item) -> Result:
            return context.copy().run(_one_at_a_time, self.fn, item)

        pool = ThreadPoolExecutor(n, thread_name_prefix="raqa-fan-out")
        try:
            yield from pool.map(call, self.items)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _one_at_a_time(fn: Callable[[Item], Result], item: Item) -> Result:
    _calls.set(1)
    return fn(item)


def fan_out(
    fn: Callable[[Item], Result],
    items: Iterable[Item],
    progress: Callable[[Iterable], Iterable] | None = None,
) -> list[Result]:
    """[fn(item) for item in items], up to calls_at_once at a time; the first exception raised is raised here."""
    work = _InOrder(fn, list(items))
    return list(progress(work) if progress is not None else work)


def streamed(fn: Callable[[Item], Result], items: Iterable[Item], width: int) -> Iterator[Result]:
    """fn(item) for each item, yielded in the items' order as soon as it and those before it are done, up to width
    calls at a time (a generator a page streams: closing it stops the calls not yet started)."""
    if not isinstance(width, int) or not 1 <= width <= MAX_CALLS:
        raise ValueError(f"The width must be a whole number from 1 to {MAX_CALLS}, got {width!r}.")
    return iter(_InOrder(fn, list(items), width))
