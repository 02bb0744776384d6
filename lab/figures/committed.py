"""Each committed record's figures, drawn once into plotly JSON under assets/results/figures/ for the page to show.

A record's figures depend on the record alone, so the lab draws them when a record changes (`python -m
lab.ops.render_docs`, which renders the docs tables too) and the page reads the files as they are: the Space ships
no figure code and builds no figure at start. Files: `figures/<record stem>/<place>-<i>-<name>.json`, where place
is `experiments` (the Experiments tab, one figure a record) or `w2r` (the When-to-retrieve tab's accordion, in
order). tests/test_figures.py fails when a file differs from what the record draws now. Left out here: the figure
functions themselves, and showing the files (the page).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go

from lab.figures.experiments import FIGURES as EXPERIMENT_FIGURES
from lab.figures.when_to_retrieve import (
    ADAPT_FIGURES,
    PIPELINE_FIGURES,
    accuracy_figure,
    ret_signal_figure,
    risk_coverage_figure,
)
from raqa.evaluation.records import RESULTS_DIR, load_results
from raqa.web.committed_figures import FIGURES_DIR
from raqa.web.figures_run import safe

Draw = Callable[[dict], go.Figure]
# an experiment's figures: the Experiments tab's one, then the When-to-retrieve tab's, in the order shown
PLACES: dict[str, dict[str, dict[str, Draw]]] = {
    **{name: {"experiments": {name: make}} for name, make in EXPERIMENT_FIGURES.items()},
    "when_to_retrieve": {"experiments": {"when_to_retrieve": accuracy_figure}, "w2r": ADAPT_FIGURES},
    "pipeline": {"experiments": {"pipeline": risk_coverage_figure}, "w2r": PIPELINE_FIGURES},
    "ret_signal": {"experiments": {"ret_signal": ret_signal_figure}, "w2r": {"ret": ret_signal_figure}},
}


def drawn(results_dir: Path = RESULTS_DIR) -> dict[str, str]:
    """Every figure the committed records draw now: its path under figures/ -> plotly JSON (a figure that cannot be
    drawn says why, as on the page)."""
    files = {}
    for stem, record in load_results(results_dir).items():
        for place, figures in PLACES.get(record.get("experiment"), {}).items():
            for i, (name, make) in enumerate(figures.items()):
                files[f"{stem}/{place}-{i}-{name}.json"] = safe(make, record).to_json()
    return files


def outdated(results_dir: Path = RESULTS_DIR, fresh: dict[str, str] | None = None) -> list[str]:
    """The figure files that differ from what the records draw now (fresh, when already drawn), or are missing, or
    belong to no record."""
    fresh = drawn(results_dir) if fresh is None else fresh
    folder = results_dir / FIGURES_DIR
    held = {p.relative_to(folder).as_posix(): p for p in folder.glob("*/*.json")}
    differ = [n for n, text in fresh.items() if n not in held or json.loads(held[n].read_text()) != json.loads(text)]
    return sorted(differ + [n for n in held if n not in fresh])


def write(results_dir: Path = RESULTS_DIR, files: dict[str, str] | None = None) -> int:
    """Every record's figures (files, when already drawn) written into figures/, replacing what was there; the number
    of files."""
    files = drawn(results_dir) if files is None else files
    folder = results_dir / FIGURES_DIR
    shutil.rmtree(folder, ignore_errors=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return len(files)
