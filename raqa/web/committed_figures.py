"""The committed records' figures as the lab drew them (lab/figures/committed.py): plotly JSON read and handed to
gr.Plot as it is, so the page builds no figure and ships no figure code.

Example:
    >>> [name for name, _ in committed_plots("no-such-record", "w2r")]
    []
"""

from __future__ import annotations

from pathlib import Path

from gradio.components.plot import PlotData

from raqa.evaluation.records import RESULTS_DIR

FIGURES_DIR = "figures"  # beside the records: figures/<record stem>/<place>-<i>-<name>.json
REDRAW = "python -m lab.ops.render_docs"


def committed_plots(stem: str, place: str, results_dir: Path = RESULTS_DIR) -> list[tuple[str, PlotData]]:
    """A record's figures for one place of the page ("experiments" or "w2r"), in order: (name, plot)."""
    files = sorted((results_dir / FIGURES_DIR / stem).glob(f"{place}-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [(p.stem.split("-", 2)[2], PlotData(type="plotly", plot=p.read_text(encoding="utf-8"))) for p in files]
