"""`experiment badges`: the badge measured per question on NQ-open and TriviaQA test, before and after the support model.

Runs each question with the page's defaults under both badge rules (evaluation/badges.py), one row per question in
a resumable JSONL, and writes `assets/results/badges-<datasets>.json` with `per_question` figures per dataset. With
`--endpoint NAME --concurrency N` the model's replies come from a model server, N questions at once; the answer judge
and the support model stay local.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from lab.cli.experiments import run_concurrency
from lab.cli.progress import counter_bar
from lab.evaluation.badges import RuleJudge, run_rows, score
from lab.evaluation.positives import PositiveIndex
from lab.evaluation.registry import served_by, server_about
from lab.records import command_line, write_record
from raqa.cli.options import app_config
from raqa.cli.output import error, say
from raqa.config import RunSettings
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions
from raqa.evaluation import records
from raqa.evaluation.fan_out import calls_at_once
from raqa.evaluation.questions import QuestionsError
from raqa.models.base import ModelError
from raqa.retrieval.corpus import CorpusError
from raqa.text import slug


def shuffled(items: list, seed: int) -> list:
    return random.Random(seed).sample(items, len(items))


def cmd_eval_badges(args: argparse.Namespace) -> int:
    from raqa.service import Service  # lazy: imports torch

    try:
        if args.limit < 1:
            raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
        # a seeded shuffle, then the first --limit: a smaller limit is a prefix, so a run stopped early is scored by
        # rerunning with the limit it reached (every row is already there)
        tests = {d: shuffled(question_sets.load_questions(d, "test"), args.seed)[: args.limit] for d in args.datasets}
        service = Service.load(app_config(args), progress=say)
        service = served_by(service, args.endpoint) if args.endpoint else service  # the model's replies; judge local
        concurrency = run_concurrency(args, service)
        reader, backend, base, judge = service.reading(None, RunSettings())
        if judge is None or judge.support is None:
            raise ModelError(
                "experiment badges needs the answer judge with its support model (assets/judge/support.json)."
            )
    except (ValueError, QuestionsError, CorpusError, ModelError) as e:
        return error(e)
    start = time.perf_counter()
    out_dir = Path(args.out) if args.out else records.RESULTS_DIR
    # the rows are committed beside the record, so the figures recompute from them and a rerun resumes them
    label = "+".join(args.datasets) + (f"-{slug(args.endpoint)}" if args.endpoint else "")
    rows_path = Path(args.rows) if args.rows else out_dir / f"badges-{label}.rows.jsonl"
    # interleaved, so a run stopped early still covers every dataset evenly
    items = [(d, tests[d][i]) for i in range(args.limit) for d in args.datasets if i < len(tests[d])]
    with counter_bar("experiment badges", len(items)) as bar, calls_at_once(concurrency):
        rows = run_rows(
            items, service.index, backend, judge, base, PositiveIndex(service.pages), rows_path, lambda: bar.update(1)
        )
    command = command_line(
        "experiment badges",
        datasets=args.datasets,
        limit=args.limit,
        seed=args.seed,
        endpoint=args.endpoint,
        concurrency=concurrency if args.endpoint else None,
    )
    about = {
        "command": command,
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
        "seconds": round(time.perf_counter() - start, 1),
    }
    if args.endpoint:
        about["server"] = server_about(backend, args.endpoint, concurrency, "the model's replies; the judge: local")
    path = write_record("badges", label, score(rows), about, out_dir)
    say(f"wrote {path}")
    return 0
