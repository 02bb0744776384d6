"""What the commands print: a run's events for a person or as JSON lines, progress lines, JSON records.

Results go to stdout (the answer, the JSON events, a command's summary); everything a person watches while
waiting (loading, windows, progress, notes) goes to stderr, so `... --json > events.jsonl` keeps only data.
"""

from __future__ import annotations

import json
import sys

from raqa.reading.attribution import shown_p
from raqa.reading.events import (
    Attribution,
    Final,
    InLine,
    Notice,
    ReplyDelta,
    Retrieved,
    RunFailed,
    WindowStarted,
    WindowVerdict,
    to_json,
)


def say(message: str) -> None:
    """A line for the person at the terminal (stderr), e.g. loading progress; flushed, so it shows at once."""
    print(message, file=sys.stderr, flush=True)


def error(message: object) -> int:
    """Print `error: message` and return the exit status for bad input (2)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def print_json(event) -> None:
    """One event (a run's or a policy's) as one JSON line on stdout."""
    print(json.dumps(to_json(event), ensure_ascii=False), flush=True)


def print_human(event) -> None:
    """One run event as a person reads it: the answer on stdout, the windows and counts on stderr."""
    if isinstance(event, Retrieved):
        print(f"Retrieved {len(event.hits)} pages in {event.seconds * 1000:.1f} ms", file=sys.stderr)
    elif isinstance(event, InLine):
        offer = f"; {event.offer} would read now" if event.offer else ""
        print(
            f"In line for {event.model}: place {event.place}, {event.ahead} ahead, about {event.eta_s:.0f} s{offer}",
            file=sys.stderr,
        )
    elif isinstance(event, Notice):
        print(f"Note: {event.message}", file=sys.stderr)
    elif isinstance(event, WindowStarted):
        pages = ", ".join(f"#{h.rank} {h.page.title} [{h.page.id}]" for h in event.hits)
        print(f"\nWindow {event.window}/{event.of}: {pages}", file=sys.stderr)
    elif isinstance(event, ReplyDelta):
        print(event.text, end="", flush=True, file=sys.stderr)
    elif isinstance(event, WindowVerdict):
        confidence = f" (P(answer)={event.p_answer:.2f})" if event.p_answer is not None else ""
        note = f" - {event.grounding.note}" if event.grounding else ""
        print(f"\n=> {event.verdict}{confidence}{note}", file=sys.stderr)
        if event.judge:
            reading, page = event.judge[event.judge_best], event.hits[event.judge_best].page
            says = f": page {page.id} says {reading.answer!r}" if reading.answer else ""
            support = f", support {reading.support:.3f}" if reading.support is not None else ""
            print(
                f"   answer judge: P(this window states the answer)={reading.p_answer:.2f}{support}{says}",
                file=sys.stderr,
            )
    elif isinstance(event, Final):
        shown = event.answer if event.answer is not None else "answer not found"
        flag = " (unsupported by its page)" if event.supported is False else ""
        flag = " (weak support: the grader or judge is unsure)" if event.verdict == "weak" else flag
        print(f"\n{shown}{flag}")
        print(
            f"windows {event.windows_read}, pages {event.pages_read}, prompt tokens {event.prompt_tokens} "
            f"(Top-K would use {event.topk_prompt_tokens}), completion tokens {event.completion_tokens}, "
            f"{event.seconds:.1f} s",
            file=sys.stderr,
        )
    elif isinstance(event, RunFailed):
        print(f"Run failed: {event.message}", file=sys.stderr)
    elif isinstance(event, Attribution):
        print(f"   why: {event.summary} ({event.seconds:.1f} s)", file=sys.stderr)
        for e in sorted(event.sentences, key=lambda e: e.logprob)[:3]:
            print(
                f"     without sentence {e.sentence} of page {e.page_id}: P(answer) {shown_p(event.logprob)} -> "
                f"{shown_p(e.logprob)}",
                file=sys.stderr,
            )


def progress_line(label: str):
    """progress(done, total) that rewrites one stderr line, ending it when done reaches total."""

    def show(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return show
