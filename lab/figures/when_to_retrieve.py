"""Figures of the committed When-to-retrieve records: record in, Figure out, 95% intervals and sample sizes shown.

experiment pipeline (assets/results/pipeline-*.json): risk-coverage curves (one subplot per test set: the closed-book
signals answering their most confident questions first, and the full pipeline as its threshold sweeps from never to
always retrieving), each signal's AUC against wrong closed-book answers, and selective accuracy against coverage for
every configuration at its dev-chosen threshold. experiment when_to_retrieve (assets/results/when_to_retrieve-*.json):
accuracy by policy (the paper's "contains the gold answer" accuracy and exact match), the retrieval budget as the
P(<RET>) threshold moves, the share of questions on which Adapt-LLM asked for <RET>, and the paper's Table 3 split.
experiment ret_signal: two adapters' P(<RET>). The tab shows them all under one accordion (FIGURES).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.figures.style import COLOURS, LAYOUT, errors
from raqa.when_to_retrieve.pipeline import PIPELINE_TITLES
from raqa.when_to_retrieve.uncertainty import SIGNAL_TITLES


def _datasets(record: dict) -> dict[str, dict]:
    return record["results"]["datasets"]


def _side_by_side(datasets: dict) -> go.Figure:
    """One panel a dataset, side by side on a shared y axis, each titled with its sample size."""
    titles = [f"{name} (n={d['n']})" for name, d in datasets.items()]
    return make_subplots(rows=1, cols=len(datasets), shared_yaxes=True, subplot_titles=titles)


def risk_coverage_figure(record: dict, reader: str = "base+judge") -> go.Figure:
    """Risk (wrong among answered) against coverage (answered share): lower and further right is better."""
    datasets = _datasets(record)
    figure = _side_by_side(datasets)
    for col, d in enumerate(datasets.values(), start=1):
        for colour, (signal, curve) in zip(COLOURS * 2, d["curves"]["closed_book"].items(), strict=False):
            figure.add_scatter(
                x=curve["coverage"],
                y=curve["risk"],
                mode="lines",
                line=dict(color=colour, width=1),
                name=f"closed-book, {SIGNAL_TITLES[signal]} (AURC {curve['aurc']})",
                legendgroup=signal,
                showlegend=col == 1,
                opacity=0.6,
                row=1,
                col=col,
            )
        best = [
            d["targets"][k].split(":")[1] for k in ("best_pipeline", "best_abstaining_pipeline") if k in d["targets"]
        ]
        for policy in dict.fromkeys(["adapt", *best]):
            curve = d["curves"]["pipeline"].get(f"{policy}:{reader}")
            if curve:
                figure.add_scatter(
                    x=curve["coverage"],
                    y=curve["risk"],
                    mode="lines+markers",
                    marker=dict(size=4),
                    line=dict(width=3),
                    name=f"pipeline, {PIPELINE_TITLES[policy]}, {reader} (AURC {curve['aurc']})",
                    legendgroup=f"p-{policy}",
                    showlegend=col == 1,
                    row=1,
                    col=col,
                )
    figure.update_xaxes(title_text="coverage (share answered)", tickformat=".0%", range=[0, 1.02])
    figure.update_yaxes(title_text="risk (wrong among answered)", tickformat=".0%", col=1)
    figure.update_layout(
        title="Risk-coverage: when the model answers, how often it is wrong", **{**LAYOUT, "height": 460}
    )
    return figure


def auc_figure(record: dict) -> go.Figure:
    """Each decision signal's AUC at ranking wrong closed-book answers, per test set, with the 0.70 target."""
    datasets = _datasets(record)
    figure = go.Figure()
    for colour, (name, d) in zip(COLOURS, datasets.items(), strict=False):
        signals = list(d["auc"])
        estimates = [d["auc"][s] for s in signals]
        figure.add_bar(
            x=[SIGNAL_TITLES[s] for s in signals],
            y=[e["value"] for e in estimates],
            error_y=errors([e if e["low"] is not None else {"value": None} for e in estimates]),
            name=f"{name} (n={d['n']}, {estimates[0]['wrong']} wrong)",
            marker_color=colour,
            showlegend=True,
        )
    figure.add_hline(y=0.7, line_dash="dash", annotation_text="target 0.70")
    figure.add_hline(y=0.5, line_dash="dot", annotation_text="chance")
    figure.update_yaxes(range=[0, 1], title_text="AUC (wrong closed-book answers)")
    figure.update_layout(title="Which signal knows when the model is wrong (95% intervals)", barmode="group", **LAYOUT)
    return figure


def operating_points_figure(record: dict) -> go.Figure:
    """Selective accuracy against coverage for every configuration at its dev-chosen threshold."""
    datasets = _datasets(record)
    figure = _side_by_side(datasets)
    groups = {"never": "#6e7781", "closed_book": "#bf8700", "always": "#cf222e", "pipeline": "#0969da"}
    for col, d in enumerate(datasets.values(), start=1):
        for group, colour in groups.items():
            names = [n for n in d["table"] if n.split(":")[0] == group]
            cov = [d["table"][n]["coverage"] for n in names]
            sel = [d["table"][n]["selective_accuracy"] for n in names]
            figure.add_scatter(
                x=[c["value"] for c in cov],
                y=[s["value"] for s in sel],
                mode="markers",
                error_x=errors(cov),
                error_y=errors(sel),
                marker=dict(color=colour, size=9),
                text=names,
                hovertemplate="%{text}<br>coverage %{x:.1%}<br>accuracy among answered %{y:.1%}<extra></extra>",
                name=group.replace("_", "-"),
                legendgroup=group,
                showlegend=col == 1,
                row=1,
                col=col,
            )
    figure.update_xaxes(title_text="coverage (share answered)", tickformat=".0%")
    figure.update_yaxes(title_text="accuracy among answered", tickformat=".0%", col=1)
    figure.update_layout(title="Every configuration at its dev-chosen threshold (95% intervals)", **LAYOUT)
    return figure


def ret_signal_figure(record: dict) -> go.Figure:
    """Two Adapt-LLM adapters' P(<RET>) on each test set's questions, split by whether the closed-book answer
    was right (experiment ret_signal's record): an informative P(<RET>) puts the wrong ones higher."""
    results = record["results"]
    tests = [name for name in results["groups"] if name.startswith("test:")]
    titles = []
    for name in tests:
        auc = results["groups"][name]["auc"]
        titles.append(
            f"{name[5:]}: AUC {auc['baseline']['value']} (baseline) vs {auc['candidate']['value']} (candidate)"
        )
    figure = make_subplots(rows=1, cols=len(tests), shared_yaxes=True, subplot_titles=titles)
    kinds = {False: ("closed-book answer right", "#1a7f37"), True: ("closed-book answer wrong", "#cf222e")}
    for col, name in enumerate(tests, start=1):
        questions = results["questions"][name]
        for needs, (label, colour) in kinds.items():
            chosen = [q for q in questions if q["needs_retrieval"] is needs]
            figure.add_box(
                x=["baseline"] * len(chosen) + ["candidate"] * len(chosen),
                y=[q["baseline"] for q in chosen] + [q["candidate"] for q in chosen],
                name=f"{label}",
                marker_color=colour,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker=dict(size=3, opacity=0.5),
                legendgroup=label,
                showlegend=col == 1,
                row=1,
                col=col,
            )
    figure.update_yaxes(title_text="P(<RET>)", range=[0, 1], col=1)
    figure.update_layout(
        title="P(<RET>) of two Adapt-LLM adapters: higher on wrong answers is what helps", boxmode="group", **LAYOUT
    )
    return figure


POLICY_NAMES = {
    "never": "NR-LLM (never)",
    "always": "AR-LLM (always)",
    "adapt": "Adapt-LLM",
    "adapt_threshold": "Adapt-LLM, P(<RET>) threshold",
    "popularity": "Popularity threshold",
}
METRIC_LABELS = {"accuracy": "accuracy (gold answer contained)", "exact_match": "exact match"}


def _bars(figure: go.Figure, x: list[str], estimates: list[dict], name: str, colour: str, where: dict) -> None:
    """One series of shares as bars with their 95% intervals (where: the subplot and legend group)."""
    figure.add_bar(
        x=x, y=[e["value"] for e in estimates], error_y=errors(estimates), name=name, marker_color=colour, **where
    )


def _cell(col: int, group: str) -> dict:
    """Subplot col of one row; the legend names each group once, from the first subplot."""
    return dict(showlegend=col == 1, legendgroup=group, row=1, col=col)


def accuracy_figure(record: dict) -> go.Figure:
    """Accuracy of each policy on each dataset, one subplot per metric."""
    datasets = _datasets(record)
    figure = make_subplots(rows=1, cols=2, subplot_titles=list(METRIC_LABELS.values()), shared_yaxes=True)
    policies = [p for p in POLICY_NAMES if any(p in d["policies"] for d in datasets.values())]
    for col, metric in enumerate(METRIC_LABELS, start=1):
        for colour, policy in zip(COLOURS, policies, strict=False):
            names = [f"{name} (n={d['n']})" for name, d in datasets.items() if policy in d["policies"]]
            estimates = [d["policies"][policy][metric] for d in datasets.values() if policy in d["policies"]]
            _bars(figure, names, estimates, name=POLICY_NAMES[policy], colour=colour, where=_cell(col, policy))
    figure.update_yaxes(tickformat=".0%", title_text="share of questions", col=1)
    figure.update_layout(title="When to retrieve: accuracy by policy (95% intervals)", barmode="group", **LAYOUT)
    return figure


def ret_rate_figure(record: dict) -> go.Figure:
    """How often Adapt-LLM asked for retrieval, next to how often the closed-book model already knew."""
    datasets = _datasets(record)
    names = [f"{name} (n={d['n']})" for name, d in datasets.items()]
    figure = go.Figure()
    series = {
        "Adapt-LLM asked for <RET>": "ret_rate",
        "NR-LLM answered correctly (no retrieval needed)": "nr_knows",
        "top BM25 page holds a gold answer": "top_page_has_answer",
    }
    for colour, (label, key) in zip(COLOURS, series.items(), strict=False):
        _bars(figure, names, [d[key] for d in datasets.values()], name=label, colour=colour, where={})
    figure.update_layout(
        title="How often Adapt-LLM asks for retrieval",
        barmode="group",
        yaxis=dict(tickformat=".0%", title="share of questions", range=[0, 1.05]),
        **LAYOUT,
    )
    return figure


def table3_figure(record: dict) -> go.Figure:
    """The paper's Table 3: Adapt-LLM's accuracy with and without context, for <RET> and direct questions."""
    datasets = {k: v for k, v in _datasets(record).items() if "table3" in v}
    figure = make_subplots(rows=1, cols=max(1, len(datasets)), subplot_titles=list(datasets), shared_yaxes=True)
    for col, d in enumerate(datasets.values(), start=1):
        groups = d["table3"]
        labels = [
            f"asked <RET> (n={groups['asked_ret']['n']})",
            f"answered directly (n={groups['answered_directly']['n']})",
        ]
        for colour, which in zip(COLOURS, ("with_context", "without_context"), strict=False):
            estimates = [groups[g][which]["accuracy"] for g in ("asked_ret", "answered_directly")]
            _bars(figure, labels, estimates, name=which.replace("_", " "), colour=colour, where=_cell(col, which))
    figure.update_yaxes(tickformat=".0%", title_text="accuracy (contains gold)", col=1)
    title = "Adapt-LLM's decisions: accuracy with and without context (Table 3)"
    figure.update_layout(title=title, barmode="group", **LAYOUT)
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
        points = [
            ("adapt", d["ret_rate"]["value"], "star", 14, "Adapt-LLM's own <RET> token"),
            ("never", 0.0, "circle-open", 11, POLICY_NAMES["never"]),
            ("always", 1.0, "square-open", 11, POLICY_NAMES["always"]),
        ]
        for policy, x, symbol, size, label in points:
            figure.add_scatter(
                x=[x],
                y=[d["policies"][policy]["accuracy"]["value"]],
                mode="markers",
                marker=dict(symbol=symbol, size=size, color=colour),
                name=f"{name}: {label}",
            )
    figure.update_layout(
        title="The retrieval budget: accuracy as Adapt-LLM retrieves for more questions",
        xaxis=dict(title="share of questions retrieved", tickformat=".0%", range=[-0.03, 1.03]),
        yaxis=dict(title="accuracy (gold answer contained)", tickformat=".0%"),
        **{**LAYOUT, "height": 420},
    )
    return figure


PIPELINE_FIGURES = {
    "risk_coverage": risk_coverage_figure,
    "auc": auc_figure,
    "operating_points": operating_points_figure,
}
ADAPT_FIGURES = {
    "accuracy": accuracy_figure,
    "threshold": threshold_figure,
    "ret_rate": ret_rate_figure,
    "table3": table3_figure,
}
