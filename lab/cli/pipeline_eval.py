"""`python -m lab experiment pipeline`: the When-to-retrieve pipeline measured on NQ-open and TriviaQA test.

It makes one row per question (lab/evaluation/when_to_retrieve.py, resumable from its JSONL file), scores every policy
and reader with thresholds chosen on dev questions (lab/evaluation/when_to_retrieve_scores.py) and writes the result
JSON. The windows read BM25's pages (`retrieval="bm25"`), as the committed record was made.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from lab.cli.evaluator import Evaluation, Measurement, Ready, evaluate
from lab.cli.experiments import run_concurrency
from lab.cli.progress import counter_bar
from lab.evaluation.positives import PositiveIndex
from lab.evaluation.registry import served_by
from lab.evaluation.when_to_retrieve import READERS, dev_row, example_decisions, interleave, make_rows, policy_row
from lab.evaluation.when_to_retrieve_scores import summarise_scores
from raqa.cli.options import app_config
from raqa.cli.output import say
from raqa.config import RunForm
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions
from raqa.models.base import ModelError
from raqa.service import Service
from raqa.when_to_retrieve.planning import retrieving_plan
from raqa.when_to_retrieve.uncertainty import closed_book

EVAL_K, EVAL_WINDOW, EVAL_ORDER = 15, 1, "forward"  # the page's defaults
EVAL_RETRIEVAL = "bm25"  # the committed record's pages (hybrid retrieval came later)


def _prepare(args: argparse.Namespace) -> Ready:
    if args.limit < 1 or args.dev < 1:
        raise ValueError(f"--limit and --dev must be 1 or more, got {args.limit} and {args.dev}.")
    tests = {d: question_sets.load_questions(d, "test", args.limit, args.seed) for d in args.datasets}
    # dev questions other than the ones Algorithm 1 labelled for training (train adapt: dev, seed 0)
    trained = {d: {i.id for i in question_sets.load_questions(d, "dev", 300, 0)} for d in args.datasets}
    devs = {
        d: [i for i in question_sets.load_questions(d, "dev", args.dev + 300, args.seed + 1) if i.id not in trained[d]][
            : args.dev
        ]
        for d in args.datasets
    }
    service = Service.load(app_config(args), progress=say)
    model = service.adapt_model()
    if model is None:
        raise ModelError("experiment pipeline needs the Adapt-LLM adapters (assets/adapt) on the embedded model.")
    service = served_by(service, args.endpoint) if args.endpoint else service  # the readers; memory stays local
    server = service.backend if args.endpoint else None
    reads = "the readers' windows; closed-book: local"
    return Ready(service, run_concurrency(args, service), server, reads, {"tests": tests, "devs": devs, "model": model})


def _measure(args: argparse.Namespace, ready: Ready, command: str) -> Measurement:
    service, model = ready.service, ready.loaded["model"]
    rows_path = Path(args.rows) if args.rows else service.config.cache_dir / "eval-pipeline" / "rows.jsonl"
    key = f"k{EVAL_K}-w{EVAL_WINDOW}-{EVAL_ORDER}-readers:{','.join(READERS)}-{model.name}"
    key += f"-server:{args.endpoint}" if args.endpoint else ""  # a server's rows are its own, never the local ones
    memory = threading.Lock()  # the local When-to-retrieve model switches adapters per call: one question at a time

    def answer(question: str):
        with memory:
            return closed_book(model, question)

    def reader(name: str):  # the base reader's answers as it gives them; the judge's gate grounds its own
        form = RunForm(order=EVAL_ORDER, window=EVAL_WINDOW, k=EVAL_K, reader=name, retrieval=EVAL_RETRIEVAL)
        return lambda q: service.events(retrieving_plan(service, q, form, grounded=False))

    readers = {name: reader(name) for name in READERS}
    positives = PositiveIndex(service.pages)
    dev_work, test_work = interleave(ready.loaded["devs"], "dev"), interleave(ready.loaded["tests"], "test")
    with counter_bar("experiment pipeline dev (closed-book)", len(dev_work)) as bar:
        dev_rows = make_rows(
            dev_work, rows_path, key, lambda d, s, item: dev_row(item, d, answer), lambda: bar.update(1)
        )
    with counter_bar("experiment pipeline test", len(test_work)) as bar:
        test_rows = make_rows(
            test_work,
            rows_path,
            key,
            lambda d, s, item: policy_row(item, d, answer, readers, positives.anywhere),
            lambda: bar.update(1),
        )
    results = summarise_scores(dev_rows, test_rows)
    results["examples"] = example_decisions(model, results)
    about = {
        "sample": {"split": "test", "limit": args.limit, "dev": args.dev, "seed": args.seed},
        "model": model.name,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": {
            "retrieval": f"BM25 top {EVAL_K}, iterative windows of {EVAL_WINDOW}, {EVAL_ORDER}",
            "readers": list(READERS),
            "closed_book": "greedy, first sentence, at most 32 tokens",
            "rows": "computed once per question (resumable JSONL), every policy scored from them",
        },
    }
    return Measurement(results, "+".join(args.datasets), about)


PIPELINE = Evaluation("pipeline", ("datasets", "limit", "dev", "seed"), _prepare, _measure)


def cmd_eval_pipeline(args: argparse.Namespace) -> int:
    return evaluate(PIPELINE, args)
