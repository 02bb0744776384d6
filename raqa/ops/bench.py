"""`python -m raqa bench`: how fast retrieval, the model and the first verdict are on this machine.

One run measures, with real NQ-open test questions (questions.py):
    index     BM25 build into an empty cache, and the cached memory-mapped load;
    retrieval single-query latency of our bm25s index versus rank_bm25's BM25Okapi over the same WordPiece tokens;
    model     load into an empty cache (GGUF dequantise) and from the cache; prefill and decode tokens/s next to
              the machine's fp32 matmul GFLOP/s;
    start     a fresh Python process until Service.load is ready, with warm caches;
    verdict   time from the question to the first window verdict (w=5, K=50);
    tokens    prompt tokens of an iterative run (default settings) versus one Top-K prompt over the same K.
It prints a table next to the targets and writes the numbers as JSON with --out. Everything is measured on
the spot; nothing is copied from earlier runs. Left out: answer quality (that is the evaluation's job), GPUs,
and repeating the whole run to average out a busy machine (the load average is recorded instead).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from raqa.config import AppConfig, RunSettings
from raqa.evaluation.questions import QuestionsError, load_questions
from raqa.models.local import ModelError, TransformersBackend
from raqa.retrieval.corpus import CorpusError, Page, corpus_name, load_corpus
from raqa.retrieval.index import K1, B, BM25Index, load_or_build
from raqa.retrieval.tokenize import get_tokenizer

T = TypeVar("T")

SEARCH_K = 100  # pages per query in the latency test
BASELINE_MAX_QUERIES = 500  # rank_bm25 takes ~25 ms a query; more questions than this are timed on bm25s only
PREFILL_TOKENS = 512
DECODE_TOKENS = 32
THROUGHPUT_REPEATS = 3
MATMUL_SIZE = 1024
VERDICT_QUESTIONS = 5
VERDICT_SETTINGS = RunSettings(window=5, k=50)
TOKEN_SETTINGS = RunSettings()  # the app's defaults: iterative, forward

TARGET_SEARCH_P50_MS = 1.0
TARGET_SPEEDUP = 50.0
TARGET_START_S = 15.0
TARGET_VERDICT_S = 4.0
BUSY_SHARE = 0.05  # other processes using this share of the CPUs during a part earn it a note


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


class StartTime(NamedTuple):
    process_s: float  # from launching the interpreter to a ready Service (what a user waits for)
    in_process_s: float  # from the first import of raqa to a ready Service


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


class Row(NamedTuple):
    measure: str
    result: str
    target: str = ""
    met: bool | None = None  # None: no target


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's default).

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
        2.5
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be from 0 to 100, got {q}")
    position = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(position), math.ceil(position)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


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


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
        len(subset),
        percentile(theirs, 50),
        percentile(theirs, 95),
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
    """Prefill of a PREFILL_TOKENS prompt, then DECODE_TOKENS greedy steps with the KV cache; the best of a few
    runs after an untimed warm-up (the first forward pass after a load is several times slower).

    subtle: this drives backend._forward, the very call a reply makes, so it measures what the app runs.
    """
    ids = prompt_ids(backend, pages, PREFILL_TOKENS)
    prefill, decode = [], []
    with backend.torch.inference_mode():
        backend._forward(ids, None)
        for _ in progress(range(THROUGHPUT_REPEATS), "prefill + decode"):
            (logits, cache), seconds = timed(lambda: backend._forward(ids, None))
            prefill.append(seconds)
            start = time.perf_counter()
            for _ in range(DECODE_TOKENS):
                logits, cache = backend._forward([int(backend.torch.argmax(logits))], cache)
            decode.append(time.perf_counter() - start)
    params = sum(p.numel() for p in backend.model.parameters())
    return Throughput(
        params,
        PREFILL_TOKENS,
        PREFILL_TOKENS / min(prefill),
        DECODE_TOKENS,
        DECODE_TOKENS / min(decode),
        matmul_gflops(),
    )


START_SCRIPT = """
import json, sys, time
start = time.perf_counter()
from raqa.config import AppConfig
from raqa.service import Service
Service.load(AppConfig.from_env(**json.loads(sys.argv[1])), progress=lambda message: None)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def cached_start(config: AppConfig) -> StartTime:
    """Launch a fresh interpreter that imports raqa and loads the Service from the (warm) cache."""
    overrides = {"corpus": config.corpus, "model": config.model, "adapter": config.adapter}
    overrides["cache_dir"] = str(config.cache_dir)
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", START_SCRIPT, json.dumps(overrides)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    process_s = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"The start-up process failed: {done.stderr.strip()[-500:]}")
    in_process_s = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    return StartTime(process_s, in_process_s)


def first_verdict_seconds(
    index: BM25Index, backend: TransformersBackend, question: str, settings: RunSettings
) -> float | None:
    """Seconds from run() to its first WindowVerdict; None when the run fails before reading anything."""
    from raqa.reading.engine import run
    from raqa.reading.events import WindowVerdict

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
    from raqa.reading.engine import run_to_final
    from raqa.reading.events import Final

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


class BenchResults(NamedTuple):
    index: IndexTimes
    retrieval: RetrievalLatency
    model_load: ModelLoad
    throughput: Throughput
    start: StartTime
    verdicts: VerdictTimes
    tokens: TokenCosts | None  # None when --token-questions is 0
    others_cpu: dict[str, float]  # per part: the share of all CPUs that other processes used meanwhile


def build_rows(r: BenchResults) -> list[Row]:
    """The table: one row per number, with its target and whether it was met."""
    t, lat, v = r.throughput, r.retrieval, r.verdicts
    rows = [
        Row(f"index build, empty cache ({r.index.pages:,} pages)", f"{r.index.build_s:.2f} s"),
        Row("index load, cached (memory-mapped)", f"{r.index.cached_load_s * 1000:.0f} ms"),
        Row(
            f"bm25s query p50 / p95 ({lat.queries} questions)",
            f"{lat.bm25s_p50_ms:.3f} / {lat.bm25s_p95_ms:.3f} ms",
            f"p50 < {TARGET_SEARCH_P50_MS:g} ms",
            lat.bm25s_p50_ms < TARGET_SEARCH_P50_MS,
        ),
        Row(
            f"rank_bm25 query p50 / p95 ({lat.baseline_queries} questions)",
            f"{lat.rank_bm25_p50_ms:.1f} / {lat.rank_bm25_p95_ms:.1f} ms",
        ),
        Row(
            "speed-up over rank_bm25 (p50)",
            f"{lat.speedup:.0f}x",
            f">= {TARGET_SPEEDUP:g}x",
            lat.speedup >= TARGET_SPEEDUP,
        ),
        Row("model load, empty cache", f"{r.model_load.cold_s:.1f} s"),
        Row("model load, cached", f"{r.model_load.cached_s:.1f} s"),
        Row(
            f"prefill ({t.prefill_tokens} tokens)",
            f"{t.prefill_tok_s:.0f} tok/s = {t.implied_gflops(t.prefill_tok_s):.1f} GFLOP/s",
        ),
        Row(
            f"decode ({t.decode_tokens} tokens, KV cache)",
            f"{t.decode_tok_s:.1f} tok/s = {t.implied_gflops(t.decode_tok_s):.1f} GFLOP/s",
        ),
        Row(f"fp32 matmul {MATMUL_SIZE}x{MATMUL_SIZE}", f"{t.matmul_gflops:.1f} GFLOP/s"),
        Row(
            "app start, cached (new process)",
            f"{r.start.process_s:.1f} s (in process {r.start.in_process_s:.1f} s)",
            f"< {TARGET_START_S:g} s",
            r.start.process_s < TARGET_START_S,
        ),
        Row(
            f"first verdict p50 (w={VERDICT_SETTINGS.window}, K={VERDICT_SETTINGS.k}, {len(v.seconds)} q)",
            f"{v.p50:.1f} s",
            f"< {TARGET_VERDICT_S:g} s",
            v.p50 < TARGET_VERDICT_S,
        ),
        Row("first verdict max", f"{v.max:.1f} s", f"< {TARGET_VERDICT_S:g} s", v.max < TARGET_VERDICT_S),
    ]
    if r.tokens is not None:
        c = r.tokens
        rows += [
            Row(
                f"prompt tokens, iterative (w={TOKEN_SETTINGS.window}, K={TOKEN_SETTINGS.k}, {c.questions} q)",
                f"{c.mean_iterative:.0f} (mean)",
            ),
            Row(f"prompt tokens, one Top-K prompt (K={TOKEN_SETTINGS.k})", f"{c.mean_topk:.0f} (mean)"),
            Row("iterative / Top-K", f"{c.ratio:.2f} ({c.mean_windows:.2f} windows read)"),
        ]
    return rows


def format_table(rows: Sequence[Row]) -> str:
    """Rows as aligned plain text, with a header; the last column says whether a target was met.

    Example:
        >>> print(format_table([Row("a", "1 s", "< 2 s", True), Row("bb", "3 s")]))
        measure  result  target  met
        -------  ------  ------  ---
        a        1 s     < 2 s   yes
        bb       3 s
    """
    header = ("measure", "result", "target", "met")
    cells = [header] + [(r.measure, r.result, r.target, {True: "yes", False: "NO", None: ""}[r.met]) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def machine() -> dict:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def command(args: argparse.Namespace) -> str:
    parts = ["python -m raqa bench", f"--queries {args.queries}", f"--token-questions {args.token_questions}"]
    for name in ("corpus", "model", "adapter", "out"):
        if getattr(args, name, None):
            parts.append(f"--{name} {getattr(args, name)}")
    return " ".join(parts)


def to_json(args: argparse.Namespace, r: BenchResults, corpus: str, model: str) -> dict:
    """Everything measured, with the command and the machine, ready for json.dumps."""

    def record(result: NamedTuple | None, **extra: object) -> dict | None:
        return None if result is None else {**result._asdict(), **extra}

    t = r.throughput
    return {
        "command": command(args),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "others_cpu_share": r.others_cpu},
        "corpus": corpus,
        "model": model,
        "index": record(r.index),
        "retrieval": record(r.retrieval, speedup=r.retrieval.speedup, k=SEARCH_K),
        "model_load": record(r.model_load),
        "throughput": record(
            t,
            prefill_gflops=t.implied_gflops(t.prefill_tok_s),
            decode_gflops=t.implied_gflops(t.decode_tok_s),
        ),
        "start": record(r.start),
        "first_verdict": record(r.verdicts, p50=r.verdicts.p50, max=r.verdicts.max, settings=asdict(VERDICT_SETTINGS)),
        "tokens": record(r.tokens, ratio=r.tokens.ratio, settings=asdict(TOKEN_SETTINGS)) if r.tokens else None,
        "table": [row._asdict() for row in build_rows(r)],
        "notes": notes(r),
    }


def _check_args(args: argparse.Namespace) -> str | None:
    if args.queries < 1:
        return f"--queries must be 1 or more, got {args.queries}."
    if args.token_questions < 0:
        return f"--token-questions must be 0 or more, got {args.token_questions}."
    return None


def run_bench(args: argparse.Namespace, config: AppConfig) -> tuple[BenchResults, str, str]:
    pages = load_corpus(config.corpus)
    wanted = max(args.queries, args.token_questions, VERDICT_QUESTIONS)
    questions = [item.question for item in load_questions("nq", "test", limit=wanted)]
    watch = CpuWatch()
    with watch.part("index build and cached load"):
        index_times = measure_index(pages)
    index = load_or_build(pages, config.cache_dir)
    with watch.part("query latency"):
        latency = retrieval_latency(index, questions[: args.queries])
    with watch.part("model load"):
        model_load = measure_model_load(config)
    backend = TransformersBackend.load(config.model, config.adapter, config.cache_dir)
    with watch.part("model throughput"):
        throughput = model_throughput(backend, pages)
    with watch.part("app start"):
        start = cached_start(config)
    with watch.part("first verdicts"):
        verdicts = verdict_times(index, backend, questions[:VERDICT_QUESTIONS])
    tokens = None
    if args.token_questions:
        with watch.part("prompt tokens"):
            tokens = token_costs(index, backend, questions[: args.token_questions])
    results = BenchResults(index_times, latency, model_load, throughput, start, verdicts, tokens, watch.shares)
    return results, corpus_name(config.corpus), backend.name


def notes(r: BenchResults) -> list[str]:
    """What a reader of the table should know: the questions used, and parts slowed by other processes."""
    lines = [f"NQ-open test questions (pyserini 0.17.0), the first {r.retrieval.queries}; top-{SEARCH_K} pages."]
    if r.retrieval.baseline_queries < r.retrieval.queries:
        lines.append(f"rank_bm25 timed on the first {r.retrieval.baseline_queries} of those questions.")
    busy = {part: share for part, share in r.others_cpu.items() if share >= BUSY_SHARE}
    if busy:
        parts = ", ".join(f"{part} {share:.0%}" for part, share in busy.items())
        lines.append(f"Other processes used part of the CPUs meanwhile ({parts}); those times are inflated.")
    return lines


def main(args: argparse.Namespace) -> int:
    """Run every measurement, print the table, write JSON to args.out if given. Exit status: 0 done, 1 a measurement
    failed, 2 bad input (arguments, corpus, model or questions)."""
    problem = _check_args(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    config = AppConfig.from_env(corpus=args.corpus, model=args.model, adapter=args.adapter, cache_dir=args.cache)
    try:
        results, corpus, model = run_bench(args, config)
    except (CorpusError, ModelError, QuestionsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a measurement that could not run, e.g. the start-up process failed
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(format_table(build_rows(results)))
    for note in notes(results):
        print(f"Note: {note}")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(to_json(args, results, corpus, model), indent=2, ensure_ascii=False) + "\n")
        say(f"Wrote {out}")
    return 0
