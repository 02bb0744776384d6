"""The lab's command line, five verbs: `python -m lab train NAME`, `experiment NAME`, `bench NAME`, `batch` (a question
set through the page's runs, resumable) and `deploy-space`.
The demo's verbs are `python -m raqa` (raqa/cli); the options both share are raqa/cli/options.py.

    train       reader, adapt, judge, judge-gate, support
    experiment  the registry's experiments (evaluation/registry.py), and when_to_retrieve, pipeline, badges, ret_signal
    bench       speed, load, soak, scale, start

Each NAME names its command function as "module:function" under lab.cli, imported only when that NAME runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from lab.cli.parser_eval import dataset_list, experiment_verb, lab_command
from raqa.cli.options import DATASETS, add_model_options, add_reader_option, add_run_options, add_server_options
from raqa.config import RunSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab", description="Train, measure and deploy raqa.")
    sub = parser.add_subparsers(dest="command", required=True)
    train = _group(sub, "train", "train an adapter or the answer judge, or fit the judge's gate and support")
    for add in (_train_reader, _train_adapt, _train_judge):
        add(train)
    experiment_verb(sub)
    bench = _group(sub, "bench", "speed, load, memory, scale and start time on this machine")
    for add in (_bench, _load_test, _soak, _scale_bench, _time_start):
        add(bench)
    _batch(sub)
    _deploy_space(sub)
    return parser


def _batch(sub) -> None:
    batch = sub.add_parser("batch", help="iterative prompting over a question set, resumable, N questions at once")
    batch.add_argument("--dataset", default="nq", choices=DATASETS)
    batch.add_argument("--split", default="test", choices=["test", "dev"])
    batch.add_argument("--limit", type=int, help="questions (default: all)")
    batch.add_argument("--seed", type=int, help="a seeded sample of --limit questions (default: the first ones)")
    batch.add_argument("--out", required=True, help="JSONL results; an existing file is resumed")
    add_run_options(batch)
    add_server_options(batch, "questions", 8)
    add_reader_option(batch)
    add_model_options(batch)
    batch.set_defaults(func=lab_command("batch:cmd_batch"))


def _group(sub, verb: str, help: str):
    """A verb whose first argument names what it runs: `python -m lab VERB NAME [options]`."""
    return sub.add_parser(verb, help=help).add_subparsers(dest="name", required=True, metavar="NAME")


def _lora_options(parser: argparse.ArgumentParser, epochs: int) -> None:
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=int, default=16)


def _train_reader(sub) -> None:
    train = sub.add_parser("reader", help="build dev-split windows, train the abstention-tuned LoRA reader")
    train.add_argument("--limit", type=int, default=560, help="training windows, half positive, half negative")
    _lora_options(train, epochs=1)
    train.add_argument("--accumulation", type=int, default=4, help="windows per optimiser step")
    train.add_argument("--verdict-weight", type=float, default=0.5, help="share of the loss on the first reply token")
    train.add_argument("--page-tokens", type=int, default=200, help="pages cut to this many tokens in training")
    train.add_argument("--calibration", type=int, default=20, help="held-out dev windows per kind and dataset")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", default="assets/readers/abstain", help="folder for the adapter and its card")
    train.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    train.set_defaults(func=lab_command("train:cmd_train_reader"))


def _train_judge(sub) -> None:
    judge = sub.add_parser("judge", help="train the answer judge (MiniLM QA head) on dev pages; measure on test")
    judge.add_argument("--method", default="full", choices=["full", "lora"], help="every weight, or LoRA + QA head")
    judge.add_argument("--epochs", type=int, default=2)
    judge.add_argument("--lr", type=float, default=5e-5)
    judge.add_argument("--batch", type=int, default=16)
    judge.add_argument("--max-tokens", type=int, default=256, help="question + page, in encoder tokens")
    judge.add_argument("--per-question", type=int, default=2, help="positive pages per question (as many negatives)")
    judge.add_argument("--depth", type=int, default=15, help="BM25 pages searched for positives (negatives: top 15)")
    judge.add_argument(
        "--min-shared",
        type=int,
        default=1,
        help="a positive's sentence shares this many content words with the question besides the answer's",
    )
    judge.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="steps between checkpoints; the same command run again resumes a stopped run",
    )
    judge.add_argument("--rank", type=int, default=16, help="LoRA rank (--method lora)")
    judge.add_argument("--alpha", type=int, default=32, help="LoRA alpha (--method lora)")
    judge.add_argument("--limit", type=int, help="training pairs per dataset (default: all dev questions)")
    judge.add_argument("--holdout", type=int, default=1000, help="dev questions per dataset held out (threshold)")
    judge.add_argument("--test-pairs", type=int, default=300, help="test pages per kind and dataset measured")
    judge.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="torch CPU threads")
    judge.add_argument("--seed", type=int, default=0)
    judge.add_argument("--out", default="assets/judge", help="folder for the judge and its card")
    judge.add_argument("--cache", help="cache folder for the index (env RAQA_CACHE)")
    judge.add_argument(
        "--measure-only",
        action="store_true",
        help="no training: refit p_answer and the threshold of the judge in --out and measure it again",
    )
    judge.set_defaults(func=lab_command("judge:cmd_train_judge"))
    gate = sub.add_parser("judge-gate", help="choose the model + judge reader's gate on held-out dev windows")
    gate.add_argument("--max-false", type=float, default=0.2, help="share of answer-free dev windows let through")
    gate.add_argument("--out", default="assets/judge", help="the judge folder whose card gets the gate")
    gate.add_argument("--cache", help="cache folder for the index (env RAQA_CACHE)")
    gate.set_defaults(func=lab_command("judge:cmd_calibrate_judge"))
    support = sub.add_parser("support", help="fit the support probability and the badge's thresholds on dev")
    support.add_argument("--precision", type=float, default=0.9, help="what a green (Answered) badge must reach on dev")
    support.add_argument(
        "--max-unanswerable",
        type=float,
        default=0.2,
        help="share of unanswerable dev questions that may still end with an answer",
    )
    support.add_argument("--folds", type=int, default=5, help="folds of dev questions for the out-of-fold choice")
    support.add_argument("--out", default="assets/judge", help="the judge folder that gets support.json")
    support.add_argument("--cache", help="cache folder for the index (env RAQA_CACHE)")
    support.set_defaults(func=lab_command("judge:cmd_fit_support"))


def _train_adapt(sub) -> None:
    adapt = sub.add_parser("adapt", help="label dev questions zero-shot; train Adapt-LLM, NR-LLM, AR-LLM")
    adapt.add_argument("--limit", type=int, default=300, help="dev questions per dataset")
    adapt.add_argument("--datasets", type=dataset_list, default=["nq", "triviaqa"], help="comma-separated")
    _lora_options(adapt, epochs=3)
    adapt.add_argument("--batch", type=int, default=128, help="examples per optimiser step (the paper's 128)")
    adapt.add_argument("--micro-batch", type=int, default=8, help="examples per forward pass")
    adapt.add_argument("--seed", type=int, default=0)
    adapt.add_argument("--out", default="assets/adapt", help="folder for the three adapters and the data")
    adapt.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    adapt.add_argument("--balance", action="store_true", help="repeat known questions so <RET> does not drown them")
    adapt.add_argument("--labels", help="a training_data.jsonl to train from instead of labelling again")
    adapt.add_argument("--kinds", default="adapt,never,always", help="which adapters to train (comma-separated)")
    adapt.set_defaults(func=lab_command("train:cmd_train_adapt"))


def _bench(sub) -> None:
    bench = sub.add_parser("speed", help="measure retrieval, model and first-verdict speed on this machine")
    bench.add_argument("--queries", type=int, default=500, help="real questions for the retrieval latency")
    bench.add_argument("--token-questions", type=int, default=50, help="questions for iterative vs Top-K tokens")
    bench.add_argument(
        "--speed-questions", type=int, default=8, help="questions whose windows are read with the speed-ups off and on"
    )
    bench.add_argument(
        "--no-llama-cpp", action="store_true", help="leave out the llama.cpp rows (its server and in-process)"
    )
    bench.add_argument("--out", help="write the results as JSON here too")
    add_model_options(bench)
    bench.set_defaults(func=lab_command("ops:cmd_bench"))


def _load_test(sub) -> None:
    load = sub.add_parser("load", help="many sessions at once through the served page's API (real model)")
    load.add_argument("--sessions", type=int, default=20)
    load.add_argument("--window", type=int, default=RunSettings.window, help="the page's default")
    load.add_argument("--k", type=int, default=RunSettings.k, help="the page's default")
    load.add_argument("--seed", type=int, default=0)
    load.add_argument("--out", default="assets/results/load-test.json")
    load.add_argument(
        "--readers",
        action="store_true",
        help="instead of the speed-ups off and on: the 1.5B and the small model side by side, with --visitors",
    )
    load.add_argument("--visitors", default="1,10,20,30", help="with --readers: the group sizes, comma-separated")
    load.add_argument("--solo", type=int, default=3, help="with --readers: a group of 1 is asked this many times")
    add_model_options(load)
    load.set_defaults(func=lab_command("ops:cmd_load_test"))


def _soak(sub) -> None:
    soak = sub.add_parser("soak", help="memory over many consecutive runs through the page's generator")
    soak.add_argument("--runs", type=int, default=200)
    soak.add_argument("--questions", type=int, default=50, help="distinct NQ test questions, cycled")
    soak.add_argument("--window", type=int, default=5)
    soak.add_argument("--k", type=int, default=5)
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--out", default="assets/results/soak.json")
    add_model_options(soak)
    soak.set_defaults(func=lab_command("ops:cmd_soak"))


def _scale_bench(sub) -> None:
    scale = sub.add_parser("scale", help="index a generated corpus of many pages; time, memory, latency")
    scale.add_argument("--pages", type=int, default=200_000)
    scale.add_argument("--queries", type=int, default=500, help="NQ-open test questions timed")
    scale.add_argument("--seed", type=int, default=0)
    scale.add_argument("--work", help="folder for the generated corpus and its index (default: a temp folder)")
    scale.add_argument("--out", help="write the measurements as JSON here")
    scale.set_defaults(func=lab_command("ops:cmd_scale_bench"))


def _deploy_space(sub) -> None:
    deploy = sub.add_parser("deploy-space", help="upload this checkout's files to a Hugging Face Space (HF_TOKEN)")
    deploy.add_argument("space", help="the Space's id, OWNER/NAME; created (Gradio SDK) if it does not exist")
    deploy.add_argument("--dry-run", action="store_true", help="list each file, its size and storage; upload nothing")
    deploy.add_argument("--private", action="store_true", help="create the Space private (an existing one is kept)")
    deploy.set_defaults(func=lab_command("ops:cmd_deploy_space"))


def _time_start(sub) -> None:
    start = sub.add_parser("start", help="seconds from `python app.py` to a usable page, started as on a Space")
    start.add_argument("--python", default=sys.executable, help="the interpreter (a fresh virtual environment's)")
    start.add_argument("--cache", help="RAQA_CACHE for the app (an empty folder: a fresh start)")
    start.add_argument("--not-space", action="store_true", help="leave SPACE_ID unset (no install, no limits)")
    start.add_argument("--log", help="keep the app's output in this file")
    start.add_argument("--out", help="start fresh (a new, empty cache) then warm, and write both to this record")
    start.set_defaults(func=lab_command("ops:cmd_time_start"))
