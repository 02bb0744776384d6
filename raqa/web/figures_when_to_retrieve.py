"""Figures of the committed eval-adapt result (assets/results/when_to_retrieve-*.json): record in, Figure out.

Three figures, each with 95% intervals as error bars and sample sizes in the labels: accuracy by policy
(both the paper's "contains the gold answer" accuracy and exact match), the share of questions on which
Adapt-LLM asked for <RET>, and the paper's Table 3 split.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from raqa.web.figures_experiments import _LAYOUT, COLOURS, _errors

POLICY_NAMES = {
    "never": "NR-LLM (never)",
    "always": "AR-LLM (always)",
    "adapt": "Adapt-LLM",
    "adapt_threshold": "Adapt-LLM, P(<RET>) threshold",
    "popularity": "Popularity threshold",
}
METRICS = {"accuracy": "accuracy (gold answer contained)", "exact_match": "exact match"}


def _datasets(record: dict) -> dict[str, dict]:
    return record["results"]["datasets"]


def accuracy_figure(record: dict) -> go.Figure:
    """Accuracy of each policy on each dataset, one subplot per metric."""
    datasets = _datasets(record)
    figure = make_subplots(rows=1, cols=2, subplot_titles=list(METRICS.values()), shared_yaxes=True)
    for col, metric in enumerate(METRICS, start=1):
        policies = [p for p in POLICY_NAMES if any(p in d["policies"] for d in datasets.values())]
        for colour, policy in zip(COLOURS, policies, strict=False):
            names = [f"{name} (n={d['n']})" for name, d in datasets.items() if policy in d["policies"]]
            estimates = [d["policies"][policy][metric] for d in datasets.values() if policy in d["policies"]]
            figure.add_bar(
                x=names,
                y=[e["value"] for e in estimates],
                error_y=_errors(estimates),
                name=POLICY_NAMES[policy],
                marker_color=colour,
                showlegend=col == 1,
                legendgroup=policy,
                row=1,
                col=col,
            )
    figure.update_yaxes(tickformat=".0%", title_text="share of questions", col=1)
    figure.update_layout(title="When to retrieve: accuracy by policy (95% intervals)", barmode="group", **_LAYOUT)
    return figure


def ret_rate_figure(record: dict) -> go.Figure:
    """How often Adapt-LLM asked for retrieval, next to how often the closed-book model already knew."""
    datasets = _datasets(record)
    names = [f"{name} (n={d['n']})" for name, d in datasets.items()]
    figure = go.Figure()
    series = [
        ("Adapt-LLM asked for <RET>", lambda d: d["ret_rate"]),
        ("NR-LLM answered correctly (no retrieval needed)", lambda d: d["nr_knows"]),
        ("top BM25 page holds a gold answer", lambda d: d["top_page_has_answer"]),
    ]
    for colour, (label, get) in zip(COLOURS, series, strict=False):
        estimates = [get(d) for d in datasets.values()]
        figure.add_bar(
            x=names, y=[e["value"] for e in estimates], error_y=_errors(estimates), name=label, marker_color=colour
        )
    figure.update_layout(
        title="How often Adapt-LLM asks for retrieval",
        barmode="group",
        yaxis=dict(tickformat=".0%", title="share of questions", range=[0, 1.05]),
        **_LAYOUT,
    )
    return figure


def table3_figure(record: dict) -> go.Figure:
    """The paper's Table 3: Adapt-LLM's accuracy with and without context, for <RET> and direct questions."""
    datasets = {k: v for k, v in _datasets(record).items() if "table3" in v}
    titles = [f"{name}" for name in datasets]
    figure = make_subplots(rows=1, cols=max(1, len(datasets)), subplot_titles=titles, shared_yaxes=True)
    for col, d in enumerate(datasets.values(), start=1):
        groups = d["table3"]
        labels = [
            f"asked <RET> (n={groups['asked_ret']['n']})",
            f"answered directly (n={groups['answered_directly']['n']})",
        ]
        for colour, which in zip(COLOURS, ("with_context", "without_context"), strict=False):
            estimates = [groups[g][which]["accuracy"] for g in ("asked_ret", "answered_directly")]
            figure.add_bar(
                x=labels,
                y=[e["value"] for e in estimates],
                error_y=_errors(estimates),
                name=which.replace("_", " "),
                marker_color=colour,
                showlegend=col == 1,
                legendgroup=which,
                row=1,
                col=col,
            )
    figure.update_yaxes(tickformat=".0%", title_text="accuracy (contains gold)", col=1)
    figure.update_layout(
        title="Adapt-LLM's decisions: accuracy with and without context (Table 3)", barmode="group", **_LAYOUT
    )
    return figure


def threshold_figure(record: dict) -> go.Figure:
    """Accuracy against the share of questions retrieved, as the threshold on Adapt-LLM's P(<RET>) moves."""
    figure = go.Figure()
    for colour, (name, d) in zip(COLOURS, _datasets(record).items(), strict=False):
        curve = d.get("threshold_curve") or []
        figure.add_scatter(
            x=[p["retrieval_rate"] for p in curve],
            y=[p["accuracy"] for p in curve],
            mode="lines+markers",
            marker_size=4,
            line_color=colour,
            name=f"{name}: Adapt-LLM, retrieve when P(<RET>) >= t (n={d['n']})",
            hovertext=[f"t = {p['threshold']:.3f}" for p in curve],
        )
        ret = d["ret_rate"]["value"]
        figure.add_scatter(
            x=[ret],
            y=[d["policies"]["adapt"]["accuracy"]["value"]],
            mode="markers",
            marker=dict(symbol="star", size=14, color=colour),
            name=f"{name}: Adapt-LLM's own <RET> token",
        )
        for policy, x, symbol in (("never", 0.0, "circle-open"), ("always", 1.0, "square-open")):
            figure.add_scatter(
                x=[x],
                y=[d["policies"][policy]["accuracy"]["value"]],
                mode="markers",
                marker=dict(symbol=symbol, size=11, color=colour),
                name=f"{name}: {POLICY_NAMES[policy]}",
            )
    figure.update_layout(
        title="The retrieval budget: accuracy as Adapt-LLM retrieves for more questions",
        xaxis=dict(title="share of questions retrieved", tickformat=".0%", range=[-0.03, 1.03]),
        yaxis=dict(title="accuracy (gold answer contained)", tickformat=".0%"),
        **{**_LAYOUT, "height": 420},
    )
    return figure


FIGURES = {
    "accuracy": accuracy_figure,
    "threshold": threshold_figure,
    "ret_rate": ret_rate_figure,
    "table3": table3_figure,
}
