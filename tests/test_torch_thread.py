"""torch's own thread (raqa/models/torch_thread.py): the heavy calls run there, the other threads make no OpenMP
pool, and the thread ends when idle so that llama.cpp's threads are the only OpenMP threads left."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import torch
from test_speed import tiny_llama

from raqa.models import torch_thread
from raqa.models.llama_runner import LlamaRunner, Request


def test_run_returns_the_result_raises_the_error_and_nests_inline() -> None:
    assert torch_thread.call_on_torch_thread(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        torch_thread.call_on_torch_thread(lambda: 1 / 0)
    names = torch_thread.call_on_torch_thread(
        lambda: (
            threading.current_thread().name,
            torch_thread.call_on_torch_thread(lambda: threading.current_thread().name),
        )
    )
    assert names == ("raqa-torch", "raqa-torch")  # a call from the torch thread runs there, without waiting on itself


def test_the_thread_ends_when_idle_and_a_later_call_starts_another(monkeypatch) -> None:
    monkeypatch.setattr(torch_thread, "IDLE_S", 0.05)
    torch_thread.call_on_torch_thread(int)
    deadline = time.monotonic() + 5
    while torch_thread.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not torch_thread.alive()
    monkeypatch.setattr(torch_thread, "IDLE_S", 5.0)
    torch_thread.call_on_torch_thread(int)
    assert torch_thread.alive()  # started again for the call, and waiting for the next


def test_calls_from_many_threads_all_get_their_own_answer() -> None:
    results: dict[int, int] = {}
    threads = [
        threading.Thread(target=lambda i=i: results.update({i: torch_thread.call_on_torch_thread(lambda: i * i)}))
        for i in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {i: i * i for i in range(20)}


def test_the_small_models_forward_passes_run_on_the_torch_thread(monkeypatch) -> None:
    runner = LlamaRunner(tiny_llama())
    seen: list[str] = []
    real = LlamaRunner._forward
    monkeypatch.setattr(
        LlamaRunner,
        "_forward",
        lambda self, requests: (seen.append(threading.current_thread().name), real(self, requests))[1],
    )
    logits = runner.forward([Request(runner.new_sequence(), [1, 2, 3])])
    assert seen == ["raqa-torch"] and logits[0].shape[-1] == 50


_ONE_POOL = """
import threading
import torch
from raqa.models import torch_thread
torch_thread.one_pool()
seen = {}
t = threading.Thread(target=lambda: seen.update(other=torch.get_num_threads())); t.start(); t.join()
seen["torch"] = torch_thread.call_on_torch_thread(torch.get_num_threads)
t = threading.Thread(target=lambda: seen.update(later=torch.get_num_threads())); t.start(); t.join()
seen["main"] = torch.get_num_threads()
print(seen)
"""


def test_after_one_pool_only_the_torch_thread_computes_with_more_than_one_openmp_thread() -> None:
    """In a fresh process, as the page starts: another thread, before and after the torch thread took its cores, and
    the main thread compute with one thread; the torch thread with the machine's cores (up to 2)."""
    done = subprocess.run([sys.executable, "-c", _ONE_POOL], capture_output=True, text=True, check=True, timeout=120)
    seen = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own child's dict of ints
    assert seen == {"other": 1, "torch": torch_thread.CORES, "later": 1, "main": 1}
    assert torch.get_num_threads() >= 1  # this process is untouched
