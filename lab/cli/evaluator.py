"""One evaluator: what every `python -m lab experiment NAME` does around its own measuring.

An evaluation declares two steps. `prepare(args)` checks the options and loads what the run needs; bad input raises
one of INPUT_ERRORS before anything is measured, and the command exits 2 with the message. `measure(args, ready,
command)` measures and returns a Measurement: the record's results, its label, and what its `about` says of the
sample, model and settings. `evaluate` does the rest, the same way for every evaluation: the fan-out
(`ready.concurrency` model calls at once), the timer, the rerun command (the options the evaluation declares, then
the server's when one reads), the server's provenance, the record's write and the line that says where.

Left out here: the options' grammar (cli/parser_eval.py) and each measurement (the evaluation's own module).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.evaluation.registry import server_about
from lab.records import command_line, write_record
from raqa.cli.output import error, say
from raqa.evaluation import records
from raqa.evaluation.fan_out import calls_at_once
from raqa.evaluation.questions import QuestionsError
from raqa.models.base import ModelError
from raqa.retrieval.corpus import CorpusError
from raqa.when_to_retrieve.popularity import PopularityError

INPUT_ERRORS = (ValueError, QuestionsError, CorpusError, ModelError, PopularityError)


@dataclass
class Ready:
    """What prepare loaded: the service, how many model calls at once, the server that reads (if any) and the
    evaluation's own things by name."""

    service: object = None  # raqa.service.Service, for the evaluations that load one
    concurrency: int = 1
    server: object = None  # the backend of the model server that reads, when --endpoint names one
    reads: str | None = None  # what the server reads, when not everything
    loaded: dict = field(default_factory=dict)


@dataclass
class Measurement:
    results: dict
    label: str  # the record's name after the evaluation's: its datasets, and what sets the run apart
    about: dict  # sample, model, corpus, settings; a "command" here replaces the declared one
    then: Callable[[Path], None] | None = None  # after the write: a summary printed, another record rescored


@dataclass(frozen=True)
class Evaluation:
    name: str  # the record's experiment name, and NAME in `python -m lab experiment NAME`
    options: tuple[str, ...]  # the options its rerun command states, in order
    prepare: Callable[[argparse.Namespace], Ready]
    measure: Callable[[argparse.Namespace, Ready, str], Measurement]


def rerun_command(evaluation: Evaluation, args: argparse.Namespace, ready: Ready) -> str:
    """The command that remakes the record: the declared options, then the server's when one reads.

    Example:
        >>> e = Evaluation("badges", ("datasets", "limit"), None, None)
        >>> rerun_command(e, argparse.Namespace(datasets=["nq"], limit=3, endpoint="Srv"), Ready(server=object()))
        'python -m lab experiment badges --datasets nq --limit 3 --endpoint Srv --concurrency 1'
    """
    named = {name: getattr(args, name) for name in evaluation.options}
    if ready.server is not None:
        named.update(endpoint=args.endpoint, concurrency=ready.concurrency)
    return command_line(f"experiment {evaluation.name}", **named)


def evaluate(evaluation: Evaluation, args: argparse.Namespace) -> int:
    """Prepare, measure and write the record; 2 on bad input (said on stderr), 0 once the record is written."""
    try:
        ready = evaluation.prepare(args)
    except INPUT_ERRORS as e:
        return error(e)
    start = time.perf_counter()
    command = rerun_command(evaluation, args, ready)
    with calls_at_once(ready.concurrency):
        measured = evaluation.measure(args, ready, command)
    about = {"command": command, **measured.about, "seconds": round(time.perf_counter() - start, 1)}
    if ready.server is not None:
        about["server"] = server_about(ready.server, args.endpoint, ready.concurrency, ready.reads)
    out_dir = Path(args.out) if args.out else records.RESULTS_DIR
    path = write_record(evaluation.name, measured.label, measured.results, about, out_dir)
    say(f"wrote {path}")
    if measured.then is not None:
        measured.then(path)
    return 0
