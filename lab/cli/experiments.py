"""`experiment NAME` and `experiment when_to_retrieve`: parse, load, hand over to evaluation.registry, write the record.

Exit status: 0 when the record is written, 2 on bad input (unknown reader, unreadable questions, missing
adapters or corpus) before anything is measured.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from lab.cli.evaluator import Evaluation, Measurement, Ready, evaluate
from lab.cli.progress import counter_bar, progress_bar
from lab.evaluation import registry
from lab.evaluation.eval_adapt import run_eval_adapt
from lab.evaluation.when_to_retrieve import adapt_rows
from lab.records import options_line
from raqa.cli.options import app_config
from raqa.cli.output import say
from raqa.config import SpeedOptions
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions
from raqa.evaluation import records
from raqa.evaluation.fan_out import MAX_CALLS
from raqa.text import slug
from raqa.when_to_retrieve.planning import top_page
from raqa.when_to_retrieve.popularity import load_popqa


def _prepare_experiment(args: argparse.Namespace) -> Ready:
    from raqa.service import Service  # lazy: imports torch

    experiment = registry.EXPERIMENTS[args.name]
    limit = args.limit or experiment.limit
    pool = registry.question_pool(experiment, args.dataset, limit, args.seed)
    service = Service.load(app_config(args), progress=say, load_model=experiment.needs_model)
    service = registry.on_server(experiment, service, args.endpoint)
    concurrency = run_concurrency(args, service)
    if args.endpoint and "reader" in experiment.options:
        _check_served(service, args.reader)
    registry.preload_readers(experiment, service, args.reader)  # a reader that does not exist: exit 2, nothing run
    return Ready(service, concurrency, loaded={"experiment": experiment, "limit": limit, "pool": pool})


def _measure_experiment(args: argparse.Namespace, ready: Ready, command: str) -> Measurement:
    experiment, service = ready.loaded["experiment"], ready.service
    endpoint = args.endpoint if experiment.needs_model else None
    fields = (args.seed, args.reader, args.questions, args.unanswerable, args.window, args.page_order)
    options = registry.Options(*fields, endpoint, ready.concurrency)
    label = record_label(args, experiment, service, options)
    default_rows = service.config.cache_dir / "experiments" / f"{experiment.name}-{label}.rows.jsonl"
    rows = (Path(args.rows) if args.rows else default_rows) if experiment.needs_model else None
    limit, pool, bar = ready.loaded["limit"], ready.loaded["pool"], progress_bar(experiment.name)
    run = registry.run_entry(
        experiment, service, args.dataset, pool=pool, limit=limit, options=options, progress=bar, rows=rows
    )
    # the registry states the command (and the server); a record kept in its own folder says so, so that rerunning
    # it writes it there again
    run.about["command"] += options_line(out=args.out, rows=args.rows)
    return Measurement(run.results, label, run.about)


def cmd_experiment(args: argparse.Namespace) -> int:
    return evaluate(Evaluation(args.name, (), _prepare_experiment, _measure_experiment), args)


def record_label(args: argparse.Namespace, experiment, service, options: registry.Options) -> str:
    """The record's name after the experiment's: the dataset, and what sets this run apart from the default one."""
    label = args.dataset
    if "window" in experiment.options and (args.window, args.page_order) != (3, "best_first"):  # the first records
        label += f"-w{args.window}" + ("-best-last" if args.page_order == "best_last" else "")
    weights = service.config.speed.weights if experiment.needs_model and options.endpoint is None else None
    if weights not in (None, SpeedOptions.weights):  # decoded in fp32: beside the default record
        label += f"-{weights}"
    if options.endpoint:  # read by a server: beside the local model's record
        label += "-" + slug(options.endpoint)
    return label


def run_concurrency(args: argparse.Namespace, service) -> int:
    """--concurrency, checked; a local model serving one run at a time gets 1, and is said so."""
    if not 1 <= args.concurrency <= MAX_CALLS:
        raise ValueError(f"--concurrency must be from 1 to {MAX_CALLS}, got {args.concurrency}.")
    if args.endpoint is None and args.concurrency > service.concurrent_runs:
        say(f"Note: the local model reads {service.concurrent_runs} at a time; --concurrency is for --endpoint.")
        return service.concurrent_runs
    return args.concurrency


def _check_served(service, readers: str) -> None:
    """ValueError for a reader in the comparison that is a LoRA adapter: it reads with the local weights only."""
    for name in readers.split(","):
        reader = service.readers.get(name)
        if reader is not None and reader.adapter is not None:
            raise ValueError(
                f"The reader {name!r} is a LoRA adapter on the local model, so a server cannot read "
                "with it: compare the judge readers (judge, base+judge) through --endpoint."
            )


def _prepare_adapt(args: argparse.Namespace) -> Ready:
    from lab.evaluation.served import ServedBaselines  # lazy: imports torch
    from raqa.service import Service  # lazy: imports torch
    from raqa.when_to_retrieve.model import adapter_dirs, load_adapt_model  # lazy: imports torch

    if args.limit < 1:
        raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
    sets = {d: question_sets.load_questions(d, "test", args.limit, args.seed) for d in args.datasets}
    popqa = load_popqa(args.popqa, args.limit) if args.popqa else None
    folders = adapter_dirs(Path(args.adapters))
    service = Service.load(app_config(args), progress=say, load_model=False)
    server = registry.served_by(service, args.endpoint).backend if args.endpoint else None
    concurrency = run_concurrency(args, service)
    model = load_adapt_model(service.config.cache_dir, Path(args.adapters), say)
    if server is not None:  # never and always retrieve: the served model; Adapt-LLM: the local adapter
        model = ServedBaselines(model, server)
    reads = "never and always retrieve (the served model, no adapter); Adapt-LLM: the local adapter"
    return Ready(
        service, concurrency, server, reads, {"sets": sets, "popqa": popqa, "folders": folders, "model": model}
    )


def _measure_adapt(args: argparse.Namespace, ready: Ready, command: str) -> Measurement:
    service, model, popqa = ready.service, ready.loaded["model"], ready.loaded["popqa"]
    key = f"eval-adapt | {records.code_version()} | {model.name} | adapters {args.adapters} | {service.corpus_label} "
    key += f"({len(service.pages)} pages)"
    rows_path = Path(args.rows) if args.rows else service.config.cache_dir / "eval-adapt" / "rows.jsonl"
    search = partial(top_page, service)  # BM25's top page: the paper's context
    sample = {"limit": args.limit, "seed": args.seed, "adapters": args.adapters}
    rows = adapt_rows(rows_path, key)
    run = run_eval_adapt(
        ready.loaded["sets"],
        popqa,
        model,
        search=search,
        folders=ready.loaded["folders"],
        service=service,
        sample=sample,
        bar=counter_bar,
        rows=rows,
    )
    label = "+".join(args.datasets) + ("+popqa" if popqa else "") + (f"-{slug(args.endpoint)}" if args.endpoint else "")

    def summary(path: Path) -> None:
        for dataset, summary in run.results["datasets"].items():
            line = {p: round(v["accuracy"]["value"], 3) for p, v in summary["policies"].items()}
            say(f"{dataset} (n={summary['n']}): accuracy {line}, <RET> rate {summary['ret_rate']['value']:.1%}")

    return Measurement(run.results, label, run.about, then=summary)


WHEN_TO_RETRIEVE = Evaluation(
    "when_to_retrieve", ("datasets", "limit", "seed", "adapters", "popqa"), _prepare_adapt, _measure_adapt
)


def cmd_eval_adapt(args: argparse.Namespace) -> int:
    return evaluate(WHEN_TO_RETRIEVE, args)
