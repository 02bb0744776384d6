"""The "Try a benchmark" tab: N questions of a question set read live with the Ask tab's settings, a progress bar,
the table filling row by row, a figure of the running scores, and the table as CSV at the end. Stop ends it.
The work is evaluation/live_benchmark.py; this module draws it."""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from raqa.config import RunForm, SettingsError
from raqa.evaluation.live_benchmark import (
    DATASET_CHOICES,
    MAX_QUESTIONS,
    BenchmarkRow,
    benchmark_questions,
    run_benchmark,
    summarise_benchmark,
    to_csv,
)
from raqa.models.base import ModelError
from raqa.web.ask_tab import page_form
from raqa.web.export import temporary_folder
from raqa.web.figures_run import message_figure, safe
from raqa.web.render import esc, failed_html
from raqa.web.visitors import RUNS, RUNS_ADMITTED, VisitorGate, limit_runs

COLUMNS = ["question", "gold", "answer", "exact match", "answerable here", "windows", "tokens", "seconds"]


def running_scores(rows: list[BenchmarkRow]) -> go.Figure:
    """Exact match and answers given to unanswerable questions, as running shares after each question."""
    xs, em, false = [], [], []
    for i in range(1, len(rows) + 1):
        s = summarise_benchmark(rows[:i])
        xs.append(i)
        em.append(s["exact_match"])
        false.append(s["false_answers_unanswerable"] / s["unanswerable"] if s["unanswerable"] else None)
    figure = go.Figure()
    figure.add_scatter(x=xs, y=em, mode="lines+markers", name="exact match")
    figure.add_scatter(x=xs, y=false, mode="lines+markers", name="answered, though no page has the answer")
    figure.update_layout(
        title="Running scores",
        xaxis_title="questions read",
        yaxis=dict(range=[0, 1], tickformat=".0%"),
        height=320,
        margin=dict(l=40, r=10, t=40, b=40),
        legend=dict(orientation="h", y=-0.3),
    )
    return figure


def _progress(done: int, total: int, summary: dict) -> str:
    return (
        f'<div class="raqa-bench-progress" data-done="{done}" data-total="{total}">'
        f'<progress value="{done}" max="{total}"></progress> {done} of {total} questions · exact match '
        f"{summary['exact_match']:.0%} · answered {summary['answered']:.0%} · answered without an answer in the "
        f"pages: {summary['false_answers_unanswerable']} of {summary['unanswerable']} · mean windows "
        f"{summary['mean_windows']:.1f} · mean tokens {summary['mean_tokens']:.0f}</div>"
    )


def benchmark(service, dataset_label, n, form: RunForm):
    """Stream the tab's outputs: progress, table, figure, CSV download, reading each question with the form (the Ask
    tab's). A public page reads at most PublicLimits.max_benchmark questions."""
    try:
        if form.strategy not in ("iterative", "topk"):
            raise SettingsError("The benchmark reads one strategy: choose Iterative or Top-K in the Ask tab.")
        most = benchmark_size(service)
        if most < MAX_QUESTIONS and _over(n, most):
            raise SettingsError(f"This public page reads at most {most} questions in one benchmark, got {n!r}.")
        items = benchmark_questions(DATASET_CHOICES.get(dataset_label, dataset_label), n)
        service.plan(items[0].question, form)  # bad settings are refused before anything runs
    except (SettingsError, ModelError, ValueError) as e:
        yield f'<div class="raqa-answer raqa-failed">{esc(e)}</div>', gr.skip(), gr.skip(), gr.skip()
        return
    rows: list[BenchmarkRow] = []
    empty = gr.DownloadButton(value=None, visible=False)
    yield (
        _progress(0, len(items), summarise_benchmark(rows)),
        [],
        message_figure("Scores appear as questions finish."),
        empty,
    )
    for row in run_benchmark(service, items, form):
        rows.append(row)
        table = [
            [r.question, r.gold, r.answer, r.exact_match, r.answerable, r.windows_read, r.tokens, round(r.seconds, 1)]
            for r in rows
        ]
        yield _progress(len(rows), len(items), summarise_benchmark(rows)), table, safe(running_scores, rows), gr.skip()
    with temporary_folder("raqa-benchmark-") as folder:
        path = folder / f"raqa-benchmark-{len(rows)}.csv"
        path.write_text(to_csv(rows), encoding="utf-8")
        yield gr.skip(), gr.skip(), gr.skip(), gr.DownloadButton(value=str(path), visible=True)


def benchmark_size(service) -> int:
    """The most questions one benchmark may read on this page."""
    limits = service.config.public
    return min(MAX_QUESTIONS, limits.max_benchmark) if limits else MAX_QUESTIONS


def _over(n: object, most: int) -> bool:
    """n is a number above most (anything else is left to benchmark_questions, which names what is allowed)."""
    try:
        return float(n) > most
    except (TypeError, ValueError):
        return False


def benchmark_view(service, form_inputs: list, gate: VisitorGate | None = None) -> None:
    """The tab's components and events; form_inputs are the Ask tab's strategy ... reader components. On a public
    page a benchmark is one live run for the visitor gate, and its size is capped (benchmark_size)."""
    gr.HTML(
        '<div class="raqa-lesson-text">Read a few real questions with the settings chosen in the Ask tab, and watch '
        "the scores build up. <b>Answerable here</b> says whether any retrieved page holds a gold answer; an answer "
        "to a question without one is a false answer. A question takes a few seconds on this CPU.</div>"
    )
    with gr.Row():
        dataset = gr.Radio(list(DATASET_CHOICES), value="NQ-open", label="Question set", elem_id="raqa-bench-dataset")
        n = gr.Slider(1, benchmark_size(service), value=10, step=1, label="Questions", elem_id="raqa-bench-n")
    with gr.Row():
        start = gr.Button("Run the benchmark", variant="primary", elem_id="raqa-bench-run")
        stop = gr.Button("Stop", variant="stop", elem_id="raqa-bench-stop")
    progress = gr.HTML(elem_id="raqa-bench-progress")
    table = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, elem_id="raqa-bench-table")
    figure = gr.Plot(message_figure("After each question: exact match and false answers so far."), label="Scores")
    download = gr.DownloadButton("Download the table (CSV)", visible=False, elem_id="raqa-bench-csv")

    def benchmark_here(dataset_, n_, *form):
        yield from benchmark(service, dataset_, n_, page_form(*form))

    def refused(message: str):
        return failed_html(message), gr.skip(), gr.skip(), gr.skip()

    event = start.click(
        limit_runs(gate, benchmark_here, refused),
        [dataset, n, *form_inputs],
        [progress, table, figure, download],
        api_visibility="private",
        concurrency_id=RUNS,  # each question waits in its model's line (reading/line.py)
        concurrency_limit=RUNS_ADMITTED,
        preprocess=False,
    )
    stop.click(None, cancels=[event], queue=False, api_visibility="private")
