"""The When-to-retrieve tab: each policy's decision, page and answer for a question, and the committed evaluation.

The events come from Service.decide (when_to_retrieve/policies.py); this module only renders them
(render_when_to_retrieve.py) and draws the committed eval-adapt figures.
"""

from __future__ import annotations

import logging
from pathlib import Path

import gradio as gr

from raqa.config import SettingsError, clean_question
from raqa.evaluation.pipeline_scores import MEMORY_QUESTIONS
from raqa.evaluation.records import load_results
from raqa.service import NO_ADAPT_MODEL, Service
from raqa.web.examples import load_examples
from raqa.web.experiments_tab import experiment_caption
from raqa.web.figures_pipeline import FIGURES as PIPELINE_FIGURES
from raqa.web.figures_pipeline import ret_signal_figure
from raqa.web.figures_run import safe
from raqa.web.figures_when_to_retrieve import FIGURES as ROUTE_FIGURES
from raqa.web.pipeline_recordings import PIPELINE_RECORDINGS_DIR
from raqa.web.pipeline_tab import pipeline_view
from raqa.web.render_pipeline import pipeline_summary, ret_signal_summary
from raqa.web.render_when_to_retrieve import RouteView, evaluation_summary, message_html
from raqa.web.visitors import VisitorGate
from raqa.when_to_retrieve.policies import POLICIES

LOG = logging.getLogger(__name__)


def route(service: Service, question):
    """Stream the "When to retrieve" cards: each policy's decision, page and answer for the question."""
    try:
        question = clean_question(question)
    except SettingsError as e:
        yield message_html(str(e))
        return
    if not service.has_adapt_model():
        yield message_html(NO_ADAPT_MODEL)
        return
    view = RouteView(question)
    try:
        for policy in POLICIES:
            view.busy = policy
            yield view.html()
            for event in service.decide(question, policy):
                view.add(event)
                yield view.html()
        view.busy, view.done = None, True
        yield view.html()
    except Exception:  # last resort, as in ask()
        LOG.exception("A route failed on an unexpected error")
        yield message_html("The decision stopped on an internal error. Please try again.")


def route_view(service: Service, results_dir: Path | None = None, recordings_dir: Path = PIPELINE_RECORDINGS_DIR,
               gate: VisitorGate | None = None):  # fmt: skip
    """The "When to retrieve" tab; returns (question box, button, output) for the caller to wire (the pipeline
    section wires its own, behind the visitor gate, and replays its examples' recordings from recordings_dir)."""
    results = load_results(results_dir) if results_dir else load_results()
    pipeline_records = [
        (stem, r) for stem, r in results.items() if r.get("experiment") == "pipeline" and "error" not in r
    ]
    pipeline_view(service, pipeline_records[0][1] if pipeline_records else None,
                  [*MEMORY_QUESTIONS[:1], *load_examples()], recordings_dir, gate)  # fmt: skip
    for stem, record in pipeline_records:
        gr.HTML(pipeline_summary(record))
        for name, make in PIPELINE_FIGURES.items():
            gr.Plot(safe(make, record), elem_classes=["raqa-pipe-figure"], elem_id=f"raqa-pipe-{name}-{stem}")
        gr.HTML(experiment_caption(record, "raqa-pipe-caption"))
    if not pipeline_records:
        gr.HTML('<div class="raqa-empty">No pipeline evaluation committed yet: run python -m raqa eval-pipeline.</div>')
    for stem, record in [
        (s, r) for s, r in results.items() if r.get("experiment") == "ret_signal" and "error" not in r
    ]:
        try:
            gr.HTML(ret_signal_summary(record))
        except (KeyError, TypeError) as e:
            gr.HTML(message_html(f"The adapter comparison could not be read: {type(e).__name__}: {e}"))
        gr.Plot(safe(ret_signal_figure, record), elem_classes=["raqa-pipe-figure"], elem_id=f"raqa-pipe-ret-{stem}")
        gr.HTML(experiment_caption(record, "raqa-pipe-caption"))
    gr.HTML('<h3 class="raqa-section">Each policy on its own (Adapt-LLM, NR-LLM, AR-LLM)</h3>')
    gr.HTML(
        '<p class="raqa-meta">Adapt-LLM is the same model with a LoRA adapter trained to answer from memory when '
        "it knows and to reply <code>&lt;RET&gt;</code> when it needs a page; it is compared with adapters "
        "trained to never retrieve and to always retrieve (BM25's top page), and with a popularity threshold "
        "(needs PopQA-format data: RAQA_POPQA and RAQA_POP_THRESHOLD).</p>"
    )
    with gr.Row():
        question = gr.Textbox(
            label="Question", placeholder="Ask something…", lines=1, max_length=1000, elem_id="raqa-route-question"
        )
        button = gr.Button("Decide", variant="primary", elem_id="raqa-route-run", scale=0)
    gr.Examples(load_examples(), inputs=question, label="Examples")
    output = gr.HTML(message_html(NO_ADAPT_MODEL) if not service.has_adapt_model() else "", elem_id="raqa-route-cards")
    records = [
        (stem, r) for stem, r in results.items() if r.get("experiment") == "when_to_retrieve" and "error" not in r
    ]
    if not records:
        gr.HTML('<div class="raqa-empty">No evaluation committed yet: run python -m raqa eval-adapt.</div>')
    for stem, record in records:
        try:
            gr.HTML(evaluation_summary(record))
        except (KeyError, TypeError) as e:
            gr.HTML(message_html(f"The evaluation summary could not be read: {type(e).__name__}: {e}"))
        for name, make in ROUTE_FIGURES.items():
            gr.Plot(safe(make, record), elem_classes=["raqa-route-figure"], elem_id=f"raqa-route-{name}-{stem}")
        gr.HTML(experiment_caption(record, "raqa-route-caption"))
    return question, button, output
