"""`pipeline`, `record-pipeline` and `experiment pipeline`: the When-to-retrieve stream (when_to_retrieve/pipeline.py)
for one question, recorded for the page's replays, or measured on NQ-open and TriviaQA test.

`pipeline` prints the events the page's When-to-retrieve tab shows (human or --json). `experiment pipeline` makes one
row per question (evaluation/when_to_retrieve.py, resumable from its JSONL file), scores every policy and reader
with thresholds chosen on dev questions (evaluation/when_to_retrieve_scores.py) and writes the result JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raqa.cli.options import app_config
from raqa.cli.output import error, print_human, print_json, say
from raqa.config import RunForm, SettingsError, clean_question
from raqa.evaluation import records
from raqa.models.base import ModelError
from raqa.retrieval.corpus import CorpusError
from raqa.service import Service
from raqa.web.examples import load_examples
from raqa.web.pipeline_recordings import PolicyChoice, record_pipeline, write_pipeline_recording
from raqa.when_to_retrieve.pipeline import IDK, ClosedBookAnswered, PipelineEnded, RetrievalDecided, check_policy
from raqa.when_to_retrieve.planning import pipeline
from raqa.when_to_retrieve.tuned import MEMORY_QUESTIONS, tuned_thresholds


def print_pipeline_human(event) -> None:
    if isinstance(event, ClosedBookAnswered):
        signals = ", ".join(f"{name} {value:.3f}" for name, value in event.signals)
        print(f"Closed-book answer: {event.answer}\n  confidence: {signals}", file=sys.stderr)
    elif isinstance(event, RetrievalDecided):
        print(f"Decision ({event.policy}): {event.reason}", file=sys.stderr)
    elif isinstance(event, PipelineEnded):
        print(event.answer if event.answer is not None else IDK)
        print(f"from {event.source}: {event.reason}, {event.seconds:.1f} s", file=sys.stderr)
    else:
        print_human(event)


def cmd_pipeline(args: argparse.Namespace) -> int:
    try:
        clean_question(args.question)
        check_policy(args.policy, args.threshold)
        service = Service.load(app_config(args), progress=say)
        form = RunForm(order=args.order, window=args.window, k=args.k, reader=args.reader)
        events = pipeline(service, args.question, args.policy, args.threshold, form)
    except (CorpusError, ModelError, SettingsError, ValueError) as e:
        return error(e)
    show = print_json if args.json else print_pipeline_human
    for event in events:
        show(event)
    return 0


def recording_threshold(args: argparse.Namespace) -> float | None:
    """The policy's threshold for a recording: none for never/always, else the one given, else the one the committed
    pipeline experiment chose on dev questions."""
    if args.policy in ("never", "always"):
        return None
    if args.threshold is not None:
        return args.threshold
    pipeline_records = [r for r in records.load_results().values() if r.get("experiment") == "pipeline"]
    return tuned_thresholds(pipeline_records[0] if pipeline_records else None).get(args.policy)


def record_pipeline_command(question: str, args: argparse.Namespace, threshold: float | None) -> str:
    """The `python -m raqa record-pipeline` command that makes this recording again (the recording keeps it)."""
    return (
        f'python -m raqa record-pipeline "{question}" --policy {args.policy}'
        + ("" if args.policy in ("never", "always") else f" --threshold {threshold}")
        + (f" --reader {args.reader}" if args.reader else "")
        + f" --out {args.out}"
    )


def service_with_adapters(args: argparse.Namespace) -> Service:
    service = Service.load(app_config(args), progress=say)
    if not service.has_adapt_model():
        raise ModelError("record-pipeline needs the Adapt-LLM adapters (assets/adapt) on the embedded model.")
    return service


def cmd_record_pipeline(args: argparse.Namespace) -> int:
    """Run each question through the pipeline with the tab's choices on the real models; write each recording."""
    try:
        check_policy(args.policy, threshold := recording_threshold(args))
        service = service_with_adapters(args)
    except (ValueError, CorpusError, ModelError) as e:
        return error(e)
    choice = PolicyChoice(args.policy, threshold, args.reader)
    for question in args.questions or [*MEMORY_QUESTIONS[:1], *load_examples()]:
        try:
            recording = record_pipeline(service, question, choice, record_pipeline_command(question, args, threshold))
        except (SettingsError, ModelError) as e:
            return error(e)
        path = write_pipeline_recording(recording, Path(args.out))
        seconds, ended = recording.timed_events[-1]
        say(f"{path}: {ended.get('answer')!r} from {ended.get('source')} in {seconds:.1f} s")
    return 0
