"""The When-to-retrieve tab's "Both papers in one run" section: the pipeline for a question, streamed step by
step, and the P(<RET>) threshold slider over example questions.

The events come from Service.pipeline (when_to_retrieve/pipeline.py), the stream `python -m raqa pipeline`
prints and eval-pipeline scores; render_pipeline.py turns them into HTML. The slider's numbers are the committed
eval-pipeline record's example decisions (no model runs when it moves). Left out here: the policies' own cards
(when_to_retrieve_tab.py) and the evaluation's figures (figures_pipeline.py).
"""

from __future__ import annotations

import logging

import gradio as gr

from raqa.config import SettingsError, clean_question
from raqa.models.base import ModelError
from raqa.service import NO_ADAPT_MODEL, Service
from raqa.web.render_pipeline import PipelineView, ret_examples_html
from raqa.web.render_when_to_retrieve import message_html
from raqa.when_to_retrieve.pipeline import DEFAULT_RET_THRESHOLD, PIPELINE_TITLES

LOG = logging.getLogger(__name__)
PAGE_POLICIES = ("adapt", "p_true", "token_probability", "sequence_probability", "never", "always")


def tuned_thresholds(record: dict | None) -> dict[str, float]:
    """Each page policy's threshold from the committed evaluation (the mean over its test sets of the dev-chosen
    thresholds, in the policy's units), else the defaults."""
    tuned = {p: DEFAULT_RET_THRESHOLD for p in PAGE_POLICIES}
    for policy in PAGE_POLICIES:
        values = [
            d["configurations"][f"pipeline:{policy}:base"]["threshold"]
            for d in (record or {}).get("results", {}).get("datasets", {}).values()
            if f"pipeline:{policy}:base" in d.get("configurations", {})
        ]
        numbers = [v for v in values if isinstance(v, (int, float))]
        if numbers:
            tuned[policy] = round(min(1.0, max(0.0, sum(numbers) / len(numbers))), 3)
    return tuned


def run_pipeline(service: Service, question, policy, threshold, reader=None):
    """Stream the pipeline view for the question; a clear message (and no model call) for bad input."""
    try:
        question = clean_question(question)
        if not service.has_adapt_model():
            raise ModelError(NO_ADAPT_MODEL)
        events = service.pipeline(question, policy, float(threshold) if threshold is not None else None,
                                  reader=reader)  # fmt: skip
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


def pipeline_view(service: Service, record: dict | None, examples: list[str]) -> None:
    """The section's components, wired to the service's model queue."""
    tuned = tuned_thresholds(record)
    gr.HTML(
        '<h3 class="raqa-section">Both papers in one run</h3><p class="raqa-meta">The model first answers from '
        "memory; a policy reads how sure it is and decides: keep that answer, or retrieve and read the iterative "
        "windows. After retrieving, only a page's answer counts: no window with an answer the reader stands by "
        "ends in <i>I don't know</i>.</p>"
    )
    with gr.Row():
        question = gr.Textbox(label="Question", placeholder="Ask something…", lines=1, max_length=1000,
                              elem_id="raqa-pipe-question", scale=3)  # fmt: skip
        policy = gr.Dropdown([(PIPELINE_TITLES[p], p) for p in PAGE_POLICIES], value="adapt", label="Decision policy",
                             info="What decides whether to retrieve.", elem_id="raqa-pipe-policy")  # fmt: skip
        threshold = gr.Slider(0, 1, value=tuned["adapt"], step=0.01, label="Threshold",
                              info="Adapt-LLM: retrieve when P(<RET>) ≥ this. Others: when the confidence is below.",
                              elem_id="raqa-pipe-threshold")  # fmt: skip
    choices = [(r.label, name) for name, r in service.readers.items()]
    reader = gr.Radio(choices, value=choices[0][1] if choices else None, label="Reader of the windows",
                      visible=len(choices) > 1, elem_id="raqa-pipe-reader")  # fmt: skip
    button = gr.Button("Run the pipeline", variant="primary", elem_id="raqa-pipe-run")
    gr.Examples(examples, inputs=question, label="Examples")
    output = gr.HTML(message_html(NO_ADAPT_MODEL) if not service.has_adapt_model() else "", elem_id="raqa-pipe-out")
    policy.change(lambda p: gr.Slider(value=tuned.get(p, DEFAULT_RET_THRESHOLD), interactive=p not in ("never", "always")),
                  [policy], [threshold], api_name=False, queue=False)  # fmt: skip
    listen = dict(concurrency_id="model", preprocess=False, trigger_mode="multiple")

    def run(question_, policy_, threshold_, reader_=None):
        yield from run_pipeline(service, question_, policy_, threshold_, reader_)

    button.click(run, [question, policy, threshold, reader], [output], api_name="pipeline", **listen)
    question.submit(run, [question, policy, threshold, reader], [output], api_name=False, **listen)

    decided = (record or {}).get("results", {}).get("examples", [])
    gr.HTML('<h3 class="raqa-section">Move the P(&lt;RET&gt;) threshold</h3><p class="raqa-meta">The paper\'s code '
            "reads the probability that Adapt-LLM's reply starts with &lt;RET&gt;; a threshold on it decides. Each "
            "example's probability was measured by eval-pipeline; move the slider to see which questions switch "
            "between retrieving and answering from memory.</p>")  # fmt: skip
    slider = gr.Slider(0, 1, value=tuned["adapt"], step=0.01, label="P(<RET>) threshold",
                       info="Retrieve when P(<RET>) is at or above it.", elem_id="raqa-ret-threshold")  # fmt: skip
    table = gr.HTML(ret_examples_html(decided, tuned["adapt"]), elem_id="raqa-ret-examples")
    slider.change(lambda t: ret_examples_html(decided, float(t)), [slider], [table], api_name=False, queue=False)
