"""The Ask tab: a question and its settings in, the run's windows, answers and figures streaming out.

One generator (`ask`) turns the question and a RunForm into runs with Service.plan (the same call the CLI and the
batch runner use), runs the chosen strategy (or both, one after the other) and yields the page's outputs after
each event; `replay` streams a recorded run through the same renderer. `run_events` is the same run as an API that
streams the events themselves as JSON, for clients (the load test) that want the run rather than its HTML.
`page_form` is where the form's values, as Gradio hands them over, become a RunForm. Escaping happens in render.py;
figures come from figures_run.py; the tab's components and events are laid out in ask_layout.py.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gradio as gr

from raqa.config import RunForm, RunSettings, SettingsError, validate_settings
from raqa.models.base import ModelError
from raqa.reading.events import Final, RunFailed, WindowVerdict, from_json, to_json
from raqa.service import Service
from raqa.web.compare import CHOOSE, NOTHING, differences_html, variant
from raqa.web.figures_run import message_figure, safe, score_by_rank, token_meter
from raqa.web.recordings import RECORDINGS_DIR, Recording, find, load_recordings, read_recording, stale
from raqa.web.render import RunView, esc

LOG = logging.getLogger(__name__)
# The Strategy radio's label for each strategy a RunForm (and a link) names; "both" is the page's own: the two, side
# by side. A RunForm holds the name: page_form turns a label into it.
STRATEGY_LABELS = {"iterative": "Iterative", "topk": "Top-K", "both": "Both side by side"}
TITLES = {"iterative": "Iterative", "topk": "Top-K"}


def _figures(view: RunView, verdicts: list[WindowVerdict], k: int):
    if not view.hits:
        return message_figure("Scores appear after retrieval."), message_figure("Tokens appear after the run.")
    scores = safe(score_by_rank, view.hits, verdicts, f"{view.title}<br><sup>score by rank, coloured by verdict</sup>")
    f: Final | None = view.final
    meter = (
        safe(token_meter, f.prompt_tokens, f.completion_tokens, f.topk_prompt_tokens, k)
        if f
        else message_figure("Tokens appear when the run ends.")
    )
    return scores, meter


def page_form(
    strategy, order, window, k, grounded_only, rationale, reader=None, retrieval=RunSettings.retrieval
) -> RunForm:
    """The form's values as Gradio hands them over (the Ask tab's components, or an API call's values in the same
    order) as a RunForm: the Strategy radio's label becomes its name; anything else is kept for Service.plan to check.

    Example:
        >>> page_form("Both side by side", "forward", 1, 15, False, False).strategy
        'both'
    """
    names = {label: name for name, label in STRATEGY_LABELS.items()}
    name = names.get(strategy, strategy) if isinstance(strategy, str) else strategy
    return RunForm(
        name, order, window, k=k, grounded_only=grounded_only, rationale=rationale, reader=reader, retrieval=retrieval
    )


def _strategies(form: RunForm) -> tuple[str, ...]:
    """The strategies the form runs, one after the other; SettingsError for one the page does not offer."""
    if not isinstance(form.strategy, str) or form.strategy not in STRATEGY_LABELS:
        labels = ", ".join(STRATEGY_LABELS.values())
        raise SettingsError(f"Invalid strategy: {form.strategy!r}. Choose from: {labels}.")
    return ("iterative", "topk") if form.strategy == "both" else (form.strategy,)


def ask(service: Service, question, form: RunForm, record=None, compare=None, run_b: RunForm | None = None):
    """Stream the page's outputs: answers, windows, pages, score chart, token meter. With a list as record, each
    event's JSON (to_json) is appended to it as the run goes (the page's downloads are made from it). With a
    comparison (compare.COMPARISONS), a second run with other settings follows, side by side, and the last
    output calls out what differs; for compare.CHOOSE, run_b is B's form (its order, window, grounded-only and
    reader are used)."""
    try:
        plans = [service.plan(question, form.replace(strategy=s)) for s in _strategies(form)]
        labels = None
        if compare not in (None, NOTHING):
            if len(plans) != 1:
                raise SettingsError("Compare one strategy at a time: choose Iterative or Top-K.")
            a = _compared(service, form)
            b = _compared(service, run_b) if compare == CHOOSE and run_b is not None else None
            try:
                v = variant(compare, a, service.reader_names(), b)
            except ValueError as e:
                raise SettingsError(str(e)) from e
            plans.append(service.plan(question, v.form))
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
    drawn = None  # what the charts last drawn show; an event that changes none of it (a window starting, a streamed
    # token, a place in line) skips redrawing them, which costs the server and the browser a tenth of a second each
    try:
        for i, plan in enumerate(plans):
            for event in service.events(plan):
                if record is not None:
                    record.append(to_json(event))
                views[i].update(event)
                if isinstance(event, WindowVerdict):
                    verdicts[i].append(event)
                shown = _charted(views, verdicts)
                yield _outputs(views, verdicts, plan.settings, charts=shown != drawn)
                drawn = shown
        if labels:
            answers, *rest = _outputs(views, verdicts, plans[-1].settings, charts=True)
            yield differences_html(labels, [v.final for v in views], verdicts) + answers, *rest
    except Exception:  # last resort: a bug ends this run with a message, never the page or the server
        LOG.exception("A run failed on an unexpected error")
        message = '<div class="raqa-answer raqa-failed">The run stopped on an internal error. Please try again.</div>'
        yield message, gr.skip(), gr.skip(), gr.skip(), gr.skip()


def _compared(service: Service, form: RunForm) -> RunForm:
    """The form with its values checked (SettingsError says what was wrong) and its reader named, as a comparison
    labels them."""
    s = validate_settings(form)
    return form.replace(
        order=s.order, window=s.window, grounded_only=s.grounded_only, reader=service.reader(form.reader)[0].name
    )


def _charted(views: list[RunView], verdicts: list[list[WindowVerdict]]) -> tuple:
    """What the charts show at this point of a run: the pages retrieved, the verdicts and whether it ended."""
    return tuple((len(v.hits or ()), len(w), v.final is not None) for v, w in zip(views, verdicts, strict=True))


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


def run_events(service: Service, question, form: RunForm):
    """The run of `ask` as its events, one JSON dict per yield (to_json); bad input yields one run_failed."""
    try:
        plan = service.plan(question, form)
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


def recording_for(recordings, question, form: RunForm):
    """The recording of this question with this form, if there is one (a form of one strategy, as the page sends it:
    numbers may come as floats)."""
    if form.strategy not in ("iterative", "topk") or not isinstance(question, str):
        return None
    try:
        window, k = int(form.window), int(form.k)
    except (TypeError, ValueError):
        return None
    flags = dict(grounded_only=bool(form.grounded_only), rationale=bool(form.rationale))
    return find(recordings, question, form.replace(window=window, k=k, **flags))


def replay(service: Service, recordings, page_of, question, form: RunForm, pause=time.sleep, record=None):
    """Stream a recorded run of this question and form through the same renderer as a live run; a message when
    there is none (nothing else changes). With a list as record, the replayed events' JSON is appended to it."""
    found = recording_for(recordings, question, form)
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
    drawn = None
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
        shown = _charted([view], [verdicts])
        answers, windows, pages, scores, meter = _outputs([view], [verdicts], settings, charts=shown != drawn)
        drawn = shown
        yield banner + answers, windows, pages, scores, meter


def usable_recordings(service: Service, folder: Path = RECORDINGS_DIR, read=read_recording) -> list:
    """The committed recordings made over the corpus this page serves (others would show the wrong pages)."""
    recordings, problems = load_recordings(folder, read)
    for problem in problems:
        LOG.warning("Skipping a recording: %s", problem)
    corpus = f"{service.corpus_label} ({len(service.pages):,} pages)"
    return [r for r in recordings if r.header.get("corpus") == corpus]
