"""Recorded pipeline runs (both papers in one run), so the When-to-retrieve tab replays an example at once.

The same file format as the Ask tab's recordings (recordings.py): a header line, then one {"t", "event"} line per
event, under `assets/recordings/pipeline/<question>--<policy>-<threshold>-<reader>.jsonl`. The header names the
pipeline's choices instead of the Ask tab's form:

    {"recording": 1, "kind": "pipeline", "question": ..., "choice": {policy, threshold, reader},
     "model": ..., "reader": ..., "corpus": ..., "command": ..., "code_version": ..., ...}

`record_pipeline` runs planning.pipeline (the stream the tab, the CLI and experiment pipeline read) and keeps each event
with its time; `find_pipeline` matches a question and the tab's choices to a recording. Left out here: replaying
(web/when_to_retrieve_tab.py) and reading events back (reading.events.from_json with
when_to_retrieve.pipeline.PIPELINE_EVENT_CLASSES).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from raqa import __version__
from raqa.config import RunForm
from raqa.evaluation.records import provenance
from raqa.reading.events import to_json
from raqa.text import slug
from raqa.web.recordings import FORMAT, RECORDINGS_DIR, Recording, read_recording, write_lines
from raqa.when_to_retrieve.planning import pipeline

PIPELINE_RECORDINGS_DIR = RECORDINGS_DIR / "pipeline"
THRESHOLD_TOLERANCE = 0.005  # half the tab's slider step: a threshold shown as 0.70 matches one recorded at 0.698


@dataclass(frozen=True)
class PolicyChoice:
    """The tab's choices (the arguments of planning.pipeline after the question)."""

    policy: str = "adapt"
    threshold: float | None = None  # None for never / always, which read no threshold
    reader: str | None = None  # None: the page's default reader

    def matches(self, other: PolicyChoice) -> bool:
        """Same policy, the same threshold to within half a slider step (never / always read none), same reader
        (None on either side: the default reader).

        Example:
            >>> PolicyChoice("adapt", 0.698, "base+judge").matches(PolicyChoice("adapt", 0.70, None))
            True
            >>> PolicyChoice("adapt", 0.698).matches(PolicyChoice("adapt", 0.72))
            False
        """
        if self.policy != other.policy or None not in (self.reader, other.reader) and self.reader != other.reader:
            return False
        if self.policy in ("never", "always"):
            return True
        if self.threshold is None or other.threshold is None:
            return self.threshold is other.threshold
        return math.isclose(self.threshold, other.threshold, abs_tol=THRESHOLD_TOLERANCE)


def record_pipeline(service, question: str, choice: PolicyChoice, command: str) -> Recording:
    """Run the pipeline for the question on the service's models, keeping each event with its time."""
    reader, _ = service.reader(choice.reader)  # which reader the pipeline's default run reads with
    events = pipeline(service, question, choice.policy, choice.threshold, RunForm(reader=choice.reader))
    start = time.perf_counter()
    timed = tuple((round(time.perf_counter() - start, 3), to_json(e)) for e in events)
    model = service.adapt_model()
    header = {
        "recording": FORMAT,
        "kind": "pipeline",
        "question": question,
        "choice": asdict(choice) | {"reader": reader.name},
        "model": getattr(model, "name", None),
        "reader": reader.label,
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "command": command,
        "raqa_version": __version__,
        **provenance(),
    }
    return Recording(header, timed)


def choice_of(recording: Recording) -> PolicyChoice:
    return PolicyChoice(**recording.header["choice"])


def _check_header(header: dict) -> None:
    if header.get("kind") != "pipeline":
        raise ValueError("not a pipeline recording")
    PolicyChoice(**header["choice"])


def read_pipeline_recording(path: Path) -> Recording:
    """ValueError, naming the file, when it is not a pipeline recording."""
    return read_recording(path, _check_header)


def write_pipeline_recording(recording: Recording, folder: Path = PIPELINE_RECORDINGS_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    c = choice_of(recording)
    threshold = "" if c.threshold is None or c.policy in ("never", "always") else f"-{c.threshold:.3f}"
    name = f"{slug(recording.question)}--{c.policy}{threshold}-{slug(c.reader or 'default')}.jsonl"
    return write_lines(recording, folder / name)


def find_pipeline(recordings: Sequence[Recording], question: str, choice: PolicyChoice) -> Recording | None:
    """The recording of this question (case and spacing aside) with these choices, if there is one."""
    wanted = " ".join(str(question).split()).casefold()
    for recording in recordings:
        if " ".join(recording.question.split()).casefold() == wanted and choice_of(recording).matches(choice):
            return recording
    return None
