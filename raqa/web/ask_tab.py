"""The Ask tab: a question and its settings in, the run's windows, answers and figures streaming out.

One generator (`ask`) turns the form into runs with Service.plan (the same call the CLI and the batch
runner use), runs the chosen strategy (or both, one after the other) and yields the page's outputs after
each event. `run_events` is the same run as an API that streams the events themselves as JSON, for
clients (the load test) that want the run rather than its HTML. Escaping happens in render.py; figures
come from figures_run.py.
"""

from __future__ import annotations

import json
import logging

import gradio as gr

from raqa.config import ASSETS_DIR, RunSettings, SettingsError
from raqa.models.base import ModelError
from raqa.reading.events import Final, ReplyDelta, RunFailed, WindowVerdict, to_json
from raqa.service import Service
from raqa.web.figures_run import message_figure, safe, score_by_rank, token_meter
from raqa.web.render import RunView, esc

LOG = logging.getLogger(__name__)
STRATEGIES = {"Iterative": ("iterative",), "Top-K": ("topk",), "Both side by side": ("iterative", "topk")}
TITLES = {"iterative": "Iterative", "topk": "Top-K"}


def load_examples() -> list[str]:
    data = json.loads((ASSETS_DIR / "examples.json").read_text(encoding="utf-8"))
    return [item["question"] for item in data["in_corpus"]] + data["outside"]


def _figures(view: RunView, verdicts: list[WindowVerdict], k: int):
    if not view.hits:
        return message_figure("Scores appear after retrieval."), message_figure("Tokens appear after the run.")
    scores = safe(score_by_rank, view.hits, verdicts, f"{view.title}: BM25 score by rank, coloured by verdict")
    f: Final | None = view.final
    meter = (
        safe(token_meter, f.prompt_tokens, f.completion_tokens, f.topk_prompt_tokens, k)
        if f
        else message_figure("Tokens appear when the run ends.")
    )
    return scores, meter


def ask(service: Service, question, strategy, order, window, k, grounded_only, rationale, reader=None, record=None):
    """Stream the page's outputs: answers, windows, pages, score chart, token meter. With a list as record, each
    event's JSON (to_json) is appended to it as the run goes (the page's downloads are made from it)."""
    try:
        strategies = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
        if strategies is None:
            raise SettingsError(f"Invalid strategy: {strategy!r}. Choose from: {', '.join(STRATEGIES)}.")
        plans = [service.plan(question, s, order, window, k, grounded_only, rationale, reader) for s in strategies]
    except (SettingsError, ModelError) as e:
        message = f'<div class="raqa-answer raqa-failed">{esc(e)}</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return
    # with a choice of readers, every answer says which reader gave it
    suffix = f" · {plans[0].reader.label}" if len(service.reader_names()) > 1 else ""
    views = [RunView(title=TITLES[p.settings.strategy] + suffix) for p in plans]
    verdicts: list[list[WindowVerdict]] = [[] for _ in plans]
    try:
        for i, plan in enumerate(plans):
            for event in service.events(plan):
                if record is not None:
                    record.append(to_json(event))
                views[i].update(event)
                if isinstance(event, WindowVerdict):
                    verdicts[i].append(event)
                if isinstance(event, ReplyDelta):
                    # streamed tokens only change the reading window's text; skip redrawing the charts
                    yield _outputs(views, verdicts, plan.settings, charts=False)
                else:
                    yield _outputs(views, verdicts, plan.settings, charts=True)
    except Exception:  # last resort: a bug ends this run with a message, never the page or the server
        LOG.exception("A run failed on an unexpected error")
        message = '<div class="raqa-answer raqa-failed">The run stopped on an internal error. Please try again.</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()


def _outputs(views: list[RunView], verdicts: list[list[WindowVerdict]], settings: RunSettings, charts: bool):
    answers = "".join(v.answer_html() for v in views)
    if len(views) == 1:
        windows = views[0].windows_html()
    else:
        columns = "".join(f'<div class="raqa-column"><h3>{esc(v.title)}</h3>{v.windows_html()}</div>' for v in views)
        windows = f'<div class="raqa-columns">{columns}</div>'
    pages = views[0].pages_html()
    if not charts:
        return answers, windows, pages, gr.skip(), gr.skip()
    shown = len(views) - 1 if views[-1].hits else 0
    scores, meter = _figures(views[shown], verdicts[shown], settings.k)
    return answers, windows, pages, scores, meter


def run_events(service: Service, question, strategy, order, window, k, grounded_only, rationale, reader=None):
    """The run of `ask` as its events, one JSON dict per yield (to_json); bad input yields one run_failed."""
    try:
        plan = service.plan(question, strategy, order, window, k, grounded_only, rationale, reader)
    except (SettingsError, ModelError) as e:
        yield to_json(RunFailed(str(e)))
        return
    try:
        for event in service.events(plan):
            yield to_json(event)
    except Exception:  # last resort, as in ask()
        LOG.exception("A run failed on an unexpected error")
        yield to_json(RunFailed("The run stopped on an internal error. Please try again."))
