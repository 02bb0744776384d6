"""The Experiments tab: every committed result file under assets/results/ as a plotly figure with its provenance.

Read once when the page is built; nothing is recomputed. Left out here: running experiments
(evaluation/, `python -m lab experiment`) and the figure functions themselves (figures_*.py).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from raqa.evaluation.records import load_results
from raqa.web.figures_experiments import FIGURES as RESULT_FIGURES
from raqa.web.figures_run import safe
from raqa.web.figures_when_to_retrieve import accuracy_figure, ret_signal_figure, risk_coverage_figure
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
FIGURES = {
    **RESULT_FIGURES,
    "when_to_retrieve": accuracy_figure,
    "pipeline": risk_coverage_figure,
    "ret_signal": ret_signal_figure,
}


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
            '<div class="raqa-empty">No experiment results are committed yet: run python -m lab experiment NAME.</div>'
        )
