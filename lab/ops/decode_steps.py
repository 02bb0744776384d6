"""Greedy runs over any engine that maps fed tokens to the next logits, and llama.cpp's side of the bench's decode
comparison (bench_decode.py), run as `python -m lab.ops.decode_steps GGUF THREADS CONTEXT`.

This module imports neither torch nor numpy at the top: llama.cpp's child process must not load torch's OpenMP
runtime beside the one llama.cpp's ggml links (see bench_decode.py). Logits are anything with an `argmax()`.
llama.cpp is xllamacpp's prebuilt wheel, the engine of the page's 1.5B reader: nothing compiles.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence

FeedStep = Callable[[list[int]], object]  # feed tokens, get the logits after the last (a tensor or an array)


def greedy(start: Callable[[], FeedStep], prompt: Sequence[int], n: int) -> tuple[float, float, list[int]]:
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


def same_next_token(start: Callable[[], FeedStep], prompt: Sequence[int], reference: Sequence[int]) -> float:
    """Share of the reference's greedy steps at which this path, fed the reference's tokens, picks the same token."""
    step = start()
    logits, same = step(list(prompt)), 0
    for token in reference:
        same += int(logits.argmax()) == token
        logits = step([token])
    return same / max(len(reference), 1)


class LlamaCppGreedy:
    """llama.cpp in-process (xllamacpp's embedded server, called without HTTP) on one GGUF: whole greedy runs timed by
    llama.cpp itself (its prompt and predicted milliseconds), and teacher-forced next tokens, one request a step with
    the prompt cache on (each step computes only its new token)."""

    def __init__(self, gguf: str, threads: int, context: int):
        import xllamacpp  # the child's only engine: torch is never imported here

        params = xllamacpp.CommonParams()
        params.model.path = gguf
        params.n_ctx = context
        params.n_parallel = 1
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.verbosity = -1
        self.server = xllamacpp.Server(params)

    def _complete(self, prompt: Sequence[int], n: int, cache: bool) -> dict:
        request = {"prompt": list(prompt), "n_predict": n, "temperature": 0, "logprobs": 1, "ignore_eos": True}
        result = self.server.handle_completions({**request, "cache_prompt": cache})
        if not isinstance(result, dict) or "choices" not in result:
            raise RuntimeError(f"llama.cpp returned no completion: {str(result)[:200]}")
        return result

    def greedy(self, prompt: Sequence[int], n: int) -> tuple[float, float, list[int]]:
        result = self._complete(prompt, n, cache=False)  # every repeat computes its whole prompt, as the others do
        tokens = [int(t["id"]) for t in result["choices"][0]["logprobs"]["content"]]
        timings = result["timings"]
        return timings["prompt_ms"] / 1000, timings["predicted_ms"] / 1000, tokens

    def same_next_token(self, prompt: Sequence[int], reference: Sequence[int]) -> float:
        same = 0
        for i, token in enumerate(reference):
            result = self._complete([*prompt, *reference[:i]], 1, cache=True)
            same += int(result["choices"][0]["logprobs"]["content"][0]["id"]) == token
        return same / max(len(reference), 1)


def serve_llama_cpp(gguf: str, threads: int, context: int) -> None:
    """The child's side: load the GGUF into llama.cpp, then answer one JSON request a line until stdin ends."""
    engine = LlamaCppGreedy(gguf, threads, context)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "greedy":
            reply = engine.greedy(request["prompt"], request["n"])
        else:
            reply = engine.same_next_token(request["prompt"], request["reference"])
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve_llama_cpp(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
