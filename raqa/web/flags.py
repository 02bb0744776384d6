"""Flag a verdict, for classroom exercises: "this badge is wrong" or "right to decline", appended with the whole run
(its events) as one JSON line to a local file the operator names (RAQA_FLAGS). Off by default, so a public Space
keeps nothing; nothing is ever sent anywhere. `flag_row` is the Ask tab's row of buttons, each flagging the run
whose events the page's JSON download holds. Left out: reviewing flags in the page (the file is plain JSONL).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import gradio as gr

from raqa.web.render import esc

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


def flag_row(flags_file: str | None, download_json: gr.DownloadButton) -> None:
    """A button per flag and a status line, each click appending the run download_json holds; shown only with a
    flags file (RAQA_FLAGS)."""
    with gr.Row(visible=flags_file is not None):
        buttons = {
            name: gr.Button(label, size="sm", elem_id=f"raqa-flag-{name.replace('_', '-')}")
            for name, label in FLAGS.items()
        }
        status = gr.HTML(
            "Flags are kept on this machine only, in the file the operator set.", elem_id="raqa-flag-status"
        )
    if flags_file is None:
        return

    def flag_here(run_file, name: str) -> str:
        try:
            events = json.loads(Path(run_file).read_text(encoding="utf-8")) if run_file else []
            lines = append_flag(Path(flags_file), name, events)
        except (OSError, ValueError) as e:
            return f'<span class="raqa-warning">{esc(e)}</span>'
        return f"Saved: {esc(FLAGS[name])} (line {lines} of {esc(flags_file)})."

    for name, button in buttons.items():
        flag = partial(flag_here, name=name)
        button.click(flag, [download_json], [status], queue=False, api_visibility="private")
