"""The page's "Why this answer?": a button on each answered window of a finished run asks the model which sentence
its answer depends on (reading/attribution.py), and the window is drawn again with its sentences coloured.

The button lives in the windows' HTML, so a small script (installed once when the page loads) forwards a click to
two hidden components: a box that takes the window's number and a button that starts `explain`. `explain` reads the
run from its exported JSON (the download the run has just made, so a live run and a replay work alike), adds the
Attribution event to it, and hands back the windows and the downloads with it. Left out: runs shown side by side
(the button is offered on single runs only).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from raqa.models.base import ModelError
from raqa.reading.attribution import attribute
from raqa.reading.events import Attribution, RunStarted, WindowVerdict, from_json, to_json
from raqa.web.export import temporary_folder, write_exports
from raqa.web.render import RunView, failed_html
from raqa.web.visitors import limit_runs

LOG = logging.getLogger(__name__)
# subtle: one delegated listener on the document, since the windows' HTML is replaced on every event of a run
WHY_JS = """() => {
  if (window.__raqaWhy) return;
  window.__raqaWhy = true;
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest(".raqa-why");
    if (!button) return;
    const box = document.querySelector("#raqa-why-window textarea, #raqa-why-window input");
    if (!box) return;
    box.value = button.dataset.window + ":" + Date.now();
    box.dispatchEvent(new Event("input", { bubbles: true }));
    setTimeout(() => document.querySelector("#raqa-why-go").click(), 60);
  });
}"""


def backend_named(service, model: str):
    """The loaded backend that made a run (RunStarted.model), or None when it is not loaded here."""
    for backend in (service.backend, *(lazy.loaded for lazy in service.backends.values())):
        if backend is not None and backend.name == model:
            return backend
    return None


def window_number(value: object) -> int | None:
    """The window number the button sent ("3:1733212345"), or None when it is not one."""
    head = str(value or "").split(":", 1)[0]
    return int(head) if head.isdigit() and 0 < int(head) < 10_000 else None


def explain_window(service, page_of, value, run_file) -> Iterator[tuple]:
    """Yield (windows, download_json, download_md): the windows with the attribution being worked out, then with it."""
    number = window_number(value)
    try:
        data = json.loads(Path(run_file).read_text(encoding="utf-8")) if run_file else []
        events = [from_json(item, page_of) for item in data]
    except (OSError, ValueError, TypeError) as e:
        yield failed_html(f"Why this answer? The run could not be read back: {e}"), gr.skip(), gr.skip()
        return
    started = [e for e in events if isinstance(e, RunStarted)]
    verdict = next((e for e in events if isinstance(e, WindowVerdict) and e.window == number), None)
    if len(started) != 1 or verdict is None:
        message = "Why this answer? works on one finished run: run the question, then press it."
        yield failed_html(message), gr.skip(), gr.skip()
        return
    view = RunView(explainable=True)
    for event in events:
        view.update(event)
    if number in view.attributions:
        yield view.windows_html(), gr.skip(), gr.skip()
        return
    backend = backend_named(service, started[0].model)
    view.explaining = number
    yield view.windows_html(), gr.skip(), gr.skip()
    try:
        if backend is None:
            raise ModelError(f"The model that made this run ({started[0].model}) is not loaded on this page.")
        found: Attribution = attribute(started[0].question, verdict, backend, started[0].settings)
    except ModelError as e:
        view.explaining = None
        yield failed_html(f"Why this answer? {e}") + view.windows_html(), gr.skip(), gr.skip()
        return
    view.explaining = None
    view.update(found)
    with temporary_folder("raqa-run-") as folder:
        as_json, as_md = write_exports([*data, to_json(found)], folder)
        yield view.windows_html(), gr.DownloadButton(value=str(as_json)), gr.DownloadButton(value=str(as_md))


def why_controls(demo: gr.Blocks, service, page_of, gate, newest, shown: tuple) -> None:
    """The hidden box and button the windows' "Why this answer?" buttons drive, and the listener that links them;
    newest (page_runs.NewestRun) is the run outputs' own: a new run replaces an attribution being worked out; shown
    is the outputs it writes (windows, download_json, download_md)."""
    windows, download_json, download_md = shown
    box = gr.Textbox(elem_id="raqa-why-window", elem_classes=["raqa-hidden"], show_label=False, container=False)
    go = gr.Button("why", elem_id="raqa-why-go", elem_classes=["raqa-hidden"])

    def explain_here(value, run_file):
        try:
            yield from explain_window(service, page_of, value, run_file)
        except Exception:  # last resort, as in a run: a bug gives a message, never a broken page
            LOG.exception("Why this answer? failed on an unexpected error")
            yield failed_html("Why this answer? stopped on an internal error."), gr.skip(), gr.skip()

    limited = limit_runs(gate, explain_here, lambda message: (failed_html(message), gr.skip(), gr.skip()))
    go.click(
        newest.only_newest(limited, pass_request=True),
        [box, download_json],
        [windows, download_json, download_md],
        concurrency_id="model",
        api_visibility="private",
    )
    demo.load(None, js=WHY_JS)
