"""Recorded runs: the real event stream of the real model for a question and the page's settings, kept as JSONL so
the page can replay it at once (a CPU Space's first visitor sees a whole run without waiting for the model).

A recording is one file, `assets/recordings/<question>--<settings>.jsonl`: a header line, then one line per event:

    {"recording": 1, "question": ..., "form": {strategy, order, window, k, grounded_only, rationale, reader},
     "model": ..., "reader": ..., "corpus": ..., "command": ..., "code_version": ..., "created": ..., ...}
    {"t": 0.0, "event": {"type": "run_started", ...}}          t: seconds since the run began
    ...

`record_run` makes one from Service.plan/events (the same run the page and the CLI make); `load_recordings` reads
a folder back, skipping (and naming) files that are not recordings; `stale` says how a recording differs from the
model and code that would run it live. Left out: recording the Top-K strategy next to the iterative one ("Both"),
and page texts (the replay looks pages up in the corpus by id).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from raqa import __version__
from raqa.config import ASSETS_DIR, RunForm
from raqa.evaluation.records import provenance
from raqa.reading.attribution import with_attributions
from raqa.reading.events import to_json
from raqa.text import slug

RECORDINGS_DIR = ASSETS_DIR / "recordings"
FORMAT = 1


@dataclass(frozen=True)
class Recording:
    header: dict
    timed_events: tuple[tuple[float, dict], ...]  # (seconds since the start, the event's JSON)

    @property
    def question(self) -> str:
        return self.header["question"]

    @property
    def form(self) -> RunForm:
        return recorded_form(self.header["form"])

    def matches(self, question: str, form: RunForm) -> bool:
        """Same question (case and spacing aside) and same form; a form without a reader means the default one."""
        same_question = " ".join(question.split()).casefold() == " ".join(self.question.split()).casefold()
        settings = asdict(form) | {"reader": None} == asdict(self.form) | {"reader": None}
        return same_question and settings and form.reader in (None, self.form.reader)


def record_run(service, question: str, form: RunForm, command: str, why: bool = False) -> Recording:
    """Run question with form on the service's model, keeping each event with its time; with why, each answered
    window's Attribution follows its verdict (so the replay shows "Why this answer?" at once)."""
    plan = service.plan(question, form)
    events = service.events(plan)
    if why:
        events = with_attributions(events, plan.question, plan.backend, plan.settings)
    start = time.perf_counter()
    timed = tuple((round(time.perf_counter() - start, 3), to_json(e)) for e in events)
    header = {
        "recording": FORMAT,
        "question": question,
        "form": asdict(form) | {"reader": plan.reader.name},
        "model": plan.backend.name if plan.backend else None,
        "reader": plan.reader.label,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "command": command,
        "raqa_version": __version__,
        **provenance(),
    }
    return Recording(header, timed)


def write_recording(recording: Recording, folder: Path = RECORDINGS_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = recording.form
    settings = f"{f.strategy}-{f.order}-w{f.window}-k{f.k}" + ("-grounded" if f.grounded_only else "")
    settings += ("-rationale" if f.rationale else "") + ("-bm25" if f.retrieval == "bm25" else "")
    settings += f"-{slug(f.reader or 'default')}"
    return write_lines(recording, folder / f"{slug(recording.question)}--{settings}.jsonl")


def write_lines(recording: Recording, path: Path) -> Path:
    """The recording as its file: the header line, then one {"t", "event"} line per event."""
    lines = [json.dumps(recording.header, ensure_ascii=False)]
    lines += [json.dumps({"t": t, "event": e}, ensure_ascii=False) for t, e in recording.timed_events]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recorded_form(values: dict) -> RunForm:
    """A recording's or lesson's form; one written before hybrid retrieval (no "retrieval") read BM25's pages."""
    return RunForm(**{"retrieval": "bm25", **values})


def read_recording(path: Path, check_header=lambda header: recorded_form(header["form"])) -> Recording:
    """ValueError, naming the file, when it is not a recording (check_header raises on a header of another kind)."""
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        header = lines[0]
        if header.get("recording") != FORMAT or not isinstance(header.get("question"), str):
            raise ValueError("no recording header")
        check_header(header)
        timed = tuple((float(line["t"]), dict(line["event"])) for line in lines[1:])
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(f"{path.name} is not a raqa recording: {e}") from e
    return Recording(header, timed)


def load_recordings(folder: Path = RECORDINGS_DIR, read=read_recording) -> tuple[list[Recording], list[str]]:
    """Every recording in folder (read with `read`), and a message for each file that could not be read."""
    recordings, problems = [], []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        try:
            recordings.append(read(path))
        except ValueError as e:
            problems.append(str(e))
    return recordings, problems


def find(recordings: Sequence[Recording], question: str, form: RunForm) -> Recording | None:
    return next((r for r in recordings if r.matches(question, form)), None)


def stale(recording: Recording, model: str | None) -> list[str]:
    """How the recording differs from a live run now: another model, or another raqa version (the banner names the
    exact commit either way; a commit that only added recordings is not a difference)."""
    notes = []
    if model is not None and recording.header.get("model") != model:
        notes.append(f"it was made by {recording.header.get('model')}, not by this page's {model}")
    if recording.header.get("raqa_version") != __version__:
        notes.append(f"it was made by raqa {recording.header.get('raqa_version')}; this page runs raqa {__version__}")
    return notes
