"""The bench's decode comparison, in one process: raqa's lean forward with fp32 weights, the same with packed weights
for decode (models/weights.py), and llama.cpp called in-process (llama-cpp-python's `Llama`) on the same GGUF file.

All three get the same prompt token ids (a real window prompt at the page's defaults), the same thread count and the
same number of greedy tokens, with prefill and decode timed apart; they alternate repeat by repeat, so a busy moment
slows all three, and the median repeat is reported. Each path is compared with fp32: how many leading greedy tokens
agree, and, fed fp32's own tokens (teacher-forced), at how many steps its most likely next token is fp32's.

llama.cpp is a test dependency compiled from source (requirements-test.txt), never the demo's; where it is not
installed its row says so. Its logits are read straight from the context (llama-cpp-python keeps none in `scores`
unless every position's logits are asked for, which would slow its prefill).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from raqa.models.llama_runner import LlamaRunner, Request

DECODE_TOKENS = 64
REPEATS = 5
PATHS = ("fp32", "int4", "llama_cpp_in_process")


class PathSpeed(NamedTuple):
    prefill_seconds: tuple[float, ...]  # per repeat
    decode_seconds: tuple[float, ...]
    prompt_tokens: int
    decode_tokens: int
    tokens: tuple[int, ...]  # the greedy tokens of the first repeat

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / statistics.median(self.prefill_seconds)

    @property
    def decode_tok_s(self) -> float:
        return self.decode_tokens / statistics.median(self.decode_seconds)


class DecodeComparison(NamedTuple):
    threads: int
    paths: dict[str, PathSpeed]
    agreeing_tokens: dict[str, int]  # per path, leading greedy tokens equal to fp32's
    same_next_token: dict[str, float]  # per path, share of fp32's steps where its top token is fp32's (teacher-forced)
    llama_cpp_error: str | None


Step = Callable[[list[int]], torch.Tensor]  # feed tokens, get the logits after the last


def greedy(start: Callable[[], Step], prompt: Sequence[int], n: int) -> tuple[float, float, list[int]]:
    """(prefill seconds, decode seconds, tokens) of n greedy tokens after prompt."""
    step = start()
    began = time.perf_counter()
    logits = step(list(prompt))
    prefilled = time.perf_counter()
    tokens = []
    for _ in range(n):
        tokens.append(int(torch.argmax(logits)))
        logits = step([tokens[-1]])
    return prefilled - began, time.perf_counter() - prefilled, tokens


def runner_steps(runner: LlamaRunner) -> Callable[[], Step]:
    def start() -> Step:
        sequence = runner.new_sequence()
        return lambda ids: runner.forward([Request(sequence, ids)])[0]

    return start


def llama_cpp_steps(gguf: str, threads: int, context: int) -> Callable[[], Step]:
    """Steps through llama.cpp in-process; raises ImportError when llama-cpp-python is not installed."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=context, verbose=False)

    def start() -> Step:
        llm.reset()

        def step(ids: list[int]) -> torch.Tensor:
            llm.eval(ids)
            logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            return torch.from_numpy(np.ctypeslib.as_array(logits, shape=(llm.n_vocab(),)).copy())

        return step

    return start


def agreeing(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def same_next_token(start: Callable[[], Step], prompt: Sequence[int], reference: Sequence[int]) -> float:
    """Share of the reference's greedy steps at which this path, fed the reference's tokens, picks the same token."""
    step = start()
    logits, same = step(list(prompt)), 0
    for token in reference:
        same += int(torch.argmax(logits)) == token
        logits = step([token])
    return same / max(len(reference), 1)


def compare_decode(
    model, gguf: str | None, prompt: Sequence[int], tokens: int = DECODE_TOKENS, repeats: int = REPEATS
) -> DecodeComparison:
    """fp32, int4 and llama.cpp in-process on the same prompt ids, alternating (see the module docstring)."""
    threads = torch.get_num_threads()
    starts: dict[str, Callable[[], Step]] = {
        "fp32": runner_steps(LlamaRunner(model, "fp32")),
        "int4": runner_steps(LlamaRunner(model, "int4")),
    }
    error = None
    try:
        if gguf is None:
            raise ValueError("not asked for, or no GGUF file for this model")
        starts["llama_cpp_in_process"] = llama_cpp_steps(gguf, threads, len(prompt) + tokens + 8)
    except ImportError:
        error = "llama-cpp-python is not installed (pip install -r requirements-test.txt builds it)"
    except (ValueError, RuntimeError, OSError) as e:
        error = str(e).splitlines()[0]
    for start in starts.values():
        greedy(start, prompt[:32], 4)  # warm-up: the first passes after a load are slow
    runs: dict[str, list[tuple[float, float, list[int]]]] = {name: [] for name in starts}
    for _ in range(repeats):
        for name, start in starts.items():
            runs[name].append(greedy(start, prompt, tokens))
    paths = {
        name: PathSpeed(tuple(r[0] for r in got), tuple(r[1] for r in got), len(prompt), tokens, tuple(got[0][2]))
        for name, got in runs.items()
    }
    reference = paths["fp32"].tokens
    agree = {name: agreeing(p.tokens, reference) for name, p in paths.items()}
    same = {name: same_next_token(start, prompt, reference) for name, start in starts.items()}
    return DecodeComparison(threads, paths, agree, same, error)


def decode_record(c: DecodeComparison) -> dict:
    """The JSON of the comparison: a row per path (speed.fp32.decode_tok_s, speed.int4..., ...)."""
    record: dict = {"threads": c.threads, "llama_cpp_in_process_error": c.llama_cpp_error}
    for name, p in c.paths.items():
        record[name] = {
            "prefill_tok_s": p.prefill_tok_s,
            "decode_tok_s": p.decode_tok_s,
            "prompt_tokens": p.prompt_tokens,
            "decode_tokens": p.decode_tokens,
            "prefill_seconds": list(p.prefill_seconds),
            "decode_seconds": list(p.decode_seconds),
            "leading_tokens_equal_to_fp32": c.agreeing_tokens[name],
            "same_next_token_as_fp32": c.same_next_token[name],
        }
    return record
