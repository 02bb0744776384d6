"""`python -m lab batch`: iterative prompting over a question set, resumable, one JSONL line per question as it
finishes (evaluation/batch.py), with EM and F1 at the end. Each question's run is planned as the page and `python -m
raqa ask` plan it (Service.plan), so the same choices give the same events. Exit status: 0, 2 on bad input, 1 when a
question's work failed (rerun to retry it).
"""

from __future__ import annotations

import argparse

from lab.evaluation.batch import question_work, run_batch, summarise_batch
from raqa.cli.ask import LOAD_ERRORS, check_endpoint, run_form, service_with_reader
from raqa.cli.options import app_config
from raqa.cli.output import error, progress_line, say
from raqa.config import validate_settings
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions
from raqa.evaluation.questions import QuestionsError
from raqa.models.endpoints_file import READER_PREFIX
from raqa.models.local import TransformersBackend


def batch_reader(args: argparse.Namespace) -> str | None:
    """--reader, or --endpoint NAME as endpoint:NAME; ValueError when both name different readers."""
    if args.endpoint is None:
        return args.reader
    reader = READER_PREFIX + args.endpoint
    if args.reader is not None and args.reader != reader:
        raise ValueError(f"--endpoint {args.endpoint} means --reader {reader}; give one of them, not both.")
    return reader


def cmd_batch(args: argparse.Namespace) -> int:
    """Iterative prompting over a question set, resumable: one JSONL line per question as it finishes."""
    if not 1 <= args.concurrency <= 256:
        return error("--concurrency must be from 1 to 256.")
    try:
        items, service, form, concurrency = _prepared(args)
    except (QuestionsError, *LOAD_ERRORS) as e:
        return error(e)
    work = question_work(lambda question: service.plan(question, form), service.events)  # as ask and the page plan
    result = run_batch(items, work, args.out, concurrency, progress_line("questions done"))  # RowsFileError: main
    _report(args.out, items, result)
    return 1 if result.errors else 0


def _prepared(args: argparse.Namespace) -> tuple[list, object, object, int]:
    """The questions, the service, the run's choices and how many questions read at once; the errors of bad input."""
    form = run_form(args, reader=batch_reader(args))
    validate_settings(form)
    items = question_sets.load_questions(args.dataset, args.split, args.limit, args.seed)
    config = app_config(args)
    check_endpoint(form.reader, config)
    service = service_with_reader(config, form.reader)
    _, backend = service.reader(form.reader)  # an unknown reader stops here, listing the readers
    concurrency = args.concurrency
    if isinstance(backend, TransformersBackend) and concurrency > 1:
        # the local model computes on this machine's cores: parallel runs only compete for them
        say("Note: the local model reads one question at a time; --concurrency applies to --endpoint.")
        concurrency = 1
    return items, service, form, concurrency


def _report(out: str, items: list, result) -> None:
    for item_id, message in result.errors.items():
        say(f"failed (rerun to retry): {item_id}: {message}")
    totals = summarise_batch(out, [item.id for item in items])
    print(
        f"{totals['questions']}/{result.total} questions in {out} ({result.skipped} from before, "
        f"{result.written} now, {len(result.errors)} failed): answered {totals['answered']}, "
        f"abstained {totals['abstained']}, run failed {totals['run_failed']}; "
        f"EM {totals['em']:.3f}, F1 {totals['f1']:.3f}"
    )
