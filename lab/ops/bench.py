"""`python -m lab bench speed`: how fast retrieval, the model and the first verdict are on this machine.

One run measures, with real NQ-open test questions (questions.py):
    index     BM25 build into an empty cache, and the cached memory-mapped load;
    retrieval single-query latency of our bm25s index versus rank_bm25's BM25Okapi over the same WordPiece tokens;
    model     load into an empty cache (GGUF dequantise) and from the cache; prefill and decode tokens/s next to
              the machine's fp32 matmul GFLOP/s;
    start     a fresh Python process until Service.load is ready, with warm caches; and a fresh
              `python -m raqa ask --json` until its first window verdict (and its final event);
    verdict   time from the question to the first window verdict (w=5, K=50);
    tokens    prompt tokens of an iterative run (default settings) versus one Top-K prompt over the same K.
It prints a table next to the targets and writes the numbers as JSON with --out. Everything is measured on
the spot; nothing is copied from earlier runs. Left out: answer quality (that is the evaluation's job), GPUs,
and repeating the whole run to average out a busy machine (the load average is recorded instead).

The measurements themselves live in bench_measure.py (in this process) and bench_start.py (new processes), with
the timing helpers in bench_timing.py; this module runs them in order and reports: table, targets, notes, JSON.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

from lab.ops.bench_measure import (
    MATMUL_SIZE,
    SEARCH_K,
    TOKEN_SETTINGS,
    VERDICT_SETTINGS,
    IndexTimes,
    ModelLoad,
    RetrievalLatency,
    Throughput,
    TokenCosts,
    VerdictTimes,
    measure_index,
    measure_model_load,
    model_throughput,
    retrieval_latency,
    token_costs,
    verdict_times,
)
from lab.ops.bench_speed import (
    SPEED_QUESTIONS,
    SpeedComparison,
    compare_speed,
    embedded_gguf,
    first_window_decode,
    speed_record,
    speed_rows,
)
from lab.ops.bench_start import AskStart, StartTime, ask_start, cached_start
from lab.ops.bench_timing import CpuWatch, Row
from lab.records import command_line, write_json
from raqa.cli.output import say
from raqa.config import AppConfig
from raqa.evaluation.questions import QuestionsError, load_questions
from raqa.evaluation.records import provenance
from raqa.models.base import ModelError
from raqa.models.local import TransformersBackend
from raqa.retrieval.corpus import CorpusError, corpus_name, load_corpus
from raqa.retrieval.index import load_or_build

VERDICT_QUESTIONS = 5

TARGET_SEARCH_P50_MS = 1.0
TARGET_SPEEDUP = 50.0
TARGET_START_S = 15.0
TARGET_ASK_START_S = 6.0  # `python -m raqa ask` on the base model, warm cache, until its run begins
TARGET_VERDICT_S = 4.0
BUSY_SHARE = 0.05  # other processes using this share of the CPUs during a part earn it a note


class BenchResults(NamedTuple):
    index: IndexTimes
    retrieval: RetrievalLatency
    model_load: ModelLoad
    throughput: Throughput
    start: StartTime
    ask_start: AskStart
    verdicts: VerdictTimes
    tokens: TokenCosts | None  # None when --token-questions is 0
    others_cpu: dict[str, float]  # per part: the share of all CPUs that other processes used meanwhile
    speed: SpeedComparison | None = None  # None when --speed-questions is 0


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
        ask_start_row(r.ask_start),
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
    return rows + (speed_rows(r.speed) if r.speed else [])


def ask_start_row(a: AskStart) -> Row:
    """The command line's start, judged like the app start: until the service is loaded and the run begins (its
    first event). The result also says when the first window verdict and the final answer came; a process that
    never began its run misses the target."""
    name = "ask start, cached (new process, until its run begins)"
    target = f"< {TARGET_ASK_START_S:g} s"
    verdict = f"first verdict {a.first_verdict_s:.1f} s" if a.first_verdict_s is not None else "no window verdict"
    final = f"final {a.final_s:.1f} s" if a.final_s is not None else "no final"
    if a.run_started_s is None:
        return Row(name, f"never began ({verdict}, {final})", target, False)
    return Row(name, f"{a.run_started_s:.1f} s ({verdict}, {final})", target, a.run_started_s < TARGET_ASK_START_S)


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


def machine(about: dict) -> dict:
    """bench.json's machine fields: the shared provenance's (under bench.json's own names) plus torch's."""
    import torch

    return {
        "cpu_count": about["machine"]["cpus"],
        "platform": about["machine"]["platform"],
        "processor": platform.processor() or platform.machine(),
        "python": about["machine"]["python"],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def bench_rerun_command(args: argparse.Namespace) -> str:
    speed_questions = getattr(args, "speed_questions", SPEED_QUESTIONS)
    named = {name: getattr(args, name, None) for name in ("no_llama_cpp", "corpus", "model", "adapter", "out")}
    return command_line(
        "bench speed",
        queries=args.queries,
        token_questions=args.token_questions,
        speed_questions=speed_questions if speed_questions != SPEED_QUESTIONS else None,
        **named,
    )


def bench_record(args: argparse.Namespace, r: BenchResults, corpus: str, model: str, about: dict | None = None) -> dict:
    """Everything measured, with the command and the provenance (records.provenance(), taken before the run;
    now if not given), ready for json.dumps. bench.json keeps its own names: "date" for "created",
    "cpu_count" for "cpus"."""
    about = about or provenance()

    def record(result: NamedTuple | None, **extra: object) -> dict | None:
        return None if result is None else {**result._asdict(), **extra}

    t = r.throughput
    return {
        "command": bench_rerun_command(args),
        "code_version": about["code_version"],
        "date": about["created"],
        "load_average_before": about["load_average_before"],
        "machine": {**machine(about), "others_cpu_share": r.others_cpu},
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
        "ask_start": record(r.ask_start, command=command_line("ask", r.ask_start.question, json=True)),
        "first_verdict": record(r.verdicts, p50=r.verdicts.p50, max=r.verdicts.max, settings=asdict(VERDICT_SETTINGS)),
        "tokens": record(r.tokens, ratio=r.tokens.ratio, settings=asdict(TOKEN_SETTINGS)) if r.tokens else None,
        "speed": speed_record(r.speed),
        "table": [row._asdict() for row in build_rows(r)],
        "notes": notes(r),
    }


def _check_args(args: argparse.Namespace) -> str | None:
    if args.queries < 1:
        return f"--queries must be 1 or more, got {args.queries}."
    if getattr(args, "speed_questions", 0) < 0:
        return f"--speed-questions must be 0 or more, got {args.speed_questions}."
    if args.token_questions < 0:
        return f"--token-questions must be 0 or more, got {args.token_questions}."
    return None


def run_bench(args: argparse.Namespace, config: AppConfig) -> tuple[BenchResults, str, str]:
    pages = load_corpus(config.corpus)
    speed_questions = getattr(args, "speed_questions", 0)
    wanted = max(args.queries, args.token_questions, VERDICT_QUESTIONS, speed_questions)
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
    decode = None
    if speed_questions:
        with watch.part("decode in-process"):
            gguf = embedded_gguf(config) if not getattr(args, "no_llama_cpp", False) else None
            decode = first_window_decode(index, backend, questions[0], gguf)
    with watch.part("app start"):
        start = cached_start(config)
    with watch.part("ask start"):
        asked = ask_start(config)
    with watch.part("first verdicts"):
        verdicts = verdict_times(index, backend, questions[:VERDICT_QUESTIONS])
    tokens = None
    if args.token_questions:
        with watch.part("prompt tokens"):
            tokens = token_costs(index, backend, questions[: args.token_questions])
    speed = None
    if speed_questions:
        with watch.part("speed-ups off and on"):
            speed = compare_speed(
                index,
                backend,
                questions[:speed_questions],
                verdict_questions=questions[:VERDICT_QUESTIONS],
                with_llama_cpp=not getattr(args, "no_llama_cpp", False),
                decode=decode,
            )
    results = BenchResults(
        index_times,
        latency,
        model_load,
        throughput=throughput,
        start=start,
        ask_start=asked,
        verdicts=verdicts,
        tokens=tokens,
        others_cpu=watch.shares,
        speed=speed,
    )
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
    about = provenance()
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
        say(f"Wrote {write_json(Path(args.out), bench_record(args, results, corpus, model, about))}")
    return 0
