"""The Experiments tab: every committed result file under assets/results/ as a plotly figure with its provenance.

Read once when the page is built; nothing is recomputed, and the figures are the lab's drawings of the records
(committed_figures.py). Left out here: running experiments (`python -m lab experiment`) and drawing the figures
(lab/figures/).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from raqa.evaluation.records import RESULTS_DIR, load_results
from raqa.web.committed_figures import REDRAW, committed_plots
from raqa.web.figures_run import message_figure
from raqa.web.render import esc

EXPERIMENT_ORDER = [
    "recall",
    "topk_vs_iterative",
    "window_order",
    "negative_windows",
    "unanswerable",
    "reading_defaults",
    "reader_comparison",
    "badges",
    "judges",
    "attribution",
    "when_to_retrieve",
    "pipeline",
    "ret_signal",
]


def experiment_caption(record: dict, css: str = "raqa-caption") -> str:
    """Where a committed result came from: the command, data, model and code that made it."""
    parts = [
        f"<b>{esc(record.get('experiment', '?'))}</b> · {esc(record.get('dataset', '?'))}",
        f"command: <code>{esc(record.get('command', '?'))}</code>"
        + (f", then <code>{esc(record['rescored'].get('command'))}</code>" if record.get("rescored") else ""),
        f"model: {esc(record.get('model') or 'none (retrieval only)')}",
        f"corpus: {esc(record.get('corpus', '?'))}",
        f"{esc(record.get('code_version', '?'))}, {esc(record.get('created', '?'))}, {esc(record.get('seconds', '?'))} s",
    ]
    return f'<div class="{css}">' + " · ".join(parts) + "</div>"


def experiments_view(results_dir: Path = RESULTS_DIR) -> None:
    """The committed results as figures, read once when the page is built; nothing is recomputed."""
    records = load_results(results_dir)
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
            plots = committed_plots(stem, "experiments", results_dir)
            plot = plots[0][1] if plots else message_figure(f"This figure is not drawn yet: run {REDRAW}.")
            gr.Plot(plot, elem_classes=["raqa-experiment"], elem_id=f"raqa-exp-{stem}")
            gr.HTML(experiment_caption(record))
            shown += 1
    if not shown:
        gr.HTML(
            '<div class="raqa-empty">No experiment results are committed yet: run python -m lab experiment NAME.</div>'
        )
