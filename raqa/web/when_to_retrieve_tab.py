"""The When-to-retrieve tab: the live pipeline for a question, the P(<RET>) threshold over example questions, and the
committed evaluations' figures folded under one accordion.

The events come from when_to_retrieve/planning.pipeline, the one stream `python -m raqa pipeline` prints and the
evaluations score; render_when_to_retrieve.py turns them into HTML. A click on an example replays its recording
(pipeline_recordings.py) when one matches the choices. The slider's numbers are the committed experiment pipeline
record's example decisions (no model runs when it moves). Left out here: drawing the figures (the lab draws them,
committed_figures.py reads them).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gradio as gr

from raqa.config import RunForm, SettingsError, clean_question
from raqa.evaluation.records import RESULTS_DIR, load_results
from raqa.models.base import ModelError
from raqa.reading.events import from_json
from raqa.reading.readers import MODEL_JUDGE_READER
from raqa.retrieval.corpus import page_lookup
from raqa.service import Service
from raqa.web.ask_tab import REPLAY_GAP_S, REPLAY_TOTAL_S, recorded_banner, usable_recordings
from raqa.web.committed_figures import REDRAW, committed_plots
from raqa.web.examples import load_examples
from raqa.web.experiments_tab import experiment_caption
from raqa.web.figures_run import message_figure
from raqa.web.page_runs import NewestRun
from raqa.web.pipeline_recordings import PIPELINE_RECORDINGS_DIR, PolicyChoice, find_pipeline, read_pipeline_recording
from raqa.web.render_when_to_retrieve import (
    PipelineView,
    evaluation_summary,
    message_html,
    pipeline_summary,
    ret_examples_html,
    ret_signal_summary,
)
from raqa.web.visitors import VisitorGate, limit_runs
from raqa.when_to_retrieve.pipeline import DEFAULT_RET_THRESHOLD, PIPELINE_EVENT_CLASSES, PIPELINE_TITLES
from raqa.when_to_retrieve.planning import NO_ADAPT_MODEL, pipeline
from raqa.when_to_retrieve.tuned import MEMORY_QUESTIONS, PAGE_POLICIES, tuned_thresholds

LOG = logging.getLogger(__name__)
NO_RECORDING = (
    '<div class="raqa-answer raqa-failed">No recorded run of this question with this policy, threshold and reader: '
    "press Run the pipeline to run it live.</div>"
)
# what each committed record shows under the accordion: its summary in words, then the figures the lab drew of it
SUMMARIES = {"pipeline": pipeline_summary, "ret_signal": ret_signal_summary, "when_to_retrieve": evaluation_summary}


def _first_reader(service: Service) -> str | None:
    """The small model's judge chain when offered (the Adapt-LLM adapters and this tab's recordings are the small
    model's), else the page's first reader."""
    if MODEL_JUDGE_READER.name in service.readers:
        return MODEL_JUDGE_READER.name
    return next(iter(service.readers), None)


def run_pipeline(service: Service, question, policy, threshold, reader=None):
    """Stream the pipeline view for the question; a clear message (and no model call) for bad input."""
    try:
        question = clean_question(question)
        threshold = float(threshold) if threshold is not None else None
        events = pipeline(service, question, policy, threshold, RunForm(reader=reader))
    except (SettingsError, ModelError, TypeError, ValueError) as e:
        yield message_html(str(e))
        return
    view = PipelineView(question)
    yield view.html()
    try:
        for event in events:
            view.add(event)
            yield view.html()
    except (SettingsError, ModelError) as e:
        yield message_html(str(e))
    except Exception:  # last resort, as in ask()
        LOG.exception("A pipeline run failed on an unexpected error")
        yield message_html("The pipeline stopped on an internal error. Please try again.")


def replay_pipeline(service: Service, recordings, page_of, question, policy, threshold, reader=None, pause=time.sleep):
    """Stream a recorded pipeline run of this question and these choices through the live run's renderer, marked
    as recorded; a message when there is none (no model runs either way)."""
    try:
        choice = PolicyChoice(policy, float(threshold) if threshold is not None else None, reader)
        found = find_pipeline(recordings, question, choice) if isinstance(question, str) else None
    except (TypeError, ValueError):
        found = None
    if found is None:
        yield NO_RECORDING
        return
    # the adapters ride on the page's base model (when_to_retrieve.model.load_adapt_model names it so)
    model = f"{service.backend.name} + Adapt-LLM adapters" if service.backend else None
    banner = recorded_banner(found, model)
    view = PipelineView(found.question)
    previous = 0.0
    longest = min(REPLAY_GAP_S, REPLAY_TOTAL_S / max(len(found.timed_events), 1))
    for t, data in found.timed_events:
        pause(min(max(t - previous, 0.0), longest))
        previous = t
        view.add(from_json(data, page_of, PIPELINE_EVENT_CLASSES))
        yield banner + view.html()


def when_to_retrieve_view(
    service: Service,
    results_dir: Path = RESULTS_DIR,
    recordings_dir: Path = PIPELINE_RECORDINGS_DIR,
    gate: VisitorGate | None = None,
) -> None:
    """The tab's components, wired to the service's model queue (live runs behind the visitor gate of a public page)."""
    results = {stem: r for stem, r in load_results(results_dir).items() if "error" not in r}
    pipeline_records = [r for r in results.values() if r.get("experiment") == "pipeline"]
    record = pipeline_records[0] if pipeline_records else None
    live_pipeline(service, record, [*MEMORY_QUESTIONS[:1], *load_examples()], recordings_dir, gate)
    ret_slider(record)
    title = "The evaluations: every policy and reader measured on NQ-open and TriviaQA"
    with gr.Accordion(title, open=False, elem_id="raqa-w2r-evaluation"):
        evaluation_figures(results, results_dir)


def _pipeline_controls(service: Service, tuned: dict) -> tuple:
    """The pipeline's question, decision policy, threshold and reader."""
    with gr.Row():
        question = gr.Textbox(
            label="Question",
            placeholder="Ask something…",
            lines=1,
            max_length=1000,
            elem_id="raqa-pipe-question",
            scale=3,
        )
        policy = gr.Dropdown(
            [(PIPELINE_TITLES[p], p) for p in PAGE_POLICIES],
            value="adapt",
            label="Decision policy",
            info="What decides whether to retrieve.",
            elem_id="raqa-pipe-policy",
        )
        threshold = gr.Slider(
            0,
            1,
            value=tuned["adapt"],
            step=0.01,
            label="Threshold",
            info="Adapt-LLM: retrieve when P(<RET>) ≥ this. Others: when the confidence is below.",
            elem_id="raqa-pipe-threshold",
        )
    choices = [(r.label, name) for name, r in service.readers.items()]
    reader = gr.Radio(
        choices,
        value=_first_reader(service),
        label="Reader of the windows",
        visible=len(choices) > 1,
        elem_id="raqa-pipe-reader",
    )
    return question, policy, threshold, reader


def live_pipeline(
    service: Service, record: dict | None, examples: list[str], recordings_dir: Path, gate: VisitorGate | None
) -> None:
    """Question, policy, threshold and reader; the run streamed step by step; examples replay their recordings."""
    tuned = tuned_thresholds(record)
    gr.HTML(
        '<h3 class="raqa-section">Both papers in one run</h3><p class="raqa-meta">The model first answers from '
        "memory; a policy reads how sure it is and decides: keep that answer, or retrieve and read the iterative "
        "windows. After retrieving, only a page's answer counts: no window with an answer the reader stands by "
        "ends in <i>I don't know</i>.</p>"
    )
    question, policy, threshold, reader = _pipeline_controls(service, tuned)
    button = gr.Button("Run the pipeline", variant="primary", elem_id="raqa-pipe-run")
    example_list = gr.Examples(
        examples, inputs=question, label="Examples (a click replays a recorded run)", elem_id="raqa-pipe-examples"
    )
    output = gr.HTML(message_html(NO_ADAPT_MODEL) if not service.has_adapt_model() else "", elem_id="raqa-pipe-out")
    policy.change(
        lambda p: gr.Slider(value=tuned.get(p, DEFAULT_RET_THRESHOLD), interactive=p not in ("never", "always")),
        [policy],
        [threshold],
        api_visibility="private",
        queue=False,
    )
    listen = dict(concurrency_id="model", preprocess=False, trigger_mode="multiple")

    def run_here(question_, policy_, threshold_, reader_=None):
        yield from run_pipeline(service, question_, policy_, threshold_, reader_)

    newest = NewestRun()  # a new run or replay replaces the page's earlier one on the output
    run = newest.only_newest(limit_runs(gate, run_here, message_html), pass_request=True)
    button.click(run, [question, policy, threshold, reader], [output], api_name="pipeline", **listen)
    question.submit(run, [question, policy, threshold, reader], [output], api_visibility="private", **listen)
    recordings = usable_recordings(service, recordings_dir, read_pipeline_recording)
    page_of = page_lookup(service.pages)

    def replay(question_, policy_, threshold_, reader_=None):
        yield from replay_pipeline(
            service, recordings, page_of, question=question_, policy=policy_, threshold=threshold_, reader=reader_
        )

    # a replay uses no model: it is not queued behind live runs
    example_list.load_input_event.then(
        newest.only_newest(replay),
        [question, policy, threshold, reader],
        [output],
        api_visibility="private",
        preprocess=False,
        concurrency_limit=None,
    )


def ret_slider(record: dict | None) -> None:
    """The P(<RET>) threshold over the committed example decisions: which questions switch as it moves."""
    decided, start = (record or {}).get("results", {}).get("examples", []), tuned_thresholds(record)["adapt"]
    gr.HTML(
        '<h3 class="raqa-section">Move the P(&lt;RET&gt;) threshold</h3><p class="raqa-meta">The paper\'s code '
        "reads the probability that Adapt-LLM's reply starts with &lt;RET&gt;; a threshold on it decides. Each "
        "example's probability is in the committed pipeline evaluation; move the slider to see which questions switch "
        "between retrieving and answering from memory.</p>"
    )
    slider = gr.Slider(
        0,
        1,
        value=start,
        step=0.01,
        label="P(<RET>) threshold",
        info="Retrieve when P(<RET>) is at or above it.",
        elem_id="raqa-ret-threshold",
    )
    table = gr.HTML(ret_examples_html(decided, start), elem_id="raqa-ret-examples")
    slider.change(
        lambda t: ret_examples_html(decided, float(t)), [slider], [table], api_visibility="private", queue=False
    )


def evaluation_figures(results: dict[str, dict], results_dir: Path = RESULTS_DIR) -> None:
    """Each committed When-to-retrieve record: its summary, its figures (one failing figure shows a message) and how
    to rerun it."""
    shown = 0
    for kind, summary in SUMMARIES.items():
        for stem, record in [(s, r) for s, r in results.items() if r.get("experiment") == kind]:
            shown += 1
            try:
                gr.HTML(summary(record))
            except (KeyError, TypeError) as e:
                gr.HTML(message_html(f"The {kind} summary could not be read: {type(e).__name__}: {e}"))
            plots = committed_plots(stem, "w2r", results_dir) or [
                ("none", message_figure(f"Not drawn yet: run {REDRAW}."))
            ]
            for name, plot in plots:
                gr.Plot(plot, elem_classes=["raqa-w2r-figure"], elem_id=f"raqa-w2r-{name}-{stem}")
            gr.HTML(experiment_caption(record, "raqa-w2r-caption"))
    if not shown:
        rerun = "python -m lab experiment pipeline and python -m lab experiment when_to_retrieve"
        gr.HTML(f'<div class="raqa-empty">No evaluation committed yet: run {rerun}.</div>')
