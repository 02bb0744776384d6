"""torch's arithmetic on one thread of its own, which ends when torch is idle, so that llama.cpp keeps its cores.

Why (lab/ops/omp_threads.py, lab/ops/reader_decode.py): torch and llama.cpp's ggml both run on GNU OpenMP, and with
the same soname `libgomp.so.1` the process loads one copy for both. libgomp gives every thread that starts a parallel
region a pool of worker threads, kept until that thread ends; once the pools of all threads hold more threads than
the machine has cores, every pool's workers sleep between regions instead of spinning, and each small product, torch's
or ggml's, pays a futex wake-up. On 2 cores, a second pool made the small model's decode run at one core's speed,
and once the small model had read on the page, the 1.5B decoded at 13.7 instead of 20.1 tok/s.

So in a process that serves runs (`one_pool()`, called when the page or the CLI loads its models), every thread
computes with one OpenMP thread (no pool), except the torch thread here, which has the machine's cores. The heavy
torch calls (the small model's forward passes, the encoder, the judge, the when-to-retrieve model) are sent to it
with `call_on_torch_thread` or `@on_torch_thread`; a stray small call elsewhere runs single-threaded and makes no pool. The thread
ends after `IDLE_S` without work and its pool ends with it, so while nobody uses torch, ggml's threads are the only
OpenMP threads in the process. Left out: sharing the cores between the two engines while both compute (then both
sleep between regions, which is what oversubscribed cores should do).

Example:
    >>> call_on_torch_thread(sum, [1, 2, 3])
    6
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

IDLE_S = 1.0  # the thread (and its OpenMP pool) ends after this long without work; restarting costs a millisecond
CORES = min(os.cpu_count() or 1, 2)  # the torch thread's OpenMP threads; the machines this runs on have 2 cores

_jobs: queue.SimpleQueue[tuple[Callable[[], object], Future]] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None
_claimed = False  # one_pool() has run: threads other than the torch thread compute with one OpenMP thread


def one_pool() -> None:
    """From now on, every thread that has not yet used torch computes with one OpenMP thread, this one too; only the
    torch thread uses more. Call before the models load (idempotent)."""
    global _claimed
    import torch

    torch.set_num_threads(1)  # this thread's OpenMP and MKL threads, and the count a new thread starts from
    _claimed = True


def on_torch_thread(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorator: every call of fn runs on the torch thread (inline when already there)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return call_on_torch_thread(fn, *args, **kwargs)

    return wrapper


def call_on_torch_thread(fn: Callable[..., T], *args, **kwargs) -> T:
    """fn(*args, **kwargs) on the torch thread; waits for it and returns its result or raises its error."""
    if threading.current_thread() is _thread:
        return fn(*args, **kwargs)
    done: Future = Future()
    with _lock:  # subtle: queued under the lock, so a thread deciding to end sees the job or is seen as ending
        _jobs.put((functools.partial(fn, *args, **kwargs), done))
        _ensure_thread()
    return done.result()


def alive() -> bool:
    """Whether the torch thread (and its OpenMP pool) exists now."""
    thread = _thread
    return thread is not None and thread.is_alive()


def _ensure_thread() -> None:
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_serve, name="raqa-torch", daemon=True)
        _thread.start()


def _serve() -> None:
    global _thread
    _take_cores()
    while True:
        try:
            job, done = _jobs.get(timeout=IDLE_S)
        except queue.Empty:
            with _lock:
                if _jobs.empty():
                    _thread = (
                        None  # the next call_on_torch_thread() starts a new thread; this one ends, and its pool with it
                    )
                    return
            continue
        if not done.set_running_or_notify_cancel():
            continue
        try:
            done.set_result(job())
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
            done.set_exception(e)


def _take_cores() -> None:
    """This thread computes with CORES OpenMP threads; after one_pool(), new threads still start from one."""
    import torch

    torch.get_num_threads()  # subtle: torch's once-a-thread setup, which copies the shared count; done first, so it
    # cannot later overwrite the count set here
    torch.set_num_threads(CORES)  # sets this thread's count, and also the count new threads start from
    if _claimed:
        # subtle: torch.set_num_threads sets the calling thread's OpenMP and MKL counts but also the shared default
        # new threads copy on their first parallel call; setting 1 from a helper thread restores that default
        # without touching this thread's own count
        helper = threading.Thread(target=torch.set_num_threads, args=(1,), name="raqa-torch-default")
        helper.start()
        helper.join()
