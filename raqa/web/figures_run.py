"""Pure figure functions: data in, plotly Figure out. No UI code, no recomputation of results.

`safe()` wraps a figure function so one failing figure shows its error in place of the chart
instead of breaking the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from raqa.reading.events import WindowVerdict
from raqa.retrieval.index import Hit

VERDICT_COLOURS = {
    "answered": "#1a7f37",
    "weak": "#a15c00",
    "unsupported": "#cf222e",
    "not_found": "#8c959f",
    "unparseable": "#bf8700",
    "unread": "#d0d7de",
}
_LAYOUT = dict(template="plotly_white", margin=dict(l=50, r=20, t=50, b=40), height=300)


def score_by_rank(hits: Sequence[Hit], verdicts: Sequence[WindowVerdict], title: str = "Score by rank") -> go.Figure:
    """Bars of the score that ranked the pages (the dense similarity under hybrid retrieval, else BM25's) by rank,
    coloured by the verdict of the window that read each page, with window boundaries as dashed lines and each
    window's reading position as a label."""
    dense = bool(hits) and all(h.similarity is not None for h in hits)
    verdict_of = {h.rank: v.verdict for v in verdicts for h in v.hits}
    last_rank = max((h.rank for h in hits), default=0)
    edges = {edge for v in verdicts for edge in (v.hits[0].rank - 0.5, v.hits[-1].rank + 0.5)}
    figure = go.Figure()
    for verdict, colour in VERDICT_COLOURS.items():
        chosen = [h for h in hits if verdict_of.get(h.rank, "unread") == verdict]
        if chosen:
            figure.add_bar(
                x=[h.rank for h in chosen],
                y=[h.similarity if dense else h.score for h in chosen],
                name=verdict.replace("_", " "),
                marker_color=colour,
                customdata=[h.page.title for h in chosen],
                hovertemplate="rank %{x}<br>score %{y:.2f}<br>%{customdata}<extra></extra>",
            )
    for x in sorted(edges):
        if 0.5 < x < last_rank + 0.5:
            figure.add_vline(x=x, line_dash="dash", line_color="#57606a", line_width=1)
    for v in verdicts:
        ranks = [h.rank for h in v.hits]
        figure.add_annotation(
            x=(min(ranks) + max(ranks)) / 2, y=1.02, yref="paper", text=f"w{v.window}", showarrow=False
        )
    figure.update_layout(
        title=title,
        xaxis_title="rank",
        yaxis_title="similarity (MiniLM)" if dense else "BM25 score",
        barmode="overlay",
        **_LAYOUT,
    )
    return figure


def token_meter(used_prompt: int, used_completion: int, topk_prompt: int, k: int) -> go.Figure:
    """Horizontal bars: tokens this run used against one Top-K prompt over the same K pages."""
    figure = go.Figure()
    figure.add_bar(y=["this run"], x=[used_prompt], name="prompt", orientation="h", marker_color="#0969da")
    figure.add_bar(y=["this run"], x=[used_completion], name="completion", orientation="h", marker_color="#8250df")
    figure.add_bar(y=[f"Top-K (K={k})"], x=[topk_prompt], name="Top-K prompt", orientation="h", marker_color="#8c959f")
    figure.update_layout(
        title="Tokens: this run against one Top-K prompt", barmode="stack", xaxis_title="tokens", **_LAYOUT
    )
    figure.update_layout(height=220)
    return figure


def message_figure(message: str, width: int = 38) -> go.Figure:
    """A figure that only says something (what a chart will show, or why it cannot): the text broken into short
    lines so that it fits a phone's width too."""
    import html
    import textwrap

    figure = go.Figure()
    lines = "<br>".join(html.escape(line, quote=False) for line in textwrap.wrap(message, width)) or "&nbsp;"
    figure.add_annotation(text=lines, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font_size=13)
    figure.update_layout(xaxis_visible=False, yaxis_visible=False, **_LAYOUT)
    return figure


def safe(make: Callable[..., go.Figure], *args, **kwargs) -> go.Figure:
    """Call a figure function; on any error return a figure that says what failed."""
    try:
        return make(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - one broken chart must not break the page
        return message_figure(f"This chart could not be drawn: {type(e).__name__}: {e}")
