"""The Gradio page: a header, the four tabs (Ask, When to retrieve, Try a benchmark, Experiments) and the footer, wired to
the service. It owns no retrieval or model logic: each tab renders events the service streams.

`build_demo(service)` returns the Blocks (tests and the load test serve it on loopback); `launch` adds the
stylesheet and theme and starts the server (app.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from raqa.config import ASSETS_DIR, RunSettings, run_ranges
from raqa.reading.events import RunFailed, to_json
from raqa.reading.readers import BASE_READER
from raqa.reading.support import shipped as shipped_support
from raqa.service import Service
from raqa.web.ask_tab import (
    STRATEGIES,
    ask,
    page_lookup,
    recording_for,
    replay,
    run_events,
    usable_recordings,
)
from raqa.web.benchmark_tab import benchmark_view
from raqa.web.compare_controls import compare_controls
from raqa.web.examples import load_examples
from raqa.web.experiments_tab import experiments_view
from raqa.web.export import temporary_folder, write_exports
from raqa.web.figures_run import message_figure
from raqa.web.flags import FLAGS, append_flag
from raqa.web.lessons import load_lessons
from raqa.web.links import LINK_JS, form_from_link
from raqa.web.page_text import badge_legend, footer
from raqa.web.recordings import RECORDINGS_DIR
from raqa.web.render import MARK_STOPPED_JS, RunView, esc, failed_html
from raqa.web.visitors import VisitorGate, limit_runs
from raqa.web.when_to_retrieve_tab import when_to_retrieve_view
from raqa.web.why import why_controls

LOG = logging.getLogger(__name__)
# Gradio's copies of the downloads (runs, reports, benchmark tables): every hour, those older than an hour go
DELETE_CACHE = (3600, 3600)
PRIVATE = dict(api_visibility="private")  # the page's own events, not offered to API clients


def build_demo(service: Service, recordings_dir: Path = RECORDINGS_DIR, results_dir: Path | None = None) -> gr.Blocks:
    limits = service.config.public
    gate = VisitorGate(limits) if limits else None  # per-visitor limits on a public page (web/visitors.py)
    window_range, k_range = run_ranges(limits)
    defaults = RunSettings(window=min(RunSettings.window, window_range[1]), k=min(RunSettings.k, k_range[1]))
    with gr.Blocks(title="raqa: when should a model admit ignorance?", delete_cache=DELETE_CACHE) as demo:
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
            steps = load_lessons()
            with gr.Accordion(f"Lesson: when a model should admit ignorance ({len(steps)} steps)", open=True,
                              visible=bool(steps), elem_id="raqa-lesson"):  # fmt: skip
                lesson = gr.Radio(
                    [step.title for step in steps],
                    value=None,
                    label="Pick a step: it loads a question and settings and replays a recorded run",
                    elem_id="raqa-lesson-steps",
                )
                lesson_text = gr.HTML(
                    '<div class="raqa-lesson-text">Start with step 1. Each step changes one thing; after the replay, '
                    "press Run to run it live or change a setting yourself.</div>",
                    elem_id="raqa-lesson-text",
                )
            with gr.Row():
                with gr.Column(scale=3):
                    question = gr.Textbox(
                        label="Question",
                        placeholder="Ask something…",
                        lines=2,
                        max_length=1000,
                        elem_id="raqa-question",
                    )
                    examples = gr.Examples(
                        load_examples(),
                        inputs=question,
                        example_labels=load_examples(),  # labels are shown whole; samples are cut at 50 characters
                        label="Examples (the last two have no answer in the corpus; a click replays a recorded run)",
                    )
                    with gr.Row():
                        run_button = gr.Button("Run", variant="primary", elem_id="raqa-run")
                        stop_button = gr.Button("Stop", variant="stop", elem_id="raqa-stop")
                        replay_button = gr.Button("Replay", elem_id="raqa-replay")
                        link_button = gr.Button("Copy link", elem_id="raqa-copy-link")
                    link = gr.Textbox(
                        label="Link to this question and these settings",
                        info="Send it to a class: it opens the page with the same question and settings.",
                        interactive=False,
                        buttons=["copy"],
                        elem_id="raqa-link",
                    )
                    choices = [(r.label, name) for name, r in service.readers.items()] or [
                        (BASE_READER.label, BASE_READER.name)
                    ]
                    compare, run_b = compare_controls(choices)
                with gr.Column(scale=2):
                    strategy = gr.Radio(
                        list(STRATEGIES),
                        value="Iterative",
                        label="Strategy",
                        info="Iterative: a window of w pages at a time; Top-K: all K pages in one prompt.",
                        elem_id="raqa-strategy",
                    )
                    order = gr.Radio(
                        ["forward", "backward"],
                        value=defaults.order,
                        label="Window order",
                        info="Forward: best BM25 score first. Backward: worst first, to see answers invented.",
                        elem_id="raqa-order",
                    )
                    with gr.Row():
                        window = gr.Slider(
                            *window_range,
                            value=defaults.window,
                            step=1,
                            label="Window w",
                            info="Pages per prompt.",
                            elem_id="raqa-window",
                        )
                        k = gr.Slider(
                            *k_range,
                            value=defaults.k,
                            step=1,
                            label="Pages K",
                            info="Pages retrieved.",
                            elem_id="raqa-k",
                        )
                    grounded_only = gr.Checkbox(
                        value=False,
                        label="Accept only grounded answers (an unsupported answer counts as a decline)",
                        elem_id="raqa-grounded",
                    )
                    rationale = gr.Checkbox(
                        value=False, label="Ask for a reason on declined windows (slower)", elem_id="raqa-rationale"
                    )
                    reader = gr.Radio(
                        choices,
                        value=choices[0][1],
                        label="Reader (the model that reads the windows)",
                        info="The abstention-tuned reader is the same model with a LoRA adapter trained to say "
                        "NOT FOUND on windows without the answer. With the answer judge, the model is asked only "
                        "where the judge finds an answer on a page, and its answer stands only when the judge "
                        "agrees; the judge alone is an extractive baseline.",
                        visible=len(choices) > 1,
                        elem_id="raqa-reader",
                    )
            answers = gr.HTML(elem_id="raqa-answers")
            has_judge = service.judge_loader is not None or service.judge is not None
            gr.HTML(badge_legend(has_judge, shipped_support() if has_judge else None), elem_id="raqa-legend")
            windows = gr.HTML(RunView().windows_html(), elem_id="raqa-windows")
            with gr.Row():
                scores = gr.Plot(
                    message_figure("After a run: each retrieved page's BM25 score by rank, coloured by its verdict."),
                    label="BM25 score by rank",
                    min_width=320,  # side by side on a wide page, one above the other on a phone
                    elem_id="raqa-scores",
                )
                meter = gr.Plot(
                    message_figure("After a run: the tokens it used, against one Top-K prompt over the same pages."),
                    label="Token meter",
                    min_width=320,
                    elem_id="raqa-tokens",
                )
            with gr.Accordion("All retrieved pages", open=False):
                pages = gr.HTML(elem_id="raqa-pages")
            with gr.Row():
                download_json = gr.DownloadButton(
                    "Download the run (JSON events)", visible=False, elem_id="raqa-download-json"
                )
                download_md = gr.DownloadButton(
                    "Download a report (Markdown)", visible=False, elem_id="raqa-download-md"
                )
            flagging = service.config.flags_file is not None
            with gr.Row(visible=flagging):
                flag_buttons = {
                    name: gr.Button(label, size="sm", elem_id=f"raqa-flag-{name.replace('_', '-')}")
                    for name, label in FLAGS.items()
                }
                flag_status = gr.HTML(
                    "Flags are kept on this machine only, in the file the operator set.", elem_id="raqa-flag-status"
                )
        with gr.Tab("When to retrieve", id="route"):
            when_to_retrieve_view(service, results_dir, recordings_dir / "pipeline", gate)
        with gr.Tab("Try a benchmark", id="benchmark"):
            benchmark_view(service, [strategy, order, window, k, grounded_only, rationale, reader], gate)
        with gr.Tab("Experiments", id="experiments"):
            experiments_view()
        gr.HTML(f'<div class="raqa-footer">{footer(service)}</div>')

        def with_downloads(runs, record: list[dict]):
            """A run's outputs, then its downloads once it has ended; hidden (and emptied) while it runs."""
            hidden = (gr.DownloadButton(value=None, visible=False), gr.DownloadButton(value=None, visible=False))
            last = None
            for outputs_ in runs:
                yield (*outputs_, *(hidden if last is None else (gr.skip(), gr.skip())))
                last = outputs_
            if last is not None and any(event["type"] == "final" for event in record):
                # subtle: the last yield repeats the run's last outputs, so an API client's result is the run's end
                with temporary_folder("raqa-run-") as folder:
                    as_json, as_md = write_exports(record, folder)
                    yield (*last, gr.DownloadButton(value=str(as_json), visible=True),
                           gr.DownloadButton(value=str(as_md), visible=True))  # fmt: skip

        def ask_here(question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_=None, compare_=None,
                     *run_b_):  # fmt: skip
            record: list[dict] = []
            form = (question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_)
            yield from with_downloads(ask(service, *form, record, compare_, run_b_ or None), record)

        inputs = [question, strategy, order, window, k, grounded_only, rationale, reader]
        outputs = [answers, windows, pages, scores, meter, download_json, download_md]
        link_button.click(None, inputs, [link], js=LINK_JS, queue=False, **PRIVATE)

        recordings = usable_recordings(service, recordings_dir)
        page_of = page_lookup(service)
        why_controls(demo, service, page_of, gate, windows, download_json, download_md)

        def replay_here(question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_=None):
            record: list[dict] = []
            form = (question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_)
            yield from with_downloads(replay(service, recordings, page_of, *form, record=record), record)

        # a replay uses no model: it is not queued behind live runs
        replay_listen = dict(preprocess=False, concurrency_limit=None, **PRIVATE)
        replay_event = replay_button.click(replay_here, inputs, outputs, **replay_listen)
        example_event = examples.load_input_event.then(replay_here, inputs, outputs, **replay_listen)

        def flag_here(name: str, run_file):
            try:
                events = json.loads(Path(run_file).read_text(encoding="utf-8")) if run_file else []
                lines = append_flag(Path(service.config.flags_file), name, events)
            except (OSError, ValueError) as e:
                return f'<span class="raqa-warning">{esc(e)}</span>'
            return f"Saved: {esc(FLAGS[name])} (line {lines} of {esc(service.config.flags_file)})."

        if flagging:
            for name, button in flag_buttons.items():
                button.click(lambda run_file, name=name: flag_here(name, run_file), [download_json], [flag_status],
                             queue=False, **PRIVATE)  # fmt: skip

        def lesson_here(title: str):
            """Load a lesson step into the form and replay its recorded run."""
            step = next((s for s in steps if s.title == title), None)
            if step is None:
                yield (gr.skip(),) * (2 + len(inputs) + len(outputs))
                return
            f = step.form
            strategy_label = {v[0]: k for k, v in STRATEGIES.items() if len(v) == 1}[f.strategy]
            form_values = [step.question, strategy_label, f.order, f.window, f.k, f.grounded_only, f.rationale,
                           f.reader if f.reader else gr.skip()]  # fmt: skip
            text = f'<div class="raqa-lesson-text"><b>{esc(step.title)}</b>: {esc(step.watch)}</div>'
            for outputs_ in replay_here(step.question, strategy_label, f.order, f.window, f.k, f.grounded_only,
                                        f.rationale, f.reader):  # fmt: skip
                yield (gr.skip(), text, *form_values, *outputs_)

        lesson_event = lesson.input(lesson_here, [lesson], [lesson, lesson_text, *inputs, *outputs], **replay_listen)

        def from_link(request: gr.Request):
            """The form as the page's URL gives it (a shared link); what the link got wrong is said in the answers."""
            params = dict(request.query_params) if request is not None else {}
            form = form_from_link(params, service.reader_names(), defaults, limits)
            values = [form.question, form.strategy, form.order, form.window, form.k, form.grounded_only, form.rationale]
            reader_value = form.reader if form.reader is not None else gr.skip()
            note = (
                '<div class="raqa-answer raqa-failed">This link had settings the page could not use, so their '
                f"defaults are shown: {esc('; '.join(form.problems))}.</div>"
                if form.problems
                else gr.skip()
            )
            return (*values, reader_value, note) if params else (*[gr.skip()] * 8, gr.skip())

        def replay_linked(question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_=None):
            """A shared link whose question and settings have a recording opens into its replay."""
            form = (question_, strategy_, order_, window_, k_, grounded_, rationale_, reader_)
            if recording_for(recordings, *form) is None:
                yield (gr.skip(),) * len(outputs)
                return
            yield from replay_here(*form)

        demo.load(from_link, None, [*inputs, answers], queue=False, **PRIVATE).then(
            replay_linked, inputs, outputs, **replay_listen
        )
        # preprocess=False: values sent straight to the API reach ask() as sent, so every bad value gets
        # the same clear message from validate_settings instead of a component's generic error.
        # trigger_mode="multiple": a Run clicked right after Stop, while the cancel is still settling,
        # queues a new run; in the default mode that click is silently lost.
        listen = dict(concurrency_id="model", preprocess=False, trigger_mode="multiple")
        ask_live = limit_runs(gate, ask_here, lambda message: (failed_html(message), *[gr.skip()] * 6))
        run_event = run_button.click(ask_live, [*inputs, compare, *run_b], outputs, api_name="ask", **listen)
        submit_event = question.submit(ask_live, [*inputs, compare, *run_b], outputs, **listen, **PRIVATE)
        # Stop marks what was being read at once, and again once each cancel has settled (Gradio runs a cancelled
        # event's .then then): an update the run sent before the cancel can land after Stop's first mark.
        stoppable = [run_event, submit_event, replay_event, example_event, lesson_event]
        mark = dict(fn=None, inputs=[answers, windows], outputs=[answers, windows], js=MARK_STOPPED_JS, queue=False)
        stop_button.click(**mark, cancels=stoppable, **PRIVATE)
        for event in stoppable:
            event.then(**mark, **PRIVATE)

        events_live = limit_runs(gate, lambda *form: run_events(service, *form), lambda m: to_json(RunFailed(m)))

        def events_here(
            request: gr.Request,
            question: str,
            strategy: str = "iterative",
            order: str = "forward",
            window: int = RunSettings.window,
            k: int = RunSettings.k,
            grounded_only: bool = False,
            rationale: bool = False,
            reader: str | None = None,
        ) -> Iterator[dict]:
            """One run's events as JSON dicts, streamed (the same events `python -m raqa ask --json` prints)."""
            yield from events_live(request, question, strategy, order, window, k, grounded_only, rationale, reader)

        # the same queue and worker as the page's runs, so API clients wait their turn like visitors
        gr.api(events_here, api_name="run_events", concurrency_id="model")
    # several runs at once only when the model shares its forward passes between them (Service.concurrent_runs)
    demo.queue(default_concurrency_limit=service.concurrent_runs, max_size=64)
    return demo


def launch(service: Service, **kwargs) -> None:
    css = (ASSETS_DIR / "style.css").read_text(encoding="utf-8")
    build_demo(service).launch(css=css, theme=gr.themes.Soft(), **kwargs)
