"""The page shows the records' figures as the lab drew them: the committed drawings are what the records draw now,
each place gets its figures in order, and a record changed or removed after drawing is named stale."""

from __future__ import annotations

import json

from test_pipeline_eval import _rows

from lab.evaluation.when_to_retrieve_scores import summarise_scores
from lab.figures import committed
from lab.figures.when_to_retrieve import PIPELINE_FIGURES
from lab.records import write_record
from raqa.web.committed_figures import FIGURES_DIR, committed_plots


def test_the_committed_figures_are_what_the_committed_records_draw_now() -> None:
    assert committed.outdated() == [], "figures differ from their records: run python -m lab.ops.render_docs"


def _pipeline_record(folder) -> str:
    rows = _rows()
    record = {**summarise_scores([dict(r, split="dev") for r in rows], rows), "examples": []}
    return write_record("pipeline", "nq", record, {"command": "python -m lab experiment pipeline"}, folder).stem


def test_each_place_gets_its_figures_in_order_as_plotly_json(tmp_path) -> None:
    stem = _pipeline_record(tmp_path)
    assert committed_plots(stem, "w2r", tmp_path) == []  # not drawn yet: the page says so
    assert committed.write(tmp_path) == 1 + len(PIPELINE_FIGURES)
    w2r = committed_plots(stem, "w2r", tmp_path)
    assert [name for name, _ in w2r] == list(PIPELINE_FIGURES)
    assert all(plot.type == "plotly" and "layout" in json.loads(plot.plot) for _, plot in w2r)
    assert [name for name, _ in committed_plots(stem, "experiments", tmp_path)] == ["pipeline"]


def test_a_record_changed_or_removed_after_drawing_is_named_stale(tmp_path) -> None:
    stem = _pipeline_record(tmp_path)
    committed.write(tmp_path)
    assert committed.outdated(tmp_path) == []
    path = tmp_path / f"{stem}.json"
    record = json.loads(path.read_text())
    record["results"] = {}  # the figures now say they cannot be drawn
    path.write_text(json.dumps(record))
    assert f"{stem}/w2r-0-risk_coverage.json" in committed.outdated(tmp_path)
    path.unlink()
    assert committed.outdated(tmp_path) == sorted(
        p.relative_to(tmp_path / FIGURES_DIR).as_posix() for p in (tmp_path / FIGURES_DIR).glob("*/*.json")
    )
