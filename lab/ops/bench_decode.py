"""The bench's decode comparison, in one process: raqa's lean forward with fp32 weights, the same with packed weights
for decode (models/weights.py), and llama.cpp called in-process (xllamacpp, the page's 1.5B engine) on the same GGUF
file.

All three get the same prompt token ids (a real window prompt at the page's defaults), the same thread count and the
same number of greedy tokens, with prefill and decode timed apart; they alternate repeat by repeat, so a busy moment
slows all three, and the median repeat is reported. Each path is compared with fp32: how many leading greedy tokens
agree, and, fed fp32's own tokens (teacher-forced), at how many steps its most likely next token is fp32's.

Where llama.cpp is not installed its row says so. Its prefill and decode times are llama.cpp's own (the prompt and
predicted milliseconds it reports for one whole greedy run), and its teacher-forced next tokens come one request a
step with its prompt cache on.

subtle: llama.cpp runs in a child process of its own (`python -m lab.ops.decode_steps GGUF THREADS CONTEXT`,
fed one whole greedy run at a time), still called in-process through its library: its ggml links the system's
OpenMP runtime and torch bundles another, and with both in one process every torch call after llama.cpp's first ran
several times slower here (and llama.cpp's beside torch's), which no engine sees in use.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from lab.ops.decode_steps import FeedStep, greedy, same_next_token
from raqa.models.llama_runner import LlamaRunner, Request

COMPARED_DECODE_TOKENS = 64
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


def runner_steps(runner: LlamaRunner) -> Callable[[], FeedStep]:
    def start() -> FeedStep:
        sequence = runner.new_sequence()
        return lambda ids: runner.forward([Request(sequence, ids)])[0]

    return start


def agreeing(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def compare_decode(
    model, gguf: str | None, prompt: Sequence[int], tokens: int = COMPARED_DECODE_TOKENS, repeats: int = REPEATS
) -> DecodeComparison:
    """fp32, int4 and llama.cpp in-process on the same prompt ids, alternating (see the module docstring)."""
    threads = torch.get_num_threads()
    engines: dict[str, Engine] = {
        "fp32": LocalEngine(runner_steps(LlamaRunner(model, "fp32"))),
        "int4": LocalEngine(runner_steps(LlamaRunner(model, "int4"))),
    }
    error = None
    if gguf is None:
        error = "not asked for, or no GGUF file for this model"
    elif importlib.util.find_spec("xllamacpp") is None:
        error = "llama.cpp is not installed (pip install -r requirements.txt brings xllamacpp)"
    else:
        engines["llama_cpp_in_process"] = ChildEngine(gguf, threads, len(prompt) + tokens + 8)
    try:
        for engine in engines.values():
            engine.greedy(prompt[:32], 4)  # warm-up: the first passes after a load are slow
        runs: dict[str, list] = {name: [] for name in engines}
        for _ in range(repeats):
            for name, engine in engines.items():
                runs[name].append(engine.greedy(prompt, tokens))
        paths = {
            name: PathSpeed(tuple(r[0] for r in got), tuple(r[1] for r in got), len(prompt), tokens, tuple(got[0][2]))
            for name, got in runs.items()
        }
        reference = paths["fp32"].tokens
        agree = {name: agreeing(p.tokens, reference) for name, p in paths.items()}
        same = {name: engine.same_next_token(prompt, reference) for name, engine in engines.items()}
    finally:
        for engine in engines.values():
            engine.close()
    return DecodeComparison(threads, paths, agree, same, error)


class Engine:
    """One path of the comparison: whole greedy runs, and the teacher-forced agreement with a reference."""

    def greedy(self, prompt: Sequence[int], n: int) -> tuple[float, float, list[int]]:
        raise NotImplementedError

    def same_next_token(self, prompt: Sequence[int], reference: Sequence[int]) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalEngine(Engine):
    def __init__(self, start: Callable[[], FeedStep]):
        self.start = start

    def greedy(self, prompt, n):
        return greedy(self.start, prompt, n)

    def same_next_token(self, prompt, reference):
        return same_next_token(self.start, prompt, reference)


class ChildEngine(Engine):
    """llama.cpp through its library, in a child process of its own (see the module docstring)."""

    def __init__(self, gguf: str, threads: int, context: int):
        command = [sys.executable, "-m", "lab.ops.decode_steps", gguf, str(threads), str(context)]
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def _ask(self, request: dict):
        self.child.stdin.write(json.dumps(request) + "\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"llama.cpp's process ended (exit status {self.child.poll()})")
        return json.loads(line)

    def greedy(self, prompt, n):
        return tuple(self._ask({"op": "greedy", "prompt": list(prompt), "n": n}))

    def same_next_token(self, prompt, reference):
        return self._ask({"op": "same", "prompt": list(prompt), "reference": list(reference)})

    def close(self) -> None:
        self.child.stdin.close()
        self.child.wait(timeout=30)


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
