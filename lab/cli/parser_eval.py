"""The grammar of `python -m lab experiment NAME`: each experiment of the registry (evaluation/registry.py), with the
options they share, and the four evaluations with options of their own, named as their records name them:
`when_to_retrieve` (the Adapt-LLM paper's table), `pipeline` (both papers in one run), `badges` and `ret_signal`.

Each can read through a model server (`--endpoint NAME --concurrency N`) and keeps its work in a resumable JSONL
(`--rows`), so a long run stops and continues. parser.py places the verb among the others.
"""

from __future__ import annotations

import argparse

from lab.evaluation.registry import EXPERIMENTS
from raqa.cli.options import (
    DATASETS,
    add_corpus_options,
    add_model_options,
    add_server_options,
)
from raqa.cli.options import command as raqa_command
from raqa.config import RunSettings


def lab_command(target: str):
    """The command function "module:function" under lab.cli, imported when it is called."""
    return raqa_command(target, package="lab.cli")


def dataset_list(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in ("nq", "triviaqa")]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"invalid datasets {text!r}: choose from nq, triviaqa (comma-separated)")
    return names


def add_rows_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--rows", help=f"the resumable JSONL of rows (default: {default})")


def experiment_verb(sub) -> None:
    names = sub.add_parser("experiment", help="rerun one of the experiments or evaluations and write its record")
    names = names.add_subparsers(dest="name", required=True, metavar="NAME")
    shared = _registry_options()
    for name in EXPERIMENTS:
        names.add_parser(name, parents=[shared], help=f"the {name} experiment (evaluation/registry.py)")
    _eval_adapt(names)
    _eval_pipeline(names)
    _eval_badges(names)
    _compare_ret(names)


def _registry_options() -> argparse.ArgumentParser:
    """The options every experiment of the registry takes (each uses those its entry declares)."""
    experiment = argparse.ArgumentParser(add_help=False)
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
    experiment.set_defaults(func=lab_command("experiments:cmd_experiment"))
    return experiment


def _test_set_verb(sub, name: str, help: str, limit: int, rows: str, target: str):
    """A verb over seeded test questions of NQ-open and TriviaQA, resumable, through a server if asked."""
    verb = sub.add_parser(name, help=help)
    verb.add_argument("--datasets", type=dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    verb.add_argument("--limit", type=int, default=limit, help="test questions per dataset (seeded sample)")
    verb.add_argument("--seed", type=int, default=0)
    verb.add_argument("--out", help="folder for the result JSON (default assets/results)")
    add_server_options(verb, "test questions", 1)
    add_rows_option(verb, rows)
    # the adapters and the judge were trained on the embedded model, so no other model or adapter is offered here
    add_corpus_options(verb)
    verb.set_defaults(func=lab_command(target))
    return verb


def _eval_adapt(sub) -> None:
    evaluate = _test_set_verb(
        sub,
        "when_to_retrieve",
        "NR-LLM, AR-LLM, Adapt-LLM (and popularity) on test questions",
        limit=200,
        rows="RAQA_CACHE/eval-adapt/rows.jsonl",
        target="experiments:cmd_eval_adapt",
    )
    evaluate.add_argument("--adapters", default="assets/adapt", help="folder holding adapt/, never/ and always/")
    evaluate.add_argument("--popqa", help="a PopQA-format TSV (question, possible_answers, s_pop): adds the baseline")


def _eval_pipeline(sub) -> None:
    evaluate = _test_set_verb(
        sub,
        "pipeline",
        "every decision policy and reader, with abstention, on test",
        limit=300,
        rows="RAQA_CACHE/eval-pipeline/rows.jsonl",
        target="pipeline_eval:cmd_eval_pipeline",
    )
    evaluate.add_argument("--dev", type=int, default=60, help="dev questions per dataset to choose thresholds on")


def _eval_badges(sub) -> None:
    _test_set_verb(
        sub,
        "badges",
        "the badge per question on test, before and after the support model",
        limit=300,
        rows="beside the record, badges-<datasets>.rows.jsonl",
        target="badges:cmd_eval_badges",
    )


def _compare_ret(sub) -> None:
    ret = sub.add_parser("ret_signal", help="is a candidate Adapt-LLM adapter's P(<RET>) more informative?")
    ret.add_argument("--candidate", required=True, help="the candidate adapt adapter's folder")
    ret.add_argument("--baseline", default="assets/adapt/adapt", help="the adapter it is compared with")
    ret.add_argument("--record", default="assets/results/pipeline-nq+triviaqa.json", help="the pipeline record")
    ret.add_argument("--training", default="assets/adapt/training_data.jsonl", help="Algorithm 1's questions")
    ret.add_argument("--out", help="folder for the result JSON (default assets/results)")
    ret.add_argument("--update-record", action="store_true", help="rescore the pipeline record with the candidate")
    ret.add_argument("--cache", help="cache folder for the model (env RAQA_CACHE)")
    ret.set_defaults(func=lab_command("ret_signal:cmd_compare_ret"))
