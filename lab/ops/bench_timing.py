"""Timing helpers the measurements share: the one percentile, per-call latencies, progress lines, and how busy the
machine was meanwhile (CpuWatch). The load test and the scale bench use percentile too; the timer is timed."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from raqa.cli.output import say

T = TypeVar("T")


class Row(NamedTuple):
    """One line of the bench's table."""

    measure: str
    result: str
    target: str = ""
    met: bool | None = None  # None: no target


def percentile(values: Iterable[float], q: float) -> float:
    """numpy.percentile with its default linear interpolation, as a float; NaN for no values (a summary of runs
    that all failed still prints). The one percentile of the bench, the load test and the scale bench.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
        2.5
    """
    values = np.asarray(list(values), dtype=float)
    return math.nan if values.size == 0 else float(np.percentile(values, q))


def latencies_ms(fn: Callable[[str], object], questions: Sequence[str], label: str) -> list[float]:
    """Milliseconds of fn(question) for each question, after one untimed warm-up call."""
    fn(questions[0])
    times = []
    for question in progress(questions, label):
        start = time.perf_counter()
        fn(question)
        times.append((time.perf_counter() - start) * 1000)
    return times


def progress(items: Sequence[T], label: str) -> Iterable[T]:
    """A progress bar on stderr (tqdm when installed, else nothing)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=label, file=sys.stderr, leave=False)


def _busy_seconds() -> float | None:
    """CPU seconds every process together has been busy since boot (Linux /proc/stat), or None elsewhere."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuWatch:
    """How much of the machine other processes took while each part ran: on a 2-core machine a single busy
    neighbour makes torch's two threads wait on each other, and model timings grow several times over."""

    def __init__(self) -> None:
        self.shares: dict[str, float] = {}

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        say(name)
        busy, own, start = _busy_seconds(), _own_seconds(), time.perf_counter()
        yield
        end = _busy_seconds()
        if busy is not None and end is not None:
            others = (end - busy) - (_own_seconds() - own)
            self.shares[name] = max(0.0, others / ((time.perf_counter() - start) * (os.cpu_count() or 1)))
