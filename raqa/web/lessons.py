"""The page's lesson (assets/lessons.json): a few steps, each a question, the settings to read it with, and two or
three sentences on what to watch, written for someone who has not read the papers.

A step loads its question and settings into the form and replays its recorded run (`python -m raqa record --lessons`
records them); Run then runs it live. A lessons file that cannot be read gives no lesson and one logged warning,
never a broken page. Left out: lessons for the When-to-retrieve tab (its own example questions show the decision).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from raqa.config import ASSETS_DIR, RunForm

LESSONS_FILE = ASSETS_DIR / "lessons.json"
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class LessonStep:
    title: str
    question: str
    form: RunForm
    watch: str  # what to look at, in plain words
    why: bool = False  # record each answered window's attribution with the run ("Why this answer?" in the replay)


def load_lessons(path: Path = LESSONS_FILE) -> list[LessonStep]:
    """The steps in order; [] (and a warning) when the file is missing or malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        steps = [
            LessonStep(s["title"], s["question"], RunForm(**s["form"]), s["watch"], bool(s.get("why", False)))
            for s in data["steps"]
        ]
        if any(not isinstance(v, str) or not v.strip() for s in steps for v in (s.title, s.question, s.watch)):
            raise ValueError("a step has an empty title, question or text")
    except (OSError, ValueError, KeyError, TypeError) as e:
        LOG.warning("No lesson: %s cannot be read (%s)", path, e)
        return []
    return steps
