"""Figures of the committed experiment results: one pure function per experiment, JSON record in, Figure out.

Every point carries its 95% interval as an error bar and every title its sample size; published
numbers from the paper, where the record has them, are drawn as dashed reference lines.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.figures.judge import attribution_figure, badges_figure, judges_figure
from lab.figures.style import COLOURS, LAYOUT, errors, sample_label


def recall_figure(record: dict) -> go.Figure:
    results = record["results"]
    figure = go.Figure()
    for colour, (tokenizer, by_k) in zip(COLOURS, results["recall"].items(), strict=False):
        ks = [int(k) for k in by_k]
        estimates = list(by_k.values())
        figure.add_scatter(
            x=ks,
            y=[e["value"] for e in estimates],
            error_y=errors(estimates),
            name=f"BM25, {tokenizer} tokens",
            mode="lines+markers",
            line_color=colour,
        )
    ceiling = results["answer_anywhere_in_corpus"]["value"]
    figure.add_hline(y=ceiling, line_dash="dot", annotation_text=f"answer anywhere in corpus: {ceiling:.0%}")
    figure.update_layout(
        title=f"Recall@K: a page holding the answer in the top K ({sample_label(record)})",
        xaxis=dict(type="log", title="K"),
        yaxis=dict(title="share of questions", tickformat=".0%"),
        **LAYOUT,
    )
    return figure


def topk_vs_iterative_figure(record: dict) -> go.Figure:
    configs = record["results"]["configs"]
    names = [n.replace("_", " ") for n in configs]
    figure = make_subplots(rows=1, cols=2, subplot_titles=("Answer quality", "Prompt tokens per question"))
    for colour, metric in zip(COLOURS, ("exact_match", "contains_gold"), strict=False):
        estimates = [c[metric] for c in configs.values()]
        figure.add_bar(
            x=names,
            y=[e["value"] for e in estimates],
            error_y=errors(estimates),
            name=metric.replace("_", " "),
            marker_color=colour,
            row=1,
            col=1,
        )
    tokens = [c["prompt_tokens"] for c in configs.values()]
    figure.add_bar(
        x=names,
        y=[e["value"] for e in tokens],
        error_y=errors(tokens),
        name="prompt tokens",
        marker_color="#8c959f",
        row=1,
        col=2,
    )
    figure.update_yaxes(tickformat=".0%", row=1, col=1)
    figure.update_layout(title=f"Top-K versus iterative prompting ({sample_label(record)})", barmode="group", **LAYOUT)
    return figure


def window_order_figure(record: dict) -> go.Figure:
    rows = record["results"]["rows"]
    figure = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Answer contains a gold answer", "Negative windows read before the first positive"),
    )
    for colour, order in zip(COLOURS, ("forward", "backward"), strict=False):
        chosen = [r for r in rows if r["order"] == order]
        sizes = [r["window"] for r in chosen]
        quality = [r["contains_gold"] for r in chosen]
        negatives = [r["negative_windows_before_first_positive"] for r in chosen]
        figure.add_scatter(
            x=sizes,
            y=[e["value"] for e in quality],
            error_y=errors(quality),
            name=order,
            line_color=colour,
            row=1,
            col=1,
        )
        figure.add_scatter(
            x=sizes,
            y=[e["value"] for e in negatives],
            error_y=errors(negatives),
            name=f"{order} (negatives)",
            line_color=colour,
            line_dash="dash",
            row=1,
            col=2,
        )
    figure.update_xaxes(title="window size w")
    figure.update_yaxes(tickformat=".0%", row=1, col=1)
    figure.update_layout(title=f"Window size and order, K={record['results']['k']} ({sample_label(record)})", **LAYOUT)
    return figure


def negative_windows_figure(record: dict) -> go.Figure:
    results = record["results"]
    rows = results["rows"]
    shots = [r["shots"] for r in rows]
    figure = go.Figure()
    series = {
        "answered a negative window (false answer)": "false_answer_rate_on_negative",
        "declined a positive window": "declined_on_positive",
        "positive window: answer contains gold": "contains_gold_on_positive",
    }
    for colour, (label, key) in zip(COLOURS, series.items(), strict=False):
        estimates = [r[key] for r in rows]
        figure.add_scatter(
            x=shots,
            y=[e["value"] for e in estimates],
            error_y=errors(estimates),
            name=label,
            line_color=colour,
            mode="lines+markers",
        )
    paper = record.get("paper", {}).get("false_answer_rate_zero_shot")
    if paper is not None:
        figure.add_hline(
            y=paper, line_dash="dash", line_color="#57606a", annotation_text=f"paper, strong model, 0-shot: {paper:.1%}"
        )
    figure.update_layout(
        title=f"Negative windows: {results['negative_windows']} negative and {results['positive_windows']} positive windows of w={results['window']} ({sample_label(record)})",
        xaxis=dict(title="in-context examples (balanced)", tickvals=shots),
        yaxis=dict(tickformat=".0%", range=[0, 1.05]),
        **LAYOUT,
    )
    return figure


def unanswerable_figure(record: dict) -> go.Figure:
    runs = record["results"]["runs"]
    labels = {"default": "stop at first answer (paper)", "grounded_only": "accept only grounded answers"}
    estimates = [runs[k]["ended_with_an_answer"] for k in labels if k in runs]
    figure = go.Figure()
    figure.add_bar(
        x=[labels[k] for k in labels if k in runs],
        y=[e["value"] for e in estimates],
        error_y=errors(estimates),
        marker_color=["#cf222e", "#bf8700"],
    )
    figure.update_layout(
        title=f"Unanswerable questions that still end with an answer ({record['results']['questions']} questions, {record.get('dataset')})",
        yaxis=dict(tickformat=".0%", range=[0, 1.05], title="share of questions"),
        **LAYOUT,
    )
    return figure


READER_METRICS = (  # label on the x axis -> where the estimate lives in a reader's record
    ("false answers on negative windows", ("windows", "false_answer_rate_on_negative")),
    ("exact match on positive windows", ("windows", "exact_match_on_positive")),
    ("answers badged Answered", ("windows", "grounded_share_of_answers")),
    ("Answered badge: precision", ("windows", "badge", "precision")),
    ("Answered badge: recall", ("windows", "badge", "recall")),
    ("lexical check (before): precision", ("windows", "badge_lexical", "precision")),
    ("lexical check (before): recall", ("windows", "badge_lexical", "recall")),
    ("iterative forward: exact match", ("iterative", "forward", "exact_match")),
    ("iterative backward: exact match", ("iterative", "backward", "exact_match")),
    ("unanswerable questions answered", ("unanswerable", "ended_with_an_answer")),
)


def _at(record: dict, path: tuple[str, ...]) -> dict | None:
    """The estimate at path, or None where an older record does not have it."""
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def reader_comparison_figure(record: dict) -> go.Figure:
    """The base model and the trained reader side by side on each measurement (lower is better for false answers)."""
    results = record["results"]
    figure = go.Figure()
    metrics = [
        (label, path) for label, path in READER_METRICS if any(_at(r, path) for r in results["readers"].values())
    ]
    labels = [label for label, _ in metrics]
    for colour, (name, reader) in zip(COLOURS, results["readers"].items(), strict=False):
        estimates = [_at(reader, path) or {"value": None, "n": 0} for _, path in metrics]
        threshold = reader.get("settings", {}).get("answer_threshold")
        mode = reader.get("settings", {}).get("reader_mode", "model")
        detail = f"threshold {threshold:.2f}" if threshold is not None and mode == "model" else mode.replace("_", " + ")
        judge_auc = reader.get("windows", {}).get("auc_judge")
        detail += f", judge AUC {judge_auc:.2f}" if isinstance(judge_auc, float) else ""
        figure.add_bar(
            x=labels,
            y=[e["value"] for e in estimates],
            error_y=errors([e for e in estimates if e["value"] is not None])
            if all(e["value"] is not None for e in estimates)
            else None,
            name=f"{reader.get('label', name)} ({detail})",
            marker_color=colour,
            text=[f"{e['value']:.0%} (n={e['n']})" if e["value"] is not None else "" for e in estimates],
            textposition="outside",
        )
    figure.update_layout(
        title=(
            f"Readers compared: {results['negative_windows']} negative and "
            f"{results['positive_windows']} positive windows of w={results['window']}, "
            f"{results['iterative_questions']} questions per order, {results['unanswerable_questions']} "
            f"unanswerable NQ questions ({sample_label(record)})"
        ),
        barmode="group",
        yaxis=dict(tickformat=".0%", range=[0, 1.15], title="share"),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        title_font_size=13,
        **{**LAYOUT, "height": 520, "margin": dict(l=60, r=20, t=130, b=50)},
    )
    return figure


DEFAULTS_METRICS = (  # bar label -> where the estimate lives in a configuration's row
    ("exact match on positive windows", ("exact_match_on_positive",)),
    ("false answers on negative windows", ("false_answer_rate_on_negative",)),
    ("Answered badge: precision", ("badge", "precision")),
)


def reading_defaults_figure(record: dict) -> go.Figure:
    """Exact match and false answers of the base model per window size and in-window page order."""
    results = record["results"]
    rows = results["rows"]
    figure = go.Figure()
    for colour, (name, path) in zip(COLOURS, DEFAULTS_METRICS, strict=False):
        estimates = [_at(row, path) or {"value": None, "n": 0} for row in rows]
        if not any(e["value"] is not None for e in estimates):
            continue
        figure.add_bar(
            x=[row["label"] for row in rows],
            y=[e["value"] for e in estimates],
            error_y=errors(estimates),
            name=name,
            marker_color=colour,
            text=[f"{e['value']:.0%} (n={e['n']})" if e["value"] is not None else "" for e in estimates],
            textposition="outside",
        )
    figure.update_layout(
        title=f"Which window the base model reads best; chosen: {results['chosen']['label']} ({sample_label(record)} per kind)",
        barmode="group",
        yaxis=dict(tickformat=".0%", range=[0, 1.15], title="share of windows"),
        **LAYOUT,
    )
    return figure


FIGURES = {
    "recall": recall_figure,
    "reading_defaults": reading_defaults_figure,
    "topk_vs_iterative": topk_vs_iterative_figure,
    "window_order": window_order_figure,
    "negative_windows": negative_windows_figure,
    "unanswerable": unanswerable_figure,
    "reader_comparison": reader_comparison_figure,
    "badges": badges_figure,
    "judges": judges_figure,
    "attribution": attribution_figure,
}
