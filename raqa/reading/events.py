"""The typed events of a run, the union type of them, and their JSON form.

A strategy in engine.py yields these in order:

    RunStarted, Retrieved, [Notice], (WindowStarted, ReplyDelta*, WindowVerdict)+, Final

or RunFailed in place of what could not be done. The UI renders them, the CLI prints them as JSON
lines, and the evaluation scores them: all three see the same stream.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Literal, Union

from raqa.config import RunSettings
from raqa.reading.grounding import Grounding
from raqa.reading.prompts import ParsedReply
from raqa.retrieval.index import Hit

Verdict = Literal["answered", "unsupported", "not_found", "unparseable"]


@dataclass(frozen=True)
class RunStarted:
    question: str
    settings: RunSettings
    model: str


@dataclass(frozen=True)
class Retrieved:
    hits: tuple[Hit, ...]
    seconds: float


@dataclass(frozen=True)
class Notice:
    message: str  # something the viewer should know, e.g. that not all K pages fit the context


@dataclass(frozen=True)
class WindowStarted:
    window: int  # 1-based position in reading order
    of: int  # how many windows the run may read
    hits: tuple[Hit, ...]
    prompt_tokens: int


@dataclass(frozen=True)
class ReplyDelta:
    window: int
    text: str  # the newly generated text, to append


@dataclass(frozen=True)
class WindowVerdict:
    window: int
    hits: tuple[Hit, ...]
    verdict: Verdict
    reply: ParsedReply
    grounding: Grounding | None  # set for answers; None for declines and unparseable replies
    p_answer: float | None  # P(ANSWER) / (P(ANSWER) + P(NOT FOUND)) for the first word, if the backend reports it
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass(frozen=True)
class Final:
    question: str
    strategy: str
    order: str
    answer: str | None  # None when the run ends in "answer not found"
    abstained: bool
    verdict: Verdict  # of the window that gave the answer, or "not_found"
    supported: bool | None  # the grounding check of the answer; None when there is no answer
    window: int | None  # the window that answered
    page_id: str | None
    passage: str | None
    windows_read: int
    pages_read: int
    prompt_tokens: int
    completion_tokens: int
    topk_prompt_tokens: int  # what one Top-K prompt over the same K pages costs, for comparison
    seconds: float


@dataclass(frozen=True)
class RunFailed:
    message: str


Event = Union[
    RunStarted,
    Retrieved,
    Notice,
    WindowStarted,
    ReplyDelta,
    WindowVerdict,
    Final,
    RunFailed,
]

_TYPE_NAMES = {
    RunStarted: "run_started",
    Retrieved: "retrieved",
    Notice: "notice",
    WindowStarted: "window_started",
    ReplyDelta: "reply_delta",
    WindowVerdict: "window_verdict",
    Final: "final",
    RunFailed: "run_failed",
}


def _hit_json(hit: Hit) -> dict:
    return {
        "rank": hit.rank,
        "score": round(hit.score, 4),
        "page_id": hit.page.id,
        "title": hit.page.title,
    }


def to_json(event: Event) -> dict:
    """A JSON-ready dict with a "type" field; hits are reduced to rank, score, page id and title."""
    out: dict = {"type": _TYPE_NAMES[type(event)]}
    for f in fields(event):
        value = getattr(event, f.name)
        if f.name == "hits":
            value = [_hit_json(h) for h in value]
        elif isinstance(value, (RunSettings, ParsedReply, Grounding)):
            value = asdict(value)
        out[f.name] = value
    return out
