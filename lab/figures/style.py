"""What every results figure shares: its colours, its layout, 95% interval bars and the sample line in its title."""

from __future__ import annotations

COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700"]
LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=70, b=50), height=380)


def errors(estimates: list[dict]) -> dict:
    """95% interval bars; an estimate without a value (a measure an older record lacks) gets none."""
    return dict(
        type="data",
        symmetric=False,
        array=[e["high"] - e["value"] if e.get("value") is not None else None for e in estimates],
        arrayminus=[e["value"] - e["low"] if e.get("value") is not None else None for e in estimates],
    )


def sample_label(record: dict) -> str:
    sample = record.get("sample", {})
    return f"{record.get('dataset', '?')} test, n={sample.get('limit', '?')}, seed {sample.get('seed', '?')}"
