"""Figures of the answer judge's committed results: the badges' precision before and after (experiment badges), judges
compared on the same test questions (compare-judges) and what an answer depends on (experiment attribution). JSON
record in, Figure out, as in experiments.py.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.figures.style import COLOURS, LAYOUT, errors, sample_label

BADGE_MEASURES = (
    ("green badges right", "answered_precision"),
    ("amber (Weak support) right", "weak_precision"),
    ("questions ending right and green", "right_and_answered"),
    ("unanswerable questions ending with an answer", "unanswerable_with_answer"),
)


def _share_panels(titles: list[str], panels: list[list[tuple[str, list[str], list[dict]]]], title: str) -> go.Figure:
    """One panel a dataset, in each one bar series (name, labels, estimates) a rule or judge, grouped, with 95%
    intervals and counts, on one percent scale with the 90% target for green."""
    figure = make_subplots(rows=1, cols=len(panels), subplot_titles=titles)
    for col, series in enumerate(panels, start=1):
        for colour, (name, labels, estimates) in zip(COLOURS, series, strict=False):
            shown = [e if e.get("n") and e.get("value") == e.get("value") else {"value": None} for e in estimates]
            figure.add_bar(
                x=labels,
                y=[e["value"] for e in shown],
                error_y=errors(shown),
                name=name,
                marker_color=colour,
                legendgroup=name,
                showlegend=col == 1,
                text=[f"n={e.get('n', 0)}" for e in estimates],
                textposition="outside",
                row=1,
                col=col,
            )
    figure.add_hline(y=0.9, line_dash="dash", annotation_text="target for green: 90%")
    figure.update_layout(title=title, barmode="group", **LAYOUT)
    figure.update_yaxes(tickformat=".0%", range=[0, 1.1])  # every panel, not only the first
    return figure


def badges_figure(record: dict) -> go.Figure:
    """experiment badges: per question, before (the judge's P alone) and after (the support model), per dataset."""
    results = record["results"]
    labels = [label for label, _ in BADGE_MEASURES]
    return _share_panels(
        [f"{d} test, n={r['per_question']['after']['questions']}" for d, r in results.items()],
        [
            [
                (rule, labels, [r["per_question"][rule][key] for _, key in BADGE_MEASURES])
                for rule in ("before", "after")
            ]
            for r in results.values()
        ],
        "The badge per question, the page's defaults: before and after the support model",
    )


JUDGE_MEASURES = (  # (label, where in a judge's results, which cut of first_at where it is one)
    ("page AUC (answer-bearing vs -free)", "window", None),
    ("best extraction right (per question)", "best_right", None),
    ("first page >= 0.7: right", "precision", "0.7"),
    ("first page >= 0.9: right", "precision", "0.9"),
    ("questions reaching 0.9", "answered", "0.9"),
)


def _judge_estimate(result: dict, key: str, cut: str | None) -> dict:
    if key == "window":
        return {**result["window"]["auc"], "n": result["window"]["auc"].get("n_positive", 0)}
    per_question = result["per_question"]
    return per_question["first_at"][cut][key] if cut else per_question[key]


def judges_figure(record: dict) -> go.Figure:
    """compare-judges: each judge on the same test pages and questions, per dataset."""
    results = record["results"]
    n = record.get("sample", {}).get("questions_per_set", "?")
    labels = [label for label, _, _ in JUDGE_MEASURES]
    return _share_panels(
        [f"{d} test, n={n} questions" for d in results],
        [
            [
                (folder, labels, [_judge_estimate(r, key, cut) for _, key, cut in JUDGE_MEASURES])
                for folder, r in per.items()
            ]
            for per in results.values()
        ],
        "Answer judges on the same test questions: pages told apart, and the run's first confident page",
    )


DEPENDS_LABELS = (
    ("depends_on_cited", "the cited sentence"),
    ("depends_on_other", "another sentence"),
    ("depends_on_none", "no sentence"),
)
AUC_LABELS = (
    ("depends_on_a_sentence", "depends on a sentence"),
    ("largest_drop", "largest drop"),
    ("p_answer", "P(answer)"),
)


def attribution_figure(record: dict) -> go.Figure:
    """experiment attribution: what each answered window's answer depends on, by kind of window and by badge, and
    how well that (and P(answer)) tells a right answer from a wrong one."""
    r = record["results"]
    groups = [("all answered", r["all"])] + [(k.replace("_", "-"), v) for k, v in r["by_kind"].items()]
    groups += [(f"badge {b}", v) for b, v in r["by_badge"].items()]
    figure = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.68, 0.32],
        subplot_titles=[
            f"What the answer depends on ({r['answered_windows']} answered windows, {sample_label(record)})",
            "Right vs wrong answer: AUC",
        ],
    )
    for colour, (key, label) in zip(COLOURS, DEPENDS_LABELS, strict=False):
        estimates = [g[key] for _, g in groups]
        figure.add_bar(
            x=[f"{name} (n={g['n']})" for name, g in groups],
            y=[e["value"] for e in estimates],
            error_y=errors(estimates),
            name=label,
            marker_color=colour,
            row=1,
            col=1,
        )
    aucs = [r["right_vs_wrong_auc"][key] for key, _ in AUC_LABELS]
    figure.add_bar(
        x=[label for _, label in AUC_LABELS],
        y=[a["value"] for a in aucs],
        error_y=errors(aucs),
        marker_color=COLOURS[3],
        name="AUC",
        showlegend=False,
        row=1,
        col=2,
    )
    figure.add_hline(y=0.5, line_dash="dash", row=1, col=2, annotation_text="chance")
    figure.update_yaxes(tickformat=".0%", range=[0, 1.05], row=1, col=1)
    figure.update_yaxes(range=[0, 1.05], row=1, col=2)
    figure.update_layout(
        title="Why did it answer that? Leave-one-sentence-out attribution",
        barmode="group",
        **{**LAYOUT, "height": 440},
    )
    return figure
