"""The bench's in-process measurements: index build and load, retrieval latency against rank_bm25, model load,
prefill/decode throughput next to the machine's matmul GFLOP/s, time to the first window verdict, and the prompt
tokens of an iterative run against one Top-K prompt. Each returns a small named tuple; bench.py runs them."""

from __future__ import annotations

import contextlib
import gc
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from lab.ops.bench_timing import latencies_ms, percentile, progress
from lab.records import timed
from raqa.cli.output import say
from raqa.config import AppConfig, RunSettings
from raqa.models.local import TransformersBackend
from raqa.reading.engine import run, run_to_final
from raqa.reading.events import Final, WindowVerdict
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import K1, B, BM25Index, load_or_build
from raqa.retrieval.tokenize import get_tokenizer

SEARCH_K = 100  # pages per query in the latency test
BASELINE_MAX_QUERIES = 500  # rank_bm25 takes ~25 ms a query; more questions than this are timed on bm25s only
BENCH_PREFILL_TOKENS = 512
THROUGHPUT_DECODE_TOKENS = 32
THROUGHPUT_REPEATS = 3
MATMUL_SIZE = 1024
VERDICT_SETTINGS = RunSettings(window=5, k=50)
TOKEN_SETTINGS = RunSettings()  # the app's defaults: iterative, forward


class IndexTimes(NamedTuple):
    pages: int
    build_s: float  # load_or_build into an empty cache: tokenize, index, save
    cached_load_s: float  # load_or_build again: fingerprint the pages, memory-map the saved index


class RetrievalLatency(NamedTuple):
    queries: int
    bm25s_p50_ms: float
    bm25s_p95_ms: float
    baseline_queries: int  # how many of the same questions rank_bm25 was timed on
    rank_bm25_p50_ms: float
    rank_bm25_p95_ms: float

    @property
    def speedup(self) -> float:
        """rank_bm25's p50 over ours."""
        return self.rank_bm25_p50_ms / self.bm25s_p50_ms if self.bm25s_p50_ms > 0 else math.inf


class ModelLoad(NamedTuple):
    cold_s: float  # into an empty cache dir: for the embedded GGUF, dequantise and write safetensors
    cached_s: float  # the same call again, now reading the cache


class Throughput(NamedTuple):
    params: int
    prefill_tokens: int
    prefill_tok_s: float
    decode_tokens: int
    decode_tok_s: float
    matmul_gflops: float  # fp32 torch.matmul of MATMUL_SIZE x MATMUL_SIZE on this machine

    def implied_gflops(self, tokens_per_s: float) -> float:
        """A forward pass costs about 2 FLOPs per parameter per token."""
        return 2 * self.params * tokens_per_s / 1e9


class VerdictTimes(NamedTuple):
    seconds: tuple[float, ...]  # per question, from calling run() to its first WindowVerdict

    @property
    def p50(self) -> float:
        return percentile(self.seconds, 50)

    @property
    def max(self) -> float:
        return max(self.seconds)


class TokenCosts(NamedTuple):
    questions: int  # questions that ran to a Final event
    failed: int  # questions that ended in RunFailed (no page shares a word with them)
    mean_iterative: float  # prompt tokens summed over the windows read
    mean_topk: float  # one Top-K prompt over the same K pages
    mean_windows: float

    @property
    def ratio(self) -> float:
        return self.mean_iterative / self.mean_topk if self.mean_topk else math.nan


def measure_index(pages: Sequence[Page]) -> IndexTimes:
    with tempfile.TemporaryDirectory(prefix="raqa-bench-index-") as tmp:
        _, build_s = timed(lambda: load_or_build(pages, Path(tmp)))
        _, load_s = timed(lambda: load_or_build(pages, Path(tmp)))
    return IndexTimes(len(pages), build_s, load_s)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first (the same selection and sort BM25Index.search does)."""
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.lexsort((top, -scores[top]))]


def retrieval_latency(
    index: BM25Index,
    questions: Sequence[str],
    k: int = SEARCH_K,
    baseline_max: int = BASELINE_MAX_QUERIES,
) -> RetrievalLatency:
    """Per-query latency of index.search versus rank_bm25's BM25Okapi (same k1, b and tokens); both times
    include tokenizing the question and sorting the top k."""
    from rank_bm25 import BM25Okapi

    tokenize = get_tokenizer(index.tokenizer)
    ours = latencies_ms(lambda q: index.search(q, k), questions, "bm25s queries")
    say("Building rank_bm25's BM25Okapi over the same tokens")
    okapi = BM25Okapi(tokenize([f"{p.title}\n{p.text}" for p in index.pages]), k1=K1, b=B)
    subset = list(questions[:baseline_max])
    theirs = latencies_ms(lambda q: top_k(okapi.get_scores(tokenize([q])[0]), k), subset, "rank_bm25 queries")
    return RetrievalLatency(
        len(questions),
        percentile(ours, 50),
        percentile(ours, 95),
        baseline_queries=len(subset),
        rank_bm25_p50_ms=percentile(theirs, 50),
        rank_bm25_p95_ms=percentile(theirs, 95),
    )


def measure_model_load(config: AppConfig) -> ModelLoad:
    with tempfile.TemporaryDirectory(prefix="raqa-bench-model-") as tmp:
        _, cold_s = timed(lambda: TransformersBackend.load(config.model, config.adapter, Path(tmp)))
        gc.collect()
        _, cached_s = timed(lambda: TransformersBackend.load(config.model, config.adapter, Path(tmp)))
        gc.collect()
    return ModelLoad(cold_s, cached_s)


def matmul_gflops(size: int = MATMUL_SIZE, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of torch.matmul on size x size matrices, with the threads torch uses by default."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        torch.matmul(a, b)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.matmul(a, b)
        runs += 1
    return 2 * size**3 * runs / (time.perf_counter() - start) / 1e9


def prompt_ids(backend: TransformersBackend, pages: Sequence[Page], tokens: int) -> list[int]:
    """The first `tokens` model tokens of real page text."""
    ids: list[int] = []
    for page in pages:
        ids += backend.tokenizer(f"{page.title}\n{page.text}\n\n", add_special_tokens=False)["input_ids"]
        if len(ids) >= tokens:
            return ids[:tokens]
    raise ValueError(f"The pages hold fewer than {tokens} tokens.")


def model_throughput(backend: TransformersBackend, pages: Sequence[Page]) -> Throughput:
    """Prefill of a BENCH_PREFILL_TOKENS prompt, then THROUGHPUT_DECODE_TOKENS greedy steps with the KV cache; the best
    of a few runs after an untimed warm-up (the first forward pass after a load is several times slower).

    subtle: this drives a cursor of the backend's own kind, the very calls a reply makes, so it measures what the
    app runs (the lean forward when the model has one).
    """
    ids = prompt_ids(backend, pages, BENCH_PREFILL_TOKENS)
    prefill, decode = [], []
    backend.new_cursor(share=False).feed(ids)
    for _ in progress(range(THROUGHPUT_REPEATS), "prefill + decode"):
        cursor = backend.new_cursor(share=False)
        logits, seconds = timed(lambda cursor=cursor: cursor.feed(ids))
        prefill.append(seconds)
        start = time.perf_counter()
        for _ in range(THROUGHPUT_DECODE_TOKENS):
            logits = cursor.feed([int(backend.torch.argmax(logits))])
        decode.append(time.perf_counter() - start)
    params = sum(p.numel() for p in backend.model.parameters())
    return Throughput(
        params,
        BENCH_PREFILL_TOKENS,
        BENCH_PREFILL_TOKENS / min(prefill),
        decode_tokens=THROUGHPUT_DECODE_TOKENS,
        decode_tok_s=THROUGHPUT_DECODE_TOKENS / min(decode),
        matmul_gflops=matmul_gflops(),
    )


def first_verdict_seconds(
    index: BM25Index, backend: TransformersBackend, question: str, settings: RunSettings
) -> float | None:
    """Seconds from run() to its first WindowVerdict; None when the run fails before reading anything."""

    start = time.perf_counter()
    with contextlib.closing(run(question, index, backend, settings)) as events:
        for event in events:
            if isinstance(event, WindowVerdict):
                return time.perf_counter() - start
    return None


def verdict_times(index: BM25Index, backend: TransformersBackend, questions: Sequence[str]) -> VerdictTimes:
    seconds = [first_verdict_seconds(index, backend, q, VERDICT_SETTINGS) for q in progress(questions, "verdicts")]
    kept = tuple(s for s in seconds if s is not None)
    if not kept:
        raise RuntimeError("No question reached a window verdict.")
    return VerdictTimes(kept)


def token_costs(
    index: BM25Index, backend: TransformersBackend, questions: Sequence[str], settings: RunSettings = TOKEN_SETTINGS
) -> TokenCosts:
    """Mean prompt tokens of full iterative runs, and of one Top-K prompt over the same K (Final event fields)."""

    finals = [run_to_final(q, index, backend, settings) for q in progress(questions, "iterative runs")]
    done = [f for f in finals if isinstance(f, Final)]
    if not done:
        raise RuntimeError("No question ran to a final answer.")
    return TokenCosts(
        len(done),
        len(finals) - len(done),
        float(np.mean([f.prompt_tokens for f in done])),
        float(np.mean([f.topk_prompt_tokens for f in done])),
        float(np.mean([f.windows_read for f in done])),
    )
