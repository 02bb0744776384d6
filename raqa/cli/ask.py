"""`ask`, `route` and `record`: questions answered through the service, as the page answers them.

`ask` (and the lab's `batch`) turn their options into a run with `Service.plan` and stream it with `Service.events`, the
two calls the page makes, so the same choices give the same events everywhere. `route` runs each of the Adapt-LLM
paper's policies (when_to_retrieve/planning.route) and prints the When-to-retrieve stream. Exit status: 0 on
a run (even one ending in RunFailed), 2 on bad input (before anything loads where it can be checked without
loading).
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

from raqa.cli.options import app_config
from raqa.cli.output import error, print_human, print_json, say
from raqa.config import RunForm, RunSettings, SettingsError, clean_question, validate_settings
from raqa.loading import Lazy
from raqa.models.base import ModelError
from raqa.models.endpoints_file import ENDPOINTS_ENV, READER_PREFIX, configured_endpoints
from raqa.models.local import TransformersBackend
from raqa.reading.attribution import with_attributions
from raqa.retrieval.corpus import CorpusError
from raqa.service import Service
from raqa.web.examples import load_examples
from raqa.web.lessons import load_lessons
from raqa.web.recordings import record_run, write_recording
from raqa.when_to_retrieve import model as adapt_model  # by module: tests replace its load_adapt_model
from raqa.when_to_retrieve.model import ADAPT_DIR, adapter_dirs
from raqa.when_to_retrieve.planning import route

LOAD_ERRORS = (CorpusError, ModelError, ValueError)  # ValueError: SettingsError, a bad RAQA_POP_THRESHOLD


def check_endpoint(reader: str | None, config) -> None:
    """For endpoint:NAME, that NAME is in the RAQA_ENDPOINTS file; ValueError listing the names if not."""
    if reader is None or not reader.startswith(READER_PREFIX):
        return

    name = reader.removeprefix(READER_PREFIX)
    names = [c.name for c in configured_endpoints(config)]
    if name not in names:
        listed = ", ".join(names) if names else f"none ({ENDPOINTS_ENV} is not set)"
        raise ValueError(f"Invalid endpoint: {name!r}. Choose from: {listed}.")


def run_form(args: argparse.Namespace, **changes: object) -> RunForm:
    """The run's choices as the verb's options give them; a choice the verb has no option for keeps RunForm's default
    (`record` reads iterative, `batch` asks for no rationale)."""
    given = {f.name: getattr(args, f.name) for f in fields(RunForm) if hasattr(args, f.name)}
    return RunForm(**given | changes)


def service_with_reader(config, reader: str | None):
    """The service for a run with this reader; a model server's reader leaves the local model unloaded."""

    on_server = reader is not None and reader.startswith(READER_PREFIX)
    return Service.load(config, progress=say, load_model=not on_server)


def checked_form(args: argparse.Namespace) -> tuple[RunForm, object]:
    """The run's form and configuration, checked before anything loads; ValueError names what is wrong."""
    clean_question(args.question)
    form = run_form(args)
    validate_settings(form)
    config = app_config(args)
    check_endpoint(args.reader, config)
    return form, config


def cmd_ask(args: argparse.Namespace) -> int:
    try:
        form, config = checked_form(args)
        service = service_with_reader(config, args.reader)
        plan = service.plan(args.question, form)
    except LOAD_ERRORS as e:
        return error(e)
    events = service.events(plan)
    if args.why:
        events = with_attributions(events, plan.question, plan.backend, plan.settings)
    show = print_json if args.json else print_human
    for event in events:
        show(event)
    return 0


def route_service(args: argparse.Namespace, folder: Path) -> Service:
    """The service with the Adapt-LLM adapters from `folder`. The adapters were trained on the embedded model, so
    RAQA_MODEL / RAQA_ADAPTER do not apply here."""
    service = Service.load(replace(app_config(args), model=None, adapter=None), progress=say)
    if folder.resolve() != ADAPT_DIR.resolve() or not service.has_adapt_model():
        base = service.backend if isinstance(service.backend, TransformersBackend) else None
        service.adapt = Lazy(value=adapt_model.load_adapt_model(service.config.cache_dir, folder, say, base=base))
    return service


def cmd_route(args: argparse.Namespace) -> int:
    folder = Path(args.adapters)
    try:
        question = clean_question(args.question)
        adapter_dirs(folder)  # names what is missing, before anything loads
        service = route_service(args, folder)
        for policy in args.policies:
            for event in route(service, question, policy):
                print_json(event)
    except (SettingsError, *LOAD_ERRORS) as e:
        return error(e)
    return 0


def record_command(question: str, form: RunForm, why: bool, out: str) -> str:
    """The `python -m raqa record` command that makes this recording again (the recording keeps it)."""
    return (
        f'python -m raqa record "{question}" --window {form.window} --k {form.k} --order {form.order}'
        + (" --grounded-only" if form.grounded_only else "")
        + (f" --retrieval {form.retrieval}" if form.retrieval != RunSettings.retrieval else "")
        + (f" --reader {form.reader}" if form.reader else "")
        + (" --why" if why else "")
        + f" --out {out}"
    )


def recorded_runs(args: argparse.Namespace) -> list[tuple[str, RunForm, bool]]:
    """(question, form, why) of each run `record` makes: the lessons' steps, or the questions (the page's examples by
    default) with the options' form."""
    if args.lessons:
        return [(step.question, step.form, step.why or args.why) for step in load_lessons()]
    return [(question, run_form(args), args.why) for question in args.questions or load_examples()]


def cmd_record(args: argparse.Namespace) -> int:
    """Run each question with the page's form on the real model and write its events as a recording."""
    try:
        service = service_with_reader(app_config(args), args.reader)
    except (CorpusError, ModelError, SettingsError) as e:
        return error(str(e))
    for question, form, why in recorded_runs(args):
        try:
            recording = record_run(service, question, form, record_command(question, form, why, args.out), why)
        except SettingsError as e:
            return error(str(e))
        path = write_recording(recording, Path(args.out))
        seconds, final = recording.timed_events[-1]
        say(f"{path}: {final.get('type')} {final.get('answer')!r} in {seconds:.1f} s")
    return 0
