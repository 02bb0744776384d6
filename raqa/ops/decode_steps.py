"""Greedy runs over any engine that maps fed tokens to the next logits, and llama.cpp's side of the bench's decode
comparison (bench_decode.py), run as `python -m raqa.ops.decode_steps GGUF THREADS CONTEXT`.

This module imports neither torch nor numpy at the top: llama.cpp's child process must not load torch's OpenMP
runtime beside the one llama.cpp's ggml links (see bench_decode.py). Logits are anything with an `argmax()`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

Step = Callable[[list[int]], object]  # feed tokens, get the logits after the last (a tensor or an array)


def greedy(start: Callable[[], Step], prompt: Sequence[int], n: int) -> tuple[float, float, list[int]]:
    """(prefill seconds, decode seconds, tokens) of n greedy tokens after prompt."""
    step = start()
    began = time.perf_counter()
    logits = step(list(prompt))
    prefilled = time.perf_counter()
    tokens = []
    for _ in range(n):
        tokens.append(int(logits.argmax()))
        logits = step([tokens[-1]])
    return prefilled - began, time.perf_counter() - prefilled, tokens


def same_next_token(start: Callable[[], Step], prompt: Sequence[int], reference: Sequence[int]) -> float:
    """Share of the reference's greedy steps at which this path, fed the reference's tokens, picks the same token."""
    step = start()
    logits, same = step(list(prompt)), 0
    for token in reference:
        same += int(logits.argmax()) == token
        logits = step([token])
    return same / max(len(reference), 1)


def llama_cpp_steps(gguf: str, threads: int, context: int) -> Callable[[], Step]:
    """Steps through llama.cpp in-process; raises ImportError when llama-cpp-python is not installed."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=context, verbose=False)

    def start() -> Step:
        llm.reset()

        def step(ids: list[int]):
            llm.eval(ids)
            logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            return np.ctypeslib.as_array(logits, shape=(llm.n_vocab(),)).copy()

        return step

    return start


def serve_llama_cpp(gguf: str, threads: int, context: int) -> None:
    """The child's side: load the GGUF through llama.cpp, then answer one JSON request a line until stdin ends."""
    start = llama_cpp_steps(gguf, threads, context)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "greedy":
            reply = greedy(start, request["prompt"], request["n"])
        else:
            reply = same_next_token(start, request["prompt"], request["reference"])
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve_llama_cpp(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
