"""The demo's command line: `ask`, `route`, `record`, `pipeline`, `record-pipeline` (the shared option
helpers: options.py; the two verbs that join both papers: parser_pipeline.py). Training, measurement (a question
set's batch included) and operations are `python -m lab` (lab/cli).

Each verb names its command function as "module:function" under raqa.cli; the module is imported only when
that verb runs, so `python -m raqa --help` and `ask` load nothing they do not use.
"""

from __future__ import annotations

import argparse

from raqa.cli.options import (
    add_corpus_options,
    add_model_options,
    add_reader_option,
    add_retrieval_option,
    add_run_options,
    command,
    policy_list,
)
from raqa.cli.parser_pipeline import add_pipeline_verbs
from raqa.config import RunSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m raqa", description="Retrieval-augmented QA that admits ignorance.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_ask, _route, _record, add_pipeline_verbs):
        add(sub)
    return parser


def _ask(sub) -> None:
    ask = sub.add_parser("ask", help="answer one question, streaming each window")
    ask.add_argument("question")
    add_run_options(ask)
    ask.add_argument("--rationale", action="store_true", help="ask for a reason on declined windows")
    ask.add_argument("--json", action="store_true", help="one JSON object per event")
    ask.add_argument(
        "--why",
        action="store_true",
        help="after each answered window, which sentence the answer depends on (leave-one-sentence-out)",
    )
    add_reader_option(ask)
    add_model_options(ask)
    ask.set_defaults(func=command("ask:cmd_ask"))


def _route(sub) -> None:
    route = sub.add_parser("route", help="When to retrieve: each policy's decision and answer, as JSON lines")
    route.add_argument("question")
    route.add_argument("--policies", type=policy_list, default=["never", "always", "adapt"], help="comma-separated")
    route.add_argument("--adapters", default="assets/adapt", help="folder holding adapt/, never/ and always/")
    add_corpus_options(route)
    route.set_defaults(func=command("ask:cmd_route"))


def _record(sub) -> None:
    record = sub.add_parser("record", help="record real runs of the page's examples for instant replay")
    record.add_argument("questions", nargs="*", help="questions to record (default: the page's examples)")
    record.add_argument("--window", type=int, default=RunSettings.window, help="the page's default")
    record.add_argument("--k", type=int, default=RunSettings.k, help="the page's default")
    record.add_argument("--order", default="forward", choices=["forward", "backward"])
    record.add_argument("--grounded-only", action="store_true", help="an unsupported answer counts as a decline")
    add_retrieval_option(record)
    record.add_argument("--lessons", action="store_true", help="record the lesson's steps, each with its own settings")
    record.add_argument("--why", action="store_true", help="record each answered window's attribution with the run")
    record.add_argument("--out", default="assets/recordings", help="folder of the recordings (JSONL)")
    add_reader_option(record)
    add_model_options(record)
    record.set_defaults(func=command("ask:cmd_record"))
