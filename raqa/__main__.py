"""The command line: `python -m raqa ask|bench|batch ...`.

`ask` streams the same events as the web page: as readable lines, or with --json as one JSON object
per line (the last of type "final" or "run_failed"). Exit status: 0 on a run, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from raqa.config import AppConfig, SettingsError, clean_question, validate_settings
from raqa.evaluation import records
from raqa.models.base import ModelError
from raqa.reading.events import (
    Final,
    Notice,
    ReplyDelta,
    Retrieved,
    RunFailed,
    WindowStarted,
    WindowVerdict,
    to_json,
)
from raqa.retrieval.corpus import CorpusError


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
    from raqa.reading.engine import run
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


def cmd_route(args: argparse.Namespace) -> int:
    from raqa.service import Service
    from raqa.when_to_retrieve import policies as router
    from raqa.when_to_retrieve.model import load_adapt_model

    try:
        question = clean_question(args.question)
        service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr), load_model=False)
        model = load_adapt_model(service.config.cache_dir, Path(args.adapters), lambda m: print(m, file=sys.stderr))
    except (SettingsError, CorpusError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for policy in args.policies:
        for event in router.decide(question, policy, model, lambda q: service.index.search(q, 1)):
            print(json.dumps(router.to_json(event), ensure_ascii=False), flush=True)
    return 0


def _policy_list(text: str) -> list[str]:
    from raqa.when_to_retrieve.policies import POLICIES

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in POLICIES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"invalid policies {text!r}: choose from {', '.join(POLICIES)}")
    return names


def cmd_bench(args: argparse.Namespace) -> int:
    from raqa.ops.bench import main as bench_main

    return bench_main(args)


def _write_json(path: str, data: dict) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)


def _progress_line(label: str):
    def show(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return show


def _sample_questions(count: int, seed: int) -> list[str]:
    from raqa.evaluation.questions import load_questions

    return [item.question for item in load_questions("nq", "test", limit=count, seed=seed)]


def cmd_load_test(args: argparse.Namespace) -> int:
    """Serve the page on the real model and send one NQ question per session, all at once."""
    from raqa.ops import reliability
    from raqa.service import Service

    service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr))
    questions = _sample_questions(args.sessions, args.seed)
    form = ("Iterative", "forward", args.window, args.k, False, False)
    demo, url = reliability.serve(service)
    try:
        results = reliability.drive_sessions(url, questions, form, progress=_progress_line("sessions done"))
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
    _write_json(args.out, reliability.record("load_test", command, service, summary))
    return 0 if summary["completed"] == summary["sessions"] and all(own) else 1


def cmd_soak(args: argparse.Namespace) -> int:
    """Run questions one after another through the page's generator and record memory after each."""
    from raqa.ops import reliability
    from raqa.service import Service

    service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr))
    questions = _sample_questions(args.questions, args.seed)
    form = ("Iterative", "forward", args.window, args.k, False, False)
    result = reliability.soak(service, questions, args.runs, form, progress=_progress_line("runs"))
    result |= {"form": list(form), "distinct_questions": len(questions)}
    print(
        f"{args.runs} runs: RSS {result['rss_after_warmup_mib']:.0f} MiB after {result['warmup_runs']} runs, "
        f"{result['rss_last_mib']:.0f} MiB at the end ({result['growth_after_warmup_mib']:+.1f} MiB)"
    )
    command = (
        f"python -m raqa soak --runs {args.runs} --questions {args.questions} --window {args.window} --k {args.k} "
        f"--seed {args.seed} --out {args.out}"
    )
    _write_json(args.out, reliability.record("soak", command, service, result))
    return 0


# KILT's 5.9 M pages hold about 2.1 G words (DPR cut the same Wikipedia into 21 M passages of 100 words),
# so about 360 words or, at 1.3 WordPiece tokens a word, 470 tokens a page: an assumption, not a measurement.
KILT_PAGES, KILT_TOKENS_PER_PAGE = 5_900_000, 470


def cmd_scale_bench(args: argparse.Namespace) -> int:
    """Index a generated corpus of --pages pages and measure build time, peak memory and query latency."""
    import tempfile

    from raqa.ops import scale

    work = Path(args.work or tempfile.mkdtemp(prefix="raqa-scale-"))
    result = scale.measure(args.pages, work, _sample_questions(args.queries, args.seed), args.seed)
    result["kilt_extrapolation"] = scale.extrapolate(result, KILT_PAGES, KILT_TOKENS_PER_PAGE)
    b, q = result["build"], result["query_ms"]
    print(
        f"{args.pages:,} pages ({result['corpus_mib']:.0f} MiB): build {b['total_s']:.0f} s "
        f"(tokenize {b['tokenize_s']:.0f} s, score {b['score_s']:.0f} s), peak RSS {result['rss_peak_mib']:.0f} MiB, "
        f"index {result['index_mib']:.0f} MiB; query p50 {q['p50']:.1f} ms, p95 {q['p95']:.1f} ms"
    )
    if args.out:
        command = f"python -m raqa scale-bench --pages {args.pages} --queries {args.queries} --out {args.out}"
        _write_json(args.out, {"measurement": "scale", "command": command, "results": result, **_provenance()})
    return 0


def _provenance() -> dict:
    import os
    import platform
    from datetime import UTC, datetime

    from raqa.evaluation.records import code_version

    return {
        "code_version": code_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_average_before": os.getloadavg()[0],
    }


EXPERIMENT_LIMITS = {
    "recall": 1000,
    "topk_vs_iterative": 50,
    "window_order": 30,
    "negative_windows": 40,
    "unanswerable": 40,
    "reader_comparison": 40,
}
POOL_FACTOR = {"negative_windows": 10, "unanswerable": 10, "reader_comparison": 20}


def _reader_comparison(args, service, pool, positives, limit, progress) -> tuple[dict, float]:
    """The base model and a trained reader (both loaded here) on the same test windows and questions."""
    from raqa.config import RunSettings
    from raqa.evaluation import experiments
    from raqa.evaluation.questions import load_questions
    from raqa.models.local import TransformersBackend
    from raqa.reading.readers import BASE_READER, get_reader

    reader = get_reader(args.reader)
    tuned = TransformersBackend.load(
        service.config.model, str(reader.adapter), service.config.cache_dir, lambda m: print(m, file=sys.stderr)
    )
    # unanswerable questions come from NQ test: more than half its answers are nowhere in the corpus
    lost_pool = load_questions("nq", "test", args.unanswerable * 10, args.seed)
    readers = {
        BASE_READER.name: (service.backend, BASE_READER.settings(RunSettings()), {"label": BASE_READER.label}),
        reader.name: (
            tuned,
            reader.settings(RunSettings()),
            {"label": reader.label, "adapter": f"assets/readers/{reader.name}"},
        ),
    }
    return records.timed(
        experiments.reader_comparison,
        pool,
        lost_pool,
        service.index,
        readers,
        positives,
        limit,
        args.questions,
        args.unanswerable,
        progress,
    )


def cmd_experiment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from raqa.config import RunSettings
    from raqa.evaluation import experiments
    from raqa.evaluation.positives import PositiveIndex
    from raqa.evaluation.questions import QuestionsError, load_questions
    from raqa.retrieval.index import load_or_build
    from raqa.service import Service

    name = args.name
    limit = args.limit or EXPERIMENT_LIMITS[name]
    try:
        # windows and unanswerable questions are drawn from a larger pool than they keep
        pool = load_questions(args.dataset, "test", limit * POOL_FACTOR.get(name, 1), args.seed)
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
        results, seconds = records.timed(
            experiments.recall, pool, {"wordpiece": service.index, "word": word}, positives, progress
        )
    elif name == "topk_vs_iterative":
        results, seconds = records.timed(
            experiments.topk_vs_iterative, pool, service.index, service.backend, base, progress
        )
    elif name == "window_order":
        results, seconds = records.timed(
            experiments.window_order, pool, service.index, service.backend, base, positives, progress
        )
    elif name == "negative_windows":
        results, seconds = records.timed(
            experiments.negative_windows, pool, service.index, service.backend, base, positives, limit, progress
        )
    elif name == "unanswerable":
        results, seconds = records.timed(
            experiments.unanswerable, pool, service.index, service.backend, base, positives, limit, progress
        )
    else:
        try:
            results, seconds = _reader_comparison(args, service, pool, positives, limit, progress)
        except (QuestionsError, ModelError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    command = f"python -m raqa experiment {name} --dataset {args.dataset} --limit {limit} --seed {args.seed}"
    if name == "reader_comparison":
        command += f" --reader {args.reader} --questions {args.questions} --unanswerable {args.unanswerable}"
    provenance = {
        "command": command,
        "sample": {"split": "test", "limit": limit, "seed": args.seed, "pool": len(pool)},
        "model": None if name == "recall" else service.backend.name,
        "adapter": f"assets/readers/{args.reader}" if name == "reader_comparison" else service.config.adapter,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": experiments.settings_record(base),
        "seconds": round(seconds, 1),
    }
    path = records.write(name, args.dataset, results, provenance, Path(args.out) if args.out else records.RESULTS_DIR)
    print(f"wrote {path} in {seconds:.0f} s", file=sys.stderr)
    return 0


def cmd_train_reader(args: argparse.Namespace) -> int:
    from raqa.config import default_cache_dir
    from raqa.training.reader import LoraSettings, train_reader

    if args.limit < 4 or args.epochs < 1 or args.calibration < 1 or not 0 <= args.verdict_weight <= 1:
        print(
            "error: --limit must be at least 4, --epochs and --calibration at least 1, --verdict-weight from 0 to 1.",
            file=sys.stderr,
        )
        return 2
    settings = LoraSettings(
        rank=args.rank,
        alpha=args.alpha,
        lr=args.lr,
        epochs=args.epochs,
        accumulation=args.accumulation,
        verdict_weight=args.verdict_weight,
        page_tokens=args.page_tokens,
        seed=args.seed,
    )
    command = (
        f"python -m raqa train-reader --limit {args.limit} --epochs {args.epochs} --lr {args.lr} --rank {args.rank} "
        f"--alpha {args.alpha} --accumulation {args.accumulation} --verdict-weight {args.verdict_weight} "
        f"--page-tokens {args.page_tokens} --calibration {args.calibration} --seed {args.seed} --out {args.out}"
    )
    card = train_reader(
        Path(args.out),
        args.limit,
        settings,
        Path(args.cache) if args.cache else default_cache_dir(),
        command,
        args.calibration,
        say=lambda m: print(m, file=sys.stderr),
    )
    print(json.dumps({k: card[k] for k in ("answer_threshold", "calibration", "wall_seconds")}, indent=1))
    return 0


def cmd_train_adapt(args: argparse.Namespace) -> int:
    from raqa.config import default_cache_dir
    from raqa.training.lora import LoraSettings
    from raqa.training.when_to_retrieve import train_adapt

    settings = LoraSettings(
        rank=args.rank,
        alpha=args.alpha,
        lr=args.lr,
        epochs=args.epochs,
        batch=args.batch,
        micro_batch=args.micro_batch,
        seed=args.seed,
    )
    try:
        if args.limit < 1:
            raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
        settings.check()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = (
        f"python -m raqa train-adapt --limit {args.limit} --datasets {','.join(args.datasets)} "
        f"--epochs {args.epochs} --lr {args.lr} --rank {args.rank} --alpha {args.alpha} --batch {args.batch} "
        f"--micro-batch {args.micro_batch} --seed {args.seed} --out {args.out}"
    )
    result = train_adapt(
        Path(args.out),
        args.limit,
        settings,
        Path(args.cache) if args.cache else default_cache_dir(),
        command,
        datasets=tuple(args.datasets),
        say=lambda m: print(m, file=sys.stderr),
    )
    print(json.dumps({"wall_seconds": result["wall_seconds"], "data": result["data"]}, indent=1))
    return 0


def cmd_eval_adapt(args: argparse.Namespace) -> int:
    import time

    from tqdm import tqdm

    from raqa.evaluation.questions import QuestionsError, load_questions
    from raqa.evaluation.when_to_retrieve import evaluate, popularity_baseline, summarise
    from raqa.service import Service
    from raqa.when_to_retrieve.model import adapter_card, adapter_dirs, load_adapt_model
    from raqa.when_to_retrieve.popularity import PopularityError, load_popqa

    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    try:
        if args.limit < 1:
            raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
        sets = {d: load_questions(d, "test", args.limit, args.seed) for d in args.datasets}
        popqa = load_popqa(args.popqa, args.limit) if args.popqa else None
        folders = adapter_dirs(Path(args.adapters))
        service = Service.load(_config(args), progress=say, load_model=False)
        model = load_adapt_model(service.config.cache_dir, Path(args.adapters), say)
    except (ValueError, QuestionsError, PopularityError, CorpusError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    def search(question: str):
        return service.index.search(question, 1)

    start = time.perf_counter()
    results: dict = {"datasets": {}, "rows": {}}
    for dataset, items in sets.items():
        with tqdm(total=len(items), desc=f"eval-adapt {dataset}", file=sys.stderr) as bar:
            rows = evaluate(items, model, search, lambda row: bar.update(1))
        results["datasets"][dataset] = summarise(rows)
        results["rows"][dataset] = rows
    if popqa:
        with tqdm(total=len(popqa), desc="eval-adapt popqa", file=sys.stderr) as bar:
            pop = popularity_baseline(popqa, model, search, args.seed, lambda row: bar.update(1))
        results["datasets"]["popqa"] = {**pop["summary"], "threshold": pop["threshold"], "dev_n": pop["dev_n"]}
        results["rows"]["popqa"] = pop["rows"]
    seconds = time.perf_counter() - start
    results["adapters"] = {
        name: {k: adapter_card(folder).get(k) for k in ("label", "command", "data", "training")}
        for name, folder in folders.items()
    }
    command = (
        f"python -m raqa eval-adapt --datasets {','.join(args.datasets)} --limit {args.limit} --seed {args.seed} "
        f"--adapters {args.adapters}" + (f" --popqa {args.popqa}" if args.popqa else "")
    )
    provenance = {
        "command": command,
        "sample": {"split": "test", "limit": args.limit, "seed": args.seed},
        "model": model.name,
        "adapter": args.adapters,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": {"retrieval": "BM25 top 1 page, cut to 160 tokens", "decoding": "greedy, at most 32 tokens"},
        "seconds": round(seconds, 1),
    }
    dataset_label = "+".join(args.datasets) + ("+popqa" if popqa else "")
    path = records.write(
        "when_to_retrieve", dataset_label, results, provenance, Path(args.out) if args.out else records.RESULTS_DIR
    )
    for dataset, summary in results["datasets"].items():
        line = {p: round(v["accuracy"]["value"], 3) for p, v in summary["policies"].items()}
        say(f"{dataset} (n={summary['n']}): accuracy {line}, <RET> rate {summary['ret_rate']['value']:.1%}")
    say(f"wrote {path} in {seconds:.0f} s")
    return 0


def _dataset_list(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in ("nq", "triviaqa")]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"invalid datasets {text!r}: choose from nq, triviaqa (comma-separated)")
    return names


def _endpoint_backend(name: str):
    """The backend called name in the RAQA_ENDPOINTS file; ValueError/ModelError list what is wrong."""
    from raqa.models.endpoint import EndpointBackend
    from raqa.models.endpoints_file import ENDPOINTS_ENV, endpoints_from_env

    configs = endpoints_from_env()
    names = [c.name for c in configs]
    if name not in names:
        listed = ", ".join(names) if names else f"none ({ENDPOINTS_ENV} is not set)"
        raise ValueError(f"Invalid endpoint: {name!r}. Choose from: {listed}.")
    return EndpointBackend(configs[names.index(name)])


def cmd_batch(args: argparse.Namespace) -> int:
    """Iterative prompting over a question set, resumable: one JSONL line per question as it finishes."""
    from raqa.evaluation.questions import QuestionsError, load_questions
    from raqa.models.local import TransformersBackend
    from raqa.ops.batch import BatchError, question_work, run_batch, summarise
    from raqa.service import Service

    if not 1 <= args.concurrency <= 256:
        print("error: --concurrency must be from 1 to 256.", file=sys.stderr)
        return 2
    try:
        settings = validate_settings(args.strategy, args.order, args.window, args.k, args.grounded_only)
        items = load_questions(args.dataset, args.split, args.limit, args.seed)
        backend = _endpoint_backend(args.endpoint) if args.endpoint else None
        service = Service.load(_config(args), progress=lambda m: print(m, file=sys.stderr), backend=backend)
    except (SettingsError, QuestionsError, ValueError, CorpusError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    concurrency = args.concurrency
    if isinstance(service.backend, TransformersBackend) and concurrency > 1:
        # the local model computes on this machine's cores: parallel runs only compete for them
        print(
            "Note: the local model reads one question at a time; --concurrency applies to --endpoint.", file=sys.stderr
        )
        concurrency = 1
    work = question_work(service.index, service.backend, settings)
    try:
        result = run_batch(items, work, args.out, concurrency, _progress_line("questions done"))
    except BatchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for item_id, message in result.errors.items():
        print(f"failed (rerun to retry): {item_id}: {message}", file=sys.stderr)
    totals = summarise(args.out, [item.id for item in items])
    print(
        f"{totals['questions']}/{result.total} questions in {args.out} ({result.skipped} from before, "
        f"{result.written} now, {len(result.errors)} failed): answered {totals['answered']}, "
        f"abstained {totals['abstained']}, run failed {totals['run_failed']}; "
        f"EM {totals['em']:.3f}, F1 {totals['f1']:.3f}"
    )
    return 1 if result.errors else 0


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
    experiment.add_argument("--reader", default="abstain", help="reader_comparison: the trained reader's folder name")
    experiment.add_argument("--questions", type=int, default=25, help="reader_comparison: questions per reading order")
    experiment.add_argument(
        "--unanswerable", type=int, default=30, help="reader_comparison: NQ test questions with no answer in the corpus"
    )
    _add_model_options(experiment)
    experiment.set_defaults(func=cmd_experiment)
    train = sub.add_parser("train-reader", help="build dev-split windows, train the abstention-tuned LoRA reader")
    train.add_argument("--limit", type=int, default=560, help="training windows, half positive, half negative")
    train.add_argument("--epochs", type=int, default=1)
    train.add_argument("--lr", type=float, default=3e-4)
    train.add_argument("--rank", type=int, default=8)
    train.add_argument("--alpha", type=int, default=16)
    train.add_argument("--accumulation", type=int, default=4, help="windows per optimiser step")
    train.add_argument("--verdict-weight", type=float, default=0.5, help="share of the loss on the first reply token")
    train.add_argument("--page-tokens", type=int, default=200, help="pages cut to this many tokens in training")
    train.add_argument("--calibration", type=int, default=20, help="held-out dev windows per kind and dataset")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", default="assets/readers/abstain", help="folder for the adapter and its card")
    train.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    train.set_defaults(func=cmd_train_reader)
    route = sub.add_parser("route", help="When to retrieve: each policy's decision and answer, as JSON lines")
    route.add_argument("question")
    route.add_argument("--policies", type=_policy_list, default=["never", "always", "adapt"], help="comma-separated")
    route.add_argument("--adapters", default="assets/adapt", help="folder holding adapt/, never/ and always/")
    route.add_argument("--corpus", help="JSONL or KILT corpus file (default: embedded Wikipedia; env RAQA_CORPUS)")
    route.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    route.set_defaults(func=cmd_route, model=None, adapter=None)
    adapt = sub.add_parser("train-adapt", help="label dev questions zero-shot; train Adapt-LLM, NR-LLM, AR-LLM")
    adapt.add_argument("--limit", type=int, default=300, help="dev questions per dataset")
    adapt.add_argument("--datasets", type=_dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    adapt.add_argument("--epochs", type=int, default=3)
    adapt.add_argument("--lr", type=float, default=3e-4)
    adapt.add_argument("--rank", type=int, default=8)
    adapt.add_argument("--alpha", type=int, default=16)
    adapt.add_argument("--batch", type=int, default=128, help="examples per optimiser step (the paper's 128)")
    adapt.add_argument("--micro-batch", type=int, default=8, help="examples per forward pass")
    adapt.add_argument("--seed", type=int, default=0)
    adapt.add_argument("--out", default="assets/adapt", help="folder for the three adapters and the data")
    adapt.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    adapt.set_defaults(func=cmd_train_adapt)
    evaluate = sub.add_parser("eval-adapt", help="NR-LLM, AR-LLM, Adapt-LLM (and popularity) on test questions")
    evaluate.add_argument("--datasets", type=_dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    evaluate.add_argument("--limit", type=int, default=200, help="test questions per dataset (seeded sample)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--adapters", default="assets/adapt", help="folder holding adapt/, never/ and always/")
    evaluate.add_argument("--popqa", help="a PopQA-format TSV (question, possible_answers, s_pop): adds the baseline")
    evaluate.add_argument("--out", help="folder for the result JSON (default assets/results)")
    evaluate.add_argument("--corpus", help="JSONL or KILT corpus file (default: embedded Wikipedia; env RAQA_CORPUS)")
    evaluate.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    # the adapters were trained on the embedded model, so no other model or adapter is offered here
    evaluate.set_defaults(func=cmd_eval_adapt, model=None, adapter=None)
    load = sub.add_parser("load-test", help="many sessions at once through the served page's API (real model)")
    load.add_argument("--sessions", type=int, default=20)
    load.add_argument("--window", type=int, default=3, help="the page's default")
    load.add_argument("--k", type=int, default=15, help="the page's default")
    load.add_argument("--seed", type=int, default=0)
    load.add_argument("--out", default="assets/results/load-test.json")
    _add_model_options(load)
    load.set_defaults(func=cmd_load_test)
    soak = sub.add_parser("soak", help="memory over many consecutive runs through the page's generator")
    soak.add_argument("--runs", type=int, default=200)
    soak.add_argument("--questions", type=int, default=50, help="distinct NQ test questions, cycled")
    soak.add_argument("--window", type=int, default=5)
    soak.add_argument("--k", type=int, default=5)
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--out", default="assets/results/soak.json")
    _add_model_options(soak)
    soak.set_defaults(func=cmd_soak)
    batch = sub.add_parser("batch", help="iterative prompting over a question set, resumable, N questions at once")
    batch.add_argument("--dataset", default="nq", choices=["nq", "triviaqa", "squad"])
    batch.add_argument("--split", default="test", choices=["test", "dev"])
    batch.add_argument("--limit", type=int, help="questions (default: all)")
    batch.add_argument("--seed", type=int, help="a seeded sample of --limit questions (default: the first ones)")
    batch.add_argument("--concurrency", type=int, default=8, help="questions in flight at once (endpoints), 1-256")
    batch.add_argument("--out", required=True, help="JSONL results; an existing file is resumed")
    batch.add_argument("--strategy", default="iterative", help="iterative | topk")
    batch.add_argument("--order", default="forward", help="forward | backward")
    batch.add_argument("--window", default=3, help="pages per window, 1-20")
    batch.add_argument("--k", default=15, help="pages retrieved, 5-100")
    batch.add_argument("--grounded-only", action="store_true", help="count unsupported answers as declines")
    batch.add_argument("--endpoint", help="a model server named in the RAQA_ENDPOINTS file (default: local model)")
    _add_model_options(batch)
    batch.set_defaults(func=cmd_batch)
    scale = sub.add_parser("scale-bench", help="index a generated corpus of many pages; time, memory, latency")
    scale.add_argument("--pages", type=int, default=200_000)
    scale.add_argument("--queries", type=int, default=500, help="NQ-open test questions timed")
    scale.add_argument("--seed", type=int, default=0)
    scale.add_argument("--work", help="folder for the generated corpus and its index (default: a temp folder)")
    scale.add_argument("--out", help="write the measurements as JSON here")
    scale.set_defaults(func=cmd_scale_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
