"""The Ask tab's "Compare with" controls: a choice of comparison and, for "settings of my choice", Run B's own
order, window, grounded-only and reader (shown only then). What the comparison does lives in compare.py.
"""

from __future__ import annotations

import gradio as gr

from raqa.config import WINDOW_RANGE, RunSettings
from raqa.web.compare import CHOOSE, COMPARISONS, NOTHING


def compare_controls(reader_choices: list[tuple[str, str]]):
    """(the comparison dropdown, [B's order, window, grounded-only, reader]) for the caller to wire into a run."""
    defaults = RunSettings()
    compare = gr.Dropdown(
        list(COMPARISONS),
        value=NOTHING,
        label="Compare with",
        info="Run the question a second time, side by side: one thing changed, or Run B's settings of your choice.",
        elem_id="raqa-compare",
    )
    with gr.Group(visible=False, elem_id="raqa-run-b") as group:
        with gr.Row():
            order = gr.Radio(
                ["forward", "backward"], value="backward", label="Run B: window order", elem_id="raqa-b-order"
            )
            window = gr.Slider(
                *WINDOW_RANGE, value=defaults.window, step=1, label="Run B: window w", elem_id="raqa-b-window"
            )
        grounded = gr.Checkbox(value=False, label="Run B: accept only grounded answers", elem_id="raqa-b-grounded")
        reader = gr.Radio(
            reader_choices,
            value=reader_choices[0][1],
            label="Run B: reader",
            visible=len(reader_choices) > 1,
            elem_id="raqa-b-reader",
        )
    compare.change(
        lambda choice: gr.Group(visible=choice == CHOOSE), [compare], [group], api_visibility="private", queue=False
    )
    return compare, [order, window, grounded, reader]
