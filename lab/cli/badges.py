"""`experiment badges`: the badge measured per question on NQ-open and TriviaQA test, before and after the support
model.

Runs each question with the page's defaults under both badge rules (evaluation/badges.py), one row per question in
a resumable JSONL, and writes `assets/results/badges-<datasets>.json` with `per_question` figures per dataset. With
`--endpoint NAME --concurrency N` the model's replies come from a model server, N questions at once; the answer judge
and the support model stay local.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from lab.cli.evaluator import Evaluation, Measurement, Ready, evaluate
from lab.cli.experiments import run_concurrency
from lab.cli.progress import counter_bar
from lab.evaluation.badges import RuleJudge, run_rows, score
from lab.evaluation.positives import PositiveIndex
from lab.evaluation.registry import served_by
from raqa.cli.options import app_config
from raqa.cli.output import say
from raqa.config import RunSettings
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions
from raqa.evaluation import records
from raqa.models.base import ModelError
from raqa.text import slug


def shuffled(items: list, seed: int) -> list:
    return random.Random(seed).sample(items, len(items))


def _prepare(args: argparse.Namespace) -> Ready:
    from raqa.service import Service  # lazy: imports torch

    if args.limit < 1:
        raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
    # a seeded shuffle, then the first --limit: a smaller limit is a prefix, so a run stopped early is scored by
    # rerunning with the limit it reached (every row is already there)
    tests = {d: shuffled(question_sets.load_questions(d, "test"), args.seed)[: args.limit] for d in args.datasets}
    service = Service.load(app_config(args), progress=say)
    service = served_by(service, args.endpoint) if args.endpoint else service  # the model's replies; judge local
    concurrency = run_concurrency(args, service)
    reading = service.reading(None, RunSettings())
    _, backend, _, judge = reading
    if judge is None or judge.support is None:
        raise ModelError("experiment badges needs the answer judge with its support model (assets/judge/support.json).")
    server = backend if args.endpoint else None
    reads = "the model's replies; the judge: local"
    return Ready(service, concurrency, server, reads, {"tests": tests, "reading": reading})


def _measure(args: argparse.Namespace, ready: Ready, command: str) -> Measurement:
    service, tests = ready.service, ready.loaded["tests"]
    reader, backend, base, judge = ready.loaded["reading"]
    out_dir = Path(args.out) if args.out else records.RESULTS_DIR
    # the rows are committed beside the record, so the figures recompute from them and a rerun resumes them
    label = "+".join(args.datasets) + (f"-{slug(args.endpoint)}" if args.endpoint else "")
    rows_path = Path(args.rows) if args.rows else out_dir / f"badges-{label}.rows.jsonl"
    # interleaved, so a run stopped early still covers every dataset evenly
    items = [(d, tests[d][i]) for i in range(args.limit) for d in args.datasets if i < len(tests[d])]
    with counter_bar("experiment badges", len(items)) as bar:
        rows = run_rows(
            items,
            service.index,
            backend,
            judge=judge,
            base=base,
            positives=PositiveIndex(service.pages),
            rows_path=rows_path,
            progress=lambda: bar.update(1),
        )
    about = {
        "sample": {"split": "test", "limit": args.limit, "seed": args.seed, "questions": len(rows)},
        "model": backend.name,
        "reader": reader.name,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": {
            "retrieval": f"BM25 top {base.k}, iterative windows of {base.window}, {base.order}",
            "before": {"gate": RuleJudge(judge, None, {}).gate(base.window), "judge_threshold": judge.threshold},
            "after": {
                "weak": judge.support.weak,
                "answered": judge.support.answered,
                "support_model": judge.support.card.get("command"),
            },
        },
        "rows": rows_path.name,
    }
    return Measurement(score(rows), label, about)


BADGES_EVALUATION = Evaluation("badges", ("datasets", "limit", "seed"), _prepare, _measure)


def cmd_eval_badges(args: argparse.Namespace) -> int:
    return evaluate(BADGES_EVALUATION, args)
