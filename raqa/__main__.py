"""The command line: `python -m raqa ask|bench ...`.

`ask` streams the same events as the web page: as readable lines, or with --json as one JSON object
per line (the last of type "final" or "run_failed"). Exit status: 0 on a run, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from raqa.config import AppConfig, SettingsError, clean_question, validate_settings
from raqa.corpus import CorpusError
from raqa.events import (
    Final,
    Notice,
    ReplyDelta,
    Retrieved,
    RunFailed,
    WindowStarted,
    WindowVerdict,
    to_json,
)
from raqa.llm import ModelError


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        help="JSONL or KILT corpus file (default: embedded Wikipedia; env RAQA_CORPUS)",
    )
    parser.add_argument(
        "--model",
        help="HF model id, local folder or .gguf file (default: embedded SmolLM2; env RAQA_MODEL)",
    )
    parser.add_argument("--adapter", help="peft adapter folder (env RAQA_ADAPTER)")
    parser.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")


def _config(args: argparse.Namespace) -> AppConfig:
    return AppConfig.from_env(corpus=args.corpus, model=args.model, adapter=args.adapter, cache_dir=args.cache)


def _print_human(event) -> None:
    if isinstance(event, Retrieved):
        print(
            f"Retrieved {len(event.hits)} pages in {event.seconds * 1000:.1f} ms",
            file=sys.stderr,
        )
    elif isinstance(event, Notice):
        print(f"Note: {event.message}", file=sys.stderr)
    elif isinstance(event, WindowStarted):
        pages = ", ".join(f"#{h.rank} {h.page.title} [{h.page.id}]" for h in event.hits)
        print(f"\nWindow {event.window}/{event.of}: {pages}", file=sys.stderr)
    elif isinstance(event, ReplyDelta):
        print(event.text, end="", flush=True, file=sys.stderr)
    elif isinstance(event, WindowVerdict):
        confidence = f" (P(answer)={event.p_answer:.2f})" if event.p_answer is not None else ""
        note = f" - {event.grounding.note}" if event.grounding else ""
        print(f"\n=> {event.verdict}{confidence}{note}", file=sys.stderr)
    elif isinstance(event, Final):
        shown = event.answer if event.answer is not None else "answer not found"
        flag = " (unsupported by its page)" if event.supported is False else ""
        print(f"\n{shown}{flag}")
        print(
            f"windows {event.windows_read}, pages {event.pages_read}, prompt tokens {event.prompt_tokens} "
            f"(Top-K would use {event.topk_prompt_tokens}), completion tokens {event.completion_tokens}, {event.seconds:.1f} s",
            file=sys.stderr,
        )
    elif isinstance(event, RunFailed):
        print(f"Run failed: {event.message}", file=sys.stderr)


def cmd_ask(args: argparse.Namespace) -> int:
    from raqa.engine import run
    from raqa.service import Service

    try:
        question = clean_question(args.question)
        settings = validate_settings(
            args.strategy,
            args.order,
            args.window,
            args.k,
            args.grounded_only,
            args.rationale,
        )
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr))
    except (CorpusError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for event in run(question, service.index, service.backend, settings):
        if args.json:
            print(json.dumps(to_json(event), ensure_ascii=False), flush=True)
        else:
            _print_human(event)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from raqa.bench import main as bench_main

    return bench_main(args)


EXPERIMENT_LIMITS = {
    "recall": 1000,
    "topk_vs_iterative": 50,
    "window_order": 30,
    "negative_windows": 40,
    "unanswerable": 40,
}


def cmd_experiment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from raqa import experiments
    from raqa.config import RunSettings
    from raqa.experiments import PositiveIndex
    from raqa.index import load_or_build
    from raqa.questions import QuestionsError, load_questions
    from raqa.service import Service

    name = args.name
    limit = args.limit or EXPERIMENT_LIMITS[name]
    try:
        # windows and unanswerable questions are drawn from a larger pool than they keep
        pool = load_questions(
            args.dataset, "test", limit * 10 if name in ("negative_windows", "unanswerable") else limit, args.seed
        )
        service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr), load_model=name != "recall")
    except (QuestionsError, CorpusError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    positives = PositiveIndex(service.pages)

    def progress(items):
        return tqdm(items, desc=name, file=sys.stderr)

    base = RunSettings()
    if name == "recall":
        word = load_or_build(service.pages, service.config.cache_dir, tokenizer="word")
        results, seconds = experiments.timed(
            experiments.recall, pool, {"wordpiece": service.index, "word": word}, positives, progress
        )
    elif name == "topk_vs_iterative":
        results, seconds = experiments.timed(
            experiments.topk_vs_iterative, pool, service.index, service.backend, base, progress
        )
    elif name == "window_order":
        results, seconds = experiments.timed(
            experiments.window_order, pool, service.index, service.backend, base, positives, progress
        )
    elif name == "negative_windows":
        results, seconds = experiments.timed(
            experiments.negative_windows, pool, service.index, service.backend, base, positives, limit, progress
        )
    else:
        results, seconds = experiments.timed(
            experiments.unanswerable, pool, service.index, service.backend, base, positives, limit, progress
        )
    command = f"python -m raqa experiment {name} --dataset {args.dataset} --limit {limit} --seed {args.seed}"
    provenance = {
        "command": command,
        "sample": {"split": "test", "limit": limit, "seed": args.seed, "pool": len(pool)},
        "model": None if name == "recall" else service.backend.name,
        "adapter": service.config.adapter,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": experiments._settings(base),
        "seconds": round(seconds, 1),
    }
    path = experiments.write(
        name, args.dataset, results, provenance, Path(args.out) if args.out else experiments.RESULTS_DIR
    )
    print(f"wrote {path} in {seconds:.0f} s", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m raqa",
        description="Retrieval-augmented QA that admits ignorance.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer one question, streaming each window")
    ask.add_argument("question")
    ask.add_argument("--strategy", default="iterative", help="iterative | topk")
    ask.add_argument("--order", default="forward", help="forward | backward")
    ask.add_argument("--window", default=3, help="pages per window, 1-20")
    ask.add_argument("--k", default=15, help="pages retrieved, 5-100")
    ask.add_argument(
        "--grounded-only",
        action="store_true",
        help="count unsupported answers as declines",
    )
    ask.add_argument("--rationale", action="store_true", help="ask for a reason on declined windows")
    ask.add_argument("--json", action="store_true", help="one JSON object per event")
    _add_model_options(ask)
    ask.set_defaults(func=cmd_ask)
    bench = sub.add_parser("bench", help="measure retrieval, model and first-verdict speed on this machine")
    bench.add_argument(
        "--queries",
        type=int,
        default=500,
        help="real questions for the retrieval latency",
    )
    bench.add_argument(
        "--token-questions",
        type=int,
        default=50,
        help="questions for iterative vs Top-K tokens",
    )
    bench.add_argument("--out", help="write the results as JSON here too")
    _add_model_options(bench)
    bench.set_defaults(func=cmd_bench)
    experiment = sub.add_parser("experiment", help="rerun one of the paper's experiments and write its JSON")
    experiment.add_argument("name", choices=list(EXPERIMENT_LIMITS))
    experiment.add_argument("--dataset", default="nq", choices=["nq", "triviaqa", "squad"])
    experiment.add_argument(
        "--limit", type=int, help="questions (recall, Top-K, windows) or windows/questions kept per kind"
    )
    experiment.add_argument("--seed", type=int, default=0)
    experiment.add_argument("--out", help="folder for the JSON (default assets/results)")
    _add_model_options(experiment)
    experiment.set_defaults(func=cmd_experiment)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
