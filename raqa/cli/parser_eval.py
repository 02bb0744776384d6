"""The grammar of the evaluation verbs: `experiment`, `eval-adapt`, `eval-pipeline`, `eval-badges`.

Each can read through a model server (`--endpoint NAME --concurrency N`) and keeps its work in a resumable JSONL
(`--rows`), so a long run stops and continues. parser.py and parser_pipeline.py place them among the other verbs.
"""

from __future__ import annotations

from raqa.cli.options import (
    DATASETS,
    add_corpus_options,
    add_model_options,
    add_rows_option,
    add_server_options,
    command,
    dataset_list,
)
from raqa.config import RunSettings
from raqa.evaluation.registry import EXPERIMENTS


def experiment_verb(sub) -> None:
    experiment = sub.add_parser("experiment", help="rerun one of the paper's experiments and write its JSON")
    experiment.add_argument("name", choices=list(EXPERIMENTS))
    experiment.add_argument("--dataset", default="nq", choices=DATASETS)
    experiment.add_argument(
        "--limit", type=int, help="questions (recall, Top-K, windows) or windows/questions per kind"
    )
    experiment.add_argument("--seed", type=int, default=0)
    experiment.add_argument("--out", help="folder for the JSON (default assets/results)")
    experiment.add_argument(
        "--reader",
        default="abstain",
        help="reader_comparison: the readers compared with the base model, comma-separated (a trained reader's "
        "folder name, base+judge, judge)",
    )
    experiment.add_argument("--questions", type=int, default=25, help="reader_comparison: questions per reading order")
    experiment.add_argument(
        "--unanswerable", type=int, default=30, help="reader_comparison: NQ test questions with no answer in the corpus"
    )
    experiment.add_argument(
        "--window",
        type=int,
        default=RunSettings.window,
        choices=range(1, 11),
        metavar="1-10",
        help="pages per window (the experiments that do not vary it themselves)",
    )
    experiment.add_argument(
        "--page-order",
        default=RunSettings.page_order,
        choices=["best_first", "best_last"],
        help="pages inside a window, best first or best nearest the question",
    )
    add_server_options(experiment, "runs or windows", 1)
    add_rows_option(experiment, "RAQA_CACHE/experiments/NAME-LABEL.rows.jsonl, one row per model call")
    add_model_options(experiment)
    experiment.set_defaults(func=command("experiments:cmd_experiment"))


def eval_adapt_verb(sub) -> None:
    evaluate = sub.add_parser("eval-adapt", help="NR-LLM, AR-LLM, Adapt-LLM (and popularity) on test questions")
    evaluate.add_argument("--datasets", type=dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    evaluate.add_argument("--limit", type=int, default=200, help="test questions per dataset (seeded sample)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--adapters", default="assets/adapt", help="folder holding adapt/, never/ and always/")
    evaluate.add_argument("--popqa", help="a PopQA-format TSV (question, possible_answers, s_pop): adds the baseline")
    evaluate.add_argument("--out", help="folder for the result JSON (default assets/results)")
    add_server_options(evaluate, "test questions", 1)
    add_rows_option(evaluate, "RAQA_CACHE/eval-adapt/rows.jsonl")
    # the adapters were trained on the embedded model, so no other model or adapter is offered here
    add_corpus_options(evaluate)
    evaluate.set_defaults(func=command("experiments:cmd_eval_adapt"))


def eval_pipeline_verb(sub) -> None:
    evaluate = sub.add_parser("eval-pipeline", help="every decision policy and reader, with abstention, on test")
    evaluate.add_argument("--datasets", type=dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    evaluate.add_argument("--limit", type=int, default=300, help="test questions per dataset (seeded sample)")
    evaluate.add_argument("--dev", type=int, default=60, help="dev questions per dataset to choose thresholds on")
    evaluate.add_argument("--seed", type=int, default=0)
    add_rows_option(evaluate, "RAQA_CACHE/eval-pipeline/rows.jsonl")
    evaluate.add_argument("--out", help="folder for the result JSON (default assets/results)")
    add_server_options(evaluate, "test questions", 1)
    add_corpus_options(evaluate)
    evaluate.set_defaults(func=command("pipeline:cmd_eval_pipeline"))


def eval_badges_verb(sub) -> None:
    badges = sub.add_parser("eval-badges", help="the badge per question on test, before and after the support model")
    badges.add_argument("--datasets", type=dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    badges.add_argument("--limit", type=int, default=300, help="test questions per dataset (seeded sample)")
    badges.add_argument("--seed", type=int, default=0)
    add_rows_option(badges, "beside the record, badges-<datasets>.rows.jsonl")
    badges.add_argument("--out", help="folder for the result JSON (default assets/results)")
    add_server_options(badges, "test questions", 1)
    add_corpus_options(badges)
    badges.set_defaults(func=command("badges:cmd_eval_badges"))
