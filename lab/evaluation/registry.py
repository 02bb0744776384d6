"""Every experiment by name: what it runs, on how many questions, and what its record says made it.

`EXPERIMENTS[name]` holds the runner (experiments.py does the work), the default limit, how many questions
to draw per question or window kept, and whether it needs the model. `question_pool` draws the questions,
`run` times the runner and assembles the record's provenance (`Run.about`), and the caller saves it with
`write_record(name, dataset, run.results, run.about, out_dir)`. The When-to-retrieve evaluation
(`python -m lab experiment when_to_retrieve`) does the same in eval_adapt.py.

Readers come from the service (`Service.reader`), so an experiment reads with exactly the backend and
calibrated settings a page visitor or `ask --reader` would get. Left out here: parsing options, printing
and progress bars (cli/), and the scoring itself (experiments.py, when_to_retrieve.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lab.evaluation import attribution_eval, call_journal, experiments, reader_comparison, reading_defaults
from lab.evaluation.positives import PositiveIndex
from lab.records import Run, command_line, timed
from raqa.config import RunSettings, SpeedOptions
from raqa.evaluation import records
from raqa.evaluation.fan_out import calls_at_once
from raqa.evaluation.questions import ProgressBar, QAItem, load_questions
from raqa.models.endpoints_file import READER_PREFIX
from raqa.reading.readers import BASE_READER
from raqa.retrieval.corpus import page_lookup
from raqa.retrieval.index import load_or_build


@dataclass(frozen=True)
class Options:
    """The command's choices an experiment may use (reader_comparison uses the last three)."""

    seed: int = 0
    reader: str = "abstain"  # the trained reader compared with the base model
    questions: int = 25  # iterative runs per reading order
    unanswerable: int = 30  # NQ test questions with no answer in the corpus
    window: int = RunSettings.window  # pages per window of every experiment's runs (Inputs.base)
    page_order: str = RunSettings.page_order  # pages inside a window (config.PageOrder), likewise
    endpoint: str | None = None  # the model server (RAQA_ENDPOINTS) that reads instead of the local model
    concurrency: int = 1  # runs or windows in flight at once (fan_out)


@dataclass(frozen=True)
class Inputs:
    """What a runner gets: the loaded service, the drawn questions and the command's choices."""

    service: object  # raqa.service.Service
    pool: Sequence[QAItem]
    positives: PositiveIndex
    limit: int
    options: Options
    progress: ProgressBar
    base: RunSettings = RunSettings()


@dataclass(frozen=True)
class Experiment:
    name: str
    runner: Callable[[Inputs], dict]
    limit: int  # questions, or windows / questions kept per kind, when --limit is not given
    pool_factor: int = 1  # questions drawn per one kept (windows and unanswerable questions are rare)
    needs_model: bool = True  # False: retrieval only, the model is not loaded
    local_only: str = ""  # why it needs the local model's own weights (it cannot read through a server), if it does
    options: tuple[str, ...] = ()  # the Options fields it uses, repeated in its record's command


def _recall(i: Inputs) -> dict:
    word = load_or_build(i.service.pages, i.service.config.cache_dir, tokenizer="word")
    return experiments.recall(i.pool, {"wordpiece": i.service.index, "word": word}, i.positives, i.progress)


def _topk_vs_iterative(i: Inputs) -> dict:
    return experiments.topk_vs_iterative(i.pool, i.service.index, i.service.backend, i.base, i.progress)


def _window_order(i: Inputs) -> dict:
    return experiments.window_order(
        i.pool, i.service.index, i.service.backend, base=i.base, positives=i.positives, progress=i.progress
    )


def _negative_windows(i: Inputs) -> dict:
    s = i.service
    return experiments.negative_windows(
        i.pool, s.index, s.backend, base=i.base, positives=i.positives, per_kind=i.limit, progress=i.progress
    )


def _unanswerable(i: Inputs) -> dict:
    s = i.service
    return experiments.unanswerable(
        i.pool, s.index, s.backend, base=i.base, positives=i.positives, per_kind=i.limit, progress=i.progress
    )


def _reader_comparison(i: Inputs) -> dict:
    """The base model and the chosen readers (comma-separated --reader), each as the service serves it (with the
    answer judge reading every window when the service has one), on the same windows and questions.

    Raises SettingsError (a ValueError) naming the readers when there is no such reader.
    """

    o = i.options
    names = [BASE_READER.name] + [n for n in o.reader.split(",") if n and n != BASE_READER.name]
    readers, judge = {}, None
    for name in names:
        reader, backend, settings, judge = i.service.reading(name, i.base)
        about = {"label": reader.label, "mode": reader.mode}
        if reader.adapter is not None:
            about["adapter"] = f"assets/readers/{reader.name}"
        readers[reader.name] = (backend, settings, about)
    # unanswerable questions come from NQ test: more than half its answers are nowhere in the corpus
    lost_pool = load_questions("nq", "test", o.unanswerable * 10, o.seed)
    return reader_comparison.reader_comparison(
        i.pool,
        lost_pool,
        i.service.index,
        readers=readers,
        positives=i.positives,
        per_kind=i.limit,
        questions_per_order=o.questions,
        unanswerable_questions=o.unanswerable,
        progress=i.progress,
        judge=judge,
        window=o.window,
    )


def _reading_defaults(i: Inputs) -> dict:
    """The base model, with the answer judge reading every window when the service has one, at each window size
    and in-window page order."""

    _, backend, settings, judge = i.service.reading(BASE_READER.name, i.base)
    return reading_defaults.reading_defaults(
        i.pool,
        i.service.index,
        backend,
        base=settings,
        positives=i.positives,
        per_kind=i.limit,
        progress=i.progress,
        judge=judge,
    )


def _attribution(i: Inputs) -> dict:
    """The base model's answered windows, read as the page reads them (the judge giving the badge), attributed."""

    _, backend, settings, judge = i.service.reading(BASE_READER.name, i.base)
    return attribution_eval.attribution_experiment(
        i.pool,
        i.service.index,
        backend,
        settings=settings,
        judge=judge,
        positives=i.positives,
        per_kind=i.limit,
        progress=i.progress,
    )


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment("recall", _recall, 1000, needs_model=False),
        Experiment("topk_vs_iterative", _topk_vs_iterative, 50),
        Experiment("window_order", _window_order, 30),
        Experiment("negative_windows", _negative_windows, 40, pool_factor=10),
        Experiment("unanswerable", _unanswerable, 40, pool_factor=10),
        Experiment("reading_defaults", _reading_defaults, 60, pool_factor=20),
        Experiment(
            "reader_comparison",
            _reader_comparison,
            40,
            pool_factor=20,
            options=("reader", "questions", "unanswerable", "window", "page_order"),
        ),
        Experiment(
            "attribution",
            _attribution,
            150,
            pool_factor=20,
            local_only="it scores the answer's "
            "log-probability with each sentence left out, which a chat server does not report",
        ),
    )
}


def question_pool(experiment: Experiment, dataset: str, limit: int, seed: int) -> list[QAItem]:
    """The seeded test questions the experiment draws from; QuestionsError when they cannot be read."""
    return load_questions(dataset, "test", limit * experiment.pool_factor, seed)


def experiment_command(experiment: Experiment, dataset: str, limit: int, options: Options, weights: str) -> str:
    """The command that reruns the experiment, as its record states it."""
    named = list(experiment.options)
    named += [n for n in ("window", "page_order") if n not in named and getattr(options, n) != getattr(RunSettings, n)]
    if options.endpoint is not None:
        named += ["endpoint", "concurrency"]
    chosen = {name: str(getattr(options, name)) for name in named}  # str: an option's 0 or False is stated too
    default = weights == SpeedOptions.weights  # the --weights a rerun needs: none for the default
    return command_line(
        "experiment",
        experiment.name,
        dataset=dataset,
        limit=limit,
        seed=options.seed,
        **chosen,
        weights=None if default else weights,
    )


def on_server(experiment: Experiment, service, endpoint: str | None):
    """The service reading through the model server named endpoint (served_by), or the service itself for None or
    an experiment without a model. ValueError when the experiment needs local weights or there is no such server."""
    if endpoint is None or not experiment.needs_model:
        return service
    if experiment.local_only:
        raise ValueError(
            f"{experiment.name} needs the local model's own weights ({experiment.local_only}): run it "
            "without --endpoint."
        )
    return served_by(service, endpoint)


def served_by(service, endpoint: str):
    """The service with its base model replaced by the model server named endpoint (RAQA_ENDPOINTS): every reader
    that asks the base model (base, the judge readers) then asks the server; the answer judge and the When-to-retrieve
    adapters stay local. ValueError naming the servers when there is none by that name."""
    servers = {
        name.removeprefix(READER_PREFIX): backend
        for name, lazy in service.backends.items()
        if name.startswith(READER_PREFIX) and (backend := lazy.loaded) is not None
    }
    if endpoint not in servers:
        raise ValueError(
            f"Invalid endpoint: {endpoint!r}. Choose from: {', '.join(servers) or 'none'} (RAQA_ENDPOINTS)."
        )
    return replace(service, backend=servers[endpoint])


def journal_key(service, experiment: Experiment) -> str:
    """What the journal's calls share and their keys do not say: the code (a changed prompt or engine makes other
    calls), the model (or server) and its weights, the corpus, the answer judge. A journal of other settings is left
    alone (its rows are not this run's)."""
    backend = service.backend
    served = hasattr(backend, "provenance")  # a server: its name in RAQA_ENDPOINTS and the model it is asked for
    model = f"server {backend.name} ({backend.config.model})" if served else getattr(backend, "name", None)
    weights = None if served else service.config.speed.weights
    judge = service.judge.available
    return (
        f"{experiment.name} | {records.code_version()} | {model} | weights {weights} | {service.corpus_label} "
        f"({len(service.pages)} pages) | judge {judge}"
    )


def server_about(backend, endpoint: str, concurrency: int, reads: str | None = None) -> dict:
    """What a record says of the server that read for it: its provenance (EndpointBackend.provenance: the model
    asked for and reported, fingerprint, sampling), the concurrency, and what it read when not everything."""
    served = getattr(backend, "provenance", lambda: {"endpoint": endpoint})
    return {**served(), "concurrency": concurrency, **({"reads": reads} if reads else {})}


def preload_readers(experiment: Experiment, service, readers: str) -> None:
    """Each reader the experiment compares, loaded before the clock starts; SettingsError naming the readers when one
    does not exist."""
    if "reader" in experiment.options:
        for name in readers.split(","):
            service.reading(name, RunSettings())


def run_entry(
    experiment: Experiment,
    service,
    dataset: str,
    pool: Sequence[QAItem],
    limit: int,
    options: Options,
    progress: ProgressBar,
    rows: Path | None = None,
) -> Run:
    """Run the experiment and say what made it; the runner's SettingsError, ModelError, QuestionsError pass.

    rows: the call journal (call_journal.py): its model calls are read from there when it holds them, and the others
    appended as they are made, so an interrupted run resumes and a rerun recomputes the record from the rows."""
    preload_readers(experiment, service, options.reader)
    base = RunSettings(window=options.window, page_order=options.page_order)  # every experiment's windows
    inputs = Inputs(
        service, pool, PositiveIndex(service.pages), limit=limit, options=options, progress=progress, base=base
    )
    journal = call_journal.rows_file(rows, journal_key(service, experiment)) if rows else None
    resumed_from = len(journal.rows) if journal else 0
    with calls_at_once(options.concurrency), call_journal.journaled(journal, page_lookup(service.pages)):
        results, seconds = timed(experiment.runner, inputs)
    local = experiment.needs_model and options.endpoint is None  # read by the local model, in these weights
    weights = service.config.speed.weights if local else None
    about = {
        "command": experiment_command(experiment, dataset, limit, options, weights or SpeedOptions.weights),
        "sample": {"split": "test", "limit": limit, "seed": options.seed, "pool": len(pool)},
        "model": service.backend.name if experiment.needs_model else None,
        "weights": weights,
        "adapter": service.config.adapter if local else None,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": experiments.settings_record(inputs.base),
        "seconds": round(seconds, 1),
    }
    if journal is not None:
        # seconds is this invocation's time: calls resumed from the file were made by an earlier one
        about["rows"] = {"file": rows.name, "calls": len(journal.rows), "in_file_before": resumed_from}
    if experiment.needs_model and not local:
        about["server"] = server_about(service.backend, options.endpoint, options.concurrency)
    return Run(results, about, seconds)
