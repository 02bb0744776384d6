"""The Ask tab: a question and its settings in, the run's windows, answers and figures streaming out.

One generator (`ask`) turns the form into runs with Service.plan (the same call the CLI and the batch
runner use), runs the chosen strategy (or both, one after the other) and yields the page's outputs after
each event. `run_events` is the same run as an API that streams the events themselves as JSON, for
clients (the load test) that want the run rather than its HTML. Escaping happens in render.py; figures
come from figures_run.py.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gradio as gr

from raqa.config import RunSettings, SettingsError, validate_settings
from raqa.models.base import ModelError
from raqa.reading.events import Final, ReplyDelta, RunFailed, WindowVerdict, from_json, to_json
from raqa.retrieval import corpus
from raqa.service import Service
from raqa.web.compare import CHOOSE, NOTHING, Choice, differences_html, variant
from raqa.web.figures_run import message_figure, safe, score_by_rank, token_meter
from raqa.web.recordings import RECORDINGS_DIR, Form, Recording, find, load_recordings, read_recording, stale
from raqa.web.render import RunView, esc

LOG = logging.getLogger(__name__)
STRATEGIES = {"Iterative": ("iterative",), "Top-K": ("topk",), "Both side by side": ("iterative", "topk")}
TITLES = {"iterative": "Iterative", "topk": "Top-K"}


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


def ask(service: Service, question, strategy, order, window, k, grounded_only, rationale, reader=None, record=None,
        compare=None, run_b=None):  # fmt: skip
    """Stream the page's outputs: answers, windows, pages, score chart, token meter. With a list as record, each
    event's JSON (to_json) is appended to it as the run goes (the page's downloads are made from it). With a
    comparison (compare.COMPARISONS), a second run with other settings follows, side by side, and the last
    output calls out what differs; for compare.CHOOSE, run_b is B's (order, window, grounded_only, reader)."""
    try:
        strategies = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
        if strategies is None:
            raise SettingsError(f"Invalid strategy: {strategy!r}. Choose from: {', '.join(STRATEGIES)}.")
        plans = [service.plan(question, s, order, window, k, grounded_only, rationale, reader) for s in strategies]
        labels = None
        if compare not in (None, NOTHING):
            if len(plans) != 1:
                raise SettingsError("Compare one strategy at a time: choose Iterative or Top-K.")
            a = validate_settings(strategies[0], order, window, k, grounded_only, rationale)  # as the form says
            b = _chosen_b(service, question, strategies[0], k, rationale, run_b) if compare == CHOOSE else None
            try:
                v = variant(
                    compare, a.order, a.window, plans[0].reader.name, service.reader_names(), b, a.grounded_only
                )
            except ValueError as e:
                raise SettingsError(str(e)) from e
            b_grounded = a.grounded_only if v.grounded_only is None else v.grounded_only
            plans.append(service.plan(question, strategies[0], v.order, v.window, k, b_grounded, rationale, v.reader))
            labels = [v.label_a, v.label_b]
    except (SettingsError, ModelError) as e:
        message = f'<div class="raqa-answer raqa-failed">{esc(e)}</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return
    # with a choice of readers, every answer says which reader gave it
    suffix = f" · {plans[0].reader.label}" if len(service.reader_names()) > 1 else ""
    views = (
        [RunView(title=t) for t in labels]
        if labels
        else [RunView(title=TITLES[p.settings.strategy] + suffix) for p in plans]
    )
    views[0].explainable = len(views) == 1 and plans[0].backend.can_score  # "Why this answer?" on a single run
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
        if labels:
            answers, *rest = _outputs(views, verdicts, plans[-1].settings, charts=True)
            yield differences_html(labels, [v.final for v in views], verdicts) + answers, *rest
    except Exception:  # last resort: a bug ends this run with a message, never the page or the server
        LOG.exception("A run failed on an unexpected error")
        message = '<div class="raqa-answer raqa-failed">The run stopped on an internal error. Please try again.</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()


def _chosen_b(service: Service, question, strategy: str, k, rationale, run_b) -> Choice:
    """Run B's own settings, validated like A's (SettingsError says what was wrong)."""
    if not isinstance(run_b, (list, tuple)) or len(run_b) != 4:
        raise SettingsError("Choose Run B's order, window, grounded-only and reader to compare with.")
    order, window, grounded_only, reader = run_b
    b = validate_settings(strategy, order, window, k, grounded_only, rationale)
    return Choice(b.order, b.window, b.grounded_only, service.plan(question, reader=reader).reader.name)


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


REPLAY_GAP_S = 0.25  # the longest pause between two recorded events in a replay (reading speed, not model speed)
REPLAY_TOTAL_S = 5.0  # and a long run's pauses are shortened so that a replay takes about this long at most


def recorded_banner(recording: Recording, model: str | None) -> str:
    """The mark every replay carries: what made the recording, and how it differs from a live run now."""
    h = recording.header
    notes = stale(recording, model)
    differs = f" Note: {esc('; '.join(notes))}." if notes else ""
    return (
        '<div class="raqa-recorded" data-recorded="true"><b>Recorded run</b>, replayed: '
        f"{esc(h.get('model'))}, reader {esc(h.get('reader'))}, code {esc(h.get('code_version'))}, recorded "
        f"{esc(h.get('created'))} by "
        f"<code>{esc(h.get('command'))}</code>.{differs} Press <b>Run</b> to run it live.</div>"
    )


def recording_for(recordings, question, strategy, order, window, k, grounded_only, rationale, reader=None):
    """The recording of this question with this form, if there is one (the form as the page sends it)."""
    strategies = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
    if not strategies or len(strategies) != 1 or not isinstance(question, str):
        return None
    try:
        form = Form(strategies[0], order, int(window), int(k), bool(grounded_only), bool(rationale), reader)
    except (TypeError, ValueError):
        return None
    return find(recordings, question, form)


def replay(service: Service, recordings, page_of, question, strategy, order, window, k, grounded_only, rationale,
           reader=None, pause=time.sleep, record=None):  # fmt: skip
    """Stream a recorded run of this question and form through the same renderer as a live run; a message when
    there is none (nothing else changes). With a list as record, the replayed events' JSON is appended to it."""
    found = recording_for(recordings, question, strategy, order, window, k, grounded_only, rationale, reader)
    if found is None:
        message = (
            '<div class="raqa-answer raqa-failed">No recorded run of this question with these settings: '
            "press Run to run it live.</div>"
        )
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return
    banner = recorded_banner(found, service.backend.name if service.backend else None)
    view = RunView(title=TITLES[found.form.strategy] + " · recorded")
    backend = service.backend
    view.explainable = backend is not None and backend.can_score and found.header.get("model") == backend.name
    verdicts: list[WindowVerdict] = []
    settings = RunSettings(k=found.form.k)
    previous = 0.0
    longest = min(REPLAY_GAP_S, REPLAY_TOTAL_S / max(len(found.timed_events), 1))
    for t, data in found.timed_events:
        pause(min(max(t - previous, 0.0), longest))
        previous = t
        event = from_json(data, page_of)
        if record is not None:
            record.append(data)
        view.update(event)
        if isinstance(event, WindowVerdict):
            verdicts.append(event)
        answers, windows, pages, scores, meter = _outputs(
            [view], [verdicts], settings, not isinstance(event, ReplyDelta)
        )
        yield banner + answers, windows, pages, scores, meter


def usable_recordings(service: Service, folder: Path = RECORDINGS_DIR, read=read_recording) -> list:
    """The committed recordings made over the corpus this page serves (others would show the wrong pages)."""
    recordings, problems = load_recordings(folder, read)
    for problem in problems:
        LOG.warning("Skipping a recording: %s", problem)
    corpus = f"{service.corpus_label} ({len(service.pages):,} pages)"
    return [r for r in recordings if r.header.get("corpus") == corpus]


def page_lookup(service: Service):
    """page id -> Page for the service's corpus (a replay needs the pages' texts; a live run does not)."""
    return corpus.page_lookup(service.pages)
