"""The Ask tab's components and events: the lesson, the question with its examples and buttons, the settings, and the
run's answers, windows, figures, pages, downloads and flags, wired to the generators in ask_tab.py.

Values cross from the page into a run here, through ask_tab.page_form: each handler takes the form's values as the
components send them (question, strategy, order, window, k, grounded-only, rationale, reader; the /ask API takes
them in the same order) and hands ask, replay and recording_for a RunForm. A lesson step and a shared link go the
other way: `form_values` sets the components from a RunForm. Left out: what a run does (ask_tab.py), the
comparison's controls (compare_controls.py), "Why this answer?" (why.py) and the flag buttons (flags.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from raqa.config import RunForm, RunSettings, run_ranges
from raqa.reading.grader import grader_calibration
from raqa.reading.judge import JUDGE_DIR
from raqa.reading.readers import BASE_READER, GRADED_READER
from raqa.reading.support import shipped as shipped_support
from raqa.retrieval.corpus import page_lookup
from raqa.service import Service
from raqa.web.ask_tab import STRATEGY_LABELS, ask, page_form, recording_for, replay, usable_recordings
from raqa.web.compare import CHOSEN
from raqa.web.compare_controls import compare_controls
from raqa.web.examples import load_examples
from raqa.web.figures_run import message_figure
from raqa.web.flags import flag_row
from raqa.web.lessons import LessonStep, load_lessons
from raqa.web.links import LINK_JS, form_from_link
from raqa.web.page_runs import NewestRun, with_downloads
from raqa.web.page_text import badge_legend, grader_legend
from raqa.web.recordings import RECORDINGS_DIR
from raqa.web.render import MARK_AFTER_STOP_JS, MARK_STOPPED_JS, RunView, esc, failed_html
from raqa.web.visitors import RUNS, RUNS_ADMITTED, VisitorGate, limit_runs
from raqa.web.why import why_controls

PRIVATE = dict(api_visibility="private")  # the page's own events, not offered to API clients
# a replay uses no model: it is not queued behind live runs
REPLAYED = dict(preprocess=False, concurrency_limit=None, **PRIVATE)
# preprocess=False: values sent straight to the API reach ask() as sent, so every bad value gets the same clear
# message from validate_settings instead of a component's generic error. trigger_mode="multiple": a Run clicked
# right after Stop, while the cancel is still settling, queues a new run; in the default mode that click is lost.
# concurrency: every live run is let in at once and waits in its model's line (reading/line.py), which tells it its
# place; the line, not Gradio's queue, decides how many read together.
LIVE = dict(concurrency_id=RUNS, concurrency_limit=RUNS_ADMITTED, preprocess=False, trigger_mode="multiple")
Replay = Callable[[object, RunForm], Iterator[tuple]]  # a question and a form -> the outputs of its recorded run


@dataclass(frozen=True)
class AskTab:
    """The tab's components that its events read and write."""

    form: list  # question, strategy, order, window, k, grounded-only, rationale, reader: page_form's order
    outputs: list  # answers, windows, pages, scores, meter, download_json, download_md
    compare: list  # the comparison, then Run B's order, window, grounded-only and reader
    buttons: dict[str, gr.Button]  # run, stop, replay, link
    link: gr.Textbox
    examples: gr.Examples
    lesson: gr.Radio
    lesson_text: gr.HTML


def ask_view(demo: gr.Blocks, service: Service, recordings_dir: Path = RECORDINGS_DIR, gate: VisitorGate | None = None):
    """The Ask tab's components and events; returns the form's settings (strategy ... reader) for the benchmark tab.
    On a public page (gate) live runs pass the visitor gate; replays of recordings_dir's runs never wait."""
    steps = load_lessons()
    defaults = page_defaults(service)
    tab = _layout(service, steps, defaults)
    tab.buttons["link"].click(None, tab.form, [tab.link], js=LINK_JS, queue=False, **PRIVATE)
    recordings, page_of = usable_recordings(service, recordings_dir), page_lookup(service.pages)
    answers, windows, *_, download_json, download_md = tab.outputs
    newest = NewestRun()  # every event writing the run's outputs: a new one replaces the page's earlier one
    why_controls(demo, service, page_of, gate=gate, newest=newest, shown=(windows, download_json, download_md))

    def replay_form(question, form: RunForm):
        record: list[dict] = []
        yield from with_downloads(
            replay(service, recordings, page_of, question=question, form=form, record=record), record
        )

    def replay_here(question, *values):
        yield from replay_form(question, page_form(*values))

    replay_newest = newest.only_newest(replay_here)
    stoppable = [
        tab.buttons["replay"].click(replay_newest, tab.form, tab.outputs, **REPLAYED),
        tab.examples.load_input_event.then(replay_newest, tab.form, tab.outputs, **REPLAYED),
        _lessons(tab, steps, replay_form, newest),
    ]
    _links(demo, service, tab, defaults=defaults, recordings=recordings, replay_form=replay_form, newest=newest)
    stoppable += _runs(service, tab, gate, newest)
    # Stop marks what was being read at once, and again once each cancel has settled (Gradio runs a cancelled
    # event's .then then): an update the run sent before the cancel can land after Stop's first mark.
    mark = dict(fn=None, inputs=[answers, windows], outputs=[answers, windows], queue=False, **PRIVATE)
    tab.buttons["stop"].click(**mark, js=MARK_STOPPED_JS, cancels=stoppable)
    for event in stoppable:
        event.then(**mark, js=MARK_AFTER_STOP_JS)
    return tab.form[1:]


def page_defaults(service: Service) -> RunSettings:
    """The form's starting settings: RunSettings' window and K, within a public page's caps."""
    window_range, k_range = run_ranges(service.config.public)
    return RunSettings(window=min(RunSettings.window, window_range[1]), k=min(RunSettings.k, k_range[1]))


def form_values(question: str, form: RunForm) -> list:
    """The form's components' values for a question and a RunForm (a lesson step, a link); no reader keeps the
    page's reader."""
    reader = form.reader if form.reader is not None else gr.skip()
    strategy = STRATEGY_LABELS[form.strategy]
    values = [form.order, form.window, form.k, form.grounded_only, form.rationale, reader, form.retrieval]
    return [question, strategy, *values]


def _runs(service: Service, tab: AskTab, gate: VisitorGate | None, newest: NewestRun) -> list:
    """Run and Enter: a live run (two with a comparison), behind the visitor gate, replacing the page's earlier run;
    returns the two events."""

    def ask_here(question, *values):
        form = page_form(*values[:8])
        compare, run_b = (values[8], values[9:]) if len(values) > 8 else (None, ())
        b = form.replace(**dict(zip(CHOSEN, run_b, strict=True))) if len(run_b) == len(CHOSEN) else None
        record: list[dict] = []
        yield from with_downloads(ask(service, question, form, record=record, compare=compare, run_b=b), record)

    def refused(message: str) -> tuple:
        return (failed_html(message), *[gr.skip()] * 6)

    live = newest.only_newest(limit_runs(gate, ask_here, refused), pass_request=True)
    inputs = [*tab.form, *tab.compare]
    run = tab.buttons["run"].click(live, inputs, tab.outputs, api_name="ask", **LIVE)
    return [run, tab.form[0].submit(live, inputs, tab.outputs, **LIVE, **PRIVATE)]


def _lessons(tab: AskTab, steps: list[LessonStep], replay_form: Replay, newest: NewestRun) -> gr.events.Dependency:
    """A lesson step loads its question and settings into the form and replays its recorded run."""

    def lesson_here(title: str):
        step = next((s for s in steps if s.title == title), None)
        if step is None:
            yield (gr.skip(),) * (2 + len(tab.form) + len(tab.outputs))
            return
        text = f'<div class="raqa-lesson-text"><b>{esc(step.title)}</b>: {esc(step.watch)}</div>'
        for outputs in replay_form(step.question, step.form):
            yield (gr.skip(), text, *form_values(step.question, step.form), *outputs)

    outputs = [tab.lesson, tab.lesson_text, *tab.form, *tab.outputs]
    return tab.lesson.input(newest.only_newest(lesson_here), [tab.lesson], outputs, **REPLAYED)


def _links(
    demo: gr.Blocks,
    service: Service,
    tab: AskTab,
    defaults: RunSettings,
    recordings: list,
    replay_form: Replay,
    newest: NewestRun,
) -> None:
    """A shared link (links.py) fills the form when the page opens, and opens into its replay when one is recorded."""

    def from_link(request: gr.Request):
        """What the link got wrong is said in the answers."""
        params = dict(request.query_params) if request is not None else {}
        if not params:
            return (gr.skip(),) * (len(tab.form) + 1)
        linked = form_from_link(params, service.reader_names(), defaults, service.config.public)
        note = (
            '<div class="raqa-answer raqa-failed">This link had settings the page could not use, so their '
            f"defaults are shown: {esc('; '.join(linked.problems))}.</div>"
            if linked.problems
            else gr.skip()
        )
        return (*form_values(linked.question, linked.form), note)

    def replay_linked(question, *values):
        form = page_form(*values)
        if recording_for(recordings, question, form) is None:
            yield (gr.skip(),) * len(tab.outputs)
            return
        yield from replay_form(question, form)

    loaded = demo.load(from_link, None, [*tab.form, tab.outputs[0]], queue=False, **PRIVATE)
    loaded.then(newest.only_newest(replay_linked), tab.form, tab.outputs, **REPLAYED)


def _layout(service: Service, steps: list[LessonStep], defaults: RunSettings) -> AskTab:
    """The tab's components, top to bottom: the lesson, the question and the settings side by side, the results."""
    title = f"Lesson: when a model should admit ignorance ({len(steps)} steps)"
    with gr.Accordion(title, open=True, visible=bool(steps), elem_id="raqa-lesson"):
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
    choices = [(r.label, name) for name, r in service.readers.items()] or [(BASE_READER.label, BASE_READER.name)]
    with gr.Row():
        with gr.Column(scale=3):
            question = gr.Textbox(
                label="Question", placeholder="Ask something…", lines=2, max_length=1000, elem_id="raqa-question"
            )
            examples = gr.Examples(
                load_examples(),
                inputs=question,
                example_labels=load_examples(),  # labels are shown whole; samples are cut at 50 characters
                label="Examples (the last two have no answer in the corpus; a click replays a recorded run)",
            )
            with gr.Row():
                buttons = {
                    "run": gr.Button("Run", variant="primary", elem_id="raqa-run"),
                    "stop": gr.Button("Stop", variant="stop", elem_id="raqa-stop"),
                    "replay": gr.Button("Replay", elem_id="raqa-replay"),
                    "link": gr.Button("Copy link", elem_id="raqa-copy-link"),
                }
            link = gr.Textbox(
                label="Link to this question and these settings",
                info="Send it to a class: it opens the page with the same question and settings.",
                interactive=False,
                buttons=["copy"],
                elem_id="raqa-link",
            )
            compare, run_b = compare_controls(choices)
        with gr.Column(scale=2):
            settings = _settings(service, choices, defaults)
    outputs = _results(service)
    return AskTab(
        [question, *settings],
        outputs,
        [compare, *run_b],
        buttons=buttons,
        link=link,
        examples=examples,
        lesson=lesson,
        lesson_text=lesson_text,
    )


def _settings(service: Service, choices: list[tuple[str, str]], defaults: RunSettings) -> list:
    """Strategy, order, window, K, grounded-only, rationale, reader and retrieval, in page_form's order."""
    window_range, k_range = run_ranges(service.config.public)
    strategy = gr.Radio(
        list(STRATEGY_LABELS.values()),
        value=STRATEGY_LABELS["iterative"],
        label="Strategy",
        info="Iterative: a window of w pages at a time; Top-K: all K pages in one prompt.",
        elem_id="raqa-strategy",
    )
    order = gr.Radio(
        ["forward", "backward"],
        value=defaults.order,
        label="Window order",
        info="Forward: best-ranked page first. Backward: worst first, to see answers invented.",
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
        k = gr.Slider(*k_range, value=defaults.k, step=1, label="Pages K", info="Pages retrieved.", elem_id="raqa-k")
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
        info="The default reads with Qwen2.5-Coder-1.5B in llama.cpp and grades each answer against its page; the others "
        "use SmolLM2-135M, the small model. The abstention-tuned reader is the small model with a LoRA adapter trained to say NOT FOUND on windows "
        "without the answer. With the answer judge, the model is asked only where the judge finds an answer on a "
        "page, and its answer stands only when the judge agrees; the judge alone is an extractive baseline.",
        visible=len(choices) > 1,
        elem_id="raqa-reader",
    )
    hybrid = "Hybrid: BM25's top 50 and the 10 pages nearest in meaning, by MiniLM. BM25 alone: as in the papers."
    sources = [("Hybrid (BM25 + MiniLM)", "hybrid"), ("BM25 alone", "bm25")]
    retrieval = gr.Radio(sources, value=defaults.retrieval, label="Retrieval", info=hybrid, elem_id="raqa-retrieval")
    return [strategy, order, window, k, grounded_only, rationale, reader, retrieval]


def _results(service: Service) -> list:
    """The run's answers, windows, figures, pages, downloads and (when the operator keeps them) flag buttons."""
    answers = gr.HTML(elem_id="raqa-answers")
    has_judge = service.judge.available
    legend = badge_legend(has_judge, shipped_support(JUDGE_DIR) if has_judge else None)
    if GRADED_READER.name in service.readers:
        legend = grader_legend(grader_calibration()) + legend.replace(
            "<b>Badges</b>", "<b>Badges of the other readers</b>"
        )
    gr.HTML(legend, elem_id="raqa-legend")
    windows = gr.HTML(RunView().windows_html(), elem_id="raqa-windows")
    with gr.Row():
        scores = gr.Plot(
            message_figure("After a run: each retrieved page's score by rank, coloured by its verdict."),
            label="Score by rank",
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
        download_json = gr.DownloadButton("Download the run (JSON events)", visible=False, elem_id="raqa-download-json")
        download_md = gr.DownloadButton("Download a report (Markdown)", visible=False, elem_id="raqa-download-md")
    flag_row(service.config.flags_file, download_json)
    return [answers, windows, pages, scores, meter, download_json, download_md]
