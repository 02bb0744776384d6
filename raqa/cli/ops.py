"""`bench`, `load-test`, `soak`, `scale-bench`: measurements of this machine, each written as a JSON record.

The measuring lives in raqa.ops; here the options become its arguments, and its results a summary line on
stdout and a record at --out (built in raqa.ops with records.provenance(), like every record).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from raqa.cli.output import progress_line, say, write_json
from raqa.cli.parser import app_config

# KILT's 5.9 M pages hold about 2.1 G words (DPR cut the same Wikipedia into 21 M passages of 100 words),
# so about 360 words or, at 1.3 WordPiece tokens a word, 470 tokens a page: an assumption, not a measurement.
KILT_PAGES, KILT_TOKENS_PER_PAGE = 5_900_000, 470


def sample_questions(count: int, seed: int) -> list[str]:
    """count seeded NQ-open test questions (tests replace this with their own questions)."""
    from raqa.evaluation.questions import load_questions

    return [item.question for item in load_questions("nq", "test", limit=count, seed=seed)]


def cmd_bench(args: argparse.Namespace) -> int:
    from raqa.ops.bench import main as bench_main

    return bench_main(args)


def cmd_load_test(args: argparse.Namespace) -> int:
    """Serve the page on the real model and send one NQ question per session, all at once."""
    from raqa.ops import reliability
    from raqa.service import Service

    service = Service.load(app_config(args), progress=say)
    questions = sample_questions(args.sessions, args.seed)
    form = ("iterative", "forward", args.window, args.k, False, False, None)
    demo, url = reliability.serve(service)
    try:
        results = reliability.drive_sessions(url, questions, form, progress=progress_line("sessions done"))
        after = reliability.drive_sessions(url, questions[:1], form)
    finally:
        demo.close()
    summary = reliability.summarise(results)
    own = reliability.own_run_check(service, results, args.k)
    summary |= {
        "own_run_only": sum(own),
        "server_answered_afterwards": after[0].error is None,
        "form": list(form),
        "seconds": [r.seconds for r in results],
        "concurrency_limit": 1,
    }
    print(
        f"{summary['completed']}/{summary['sessions']} sessions completed, {sum(own)} with their own run only; "
        f"p50 {summary['p50_s']:.1f} s, p95 {summary['p95_s']:.1f} s, max {summary['max_s']:.1f} s"
    )
    command = (
        f"python -m raqa load-test --sessions {args.sessions} --window {args.window} --k {args.k} "
        f"--seed {args.seed} --out {args.out}"
    )
    write_json(args.out, reliability.record("load_test", command, service, summary))
    return 0 if summary["completed"] == summary["sessions"] and all(own) else 1


def cmd_soak(args: argparse.Namespace) -> int:
    """Run questions one after another through the page's generator and record memory after each."""
    from raqa.ops import reliability
    from raqa.service import Service

    service = Service.load(app_config(args), progress=say)
    questions = sample_questions(args.questions, args.seed)
    form = ("iterative", "forward", args.window, args.k, False, False, None)
    result = reliability.soak(service, questions, args.runs, form, progress=progress_line("runs"))
    result |= {"form": list(form), "distinct_questions": len(questions)}
    print(
        f"{args.runs} runs: RSS {result['rss_after_warmup_mib']:.0f} MiB after {result['warmup_runs']} runs, "
        f"{result['rss_last_mib']:.0f} MiB at the end ({result['growth_after_warmup_mib']:+.1f} MiB)"
    )
    command = (
        f"python -m raqa soak --runs {args.runs} --questions {args.questions} --window {args.window} --k {args.k} "
        f"--seed {args.seed} --out {args.out}"
    )
    write_json(args.out, reliability.record("soak", command, service, result))
    return 0


def cmd_scale_bench(args: argparse.Namespace) -> int:
    """Index a generated corpus of --pages pages and measure build time, peak memory and query latency."""
    import tempfile

    from raqa.ops import scale

    work = Path(args.work or tempfile.mkdtemp(prefix="raqa-scale-"))
    result = scale.measure(args.pages, work, sample_questions(args.queries, args.seed), args.seed)
    result["kilt_extrapolation"] = scale.extrapolate(result, KILT_PAGES, KILT_TOKENS_PER_PAGE)
    b, q = result["build"], result["query_ms"]
    print(
        f"{args.pages:,} pages ({result['corpus_mib']:.0f} MiB): build {b['total_s']:.0f} s "
        f"(tokenize {b['tokenize_s']:.0f} s, score {b['score_s']:.0f} s), peak RSS {result['rss_peak_mib']:.0f} MiB, "
        f"index {result['index_mib']:.0f} MiB; query p50 {q['p50']:.1f} ms, p95 {q['p95']:.1f} ms"
    )
    if args.out:
        command = f"python -m raqa scale-bench --pages {args.pages} --queries {args.queries} --out {args.out}"
        write_json(args.out, scale.record(command, result))
    return 0
