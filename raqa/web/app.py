"""The Gradio page: a header, the four tabs (Ask, When to retrieve, Try a benchmark, Experiments) and the footer, wired to
the service. It owns no retrieval or model logic: each tab renders events the service streams.

`build_demo(service)` returns the Blocks (tests and the load test serve it on loopback); `launch` adds the
stylesheet and theme and starts the server (app.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from raqa.config import ASSETS_DIR, RunSettings
from raqa.evaluation.records import RESULTS_DIR
from raqa.loading import after_start
from raqa.reading.events import RunFailed, to_json
from raqa.service import Service
from raqa.web.ask_layout import ask_view
from raqa.web.ask_tab import page_form, run_events
from raqa.web.benchmark_tab import benchmark_view
from raqa.web.experiments_tab import experiments_view
from raqa.web.offer import offer_controls
from raqa.web.page_text import footer
from raqa.web.recordings import RECORDINGS_DIR
from raqa.web.render import esc
from raqa.web.visitors import RUNS, RUNS_ADMITTED, VisitorGate, limit_runs
from raqa.web.when_to_retrieve_tab import when_to_retrieve_view

# Gradio's copies of the downloads (runs, reports, benchmark tables): every hour, those older than an hour go
DELETE_CACHE = (3600, 3600)


def _models_line(service: Service) -> str:
    """The default reader's own model when it has one (the 1.5B), then the small model every other reader uses."""
    first = next(iter(service.readers), None)
    own = service.backends.get(first).loaded if first in service.backends else None
    small = service.backend.name if service.backend else "none"
    return f"{own.name} (default reader); small model {small}" if own is not None else small


def build_demo(service: Service, recordings_dir: Path = RECORDINGS_DIR, results_dir: Path = RESULTS_DIR) -> gr.Blocks:
    """The page: the header, the four tabs, the footer and the /run_events API, one queue for the model."""
    limits = service.config.public
    gate = VisitorGate(limits) if limits else None  # per-visitor limits on a public page (web/visitors.py)
    with gr.Blocks(title="raqa: when should a model admit ignorance?", delete_cache=DELETE_CACHE) as demo:
        gr.HTML(
            '<div class="raqa-header"><h1>raqa: when should a language model admit ignorance?</h1>'
            "<p>BM25 retrieves the top-K Wikipedia pages for your question. Iterative prompting shows the model a "
            "window of w pages at a time: it either answers, citing a page and sentence, or says "
            "<i>not found</i> and the window slides on. Read the windows <b>backward</b> (lowest score first) to "
            "watch a model invent answers from pages that do not hold them.</p>"
            f'<p class="raqa-meta">Model: {esc(_models_line(service))} · corpus: {esc(service.corpus_label)} '
            f"({len(service.pages):,} pages)</p></div>"
        )
        with gr.Tab("Ask", id="ask"):
            settings = ask_view(demo, service, recordings_dir, gate)
        with gr.Tab("When to retrieve", id="route"):
            when_to_retrieve_view(service, results_dir, recordings_dir / "pipeline", gate)
        with gr.Tab("Try a benchmark", id="benchmark"):
            benchmark_view(service, settings, gate)
        with gr.Tab("Experiments", id="experiments"):
            experiments_view(results_dir)
        gr.HTML(f'<div class="raqa-footer">{footer(service)}</div>')
        run_events_api(service, gate)
        offer_controls(demo)
    # live runs (concurrency group RUNS) wait in their model's line; the model's other work (Why this answer?, When
    # to retrieve) runs several at once only when the model shares its forward passes between them
    demo.queue(default_concurrency_limit=service.concurrent_runs, max_size=64)
    return demo


def run_events_api(service: Service, gate: VisitorGate | None) -> None:
    """/run_events: one run's events as JSON dicts, streamed, in the same lines as the page's runs (so API clients wait
    their turn like visitors, and hear their place); its parameters are the question and the form's values."""
    events_live = limit_runs(
        gate, lambda question, form: run_events(service, question, form), lambda m: to_json(RunFailed(m))
    )

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
        retrieval: str = RunSettings.retrieval,
    ) -> Iterator[dict]:
        """One run's events as JSON dicts, streamed (the same events `python -m raqa ask --json` prints)."""
        form = page_form(
            strategy,
            order,
            window,
            k=k,
            grounded_only=grounded_only,
            rationale=rationale,
            reader=reader,
            retrieval=retrieval,
        )
        yield from events_live(request, question, form)

    gr.api(events_here, api_name="run_events", concurrency_id=RUNS, concurrency_limit=RUNS_ADMITTED)


def launch(service: Service, **kwargs) -> None:
    css = (ASSETS_DIR / "style.css").read_text(encoding="utf-8")
    demo = build_demo(service)
    # the page is built: the 1.5B reads its fixed prompts and the small model loads while the server starts
    threading.Thread(target=after_start, args=(service,), name="raqa-after-start", daemon=True).start()
    demo.launch(css=css, theme=gr.themes.Soft(), **kwargs)
