"""Flag a verdict, for classroom exercises: "this badge is wrong" or "right to decline", appended with the whole run
(its events) as one JSON line to a local file the operator names (RAQA_FLAGS). Off by default, so a public Space
keeps nothing; nothing is ever sent anywhere. Left out: reviewing flags in the page (the file is plain JSONL).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

FLAGS = {"badge_wrong": "This badge is wrong", "right_to_decline": "Right to decline"}
_lock = threading.Lock()  # two visitors flagging at once append whole lines


def append_flag(path: Path, flag: str, events: Sequence[dict]) -> int:
    """Append {"flag", "created", "question", "answer", "verdict", "events"} to path; returns the file's line count.
    ValueError for an unknown flag or a run without a final event."""
    if flag not in FLAGS:
        raise ValueError(f"Invalid flag: {flag!r}. Choose from: {', '.join(FLAGS)}.")
    final = next((e for e in reversed(events) if e.get("type") == "final"), None)
    if final is None:
        raise ValueError("Only a finished run can be flagged.")
    line = {
        "flag": flag,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "question": final.get("question"),
        "answer": final.get("answer"),
        "verdict": final.get("verdict"),
        "events": list(events),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock, path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    with path.open(encoding="utf-8") as f:
        return sum(1 for _ in f)
